"""Parity: the episode index built with the native text scans (path runs, command words, term counts) equals the
one built with their pure-Python references, episodes, dictionaries and rendered selections alike, on generated
event streams: stretches of the stress scenario and hypothesis events made of paths and command words.

Skips when the native module is not built (a ``LATCH_PURE_BUILD=1`` install).
"""

from __future__ import annotations

import dataclasses
import itertools
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from latch import hotpaths
from latch.bench.scenario import ScenarioModel
from latch.engine import episodes as E
from latch.engine.episodes import EpisodeIndex
from latch.events import (
    AssistantMessage,
    SystemNote,
    ToolCall,
    ToolResult,
    UserMessage,
    canonical_payload,
    decode_event,
)
from latch.hotpaths import _py
from latch.store import StoredEvent

pytest.importorskip("latch._native", reason="latch._native is not built (pure-Python install)")

_NATIVE_SCANS = ("ascii_path_runs", "ascii_command_classes", "TermCounts")


def _stored(events):
    """The events as a store hands them back: decoded afresh (no parsed arguments kept), seqs from 1."""
    return [
        StoredEvent(
            seq=i,
            session_id="s",
            kind=e.KIND,
            event=decode_event(e.KIND, canonical_payload(e)),
            source_ref=None,
            ts=None,
        )
        for i, e in enumerate(events, 1)
    ]


def _built(stored, step: int) -> tuple[list[tuple], dict, dict, list[str]]:
    E._RUN_PATHS.clear()
    idx = EpisodeIndex()
    for i in range(0, len(stored), step):
        idx.extend(stored[i : i + step])
    now = idx.watermark
    views = [
        EpisodeIndex.render(
            idx.select(query, ["src/app.py", "tests/test_app.py"], now, k=8, before_seq=before), len, 600
        )
        for query in ("fix the failing test in src/app.py", "cache token parser", "")
        for before in (None, now // 2 + 1)
    ]
    return [dataclasses.astuple(e) for e in idx.episodes], idx._term_counts.ids(), dict(idx._files), views


def _same_on_both(stored, step: int = 1) -> None:
    native = _built(stored, step)
    with pytest.MonkeyPatch.context() as m:
        for name in _NATIVE_SCANS:
            m.setattr(hotpaths, name, getattr(_py, name))
        assert _built(stored, step) == native


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 1_000), skip=st.integers(0, 300), n=st.integers(1, 600), step=st.integers(1, 64))
def test_stress_scenario_stretches_build_the_same_index(seed, skip, n, step):
    events = list(itertools.islice(ScenarioModel(seed, workspace="/work/shop").events(), skip, skip + n))
    _same_on_both(_stored(events), step)


_WORDS = st.sampled_from(
    [
        *hotpaths.TEST_COMMANDS,
        *hotpaths.READ_COMMANDS,
        *hotpaths.MUTATING_COMMANDS,
        "src/app.py",
        "./a/b.PY",
        "~/x.json",
        "../up/c.ts",
        "x.py/",
        "and/or",
        "v1.2",
        "a.py_",
        "README.md",
        "é/ü.py",
        "修正.py",
        "fix",
        "parser",
        "cache",
    ]
)
_TEXT = st.lists(_WORDS | st.sampled_from([" ", "\n", "; ", "&& ", '"', "(", ":"]), max_size=12).map("".join)
_EVENT = st.one_of(
    st.builds(UserMessage, _TEXT),
    st.builds(
        lambda text, name, cmd, key, ascii_only: AssistantMessage(
            text, (ToolCall("c1", name, json.dumps({key: cmd}, ensure_ascii=ascii_only)),)
        ),
        _TEXT,
        st.sampled_from(["Bash", "Read", "Edit", "grep", "exec_command"]),
        _TEXT,
        st.sampled_from(["command", "cmd", "file_path", "description"]),
        st.booleans(),
    ),
    st.builds(
        lambda text, err, code: ToolResult("c1", text, is_error=err, exit_code=code),
        _TEXT,
        st.booleans(),
        st.sampled_from([None, 0, 1]),
    ),
    st.builds(lambda text: SystemNote(text=text, subtype="info"), _TEXT),
)


@settings(max_examples=200, deadline=None)
@given(events=st.lists(_EVENT, max_size=40))
def test_path_and_command_events_build_the_same_index(events):
    _same_on_both(_stored(events))
