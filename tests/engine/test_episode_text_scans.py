"""The episode index's text scans against their plain patterns, on generated text and on the real corpus: file
entities (a run met again gives what the path pattern gives) and the command searches of call classes."""

from __future__ import annotations

import functools
import json
import re

from corpus_support import corpus_files, require_corpus
from hypothesis import given, settings
from hypothesis import strategies as st
from test_episodes import _plain_paths

from latch.engine import episodes as E


def _strings(value, out: list[str]) -> None:
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, dict):
        for v in value.values():
            _strings(v, out)
    elif isinstance(value, list):
        for v in value:
            _strings(v, out)


@functools.cache
def _corpus_texts() -> tuple[str, ...]:
    """Every string of the corpus (JSON values of JSON lines and documents, else the lines), first scan window,
    distinct, in file order."""
    out: list[str] = []
    for path in corpus_files():
        raw = path.read_text(encoding="utf-8", errors="replace")
        try:
            _strings(json.loads(raw), out)
            continue
        except ValueError:
            pass
        for line in raw.splitlines():
            try:
                _strings(json.loads(line), out)
            except ValueError:
                out.append(line)
    return tuple(dict.fromkeys(t[: E.SCAN_CHARS] for t in out if len(t) > 1))


def _plain_classes(text: str) -> list[bool]:
    """``[test, read]`` verdicts of the plain patterns under both compilations (as the scanners are picked)."""
    read_ascii = E._READ_CMD.replace(r"\s", E._ASCII_SPACE)
    return [
        bool(re.search(E._TEST_CMD, text)),
        bool(re.search(E._READ_CMD, text)),
        bool(re.search(E._TEST_CMD, text, re.ASCII)),
        bool(re.search(read_ascii, text, re.ASCII)),
    ]


def _classes(text: str) -> list[bool]:
    return [E._UNICODE.test_cmd(text), E._UNICODE.read_cmd(text), E._ASCII.test_cmd(text), E._ASCII.read_cmd(text)]


_RUN_PIECES = [
    *"a Z _ 1 . / - ~ @ + é 修 ſ \u212a .py .PY .Json .c .ts .v .dockerfile x.py/ /etc".split(" "),
    " ",
    "\n",
    ":",
    "\\",
    '"',
    "'",
    "a.py",
    "src/a.py",
    "C:",
    "x@y",
    "../",
    "~/",
    "é.py",
    "\t",
    "d/" * 130,  # a run longer than the longest kept
]


@settings(max_examples=500, deadline=None)
@given(st.lists(st.lists(st.sampled_from(_RUN_PIECES), max_size=16).map("".join), min_size=1, max_size=8))
def test_paths_of_runs_met_again_equal_the_path_pattern(texts):
    """Texts sharing runs after different characters (``:`` and ``\\`` are in the path pattern's look-behind, not
    in a run): each text's entities, with the runs of the texts before it kept, equal the plain pattern's."""
    for text in [*texts, *texts, "".join(texts), ":".join(texts)]:
        assert E._paths(text) == _plain_paths(text), text


def test_paths_of_the_corpus_equal_the_path_pattern():
    require_corpus()
    texts = _corpus_texts()
    assert len(texts) > 1_000
    found = 0
    for text in (*texts, *texts[:2_000]):  # the second pass meets kept runs
        paths = E._paths(text)
        assert paths == _plain_paths(text), text[:200]
        found += bool(paths)
    assert found > 100


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_command_searches_on_corpus_text_find_what_the_plain_patterns_find(data):
    require_corpus()
    texts = _corpus_texts()
    text = data.draw(st.sampled_from(texts))
    start = data.draw(st.integers(0, len(text)))
    for piece in (text, text[start:], text[:start]):
        assert _classes(piece) == _plain_classes(piece), piece[:200]


def test_command_searches_on_every_corpus_command_find_what_the_plain_patterns_find():
    require_corpus()
    texts = [t for t in _corpus_texts() if len(t) < 4_000]
    assert sum(any(_plain_classes(t)) for t in texts) > 50  # the corpus runs tests and reads files
    for text in texts:
        assert _classes(text) == _plain_classes(text), text[:200]
