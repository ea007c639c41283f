"""Merged messages JSON with sub-agents (the "EaglePoint" converter output: a Claude Code session merged with its
sub-agent files), FORMATS.md section 12.

Top level ``{messages[], meta{session_meta, token_counts[], subagents[], merge_stats, ...}}``. Each message is
``{role, content:[blocks], tool_calls?, tool_call_id?, _metadata{timestamp, source?, original_role?}}`` with
blocks ``{type:"text", text}``, ``{type:"tool_call", tool_call_id, name, arguments:"<json>"}`` and
``{type:"tool_output", text: string | [{type:"text", text}]}``.

* ``user`` → :class:`UserMessage`; ``assistant`` → :class:`AssistantMessage` (text blocks, and
  ``tool_call`` blocks, else the OpenAI-style ``tool_calls[]``, as :class:`ToolCall` with ``arguments`` kept as
  the converter wrote them); ``tool`` → :class:`ToolResult` for ``tool_call_id``; ``system`` →
  ``SystemNote(subtype="system_prompt")``.
* ``assistant-subagent-<agentId>`` messages (interleaved chronologically) are the sub-agent's own thread,
  mapped by ``_metadata.original_role`` the same way: :meth:`MergedMessagesImporter.parse_all` returns the
  main session first, then one child session per sub-agent (``parent_key`` the main session's key,
  ``meta.agent_id``/``agent_type``), and the main session gets a :class:`SubagentMarker` after the results
  of the call that spawned it (``meta.subagents[].mapped_tool_use_id``, else the ``Agent``/``Task`` call whose
  ``prompt`` is the sub-agent's ``subagent_prompt`` or first user message), so
  :func:`latch.agent.children.child_link` and ``child_result`` link the child to that call as they do a
  Claude Code ``subagents/agent-<id>.jsonl`` file.
* ``meta.token_counts[]`` (Codex-style ``info.last_token_usage``: ``cached_input_tokens`` is a subset of
  ``input_tokens``) → one :class:`Usage` per main assistant message, in order, when there are exactly as
  many; otherwise none is attached and ``meta.unattached_token_counts`` says how many there were.

``external_key``: ``"merged-messages:<session_meta.session_id>"`` (a child: ``…:agent:<agentId>``), else a
hash of the document. A whole-document format: no open tail.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..events import SubagentMarker, SystemNote, ToolCall, UserMessage
from ._common import (
    AssistantSlot,
    JSONArray,
    JSONObject,
    Loc,
    SessionBuilder,
    content_hash_key,
    json_type,
    list_value,
    openai_usage,
    peek_json,
)
from .base import Importer, JSONNestingError, ParsedSession, TranscriptError, decode_text, load_json

__all__ = ["MergedMessagesImporter", "IMPORTERS"]

FORMAT = "merged-messages"
SUBAGENT_ROLE = "assistant-subagent-"


class _Thread:
    """One conversation (the main one or a sub-agent's) being built."""

    def __init__(self, path: Path):
        self.b = SessionBuilder(path, FORMAT)
        self.assistants: list[AssistantSlot] = []
        self.call_slots: dict[str, AssistantSlot] = {}
        self.calls: dict[str, ToolCall] = {}
        self.first_user: str | None = None


class MergedMessagesImporter(Importer):
    """Merged messages JSON (``assistant-subagent-*`` roles) → a main session and one child per sub-agent."""

    PLUGIN_NAME = FORMAT
    DESCRIPTION = "merged messages JSON with sub-agents ({messages, meta}, roles assistant-subagent-<id>)"

    def sniff(self, path: Path, head: bytes) -> int:
        """96 when a message has an ``assistant-subagent-*`` role or ``meta`` has ``merge_stats``/``subagents``;
        90 for ``{messages}`` whose messages carry ``_metadata`` and ``tool_output``/``tool_call`` blocks."""
        try:
            top, keys, items = peek_json(head)
        except JSONNestingError:
            raise
        except Exception:  # noqa: BLE001 - a sniffer never raises: the parser names the problem
            return 0
        if top != "object" or "messages" not in keys:
            return 0
        meta = keys.get("meta")
        if isinstance(meta, dict) and ("merge_stats" in meta or "subagents" in meta):
            return 96
        msgs = [m for m in items if isinstance(m, dict)]
        if any(isinstance(m.get("role"), str) and m["role"].startswith(SUBAGENT_ROLE) for m in msgs):
            return 96
        blocks = {b.get("type") for m in msgs for b in list_value(m, "content") if isinstance(b, dict)}
        if msgs and all(isinstance(m.get("_metadata"), dict) for m in msgs) and blocks & {"tool_output", "tool_call"}:
            return 90
        return 0

    def parse(self, path: Path, data: bytes) -> ParsedSession:
        """The main session (its sub-agents: :meth:`parse_all`). Raises :class:`TranscriptError` like it."""
        return self.parse_all(path, data)[0]

    def parse_all(self, path: Path, data: bytes) -> list[ParsedSession]:
        """``[main, *sub-agents]``; ``TranscriptError`` names ``messages[i]`` (or ``meta``) and the field."""
        doc = load_json(path, decode_text(path, data))
        top = Loc(path, "top level")
        if not isinstance(doc, dict):
            raise TranscriptError(path, "top level", f"expected a JSON object, got {json_type(doc)}")
        messages = top.list(doc, "messages", required=True)
        meta_in = top.obj(doc, "meta") or {}
        mloc = Loc(path, "meta")
        session_meta = mloc.obj(meta_in, "session_meta", "meta") or {}
        session_id = mloc.str(session_meta, "session_id", "meta.session_meta")
        main = _Thread(path)
        agents: dict[str, _Thread] = {}
        for i in range(len(messages)):
            loc = Loc(path, f"messages[{i}]")
            msg = loc.item_obj(messages, i, "messages")
            role = loc.str(msg, "role", required=True)
            md = loc.obj(msg, "_metadata") or {}
            ts = loc.str(md, "timestamp", "_metadata")
            thread = main
            if role.startswith(SUBAGENT_ROLE):
                agent = role[len(SUBAGENT_ROLE) :]
                thread = agents.setdefault(agent, _Thread(path))
                role = loc.str(md, "original_role", "_metadata", required=True)
            self.message(loc, thread, role, msg, f"messages[{i}]", ts)
        # usage: one token_count per main assistant message, in order
        counts = mloc.list(meta_in, "token_counts", "meta") or []
        unattached = 0
        if counts and len(counts) == len(main.assistants):
            for k, slot in enumerate(main.assistants):
                cloc = Loc(path, f"meta.token_counts[{k}]")
                entry = cloc.item_obj(counts, k, "meta.token_counts")
                info = cloc.obj(entry, "info") or {}
                last = cloc.obj(info, "last_token_usage", "info")
                if last is None:
                    continue
                usage = openai_usage(
                    cloc, *(_count(cloc, last, key) for key in ("input_tokens", "cached_input_tokens", "output_tokens"))
                )
                main.b.set_usage(slot, usage, f"meta.token_counts[{k}]", cloc.str(entry, "_timestamp"))
        else:
            unattached = len(counts)
        key = f"{FORMAT}:{session_id}" if session_id else content_hash_key(FORMAT, doc)
        subagents = mloc.list(meta_in, "subagents", "meta") or []
        info_by_agent: dict[str, JSONObject] = {}
        where_by_agent: dict[str, str] = {}
        for k in range(len(subagents)):
            sub = mloc.item_obj(subagents, k, "meta.subagents")
            agent_id = mloc.str(sub, "agent_id", f"meta.subagents[{k}]", required=True)
            info_by_agent[agent_id] = sub
            where_by_agent[agent_id] = f"meta.subagents[{k}]"
            for field in (
                "mapped_tool_use_id",
                "subagent_prompt",
                "agent_type",
                "description",
                "subagent_start_timestamp",
            ):
                mloc.str(sub, field, f"meta.subagents[{k}]")  # a string when present (one error line, else)
        spawned = _spawning_calls(main, agents, info_by_agent)
        for agent_id in [*info_by_agent, *(a for a in agents if a not in info_by_agent)]:
            call_id = spawned.get(agent_id)
            if call_id is None:
                continue
            sub, where = info_by_agent.get(agent_id, {}), where_by_agent.get(agent_id)
            args = _call_input(main.calls[call_id])
            agent_type = sub.get("agent_type") if isinstance(sub.get("agent_type"), str) else args.get("subagent_type")
            description = sub.get("description") if isinstance(sub.get("description"), str) else args.get("description")
            start = (
                sub.get("subagent_start_timestamp") if isinstance(sub.get("subagent_start_timestamp"), str) else None
            )
            main.b.after_results(
                main.call_slots[call_id],
                SubagentMarker(
                    call_id=call_id,
                    agent_id=agent_id,
                    agent_type=agent_type if isinstance(agent_type, str) else None,
                    description=description if isinstance(description, str) else "",
                ),
                where or f"subagent:{agent_id}",
                start,
            )
            if isinstance(agent_type, str) and agent_id not in info_by_agent:
                info_by_agent[agent_id] = {"agent_type": agent_type}
        meta: dict[str, Any] = {}
        for field in ("session_id", "version", "git_branch"):
            if isinstance(session_meta.get(field), str):
                meta[field] = session_meta[field]
        if unattached:
            meta["unattached_token_counts"] = unattached
        cwd = mloc.str(session_meta, "cwd", "meta.session_meta")
        out = [main.b.finish(external_key=key, workspace=cwd, meta=meta)]
        for agent_id, thread in agents.items():
            sub = info_by_agent.get(agent_id, {})
            child_meta: dict[str, Any] = {"agent_id": agent_id, "agent_kind": "subagent"}
            if isinstance(sub.get("agent_type"), str):
                child_meta["agent_type"] = sub["agent_type"]
            child = thread.b.finish(external_key=f"{key}:agent:{agent_id}", workspace=cwd, meta=child_meta)
            child.parent_key = key
            out.append(child)
        return out

    def message(self, loc: Loc, thread: _Thread, role: str, msg: JSONObject, ref: str, ts: str | None) -> None:
        b = thread.b
        content = loc.text_or_list(msg, "content")
        blocks: JSONArray = [{"type": "text", "text": content}] if isinstance(content, str) else (content or [])
        texts: list[str] = []
        calls: list[ToolCall] = []
        for j in range(len(blocks)):
            block = loc.item_obj(blocks, j, "content")
            label = f"content[{j}]"
            kind = loc.str(block, "type", label, required=True)
            if kind == "text":
                texts.append(loc.str(block, "text", label, required=True))
            elif kind == "tool_call":
                calls.append(
                    ToolCall(
                        id=loc.str(block, "tool_call_id", label, required=True),
                        name=loc.str(block, "name", label, required=True),
                        arguments=loc.str(block, "arguments", label) or "{}",
                    )
                )
            elif kind == "tool_output":
                body = loc.text_or_list(block, "text", label)
                if isinstance(body, list):
                    for k in range(len(body)):
                        part = loc.item_obj(body, k, f"{label}.text")
                        texts.append(loc.str(part, "text", f"{label}.text[{k}]") or "")
                elif body:
                    texts.append(body)
        text = "\n".join(texts)
        if role == "assistant":
            if not calls:
                raw = loc.list(msg, "tool_calls") or []
                for k in range(len(raw)):
                    entry = loc.item_obj(raw, k, "tool_calls")
                    fn = loc.obj(entry, "function", f"tool_calls[{k}]", required=True)
                    calls.append(
                        ToolCall(
                            id=loc.str(entry, "id", f"tool_calls[{k}]", required=True),
                            name=loc.str(fn, "name", f"tool_calls[{k}].function", required=True),
                            arguments=loc.str(fn, "arguments", f"tool_calls[{k}].function") or "{}",
                        )
                    )
            slot = b.assistant(ref, ts, text=text, calls=calls)
            thread.assistants.append(slot)
            for call in calls:
                thread.call_slots[call.id] = slot
                thread.calls[call.id] = call
        elif role == "tool":
            call_id = loc.str(msg, "tool_call_id", required=True)
            b.result(call_id, text, ref, ts)
        elif role == "user":
            if thread.first_user is None and text.strip():
                thread.first_user = text
            b.add(UserMessage(text=text), ref, ts)
        elif role == "system":
            b.add(SystemNote(text=text, subtype="system_prompt"), ref, ts)
        else:
            raise loc.fail(
                f"field 'role' must be user, assistant, tool, system or assistant-subagent-<id>, got {role!r}"
            )


SPAWN_TOOLS = ("Agent", "Task")
"""The main session's tools whose calls spawn a sub-agent (Claude Code 2.1.x ``Agent``, older ``Task``)."""


def _call_input(call: ToolCall) -> dict[str, Any]:
    """A call's arguments as a JSON object (``{}`` when they are not one)."""
    try:
        value = json.loads(call.arguments)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _spawning_calls(main: _Thread, agents: dict[str, _Thread], info: dict[str, JSONObject]) -> dict[str, str]:
    """agent id -> the main session's call that spawned it: ``meta.subagents[].mapped_tool_use_id`` when it
    names a main call, else the first unused ``Agent``/``Task`` call whose ``prompt`` argument is the
    sub-agent's ``subagent_prompt`` or its first user message (a sub-agent the converter did not map, or one
    missing from ``meta.subagents``). Each call spawns at most one sub-agent; unmatched agents are left out."""
    out: dict[str, str] = {}
    for agent_id, sub in info.items():
        call_id = sub.get("mapped_tool_use_id")
        if isinstance(call_id, str) and call_id in main.call_slots and call_id not in out.values():
            out[agent_id] = call_id
    open_calls = [c for c in main.calls.values() if c.name in SPAWN_TOOLS and c.id not in out.values()]
    for agent_id in [*info, *(a for a in agents if a not in info)]:
        if agent_id in out:
            continue
        prompts = {
            p.strip()
            for p in (
                info.get(agent_id, {}).get("subagent_prompt"),
                agents[agent_id].first_user if agent_id in agents else None,
            )
            if isinstance(p, str) and p.strip()
        }
        for call in open_calls:
            prompt = _call_input(call).get("prompt")
            if isinstance(prompt, str) and prompt.strip() in prompts:
                out[agent_id] = call.id
                open_calls.remove(call)
                break
    return out


def _count(loc: Loc, obj: JSONObject, key: str) -> int | None:
    value = obj.get(key)
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
        raise loc.fail(f"field 'info.last_token_usage.{key}' must be a non-negative integer, got {json_type(value)}")
    return value


IMPORTERS = [MergedMessagesImporter]
