"""Detection names the right format, and no error's suggestion leads to another format's failure.

Every corpus file (a sample of it: its first records) and the fixtures of the formats the corpus lacks are
imported under every other ``--format`` and mutated into near-misses (each field of the first records left out
in turn). Whatever the error, each ``(import with --format X)`` or ``pass --format X`` it suggests must read
the file; a near-miss no importer claims is read as the format it nearly has, so its error names that format
(``(read as FORMAT: ...)``) and the field that is missing, never ``unrecognized transcript format`` or the error
of a format the file merely also resembles.
"""

from __future__ import annotations

import copy
import json
import re
import shutil
from pathlib import Path

import pytest
from corpus_support import CORPUS, REPO, corpus_files, corpus_format, require_corpus

from latch.importers import TranscriptError, builtin_importers, detect, parse_all_file

FORMATS = sorted(c.PLUGIN_NAME for c in builtin_importers())
FIXTURES = REPO / "tests" / "fixtures"
# fixtures of formats the corpus has no file of: (format, path under tests/fixtures)
FIXTURE_FILES = [
    ("antigravity", "antigravity/trajectory.jsonl"),
    ("merged-messages", "merged-messages/session.json"),
    ("cline", "cline/globalStorage/saoudrizwan.claude-dev/tasks/1779000000000/ui_messages.json"),
    ("cline", "cline/globalStorage/saoudrizwan.claude-dev/tasks/1777000000000/api_conversation_history.json"),
]
SAMPLE_RECORDS = 30
# near-misses no importer can be expected to recognize: what the mutation leaves has nothing of the format
UNRECOGNIZABLE = {
    ("codex", "'payload' left out of every record"): "every line is then only {timestamp, type}",
    ("merged-messages", "top-level 'messages' left out"): "only the 'meta' object is left, no conversation",
}
_HINT = re.compile(r"--format (?!out\b)([\w.-]+)")  # "leave --format out" names no format


def _records(path: Path) -> tuple[str, object]:
    """``("jsonl", [objects])``, ``("json", document)`` or ``("raw", None)`` for a file that is neither."""
    text = path.read_text("utf-8", "replace")
    try:
        return "json", json.loads(text)
    except ValueError:
        pass
    try:
        return "jsonl", [json.loads(line) for line in text.splitlines() if line.strip()]
    except ValueError:
        return "raw", None


def _write(path: Path, kind: str, doc) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "jsonl":
        path.write_text("".join(json.dumps(o) + "\n" for o in doc), "utf-8")
    else:
        path.write_text(json.dumps(doc, indent=1), "utf-8")
    return path


def _sample(kind: str, doc):
    """The first records of ``doc`` (every top-level list cut to :data:`SAMPLE_RECORDS`)."""
    if kind == "jsonl" or isinstance(doc, list):
        return doc[:SAMPLE_RECORDS]
    return {k: v[:SAMPLE_RECORDS] if isinstance(v, list) else v for k, v in doc.items()}


def _records_of(doc) -> list:
    """The records a mutation edits: the array's items, or the items of the object's first list of objects."""
    if isinstance(doc, list):
        return doc
    for value in doc.values():
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            return value
    return []


def _mutations(kind: str, doc):
    """``(label, mutated document)``: each top-level key left out, each key of the first record left out of
    the first record and of every record."""
    if isinstance(doc, dict) and kind == "json":
        for key in doc:
            yield f"top-level '{key}' left out", {k: v for k, v in doc.items() if k != key}
    rows = _records_of(doc)
    first = rows[0] if rows and isinstance(rows[0], dict) else {}
    for key in first:
        for scope in ("the first record", "every record"):
            mutated = copy.deepcopy(doc)
            targets = _records_of(mutated)
            for row in targets[:1] if scope == "the first record" else targets:
                if isinstance(row, dict):
                    row.pop(key, None)
            yield f"'{key}' left out of {scope}", mutated


def _cases() -> list[tuple[str, Path]]:
    cases = [(corpus_format(p), p) for p in corpus_files()]
    cases += [(fmt, FIXTURES / rel) for fmt, rel in FIXTURE_FILES]
    return cases


def _name(case) -> str:
    fmt, path = case
    return f"{fmt}/{path.name}"


@pytest.fixture(params=_cases(), ids=_name)
def sample(request, tmp_path):
    """``(format, kind, sample document, sample path)`` of a corpus file or fixture; a database or Markdown
    file is copied whole (``kind`` ``raw``)."""
    fmt, path = request.param
    if path.is_relative_to(CORPUS):
        require_corpus()
    kind, doc = _records(path)
    target = tmp_path / "sample" / path.name
    if kind == "raw":
        target.parent.mkdir(parents=True)
        shutil.copyfile(path, target)
        return fmt, kind, None, target
    doc = _sample(kind, doc)
    _write(target, kind, doc)
    return fmt, kind, doc, target


def _error(path: Path, format: str | None = None) -> TranscriptError | None:
    try:
        parse_all_file(path, format)
    except TranscriptError as exc:
        return exc
    return None


def _dead_hints(exc: TranscriptError, path: Path) -> list[str]:
    """The formats ``exc`` suggests that do not read ``path`` (each with the error following it gives)."""
    dead = []
    for name in _HINT.findall(exc.reason):
        again = _error(path, name)
        if again is not None:
            dead.append(f"--format {name} -> {again.reason}")
    return dead


def test_sample_reads_as_its_format(sample):
    fmt, _, _, path = sample
    assert [s.format for s in parse_all_file(path)][:1] == [fmt]


def test_every_other_format_suggests_only_what_reads(sample):
    fmt, _, _, path = sample
    found = {}
    for other in FORMATS:
        if other == fmt:
            continue
        exc = _error(path, other)
        if exc is not None and _dead_hints(exc, path):
            found[other] = (exc.reason, _dead_hints(exc, path))
    assert found == {}


def test_near_misses_name_their_format(sample, tmp_path):
    fmt, kind, doc, path = sample
    if kind == "raw":
        pytest.skip("a database or Markdown history has no records to leave fields out of")
    wrong = []
    for n, (label, mutated) in enumerate(_mutations(kind, doc)):
        target = _write(tmp_path / f"m{n}" / path.name, kind, mutated)
        exc = _error(target)
        if exc is None:
            continue
        dead = _dead_hints(exc, target)
        if dead:
            wrong.append((label, exc.reason, dead))
            continue
        if exc.reason.startswith("unrecognized transcript format"):
            if (fmt, label) not in UNRECOGNIZABLE:
                wrong.append((label, "unrecognized"))
            continue
        named = detect(target, target.read_bytes()).PLUGIN_NAME
        if named != fmt and f"(read as {fmt}:" not in exc.reason:
            wrong.append((label, named, exc.reason))
    assert wrong == []
