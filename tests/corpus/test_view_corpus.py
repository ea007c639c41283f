"""``latch view`` on every corpus session: the first, a middle and the last request, in both
wire formats, print a request body that passes the wire validators and is exactly the view the replay builds."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from corpus_support import corpus_items, import_item, item_id

from latch.cli import _load_commands, cli
from latch.host.loop import model_requests
from latch.providers import validate_anthropic_messages, validate_openai_chat
from latch.store import EventStore

pytestmark = pytest.mark.corpus


@pytest.mark.parametrize("item", corpus_items(), ids=item_id)
def test_view_prints_valid_requests_for_first_middle_last(item, corpus_dir, tmp_path):
    db = tmp_path / "latch.db"
    with EventStore(db) as store:
        sid = import_item(store, item)
        count = len(model_requests(store.events(sid)))
    assert count > 0
    _load_commands()
    runner = CliRunner()
    for n in sorted({1, (count + 1) // 2, count}):
        bodies = {}
        for fmt, validate in (("openai", validate_openai_chat), ("anthropic", validate_anthropic_messages)):
            res = runner.invoke(
                cli,
                ["--db", str(db), "view", sid, "--request", str(n), "--format", fmt],
                env={"LATCH_HOME": str(tmp_path)},
                catch_exceptions=False,
            )
            assert res.exit_code == 0, (n, fmt, res.output)
            body = json.loads(res.stdout)  # stderr: a note when the transcript names no model
            assert validate(body, require_model=True) == [], (item_id(item), n, fmt)
            bodies[fmt] = body
        # the same request in both formats: every tool call and every result in each
        calls = sum(len(m.get("tool_calls") or ()) for m in bodies["openai"]["messages"])
        blocks = [b for m in bodies["anthropic"]["messages"] for b in m["content"]]
        assert sum(1 for b in blocks if b["type"] == "tool_use") == calls
        assert bodies["anthropic"]["max_tokens"] > 0
    res = runner.invoke(
        cli,
        ["--db", str(db), "view", sid, "--request", str(count + 1)],
        env={"LATCH_HOME": str(tmp_path)},
        catch_exceptions=False,
    )
    assert res.exit_code == 2 and f"1..{count}" in res.output
