"""OpenHands (V0) event-stream trajectory importer (FORMATS.md §10, §13).

The file is a JSON array of events; each event becomes zero or more Latch
events with ``source_ref`` ``"event:<id>"`` and ``ts`` = its ``timestamp``
(local-naive ISO, kept as written).

* User ``message`` actions → ``UserMessage`` (``image_urls``: ``data:`` URLs are
  stored as artifacts, remote URLs are listed in the text).
* Agent actions carrying ``tool_call_metadata.model_response`` are grouped by
  ``model_response.id``: the first action of a response emits ONE
  ``AssistantMessage`` (the response's ``content``, else the action's
  ``thought``) with every ``tool_calls[]`` entry of the response (parallel calls
  share one response), then its ``Usage``. ``finish`` is not a tool: its call is
  dropped from the list and its ``final_thought``/``thought`` becomes the text.
  Agent actions without metadata (non-function-calling agents) get a
  synthesized call ``"event-<id>"`` named after the action. Agent ``message`` and
  ``finish`` actions without metadata are text-only ``AssistantMessage`` s.
* Observations answer the call of the action named by ``cause`` (else by
  ``tool_call_metadata.tool_call_id``). ``run`` output is ``metadata.prefix +
  content + metadata.suffix`` (what the agent read); ``exit_code`` comes from
  ``extras.metadata`` (a dict or a Python-repr string, parsed with
  ``ast.literal_eval``/a regex, never ``eval``); ``is_error`` when
  ``observation == "error"`` or the exit code is non-zero (−1: timeout or still
  running). An observation whose call is unknown is an orphan result.
* ``agent_state_changed`` observations → ``SystemNote(subtype="agent_state")``
  (the ``change_agent_state`` action that requested it is skipped); ``system`` actions →
  ``SystemNote(subtype="system_prompt")`` (the first one's ``args.tools``, the agent's tool schemas, →
  ``SystemNote(subtype="tools")`` after the conversation); unlinked ``error`` observations →
  ``SystemNote(subtype="error")``; other harness events →
  ``SystemNote(subtype="openhands_<type>")``. Empty ``null`` observations
  ("No observation") carry nothing and are skipped.

Usage is LiteLLM's: ``prompt_tokens`` includes both the cache reads
(``prompt_tokens_details.cached_tokens``, or ``cache_read_input_tokens``) and,
for Anthropic models, the cache writes (``cache_creation_input_tokens``), so
``input_tokens = prompt - cached - cache_write`` (verified on the corpus: the
uncached remainders are 4, 6, 6, 6 tokens). When that would be negative (a
provider that excludes writes) only ``cached`` is subtracted.

The export has no session id: ``external_key`` is ``"openhands:sha256:<content
hash>"``. ``workspace`` is the first ``metadata.working_dir`` reported.
A whole JSON document, written at once and rewritten rather than appended to, so a
content hash is a sound identity (a re-saved, longer document is another session;
growth-stable identities are for the JSONL/markdown logs agents append to).
A call unanswered at the end of the document is pending (no result).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ..events import SystemNote, ToolCall, Usage, UserMessage
from ._common import (
    JSONObject,
    Loc,
    SessionBuilder,
    data_url_bytes,
    dump_json,
    json_type,
    litellm_usage,
    peek_json,
    tool_schemas_note,
)
from ._pyrepr import literal_mapping
from .base import Importer, ParsedSession, content_key, decode_text, load_json

__all__ = ["OpenHandsImporter", "IMPORTERS"]

_EXIT_RE = re.compile(r"""['"]exit_code['"]\s*:\s*(-?\d+)""")
_TEXT_ACTIONS = ("message", "finish")


def _usage(loc: Loc, response: JSONObject) -> Usage | None:
    """Normalized usage of a LiteLLM ``model_response`` (see the module docstring)."""
    usage = loc.obj(response, "usage", "tool_call_metadata.model_response")
    if usage is None:
        return None
    return litellm_usage(
        loc,
        usage,
        "tool_call_metadata.model_response.usage",
        model=loc.str(response, "model", "tool_call_metadata.model_response"),
        request_id=loc.str(response, "id", "tool_call_metadata.model_response"),
    )


