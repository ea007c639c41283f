"""GitHub Copilot CLI session log (``~/.copilot/session-state/<sessionId>/events.jsonl``).

FORMATS.md does not describe this format; the rules below come from the corpus file
(``copilot-cli/lantern_events.jsonl``, Copilot CLI 1.0.78) and from the schema the CLI's events are
generated from (``session-events.schema.json``, published as ``nodejs/src/generated/session-events.ts``
in github/copilot-sdk). Every line is one event ``{type, data, id, timestamp, parentId}`` (``id`` a
UUID, ``timestamp`` ISO-8601 UTC ms, ``parentId`` the previous event's id); the file is appended to
while Copilot runs and again when a session is resumed. Streaming events (``assistant.message_delta``,
``assistant.usage``, ``tool.execution_progress`` ...) are ephemeral and never written, so a persisted
``assistant.message`` is always complete.

Mapping (``source_ref`` ``"line:N"``, ``ts`` = the event's ``timestamp``):

* ``session.start`` / ``session.resume``: ``data.sessionId`` → ``external_key`` ``"copilot-cli:<id>"``,
  ``data.context.cwd`` → ``workspace``, ``copilotVersion``/``producer`` → ``meta``;
  ``selectedModel`` sets the model. A resume closes calls the previous process left unanswered.
* ``session.model_change``: ``data.newModel`` is the model of the later requests (an
  ``assistant.message`` naming its own ``model`` wins).
* ``system.message`` → ``SystemNote(subtype="system_prompt"|"developer")``.
* ``user.message`` → :class:`UserMessage` of ``data.content`` (what the user typed;
  ``transformedContent``, the same text wrapped in harness reminders, is not imported). Blob
  attachments with base64 ``data`` (or an ``assetId`` of an earlier ``session.binary_asset`` event)
  become media artifacts; file and other attachments are listed in the text. ``is_meta`` when
  ``source`` names a non-human origin or ``isAutopilotContinuation`` is true.
* ``assistant.message``: one :class:`AssistantMessage` per model call: ``content``,
  ``toolRequests[]`` → :class:`ToolCall` (``arguments`` any JSON value, stored as canonical JSON;
  a string is kept as it is), ``reasoningText``/``reasoningOpaque``/``encryptedContent`` (or a
  preceding ``assistant.reasoning`` event) → ``reasoning_reported``. The chunks of one call split at
  reasoning boundaries (``chunkIndex``/``chunkCount``, same ``apiCallId``) are one message.
  ``outputTokens`` → :class:`Usage` ``(output_tokens, model, request_id=apiCallId)``: the persisted
  log holds no per-request input or cache tokens (those are in the ephemeral ``assistant.usage``).
* ``tool.execution_complete`` answers the call with the same ``toolCallId`` (a start/complete
  whose id no assistant message requested, e.g. a user-run ``!`` command, is an orphan result):
  ``result.content`` (what the model read), else ``error.message``; ``is_error`` when
  ``success`` is false or the content ends ``<exited with exit code N>`` with N ≠ 0 (``exit_code``);
  ``result.binaryResultsForLlm`` images → media. ``tool.execution_start`` only checks its fields.
  The ``sql`` tool's todo updates (``INSERT``/``UPDATE`` on the session database's ``todos`` table) and a
  ``bash`` with ``mode: "async"`` (started detached, later read with ``read_bash``/``stop_bash`` of the same
  ``shellId``) are such calls with their results, arguments kept as written; the kernel's derivation
  (``ShellRule``/``ProcessPollRule``) and the episode index link the later read to its start by ``shellId``.
* ``subagent.started`` → :class:`SubagentMarker` after the results of the ``task`` call it runs for
  (the sub-agent's own messages, tagged ``parentToolCallId``, stay inline in file order);
  ``subagent.completed``/``failed`` only end it (the ``task`` call's result carries the outcome).
* ``session.compaction_complete`` (successful) → :class:`CompactionMarker` (``trigger``,
  ``preCompactionTokens``, ``postCompactionTokens``, ``summaryContent``); ``session.truncation`` →
  ``CompactionMarker(trigger="truncation")`` with its token counts.
* ``session.info`` / ``session.warning`` / ``session.error`` → ``SystemNote(subtype="info"|"warning"|
  "error")`` of ``data.message``; ``system.notification`` → ``SystemNote(subtype="notification")``;
  ``abort`` → ``SystemNote(subtype="abort")`` and closes the turn.
* ``session.shutdown``: its summary goes to ``meta["shutdown"]`` (``shutdownType``,
  ``totalPremiumRequests``, ``totalApiDurationMs``, ``codeChanges``, and ``modelMetrics``: per model
  ``requests{count,cost}`` and ``usage{inputTokens,outputTokens,cacheReadTokens,cacheWriteTokens,
  reasoningTokens}``, token counts, the only input-token totals the log has); a shutdown of type
  ``error`` also becomes ``SystemNote(subtype="error")`` with its ``errorReason``.
* The schema's other event types (turn starts, hooks, permissions, mode and plan changes, the
  ephemeral streaming events) are skipped and counted in ``meta["ignored_events"]``; a type the
  schema does not name (a newer Copilot CLI's) is skipped too, counted in ``meta["unknown_events"]``
  (both ``{type: count}``), so a newer log still imports. Only the events imported are checked.

Turns: ``assistant.turn_end`` (unless a sub-agent is running: the schema does not say whose turn
ended), ``abort``, ``session.shutdown``, ``session.resume`` and a new user prompt not delivered as
``steering``/``queued`` close the turn: calls still unanswered get a ``missing`` result. At the end
of the file a call still executing is pending (no result), and the open tail
(``ParsedSession.settled``) starts at its result; a model call whose chunks are not all written yet
(``chunkIndex < chunkCount - 1``) is held as well.

Errors: :class:`TranscriptError` ``FILE:line N: REASON`` for invalid JSON, a line that is not an
object, or a known event whose field has the wrong type (``field 'data.toolRequests' must be an
array, got object``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..events import CompactionMarker, MediaRef, SubagentMarker, SystemNote, ToolCall, Usage, UserMessage
from ._common import (
    AssistantSlot,
    JSONLines,
    JSONObject,
    Loc,
    SessionBuilder,
    decode_base64,
    dump_json,
    head_jsonl,
    head_key,
    head_text,
    json_type,
)
from .base import Importer, ParsedSession, decode_text, iter_jsonl

__all__ = ["CopilotCliImporter", "IMPORTERS", "PLUGIN_copilot_cli"]

FORMAT = PLUGIN_copilot_cli = "copilot-cli"
_START = re.compile(r'\s*\{\s*"type"\s*:\s*"session\.(start|resume)"\s*,\s*"data"\s*:\s*\{')
_EXIT = re.compile(r"<exited with exit code (-?\d+)>\s*$")
# event namespaces of the Copilot CLI schema (session-events.schema.json): sniffing envelopes
_NAMESPACES = (
    "session",
    "user",
    "assistant",
    "tool",
    "system",
    "subagent",
    "hook",
    "skill",
    "abort",
    "permission",
    "external_tool",
    "tool_search",
    "model",
    "pending_messages",
)
# event types of the schema (github/copilot-sdk session-events.schema.json, 2026-08) that carry nothing
# to import, or are ephemeral and never written: counted in meta["ignored_events"]; any type neither
# here nor handled is a newer CLI's, counted in meta["unknown_events"]
_IGNORED = frozenset(
    """
