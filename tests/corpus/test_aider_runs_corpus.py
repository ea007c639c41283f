"""Every Aider run of the corpus, not only each file's last (the item the other corpus tests take): an aider
run is one Latch session, and the ones with a model request replay with every check passing (the latest user
instruction included, at a budget that rotates) and render valid requests in both wire formats.

Checked by hand: ``# aider chat started at`` headers (mozgoslav 3 runs, monochromatic 19) and, per run, the
assistant answers to its ``#### `` user turns. Most answers end in aider's ``> Tokens:`` line (awk over the runs:
mozgoslav 0, 7, 7; monochromatic 2, 2, 4, 16, 5, 10 in runs 12, 13, 15, 16, 18, 19); a few do not (monochromatic
run 6 answers "What's this dir doing?" without one, mozgoslav run 2 has two such), and each answer is a request.
A run with no answer (aider started and quit, or the answer was never logged) has no request.
"""

from __future__ import annotations

import pytest
from corpus_support import CORPUS, require_corpus

from latch.cli.replay import run_replay
from latch.host.ingest import import_all
from latch.host.loop import model_requests
from latch.kernel import canonical_state
from latch.providers import to_anthropic_messages, to_openai_chat, validate_anthropic_messages, validate_openai_chat
from latch.store import EventStore

pytestmark = pytest.mark.corpus

ANSWERED = {  # file -> assistant answers per run, in the file's order (0: a run with no request)
    "mozgoslav.aider.chat.history.md": [0, 9, 7],
    "monochromatic.aider.chat.history.md": [0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 2, 2, 0, 4, 16, 0, 5, 10],
}


@pytest.fixture(scope="module", params=sorted(ANSWERED))
def runs(request, tmp_path_factory):
    require_corpus()
    store = EventStore(tmp_path_factory.mktemp("aider") / "latch.db")
    sids = [sid for sid, _, _ in import_all(store, CORPUS / "aider" / request.param, "aider", final=True)]
    yield request.param, store, sids
    store.close()


def test_each_run_is_a_session_with_its_own_requests(runs):
    name, store, sids = runs
    assert [len(model_requests(store.events(sid))) for sid in sids] == ANSWERED[name]


@pytest.mark.parametrize("recent", [300, None])
def test_every_answered_run_replays_with_every_check_passing(runs, recent):
    name, store, sids = runs
    answered = [sid for sid, n in zip(sids, ANSWERED[name], strict=False) if n]
    for sid in answered:
        assert canonical_state(store, sid).goal_source == "user", (name, sid)
        doc, views = run_replay(store, sid, window=32_000, reserve=4_000, recent=recent, keep_views=True)
        summary = doc["summary"]
        assert summary["violations"] == [], (name, sid)
        assert len(views) == summary["requests"] == len(model_requests(store.events(sid)))
        loader = lambda sha256: store.get_artifact(sha256)[1]  # noqa: E731
        for n, view in enumerate(views, 1):
            assert validate_openai_chat(to_openai_chat(view, loader)) == [], (name, sid, n)
            assert validate_anthropic_messages(to_anthropic_messages(view, loader)) == [], (name, sid, n)


def test_a_run_without_a_request_says_so(runs):
    name, store, sids = runs
    empty = [sid for sid, n in zip(sids, ANSWERED[name], strict=False) if not n]
    assert empty
    for sid in empty:
        doc, views = run_replay(store, sid, window=32_000, reserve=4_000, recent=None, keep_views=True)
        assert (doc["summary"]["requests"], views) == (0, [])