def _response_message(loc: Loc, response: JSONObject) -> tuple[str | None, list[ToolCall], bool]:
    """``(text, tool calls, reasoning reported)`` of ``choices[0].message`` of a LiteLLM response."""
    prefix = "tool_call_metadata.model_response"
    choices = loc.list(response, "choices", prefix) or []
    if not choices:
        return None, [], False
    msg = loc.obj(loc.item_obj(choices, 0, f"{prefix}.choices"), "message", f"{prefix}.choices[0]") or {}
    mp = f"{prefix}.choices[0].message"
    content = loc.text_or_list(msg, "content", mp)
    if isinstance(content, list):
        content = "\n".join(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    calls = []
    tool_calls = loc.list(msg, "tool_calls", mp) or []
    for j in range(len(tool_calls)):
        tc = loc.item_obj(tool_calls, j, f"{mp}.tool_calls")
        fn = loc.obj(tc, "function", f"{mp}.tool_calls[{j}]", required=True)
        args = fn.get("arguments") or "{}"
        if not isinstance(args, str):
            raise loc.fail(f"field '{mp}.tool_calls[{j}].function.arguments' must be a string, got {json_type(args)}")
        calls.append(
            ToolCall(
                id=loc.str(tc, "id", f"{mp}.tool_calls[{j}]", required=True),
                name=loc.str(fn, "name", f"{mp}.tool_calls[{j}].function", required=True),
                arguments=args,
            )
        )
    reasoning = bool(msg.get("reasoning_content") or msg.get("thinking_blocks"))
    return content, calls, reasoning


def _exit_code(metadata: Any) -> int | None:
    parsed = literal_mapping(metadata)
    if parsed is not None:
        code = parsed.get("exit_code")
        return code if isinstance(code, int) and not isinstance(code, bool) else None
    m = _EXIT_RE.search(metadata) if isinstance(metadata, str) else None
    return int(m.group(1)) if m else None


_EVENT_KEYS = ("id", "source", "timestamp", "message", "action", "observation", "args", "extras", "cause")


class OpenHandsImporter(Importer):
    """OpenHands V0 event-stream trajectory exports (JSON array of actions and observations)."""

    PLUGIN_NAME = "openhands"
    DESCRIPTION = "OpenHands (V0) event-stream trajectory JSON (UI export / replay format)"

    def sniff(self, path: Path, head: bytes) -> int:
        top, _, items = peek_json(head)
        if top != "array" or not items:
            return 0
        first = items[0]
        if (
            isinstance(first, dict)
            and "id" in first
            and "source" in first
            and ("action" in first or "observation" in first)
        ):
            return 85
        return 0

    def resembles(self, path: Path, head: bytes) -> bool:
        """A JSON array whose first event has four of an event's keys (``id``, ``source``, ``timestamp``,
        ``message``, ``action``, ``observation``, ``args``, ``extras``, ``cause``)."""
        try:
            top, _, items = peek_json(head)
        except Exception:  # noqa: BLE001 - never raises
            return False
        first = items[0] if top == "array" and items else None
        return isinstance(first, dict) and sum(k in first for k in _EVENT_KEYS) >= 4

    def parse(self, path: Path, data: bytes) -> ParsedSession:
        doc = load_json(path, decode_text(path, data))
        if not isinstance(doc, list):
            raise Loc(path, "top level").fail(f"expected a JSON array of events, got {json_type(doc)}")
        b = SessionBuilder(path, self.PLUGIN_NAME)
        call_of_action: dict[int, str] = {}  # action event id -> call id
        responses: set[str] = set()  # model_response ids already emitted
        seen_ids: set[int] = set()
        workspace: str | None = None
        tools: SystemNote | None = None  # the first system action's tool schemas
        for i in range(len(doc)):
            ev = Loc(path, f"record {i}").item_obj(doc, i, "events")
            eid = Loc(path, f"record {i}").int(ev, "id", required=True)
            loc = Loc(path, f"record {i} (event id {eid})")
            if eid in seen_ids:
                raise loc.fail(f"duplicate event id {eid}")
            seen_ids.add(eid)
            ref, ts = f"event:{eid}", loc.str(ev, "timestamp")
            source = loc.str(ev, "source", required=True)
            message = loc.str(ev, "message") or ""
            action, observation = loc.str(ev, "action"), loc.str(ev, "observation")
            if (action is None) == (observation is None):
                raise loc.fail("an event must have exactly one of 'action' or 'observation' (a string)")
            if action is not None:
                args = loc.obj(ev, "args") or {}
                if action == "system" and source == "agent" and tools is None:
                    tools = tool_schemas_note(loc, args.get("tools"), "args.tools")
                self._action(b, loc, ev, eid, ref, ts, source, action, args, message, call_of_action, responses)
                continue
            content = loc.str(ev, "content") or ""
            extras = loc.obj(ev, "extras") or {}
            cause = loc.int(ev, "cause")
            tcm = loc.obj(ev, "tool_call_metadata") or {}
            call_id = call_of_action.get(cause) if cause is not None else None
            if call_id is None:
                call_id = loc.str(tcm, "tool_call_id", "tool_call_metadata")
            metadata = extras.get("metadata")
            meta = literal_mapping(metadata) or {}
            if workspace is None and isinstance(meta.get("working_dir"), str):
                workspace = meta["working_dir"]
            if call_id is not None:
                exit_code = _exit_code(metadata)
                if observation == "run":
                    prefix, suffix = meta.get("prefix"), meta.get("suffix")
                    content = (
                        (prefix if isinstance(prefix, str) else "")
                        + content
                        + (suffix if isinstance(suffix, str) else "")
                    )
                failed = observation == "error" or exit_code not in (None, 0)
                b.result(
                    call_id,
                    content or message,
                    ref,
                    ts,
                    is_error=failed,
                    exit_code=exit_code,
                    name=loc.str(tcm, "function_name", "tool_call_metadata"),
                )
            elif observation == "agent_state_changed":
                state = extras.get("agent_state")
                b.add(SystemNote(text=f"agent state: {state}", subtype="agent_state"), ref, ts)
            elif observation == "null" and not content.strip():
                continue  # "No observation": acknowledges a message/state action, carries nothing
            else:
                subtype = "error" if observation == "error" else f"openhands_{observation}"
                b.add(SystemNote(text=content or message, subtype=subtype), ref, ts)
        if tools is not None:  # after the conversation: see tool_schemas_note
            b.add(tools, "tools", None)
        return b.finish(
            external_key=f"{self.PLUGIN_NAME}:sha256:{content_key(data)}",
            workspace=workspace,
            meta={"events": len(doc)},
        )

    @staticmethod
    def _action(
        b: SessionBuilder,
        loc: Loc,
        ev: JSONObject,
        eid: int,
        ref: str,
        ts: str | None,
        source: str,
        action: str,
        args: JSONObject,
        message: str,
        call_of_action: dict[int, str],
        responses: set[str],
    ) -> None:
        if source == "user" and action == "message":
            text = loc.str(args, "content", "args") or message
            media = []
            urls = loc.list(args, "image_urls", "args") or []
            for j, url in enumerate(urls):
                if not isinstance(url, str):
                    raise loc.fail(f"field 'args.image_urls[{j}]' must be a string, got {json_type(url)}")
                decoded = data_url_bytes(loc, url, f"args.image_urls[{j}]")
                if decoded is None:
                    text += f"\n[image: {url}]"
                else:
                    media.append(b.media(*decoded))
            b.close_open("the next user message arrived first")
            b.add(UserMessage(text=text, media=tuple(media)), ref, ts)
            return
        if action == "change_agent_state":
            return  # a request; the agent_state_changed observation records the change
        if source != "agent":
            b.add(SystemNote(text=loc.str(args, "content", "args") or message, subtype=f"openhands_{action}"), ref, ts)
            return
        if action == "system":
            b.add(SystemNote(text=loc.str(args, "content", "args") or message, subtype="system_prompt"), ref, ts)
            return
        thought = loc.str(args, "thought", "args") or ""
        if action == "finish":
            thought = loc.str(args, "final_thought", "args") or thought or message
        elif action == "message":
            thought = loc.str(args, "content", "args") or message
        tcm = loc.obj(ev, "tool_call_metadata")
        response = loc.obj(tcm, "model_response", "tool_call_metadata") if tcm else None
        if tcm is not None and response is not None:
            call_id = loc.str(tcm, "tool_call_id", "tool_call_metadata")
            rid = loc.str(response, "id", "tool_call_metadata.model_response", required=True)
            if action not in _TEXT_ACTIONS and call_id is not None:
                call_of_action[eid] = call_id
            if rid in responses:
                return  # a further action of an already emitted response (parallel tool calls)
            responses.add(rid)
            reply, calls, reasoning = _response_message(loc, response)
            if action not in _TEXT_ACTIONS and call_id is not None and all(c.id != call_id for c in calls):
                calls.append(
                    ToolCall(
                        id=call_id,
                        name=loc.str(tcm, "function_name", "tool_call_metadata") or action,
                        arguments=dump_json(loc, _call_args(args), "args"),
                    )
                )
            calls = [c for c in calls if c.name != "finish"]
            if action == "finish" and thought and thought not in (reply or ""):
                reply = f"{reply}\n\n{thought}" if reply else thought
            b.close_open("the next model request started first")
            slot = b.assistant(
                ref,
                ts,
                text=reply or thought,
                calls=calls,
                reasoning=reasoning,
                model=loc.str(response, "model", "tool_call_metadata.model_response"),
            )
            usage = _usage(loc, response)
            if usage is not None:
                b.set_usage(slot, usage, f"{ref}#usage", ts)
            return
        b.close_open("the next model request started first")
        if action in _TEXT_ACTIONS:
            b.assistant(ref, ts, text=thought)
            return
        call_id = f"event-{eid}"
        call_of_action[eid] = call_id
        arguments = dump_json(loc, _call_args(args), "args")
        b.assistant(ref, ts, text=thought, calls=[ToolCall(id=call_id, name=action, arguments=arguments)])


def _call_args(args: JSONObject) -> JSONObject:
    """An action's arguments without the bookkeeping fields OpenHands adds."""
    return {k: v for k, v in args.items() if k not in ("thought", "confirmation_state", "hidden", "impl_source")}


IMPORTERS = [OpenHandsImporter]
