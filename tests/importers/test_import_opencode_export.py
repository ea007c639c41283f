"""``opencode export`` JSON (``{info, messages: [{info, parts}], todos}``, anomalyco/opencode
``packages/opencode/src/cli/cmd/export.ts``): read by the OpenCode importer as the same session its database holds.

The export is made here from the corpus database the way ``export.ts`` makes it: ``info`` is the session
(``Session.Info``: ``id``, ``slug``, ``projectID``, ``directory``, ``parentID``, ``title``, ``version``,
``time``), each message's ``info`` its ``data`` with its ``id`` and ``sessionID``, each part its ``data``
with ``id``, ``sessionID`` and ``messageID`` (the columns the database keeps beside ``data``).
"""

from __future__ import annotations

import json
import sqlite3

import pytest
from _importer_checks import assert_reimport_adds_nothing, assert_rejected, assert_shape, detected
from corpus_support import CORPUS, require_corpus

from latch.importers import TranscriptError, parse_all_file, parse_file

DB = CORPUS / "opencode" / "lantern_opencode.db"
S3 = "ses_031541bf9ffeMiy2LOFii47rch"  # the session with a tool call (write) and two requests


def export_of(session_id: str) -> dict:
    """What ``opencode export <session_id>`` prints for a session of the corpus database."""
    require_corpus()
    db = sqlite3.connect(f"file:{DB}?mode=ro&immutable=1", uri=True)
    try:
        sid, project, parent, slug, directory, title, version, created, updated = db.execute(
            "SELECT id, project_id, parent_id, slug, directory, title, version, time_created, time_updated "
            "FROM session WHERE id = ?",
            (session_id,),
        ).fetchone()
        info = {
            "id": sid,
            "slug": slug,
            "projectID": project,
            "directory": directory,
            "title": title,
            "version": version,
            "time": {"created": created, "updated": updated},
        }
        if parent:
            info["parentID"] = parent
        messages = []
        for mid, data in db.execute(
            "SELECT id, data FROM message WHERE session_id = ? ORDER BY time_created, id", (session_id,)
        ):
            parts = [
                {**json.loads(pdata), "id": pid, "sessionID": sid, "messageID": mid}
                for pid, pdata in db.execute("SELECT id, data FROM part WHERE message_id = ? ORDER BY id", (mid,))
            ]
            messages.append({"info": {**json.loads(data), "id": mid, "sessionID": sid}, "parts": parts})
    finally:
        db.close()
    return {"info": info, "messages": messages, "todos": []}


@pytest.fixture
def exported(tmp_path):
    path = tmp_path / "session.json"
    path.write_text(json.dumps(export_of(S3), indent=2), "utf-8")
    return path


def test_export_is_the_database_session(exported):
    assert detected(exported) == "opencode"
    from_db = next(s for s in parse_all_file(DB, "opencode") if s.external_key == f"opencode:{S3}")
    parsed = parse_file(exported)
    assert parsed.external_key == from_db.external_key == f"opencode:{S3}"
    assert [(pe.source_ref, pe.ts, pe.event) for pe in parsed.events] == [
        (pe.source_ref, pe.ts, pe.event) for pe in from_db.events
    ]
    # the corpus counts of this session (test_import_opencode.py): 1 user, 2 requests, 1 write call, 7 events
    assert (
        parsed.stats["user_messages"],
        parsed.stats["usage"]["requests"],
        parsed.stats["tool_calls"],
        len(parsed.events),
    ) == (1, 2, 1, 7)
    assert parsed.workspace == "/work" and parsed.meta["title"] == from_db.meta["title"]
    assert_shape(parsed.events)


def test_export_imports_once(exported, store):
    sid, parsed = assert_reimport_adds_nothing(store, exported)
    assert store.count_events(sid) == len(parsed.events)


def _write(tmp_path, doc, name="bad.json"):
    path = tmp_path / name
    path.write_text(json.dumps(doc, indent=2), "utf-8")
    return path


@pytest.mark.parametrize(
    "case", ["no_info", "message_no_info", "created_string", "part_no_type", "role_other", "no_messages"]
)
def test_malformed_export_is_one_line(tmp_path, store, case):
    doc = export_of(S3)
    if case == "no_info":
        del doc["info"]
        where, reason = "top level", "missing field 'info'"
    elif case == "message_no_info":
        del doc["messages"][1]["info"]
        where, reason = "messages[1]", "missing field 'info'"
    elif case == "created_string":
        doc["messages"][0]["info"]["time"]["created"] = "yesterday"
        where, reason = "messages[0].info", "field 'time.created' must be a number of milliseconds, got string"
    elif case == "part_no_type":
        del doc["messages"][1]["parts"][0]["type"]
        where, reason = "messages[1].parts[0]", "missing field 'data.type'"
    elif case == "role_other":
        doc["messages"][0]["info"]["role"] = "system"
        where, reason = "messages[0].info", "must be 'user' or 'assistant', got 'system'"
    else:
        doc["messages"] = []
        where, reason = "top level", "the exported session has no message"
    # detected without --format too: the error is the OpenCode importer's, not another format's
    assert_rejected(store, _write(tmp_path, doc), where=where, reason=reason)


def test_format_hint_never_suggests_a_format_that_fails(tmp_path):
    """An export passed as another format: the hint names opencode, which reads it."""
    path = _write(tmp_path, export_of(S3), "session.json")
    with pytest.raises(TranscriptError) as info:
        parse_file(path, format="openai-chat")
    assert "pass --format opencode" in str(info.value)
    parse_file(path, format="opencode")
