"""Corpus helpers shared by tests and benchmarks: import as ``from corpus_support import ...``.

(``tests`` is on ``sys.path`` through ``pythonpath`` in pyproject's pytest config.)

The corpus is open: it grows over time and nothing here lists its files. A file's format is the
name of its top-level folder under the corpus (``claude-code/…``, including a Claude Code
session's ``<sessionId>/subagents/agent-<id>.jsonl`` files). A format with no importer yet must be
named in :data:`NO_IMPORTER_YET` with the reason; ``tests/corpus/test_corpus_present.py`` fails on a
corpus file whose format is neither imported nor listed there, and on a listed format that has
gained an importer (so the list cannot go stale).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import os
import sqlite3
from pathlib import Path
from types import ModuleType
from typing import NamedTuple

import pytest

REPO = Path(__file__).resolve().parents[1]


def load_tool(name: str) -> ModuleType:
    """The script ``tools/<name>.py`` of the repository, imported as a module (the tools are no package)."""
    spec = importlib.util.spec_from_file_location(name, REPO / "tools" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


CORPUS = (REPO.parent / "shared" / "corpus").resolve()
DOCS = ("README.md", "FORMATS.md")

# Formats present in the corpus that no built-in importer reads yet.
# Each entry: corpus folder -> why it is allowed to be skipped. Remove an entry when its
# importer lands; the corpus tests then run its files like every other.
NO_IMPORTER_YET: dict[str, str] = {}

# Units larger than a 28,000-token hard budget (window 32,000 - reserve 4,000) even alone, per corpus file:
# the engine refuses those requests with ContextOverflow (a refusal, not a violation). Checked against the
# refusal messages and the raw lines, cl100k counts by tiktoken:
# - spotter seq 18..22: a tool turn with a Read of an 86 KB source file (line 66 of the JSONL, 14,269 cl100k
#   tokens of JSON-escaped content), 31,150 estimated tokens under the openai heuristic;
# - entire-image seq 22..25: one tool turn (line 37) with two parallel Reads (lines 41 and 44: 45,496 and
#   37,175 characters, 13,530 + 11,083 cl100k tokens), 45,742 estimated tokens.
# Every other unit of the corpus fits.
OVERSIZED_AT_28K: dict[str, int] = {
    "claude-code/8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl": 1,
    "claude-code/entire-image_session.jsonl": 1,
}


def corpus_available() -> bool:
    return CORPUS.is_dir() and any(CORPUS.rglob("*.*"))


def require_corpus() -> Path:
    """Return the corpus folder; skip when absent, fail when ``CI`` is set."""
    if corpus_available():
        return CORPUS
    if os.environ.get("CI"):
        pytest.fail(f"CI is set but the corpus folder {CORPUS} is missing")
    pytest.skip(f"corpus folder {CORPUS} is absent (it lives beside the repository)")


def corpus_files() -> list[Path]:
    """Every transcript in the corpus, sorted by path (empty when absent)."""
    if not CORPUS.is_dir():
        return []
    return sorted(p for p in CORPUS.rglob("*") if p.is_file() and p.relative_to(CORPUS).parts[0] not in DOCS)


def corpus_name(path: Path) -> str:
    """``format/relative/path`` of a corpus file, the key of per-file expectations."""
    return path.relative_to(CORPUS).as_posix()


def corpus_format(path: Path) -> str:
    """The format of a corpus file: its top-level folder name (an importer's ``PLUGIN_NAME``)."""
    return path.relative_to(CORPUS).parts[0]


def importable_corpus_files() -> list[Path]:
    """The corpus files whose format has an importer (every file not in :data:`NO_IMPORTER_YET`)."""
    return [p for p in corpus_files() if corpus_format(p) not in NO_IMPORTER_YET]


def corpus_id(path: Path) -> str:
    """Test id of a corpus file: its path under the corpus."""
    return corpus_name(path)


def require_importer(path: Path) -> str:
    """The format of corpus file ``path``; skips (with the allowlist's reason) when it has no importer yet."""
    fmt = corpus_format(path)
    if fmt in NO_IMPORTER_YET:
        pytest.skip(f"{corpus_name(path)}: {NO_IMPORTER_YET[fmt]}")
    return fmt


# Formats whose files are containers of several sessions (SQLite databases): the corpus tests run on each
# session of such a file (:func:`corpus_items`), not on the one session ``parse`` returns.
CONTAINER_FORMATS = ("goose", "opencode")


class CorpusItem(NamedTuple):
    """One session of the corpus: ``path`` and, for a container file, the ``external_key`` of one of its
    sessions (``None``: the file's only session)."""

    path: Path
    session: str | None = None


def _sessions(path: Path) -> list[tuple[str, bool]]:
    """``(external_key, has a model request)`` of every session of ``path``, in the file's order (``[]`` when
    it does not parse: the tests of the whole file then report the error)."""
    from latch.events import AssistantMessage
    from latch.importers import TranscriptError, builtin_importers, parse_all_file

    try:
        parsed = parse_all_file(path, corpus_format(path), builtin_importers())
    except TranscriptError:
        return []
    return [(s.external_key, any(isinstance(p.event, AssistantMessage) for p in s.events)) for s in parsed]


@functools.lru_cache(maxsize=1)
def _items() -> tuple[CorpusItem, ...]:
    items: list[CorpusItem] = []
    for p in corpus_files():
        fmt = corpus_format(p)
        sessions = _sessions(p) if fmt not in NO_IMPORTER_YET else []
        if fmt in CONTAINER_FORMATS and sessions:
            items.extend(CorpusItem(p, k) for k, _ in sessions)
        elif len(sessions) > 1 and not sessions[-1][1] and any(asked for _, asked in sessions):
            # a file of several sessions (Aider's runs) whose last one never reached the model: its last
            # session that did (the file's last one is what import_file takes)
            items.append(CorpusItem(p, next(k for k, asked in reversed(sessions) if asked)))
        else:
            items.append(CorpusItem(p))
    return tuple(items)


def corpus_items() -> list[CorpusItem]:
    """Every session of the corpus, sorted by path, derived from the files: one item per ordinary file, one per
    session of a container file (in the file's order); a file of several sessions whose last one has no model
    request (an Aider history whose last run ended in errors) is its last session with one. Formats without an
    importer are one item per file. Empty when the corpus is absent."""
    return list(_items())


def importable_corpus_items() -> list[CorpusItem]:
    """The :func:`corpus_items` whose format has an importer."""
    return [i for i in corpus_items() if corpus_format(i.path) not in NO_IMPORTER_YET]


def item_name(item: CorpusItem) -> str:
    """``format/relative/path`` of the item's file, then ``#<the format's session id>`` for a session of a
    container (``goose/lantern_sessions.db#20260805_1``): the key of per-session expectations and the test id."""
    name = corpus_name(item.path)
    return name if item.session is None else f"{name}#{item.session.partition(':')[2]}"


def item_id(item: CorpusItem) -> str:
    """Test id of a corpus item (:func:`item_name`)."""
    return item_name(item)


def import_item(store, item: CorpusItem, importers=None) -> str:
    """Import ``item`` into ``store`` as a finished session (``final=True``) and return its session id: the
    whole container file in one transaction (:func:`latch.host.ingest.import_all`), else the file.
    Skips (like :func:`require_importer`) when the format has no importer yet."""
    from latch.host.ingest import import_all, import_file

    fmt = require_importer(item.path)
    if item.session is None:
        sid, _, _ = import_file(store, item.path, fmt, importers=importers, final=True)
        return sid
    for sid, parsed, _ in import_all(store, item.path, fmt, importers=importers, final=True):
        if parsed.external_key == item.session:
            return sid
    raise AssertionError(f"{item_name(item)}: the file no longer holds this session")


def store_parsed(store, parsed) -> str:
    """Store ``parsed`` (a :class:`~latch.importers.ParsedSession`) in ``store`` as one session, as the importer
    would, and return its session id."""
    sid, _ = store.import_session(
        external_key=parsed.external_key,
        source=parsed.source,
        format=parsed.format,
        workspace=parsed.workspace,
        events=parsed.events,
        meta=parsed.meta,
        artifacts=parsed.artifacts,
    )
    return sid


def parse_item(item: CorpusItem, importers=None):
    """The :class:`~latch.importers.ParsedSession` of ``item`` (skips a format without an importer)."""
    from latch.importers import builtin_importers, parse_all_file, parse_file

    fmt = require_importer(item.path)
    importers = builtin_importers() if importers is None else importers
    if item.session is None:
        return parse_file(item.path, format=fmt, importers=importers)
    return next(s for s in parse_all_file(item.path, fmt, importers) if s.external_key == item.session)


def store_digest(db: Path, exclude: tuple[str, ...] = ()) -> tuple[str, dict[str, int]]:
    """``(sha256 of the database's logical content, rows per table)`` of the SQLite store at ``db``, opened
    read-only: what any write to it would change (a test of a read-only command compares before and after).
    ``exclude``: tables left out of both (their rows, in the digest, as an empty table)."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        tables = [
            t
            for (t,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
            if t not in exclude
        ]
        counts = {t: con.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0] for t in tables}
        skip = tuple(f'INSERT INTO "{t}"' for t in exclude)
        digest = hashlib.sha256(
            "\n".join(line for line in con.iterdump() if not line.startswith(skip)).encode()
        ).hexdigest()
    finally:
        con.close()
    return digest, counts


def edit_first_prompt(path: Path) -> int:
    """Rewrite ``path`` (a Claude Code JSONL) in place with its first user record's content changed: the file edited
    after an import. Returns that record's 0-based line index."""
    lines = path.read_text(encoding="utf-8").splitlines()
    k = next(i for i, ln in enumerate(lines) if json.loads(ln).get("type") == "user")
    obj = json.loads(lines[k])
    obj["message"]["content"] = "an edited first prompt"
    lines[k] = json.dumps(obj)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return k
