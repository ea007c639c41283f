"""What is installed: a group's entry points and a distribution's version, as :mod:`importlib.metadata` finds them,
optionally kept between CLI processes.

Without a file (the default), every call asks :mod:`importlib.metadata`, which reads every installed distribution's
metadata. The ``latch`` command passes ``cache/installed.json`` under the Latch data folder to
:func:`use_installed_cache`: a later process whose installation has not changed then reads the answers from that
file, without importing :mod:`importlib.metadata` or scanning the distributions. The file is keyed by a fingerprint of
the installation (:func:`fingerprint`): ``sys.path`` in order and, for each folder on it, every ``*.dist-info`` /
``*.egg-info`` in it with its modification time and that of its ``entry_points.txt`` (and an egg-info's
``PKG-INFO``). Installing, upgrading or removing a distribution (a plugin too) adds or removes such a folder, and
editing one changes its times, so the next process reads the metadata again. A file that cannot be read or written is ignored.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import stat
import sys
from pathlib import Path
from typing import Any

from .cache_files import read_cache_file, write_cache_file

__all__ = ["INSTALLATIONS", "InstalledEntryPoint", "entry_points", "version", "fingerprint", "use_installed_cache"]

INSTALLATIONS = 8
"""The most installations (fingerprints) the cache file keeps answers for."""

_cache_file: Path | None = None
_doc: dict[str, Any] | None = None  # the file's answers for the current fingerprint
_key = ""  # that fingerprint


class InstalledEntryPoint:
    """One entry point: ``name``, ``value`` (``module:attr``), ``group``, ``module``, ``attr`` (``""`` when it names
    a module) and the distribution that declares it (``dist``, ``version``; ``None`` when unknown)."""

    __slots__ = ("name", "value", "group", "module", "attr", "dist", "version")

    def __init__(
        self, name: str, value: str, group: str, module: str, attr: str, dist: str | None, version: str | None
    ) -> None:
        self.name, self.value, self.group, self.module, self.attr = name, value, group, module, attr
        self.dist, self.version = dist, version

    def load(self) -> Any:
        """The object the entry point names (its module imported), as ``importlib.metadata.EntryPoint.load``."""
        obj: Any = importlib.import_module(self.module)
        for part in filter(None, self.attr.split(".")):
            obj = getattr(obj, part)
        return obj

    def as_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__slots__}

    def __repr__(self) -> str:
        return f"InstalledEntryPoint(name={self.name!r}, value={self.value!r}, group={self.group!r})"


def fingerprint() -> str:
    """A digest of what decides the installed distributions: ``sys.path`` and, for each folder on it, its
    ``*.dist-info`` / ``*.egg-info`` entries (name, modification time and size, and those of their
    ``entry_points.txt`` and an egg-info's ``PKG-INFO``: a new version is a new dist-info folder). A zip file on the path counts by its own time and size."""
    h = hashlib.sha256(sys.version.encode())
    for entry in sys.path:
        h.update(b"\0path\0" + os.fsencode(entry or "."))
        try:
            st = os.stat(entry or ".")
        except OSError:
            continue
        if not stat.S_ISDIR(st.st_mode):  # a zip file: its own time
            h.update(f"{st.st_mtime_ns}:{st.st_size}".encode())
            continue
        try:
            names = sorted(os.listdir(entry or "."))
        except OSError:
            continue
        for name in names:
            if not name.endswith((".dist-info", ".egg-info")):
                continue
            h.update(b"\0dist\0" + os.fsencode(name))
            folder = os.path.join(entry or ".", name)
            # a new version is a new dist-info folder; an egg-info folder keeps its name, its PKG-INFO changes
            for sub in ("", "entry_points.txt", "PKG-INFO")[: 3 if name.endswith(".egg-info") else 2]:
                try:
                    s = os.stat(os.path.join(folder, sub) if sub else folder)
                except OSError:
                    continue
                h.update(f"{sub}:{s.st_mtime_ns}:{s.st_size}".encode())
    return h.hexdigest()


def use_installed_cache(path: str | os.PathLike[str] | None) -> None:
    """Keep the answers of :func:`entry_points` and :func:`version` in the JSON file ``path`` (``None``: none, ask
    :mod:`importlib.metadata` every time, the default), valid while :func:`fingerprint` stays the same."""
    global _cache_file, _doc
    _cache_file, _doc = (Path(path) if path is not None else None), None


def _read_file() -> dict[str, Any]:
    """``{fingerprint: answers}`` as the cache file holds them (``{}`` when it is absent or damaged)."""
    assert _cache_file is not None
    found = read_cache_file(_cache_file).get("installations")
    return {k: v for k, v in found.items() if isinstance(v, dict)} if isinstance(found, dict) else {}


def _answers() -> dict[str, Any] | None:
    """The cache file's answers for the installation as it is now (an empty set when the file is absent, damaged
    or knows only other installations); ``None`` without a cache file."""
    global _doc, _key
    if _cache_file is None:
        return None
    if _doc is None:
        _key = fingerprint()
        doc = _read_file().get(_key, {})
        for table in ("groups", "versions"):
            if not isinstance(doc.get(table), dict):
                doc[table] = {}
        _doc = doc
    return _doc


def _save() -> None:
    """Write this installation's answers into the file, beside those of the other installations it knows (at most
    :data:`INSTALLATIONS`, the newest: ``python -m latch`` and the ``latch`` script see different paths)."""
    if _cache_file is None or _doc is None:
        return
    known = _read_file()
    known.pop(_key, None)
    known[_key] = _doc
    doc = {"installations": dict(list(known.items())[-INSTALLATIONS:])}
    write_cache_file(_cache_file, json.dumps(doc))


def _scan_group(group: str) -> list[InstalledEntryPoint]:
    from importlib import metadata

    found = []
    for ep in metadata.entry_points(group=group):
        dist = getattr(ep, "dist", None)
        found.append(
            InstalledEntryPoint(
                ep.name,
                ep.value,
                group,
                ep.module,
                ep.attr or "",
                dist.name if dist else None,
                dist.version if dist else None,
            )
        )
    return found


def entry_points(group: str) -> list[InstalledEntryPoint]:
    """The installed entry points of ``group``, in :mod:`importlib.metadata`'s order."""
    answers = _answers()
    if answers is not None:
        rows = answers["groups"].get(group)
        if isinstance(rows, list):
            try:
                return [InstalledEntryPoint(**row) for row in rows]
            except TypeError:  # a row of another shape: read the metadata again
                pass
    found = _scan_group(group)
    if answers is not None:
        answers["groups"][group] = [ep.as_dict() for ep in found]
        _save()
    return found


def version(dist: str) -> str | None:
    """The installed version of the distribution ``dist`` (``None`` when it is not installed)."""
    answers = _answers()
    if answers is not None and dist in answers["versions"]:
        known = answers["versions"][dist]
        if known is None or isinstance(known, str):
            return known
    from importlib import metadata

    try:
        found: str | None = metadata.version(dist)
    except metadata.PackageNotFoundError:
        found = None
    if answers is not None:
        answers["versions"][dist] = found
        _save()
    return found