session.remote_steerable_changed session.idle session.title_changed session.schedule_created
session.schedule_cancelled session.schedule_rearmed session.autopilot_objective_changed session.mode_changed
session.mode_notice_delivered session.session_limits_changed session.permissions_changed session.plan_changed
session.todos_changed session.workspace_file_changed session.handoff session.snapshot_rewind
session.usage_checkpoint session.context_changed session.usage_info session.context_cleared
session.compaction_start session.task_complete session.auto_mode_resolved session.managed_settings_resolved
session.managed_settings_enforced session.tools_updated session.background_tasks_changed session.skills_loaded
session.custom_agents_updated session.mcp_servers_loaded session.mcp_server_status_changed
session.extensions_loaded session.custom_notification session.canvas.opened session.canvas.registry_changed
session.canvas.closed session.canvas.unavailable session.canvas.recorded session.canvas.removed
session.extensions.attachments_pushed pending_messages.modified assistant.turn_start assistant.intent
assistant.fusion_phase_started assistant.fusion_phase_completed assistant.fusion_phase_failed
assistant.server_tool_progress assistant.reasoning_delta assistant.tool_call_delta assistant.streaming_delta
assistant.message_start assistant.message_delta assistant.idle assistant.usage model.call_failure
model.call_finished tool.user_requested tool.execution_partial_result tool.execution_progress
tool_search.activated skill.invoked subagent.configured subagent.selected subagent.deselected hook.start
hook.end hook.progress permission.requested permission.completed user_input.requested user_input.completed
elicitation.requested elicitation.completed sampling.requested sampling.completed external_tool.requested
external_tool.completed
""".split()
)


class CopilotCliImporter(Importer):
    """GitHub Copilot CLI ``events.jsonl`` → Latch events (see the module docstring for the mapping)."""

    PLUGIN_NAME = FORMAT
    DESCRIPTION = "GitHub Copilot CLI session log (~/.copilot/session-state/<sessionId>/events.jsonl)"

    def sniff(self, path: Path, head: bytes) -> int:
        """98 when the first line is a ``session.start``/``session.resume`` event ``{type, data, id,
        timestamp}``; 80 when the first lines are all such envelopes with dotted Copilot event types;
        90 when a first line longer than the head starts like a ``session.start``; else 0."""
        lines = head_jsonl(head, limit=4)
        if not lines:
            return 90 if _START.match(head_text(head)) else 0
        envelopes = [_envelope(o) for o in lines]
        if envelopes[0] and lines[0]["type"] in ("session.start", "session.resume"):
            return 98
        if all(envelopes):
            return 80
        return 0

    def resembles(self, path: Path, head: bytes) -> bool:
        """One of the first JSONL lines has three of a Copilot event envelope's four parts (a dotted ``type``
        of Copilot's namespaces, an object ``data``, a string ``id``, ``timestamp``)."""
        return any(_envelope_parts(o) >= 3 for o in head_jsonl(head, limit=4))

    def parse(self, path: Path, data: bytes) -> ParsedSession:
        """Parse the whole file; ``TranscriptError`` names the line and field of the first problem."""
        text = decode_text(path, data)
        return _Log(path).run(iter_jsonl(path, text, live=self.live), text)


