"""PostgreSQL ``--db`` values: which strings name a server database, how one is printed (:func:`redact`) and where
its local replay scratch lives (:func:`local_anchor`). Apart from :mod:`latch.store.postgres` (psycopg, the server
schema and ranking), so a command on an SQLite store checks its ``--db`` without importing that module."""

from __future__ import annotations

import hashlib
import urllib.parse
from pathlib import Path

from .event_store import data_dir

__all__ = ["is_postgres_url", "redact", "local_anchor"]


def is_postgres_url(db: object) -> bool:
    """Whether ``db`` (a ``--db`` value) names a PostgreSQL database (``postgresql://`` or ``postgres://``)."""
    return isinstance(db, str) and db.split("://", 1)[0].lower() in ("postgresql", "postgres") and "://" in db


def redact(url: str) -> str:
    """``url`` without its password (``postgresql://user:***@host/db``; a ``password=`` query parameter is
    dropped). Safe to print and to store."""
    parts = urllib.parse.urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, host = netloc.rsplit("@", 1)
        if ":" in userinfo:
            userinfo = userinfo.split(":", 1)[0] + ":***"
        netloc = userinfo + "@" + host
    query = "&".join(p for p in parts.query.split("&") if p and not p.lower().startswith("password="))
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def local_anchor(url: str) -> Path:
    """This host's local path for the server database ``url`` (``DATA/replays/pg-<digest>``, the digest of the
    redacted URL): its replay scratch is ``<anchor>.replays.sqlite``. Nothing else is kept locally."""
    return data_dir() / "replays" / f"pg-{hashlib.sha256(redact(url).encode()).hexdigest()[:12]}"
