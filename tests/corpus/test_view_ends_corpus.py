"""No replayed view of a corpus session ends with an assistant message unless the transcript's own request did:
a view that ends with the model's previous message is a prefill the real request never had (one response split
into several messages is one request; a step the model answered is in its request's view)."""

from __future__ import annotations

import pytest
from corpus_support import corpus_name

from latch.cli.replay import run_replay

pytestmark = pytest.mark.corpus

# Requests the transcript records after an assistant message with nothing the model saw between them, each a
# request of its own (its own usage), so the original request ended with that assistant message as far as the
# file says. The harness sent a turn the file does not record as one:
ENDS_WITH_ASSISTANT = {
    # a watch-mode request ("Processing your request...": aider sends the file's AI! comments as the user turn);
    # the chat history keeps only its console lines
    "aider/monochromatic.aider.chat.history.md": 1,
    # Gemini CLI's next-speaker check sends "Please continue." unrecorded; the file has two model messages
    "gemini-cli/entire_session.json": 1,
}


def test_no_view_ends_with_an_assistant_message(corpus_session):
    path, store, sid = corpus_session
    name = corpus_name(path)
    _, views = run_replay(store, sid, keep_views=True, harness=False)
    ends = []
    for n, view in enumerate(views, 1):
        conv = [m for m in view.messages if m.kind == "conversation"]
        if conv and conv[-1].role == "assistant":
            ends.append(n)
    assert len(ends) == ENDS_WITH_ASSISTANT.get(name, 0), (name, ends)