def _envelope_parts(obj: JSONObject) -> int:
    kind = obj.get("type")
    return (
        (isinstance(kind, str) and "." in kind and kind.split(".", 1)[0] in _NAMESPACES)
        + isinstance(obj.get("data"), dict)
        + isinstance(obj.get("id"), str)
        + ("timestamp" in obj)
    )


def _envelope(obj: JSONObject) -> bool:
    kind = obj.get("type")
    return (
        isinstance(kind, str)
        and "." in kind
        and kind.split(".", 1)[0] in _NAMESPACES
        and isinstance(obj.get("data"), dict)
        and isinstance(obj.get("id"), str)
        and "timestamp" in obj
    )


class _Log:
    """One pass over the event lines, holding the model, the open call group and the turn state."""

    def __init__(self, path: Path):
        self.b = SessionBuilder(path, FORMAT)
        self.model: str | None = None
        self.session_id: str | None = None
        self.workspace: str | None = None
        self.meta: dict[str, Any] = {}
        self.ignored: dict[str, int] = {}
        self.unknown: dict[str, int] = {}
        self.reasoning = False  # an assistant.reasoning event came before the next message
        self.chunked: tuple[str, AssistantSlot, int, int] | None = None  # (apiCallId, slot, index, count)
        self.call_slots: dict[str, AssistantSlot] = {}
        self.open_calls: dict[str, str | None] = {}  # unanswered call id -> the parentToolCallId of its message
        self.subagents: set[str] = set()  # task call ids whose sub-agent started and has not finished
        self.assets: dict[str, tuple[str, str]] = {}  # assetId -> (base64 data, mime type)

    def run(self, rows: JSONLines, text: str) -> ParsedSession:
        for n, obj in rows:
            loc = Loc(self.b.path, f"line {n}")
            kind = loc.str(obj, "type", required=True)
            ts = loc.str(obj, "timestamp")
            handler = _HANDLERS.get(kind)
            if handler is None:
                counts = self.ignored if kind in _IGNORED else self.unknown
                counts[kind] = counts.get(kind, 0) + 1
                continue
            data = loc.obj(obj, "data", required=True)
            handler(self, loc, data, f"line:{n}", ts)
        if self.chunked is not None:
            _, slot, index, count = self.chunked
            if index < count - 1:
                self.b.hold(slot, "message")  # the model call's later chunks are not written yet
        meta = dict(self.meta)
        if self.session_id:
            meta["session_id"] = self.session_id
        if self.ignored:
            meta["ignored_events"] = dict(sorted(self.ignored.items()))
        if self.unknown:
            meta["unknown_events"] = dict(sorted(self.unknown.items()))
        key = f"{FORMAT}:{self.session_id}" if self.session_id else head_key(FORMAT, text)
        return self.b.finish(external_key=key, workspace=self.workspace, meta=meta, growing=True)

    # -- session lifecycle
    def start(self, loc: Loc, data: JSONObject, ref: str, ts: str | None, *, resume: bool = False) -> None:
        if resume:
            self.close_turn("the session was resumed before the tool returned", ts)
        session_id = loc.str(data, "sessionId", "data")
        if session_id and not self.session_id:
            self.session_id = session_id
        for key, name in (("copilotVersion", "copilot_version"), ("producer", "producer")):
            if isinstance(data.get(key), str):
                self.meta.setdefault(name, data[key])
        context = loc.obj(data, "context", "data")
        if context is not None:
            cwd = loc.str(context, "cwd", "data.context")
            if cwd and not self.workspace:
                self.workspace = cwd
            for key in ("gitRoot", "branch", "repository"):
                if isinstance(context.get(key), str):
                    self.meta.setdefault(f"git_{key}" if key != "gitRoot" else "git_root", context[key])
        self.model = loc.str(data, "selectedModel", "data") or self.model
        if resume:
            self.meta["resumes"] = self.meta.get("resumes", 0) + 1

    def resume(self, loc: Loc, data: JSONObject, ref: str, ts: str | None) -> None:
        self.start(loc, data, ref, ts, resume=True)

    def model_change(self, loc: Loc, data: JSONObject, ref: str, ts: str | None) -> None:
        self.model = loc.str(data, "newModel", "data", required=True)
        self.meta.setdefault("models", [])
        if self.model not in self.meta["models"]:
            self.meta["models"].append(self.model)

    def shutdown(self, loc: Loc, data: JSONObject, ref: str, ts: str | None) -> None:
        self.close_turn("the session shut down before the tool returned", ts)
        kind = loc.str(data, "shutdownType", "data")
        summary: dict[str, Any] = {"shutdown_type": kind}
        for key in (
            "totalPremiumRequests",
            "totalApiDurationMs",
            "totalNanoAiu",
            "currentTokens",
            "systemTokens",
            "conversationTokens",
            "toolDefinitionsTokens",
        ):
            value = data.get(key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
                raise loc.fail(f"field 'data.{key}' must be a number, got {json_type(value)}")
            if value is not None:
                summary[key] = value
        if isinstance(data.get("currentModel"), str):
            summary["currentModel"] = data["currentModel"]
        changes = loc.obj(data, "codeChanges", "data")
        if changes is not None:
            summary["codeChanges"] = changes
        metrics = loc.obj(data, "modelMetrics", "data")
        if metrics is not None:
            summary["modelMetrics"] = {}
            for model, metric in metrics.items():
                if not isinstance(metric, dict):
                    raise loc.fail(f"field 'data.modelMetrics.{model}' must be an object, got {json_type(metric)}")
                usage = loc.obj(metric, "usage", f"data.modelMetrics.{model}") or {}
                requests = loc.obj(metric, "requests", f"data.modelMetrics.{model}") or {}
                for key, value in usage.items():
                    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                        raise loc.fail(
                            f"field 'data.modelMetrics.{model}.usage.{key}' must be a non-negative "
                            f"integer, got {json_type(value)}"
                        )
                summary["modelMetrics"][model] = {"requests": requests, "usage": usage}
        self.meta["shutdown"] = summary
        if kind == "error":
            reason = loc.str(data, "errorReason", "data") or "the session ended with an error"
            self.b.add(SystemNote(text=reason, subtype="error"), ref, ts)

    # -- messages
    def system_message(self, loc: Loc, data: JSONObject, ref: str, ts: str | None) -> None:
        content = loc.str(data, "content", "data", required=True)
        role = loc.str(data, "role", "data")
        self.b.add(SystemNote(text=content, subtype="developer" if role == "developer" else "system_prompt"), ref, ts)

    def user_message(self, loc: Loc, data: JSONObject, ref: str, ts: str | None) -> None:
        content = loc.str(data, "content", "data", required=True)
        delivery = loc.str(data, "delivery", "data")
        source = loc.str(data, "source", "data")
        if delivery not in ("steering", "queued"):
            self.close_turn("the user sent a new prompt before the tool returned", ts)
        texts = [content] if content else []
        media: list[MediaRef] = []
        attachments = loc.list(data, "attachments", "data") or []
        for i in range(len(attachments)):
            att = loc.item_obj(attachments, i, "data.attachments")
            label = f"data.attachments[{i}]"
            kind = loc.str(att, "type", label, required=True)
            name = loc.str(att, "displayName", label) or loc.str(att, "path", label) or ""
            ref_media = self.binary(loc, att, label) if kind == "blob" else None
            if ref_media is not None:
                media.append(ref_media)
            elif kind == "blob":
                reason = loc.str(att, "omittedReason", label) or "no data in the log"
                texts.append(f"[attachment {name or loc.str(att, 'mimeType', label)}: omitted, {reason}]")
            else:
                texts.append(f"[attachment ({kind}): {name}]" if name else f"[attachment ({kind})]")
        is_meta = (source not in (None, "user")) or loc.bool(data, "isAutopilotContinuation", "data")
        self.b.add(UserMessage(text="\n".join(texts), media=tuple(media), is_meta=is_meta), ref, ts)

    def reasoning_event(self, loc: Loc, data: JSONObject, ref: str, ts: str | None) -> None:
        loc.str(data, "content", "data")
        self.reasoning = True

    def assistant_message(self, loc: Loc, data: JSONObject, ref: str, ts: str | None) -> None:
        content = loc.str(data, "content", "data") or ""
        requests = loc.list(data, "toolRequests", "data") or []
        calls: list[ToolCall] = []
        for i in range(len(requests)):
            req = loc.item_obj(requests, i, "data.toolRequests")
            label = f"data.toolRequests[{i}]"
            call_id = loc.str(req, "toolCallId", label, required=True)
            name = loc.str(req, "name", label, required=True)
            args = req.get("arguments")
            arguments = (
                args if isinstance(args, str) else dump_json(loc, {} if args is None else args, f"{label}.arguments")
            )
            calls.append(ToolCall(id=call_id, name=name, arguments=arguments))
        reasoning = self.reasoning or any(
            loc.str(data, key, "data") for key in ("reasoningText", "reasoningOpaque", "encryptedContent")
        )
        self.reasoning = False
        model = loc.str(data, "model", "data") or self.model
        api_call = loc.str(data, "apiCallId", "data")
        output = loc.int(data, "outputTokens", "data")
        if output is not None and output < 0:
            raise loc.fail(f"field 'data.outputTokens' must be a non-negative integer, got {output}")
        index, count = loc.int(data, "chunkIndex", "data"), loc.int(data, "chunkCount", "data")
        if (
            self.chunked is not None
            and api_call is not None
            and index is not None
            and index > 0
            and self.chunked[0] == api_call
        ):
            slot = self.chunked[1]  # a later chunk of the same model call
            self.b.extend(slot, text=content, calls=calls, reasoning=reasoning)
        else:
            slot = self.b.assistant(ref, ts, text=content, calls=calls, reasoning=reasoning, model=model)
        parent = loc.str(data, "parentToolCallId", "data")
        for call in calls:
            self.call_slots[call.id] = slot
            self.open_calls[call.id] = parent
        self.chunked = (api_call, slot, index, count) if api_call and index is not None and count else None
        if output is not None:
            self.b.set_usage(slot, Usage(output_tokens=output, model=model, request_id=api_call), f"{ref}#usage", ts)

    # -- tools
    def tool_start(self, loc: Loc, data: JSONObject, ref: str, ts: str | None) -> None:
        loc.str(data, "toolCallId", "data", required=True)
        loc.str(data, "toolName", "data", required=True)

    def tool_complete(self, loc: Loc, data: JSONObject, ref: str, ts: str | None) -> None:
        call_id = loc.str(data, "toolCallId", "data", required=True)
        success = data.get("success")
        if not isinstance(success, bool):
            raise loc.fail(f"field 'data.success' must be a boolean, got {json_type(success)}")
        result = loc.obj(data, "result", "data")
        error = loc.obj(data, "error", "data")
        content = ""
        media: list[MediaRef] = []
        if result is not None:
            content = loc.str(result, "content", "data.result") or ""
            binaries = loc.list(result, "binaryResultsForLlm", "data.result") or []
            for i in range(len(binaries)):
                item = loc.item_obj(binaries, i, "data.result.binaryResultsForLlm")
                got = self.binary(loc, item, f"data.result.binaryResultsForLlm[{i}]")
                if got is not None:
                    media.append(got)
                else:
                    mime = loc.str(item, "mimeType", f"data.result.binaryResultsForLlm[{i}]") or "binary"
                    content += f"\n[{mime} omitted from the log]"
        if error is not None:
            message = loc.str(error, "message", "data.error") or ""
            content = f"{content}\n{message}" if content else message
        self.open_calls.pop(call_id, None)
        m = _EXIT.search(content)
        exit_code = int(m.group(1)) if m else None
        is_error = not success or exit_code not in (None, 0)
        self.b.result(call_id, content, ref, ts, is_error=is_error, media=tuple(media), exit_code=exit_code)

    def binary(self, loc: Loc, item: JSONObject, label: str) -> MediaRef | None:
        """The media of a blob/binary item: its base64 ``data``, or the ``assetId`` of an earlier
        ``session.binary_asset``; ``None`` when the log has no bytes for it."""
        mime = loc.str(item, "mimeType", label)
        data = loc.str(item, "data", label)
        if data is None:
            asset = loc.str(item, "assetId", label)
            if asset is None or asset not in self.assets:
                return None
            data, mime = self.assets[asset][0], mime or self.assets[asset][1]
        return self.b.media(decode_base64(loc, data, f"{label}.data"), mime)

    def binary_asset(self, loc: Loc, data: JSONObject, ref: str, ts: str | None) -> None:
        asset = loc.str(data, "assetId", "data", required=True)
        self.assets[asset] = (loc.str(data, "data", "data", required=True), loc.str(data, "mimeType", "data") or "")

    def subagent_started(self, loc: Loc, data: JSONObject, ref: str, ts: str | None) -> None:
        call_id = loc.str(data, "toolCallId", "data", required=True)
        marker = SubagentMarker(
            call_id=call_id,
            agent_id=None,
            agent_type=loc.str(data, "agentName", "data"),
            description=loc.str(data, "agentDescription", "data") or "",
        )
        self.subagents.add(call_id)
        slot = self.call_slots.get(call_id)
        if slot is not None:
            self.b.after_results(slot, marker, ref, ts)
        else:
            self.b.add(marker, ref, ts)

    def subagent_finished(self, loc: Loc, data: JSONObject, ref: str, ts: str | None) -> None:
        self.subagents.discard(loc.str(data, "toolCallId", "data", required=True))

    # -- notes and markers
    def notification(self, loc: Loc, data: JSONObject, ref: str, ts: str | None) -> None:
        self.b.add(SystemNote(text=loc.str(data, "content", "data", required=True), subtype="notification"), ref, ts)

    def abort(self, loc: Loc, data: JSONObject, ref: str, ts: str | None) -> None:
        reason = loc.str(data, "reason", "data") or "aborted"
        self.b.add(SystemNote(text=f"aborted ({reason})", subtype="abort"), ref, ts)
        self.close_turn(f"the turn was aborted ({reason})", ts)

    def turn_end(self, loc: Loc, data: JSONObject, ref: str, ts: str | None) -> None:
        # the schema gives turns no parentToolCallId: while a sub-agent runs (or one of its calls is open) the
        # turn that ends may be the sub-agent's, so its calls are left open for a later close
        if not self.subagents and not any(self.open_calls.values()):
            self.close_turn("the turn ended without it", ts)

    def compaction(self, loc: Loc, data: JSONObject, ref: str, ts: str | None) -> None:
        success = data.get("success")
        if not isinstance(success, bool):
            raise loc.fail(f"field 'data.success' must be a boolean, got {json_type(success)}")
        if not success:
            self.b.add(SystemNote(text=loc.str(data, "error", "data") or "compaction failed", subtype="error"), ref, ts)
            return
        self.b.add(
            CompactionMarker(
                trigger=loc.str(data, "trigger", "data"),
                pre_tokens=_tokens(loc, data, "preCompactionTokens"),
                post_tokens=_tokens(loc, data, "postCompactionTokens"),
                summary=loc.str(data, "summaryContent", "data") or "",
            ),
            ref,
            ts,
        )

    def truncation(self, loc: Loc, data: JSONObject, ref: str, ts: str | None) -> None:
        self.b.add(
            CompactionMarker(
                trigger="truncation",
                pre_tokens=_tokens(loc, data, "preTruncationTokensInMessages"),
                post_tokens=_tokens(loc, data, "postTruncationTokensInMessages"),
            ),
            ref,
            ts,
        )

    def close_turn(self, reason: str, ts: str | None) -> None:
        self.b.close_open(reason, ts)
        self.open_calls.clear()
        self.subagents.clear()
        self.chunked = None
        self.reasoning = False


def _note(subtype: str) -> _Handler:
    """The handler of a ``session.info``/``warning``/``error`` event: ``SystemNote(subtype)`` of ``data.message``."""

    def handler(log: _Log, loc: Loc, data: JSONObject, ref: str, ts: str | None) -> None:
        log.b.add(SystemNote(text=loc.str(data, "message", "data", required=True), subtype=subtype), ref, ts)

    return handler


def _tokens(loc: Loc, data: JSONObject, key: str) -> int | None:
    value = loc.int(data, key, "data")
    if value is not None and value < 0:
        raise loc.fail(f"field 'data.{key}' must be a non-negative integer, got {value}")
    return value


_Handler = Callable[[_Log, Loc, JSONObject, str, str | None], None]
"""What an event type's handler is called with: ``(log, location, the event's data, source_ref, timestamp)``."""

_HANDLERS: dict[str, _Handler] = {
    "session.start": _Log.start,
    "session.resume": _Log.resume,
    "session.model_change": _Log.model_change,
    "session.shutdown": _Log.shutdown,
    "session.info": _note("info"),
    "session.warning": _note("warning"),
    "session.error": _note("error"),
    "session.compaction_complete": _Log.compaction,
    "session.truncation": _Log.truncation,
    "session.binary_asset": _Log.binary_asset,
    "system.message": _Log.system_message,
    "system.notification": _Log.notification,
    "user.message": _Log.user_message,
    "assistant.reasoning": _Log.reasoning_event,
    "assistant.message": _Log.assistant_message,
    "assistant.turn_end": _Log.turn_end,
    "abort": _Log.abort,
    "tool.execution_start": _Log.tool_start,
    "tool.execution_complete": _Log.tool_complete,
    "subagent.started": _Log.subagent_started,
    "subagent.completed": _Log.subagent_finished,
    "subagent.failed": _Log.subagent_finished,
}

IMPORTERS = [CopilotCliImporter]
