"""Every replayed view of every corpus file renders to both wire formats and passes both validators.
The tiny budget (window 32,000, reserve 4,000, recent 4,000 tokens) forces rotations."""

from __future__ import annotations

from dataclasses import replace

import pytest

from latch.cli.replay import run_replay
from latch.cli.view import UNKNOWN_MODEL
from latch.providers import (
    WireCheck,
    to_anthropic_messages,
    to_openai_chat,
    to_responses,
    validate_anthropic_messages,
    validate_openai_chat,
    validate_responses,
)

# the corpus_session fixture (conftest.py) runs each test on every corpus file, imported into a new store
pytestmark = pytest.mark.corpus


def test_every_view_is_a_valid_request_in_both_formats(corpus_session):
    path, store, sid = corpus_session
    # the conversation alone: an inferred Claude Code harness prompt (up to 41k tokens) does not fit this budget;
    # test_harness_corpus.py renders the views with the harness's system prompt at the default budget
    doc, views = run_replay(store, sid, window=32_000, reserve=4_000, recent=4_000, keep_views=True, harness=False)
    summary = doc["summary"]
    assert len(views) == summary["requests"] - summary["overflows"] > 0
    if summary["conversation_tokens"] > 2 * 4_000:
        assert summary["rotations"] > 0
    loader = lambda sha256: store.get_artifact(sha256)[1]  # noqa: E731
    for n, view in enumerate(views, 1):
        where = f"{path.name} view {n} (epoch {view.epoch})"
        model = doc["model"] or UNKNOWN_MODEL  # as `latch view` names it
        openai = to_openai_chat(view, loader, model=model)
        anthropic = to_anthropic_messages(view, loader, model=model)
        assert validate_openai_chat(openai, require_model=True) == [], where
        assert validate_anthropic_messages(anthropic, require_model=True) == [], where
        # nothing silently dropped: every call and every result of the view reaches both bodies
        calls = sum(len(m.tool_calls) for m in view.messages)
        results = sum(1 for m in view.messages if m.role == "tool")
        assert sum(len(m.get("tool_calls") or ()) for m in openai["messages"]) == calls, where
        assert sum(1 for m in openai["messages"] if m["role"] == "tool") == results, where
        blocks = [b for m in anthropic["messages"] for b in m["content"]]
        assert sum(1 for b in blocks if b["type"] == "tool_use") == calls, where
        assert sum(1 for b in blocks if b["type"] == "tool_result") == results, where


def test_views_checked_as_far_as_each_is_new_get_each_views_own_violations(corpus_session):
    """A bench job's WireCheck over the replay's views in order, and every third view again with its middle message
    left out (the others the same objects): each result is what rendering and validating that view whole gives."""
    path, store, sid = corpus_session
    doc, views = run_replay(store, sid, window=32_000, reserve=4_000, recent=4_000, keep_views=True, harness=False)
    model = doc["model"] or UNKNOWN_MODEL
    check = WireCheck(model=model, max_tokens=4_000)
    assert views
    for n, view in enumerate(views, 1):
        runs = [view]
        if n % 3 == 0 and len(view.messages) > 2:
            middle = len(view.messages) // 2
            runs.append(replace(view, messages=view.messages[:middle] + view.messages[middle + 1 :]))
        for v in runs:
            whole = (
                validate_openai_chat(to_openai_chat(v))
                + validate_anthropic_messages(to_anthropic_messages(v, max_tokens=4_000))
                + validate_responses(to_responses(v, model=model))
            )
            assert check.problems(v) == whole, f"{path.name} view {n}"
