"""Claude Code session JSONL (``~/.claude/projects/<cwd>/<sessionId>.jsonl``), FORMATS.md section 1.

Conversation order is the ``uuid``/``parentUuid`` tree, not file order: the
importer keeps the *active branch*, the path from the last conversational line
back to the root, continuing across ``compact_boundary`` lines through
``logicalParentUuid``. Results of parallel tool calls hang off their own
``tool_use`` line (a side branch), so an off-branch ``tool_result`` line that
answers a call on the branch is kept too. Sidechain lines (``isSidechain``) are a
sub-agent's own transcript, not the main conversation; a file holding only
sidechain lines (``subagents/agent-<id>.jsonl``) imports as that sub-agent.

Mapping:

* assistant lines sharing ``message.id`` → one :class:`AssistantMessage`
  (``thinking`` blocks set ``reasoning_reported``); the usage of the group's last
  line → one :class:`Usage` (never summed; an all-zero usage, as written by
  third-party models behind a proxy, is treated as not reported);
* ``tool_result`` blocks → :class:`ToolResult` (``is_error``; ``exit_code`` from
  ``Exit code N``); ``Task``/``Agent`` calls → :class:`SubagentMarker`;
* user text → :class:`UserMessage` (``isMeta``, interrupt notices, local-command
  output and task notifications are ``is_meta``); images → artifacts;
* ``system/compact_boundary`` (+ its ``isCompactSummary`` line) →
  :class:`CompactionMarker`; ``system/api_error`` and synthetic
  ``isApiErrorMessage`` assistant lines → ``SystemNote(subtype="api_error")``;
  ``turn_duration`` is telemetry and skipped; other system lines with text →
  ``SystemNote(subtype=<subtype>)``;
* ``attachment`` lines the model saw as injected context (``file``,
  ``edited_text_file``) → ``UserMessage(is_meta=True)``; a ``queued_command`` is a
  prompt the user typed while the agent was busy → ``UserMessage``; the harness's
  listings (``deferred_tools_delta``, ``mcp_instructions_delta``, ``skill_listing``,
  ``agent_listing_delta``) → ``SystemNote(subtype="attachment:<type>")``, text the
  user can search (``latch search``) that is never provider-visible, never recalled
  by the engine and gives the episode index no terms (:data:`~latch.events.ATTACHMENT_NOTE`);
  other attachments and bookkeeping lines (``progress``, ``file-history-snapshot``,
  ``queue-operation``, ``permission-mode``...) are not conversation.

Claude Code appends one line per content block while a response streams, then
the results, so the file grows under the importer. A call whose result is not
written yet is pending (no placeholder; a ``missing`` result only when a later
prompt proves it will never come). The last response is the open tail
(``ParsedSession.settled``) while its next block may still be written: until a
user, system or attachment line or another response follows it, whatever its
``stop_reason`` (2.1.14 and 2.1.17 stream blocks with ``stop_reason: null``;
2.1.109+ repeats the final ``stop_reason`` and usage on every line of a
response, so only a later line proves the response complete). ``external_key`` is
``"claude-code:<sessionId>"`` (else a hash of the first line).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ..events import ATTACHMENT_NOTE, CompactionMarker, MediaRef, SubagentMarker, SystemNote, ToolCall, UserMessage
from ..records import dataclass
from ._common import (
    AssistantSlot,
    JSONArray,
    JSONObject,
    Loc,
    SessionBuilder,
    anthropic_usage,
    compute_stats,
    decode_base64,
    dump_json,
    head_jsonl,
    head_key,
    head_text,
    str_value,
)
from .base import Importer, ParsedSession, TranscriptError, decode_text, iter_jsonl

__all__ = ["ClaudeCodeImporter", "IMPORTERS"]

FORMAT = "claude-code"
_CONVERSATION = ("user", "assistant", "system")
_TREE_TYPES = _CONVERSATION + ("attachment", "progress")
_BOOKKEEPING = (
    "file-history-snapshot",
    "queue-operation",
    "permission-mode",
    "mode",
    "last-prompt",
    "ai-title",
    "summary",
    "custom-title",
)
_SUBAGENT_TOOLS = ("Task", "Agent")
_META_PREFIXES = (
    "<local-command-stdout>",
    "<local-command-stderr>",
    "<local-command-caveat>",
    "<task-notification>",
    "<system-reminder>",
    "[Request interrupted by user",
)
_EXIT_CODE = re.compile(r"\AExit code (-?\d+)")
_PARTIAL_LINE = (re.compile(r'"sessionId"\s*:\s*"'), re.compile(r'"(parentUuid|uuid)"\s*:'))


@dataclass
class _Line:
    n: int
    type: str
    obj: JSONObject
    uuid: str | None
    parent: str | None
    logical_parent: str | None
    sidechain: bool
    ts: str | None
    content: str | JSONArray = ""  # user/assistant message.content (validated); "" on other lines


_LINE_KEYS = ("type", "uuid", "parentUuid", "sessionId", "message")


class ClaudeCodeImporter(Importer):
    """Claude Code session JSONL → Latch events (active branch only)."""

    PLUGIN_NAME = FORMAT
    DESCRIPTION = "Claude Code session JSONL (~/.claude/projects/<project>/<session>.jsonl)"

    def sniff(self, path: Path, head: bytes) -> int:
        """95 for JSONL lines with ``type``/``uuid``/``sessionId``/``message``; 60 for only bookkeeping lines.

        A first line longer than the head (lines reach 84 KB) scores 70 when it reads like a conversation line.
        """
        lines = head_jsonl(head)
        if not lines:
            first = head_text(head).lstrip()
            return 70 if first.startswith("{") and all(m.search(first) for m in _PARTIAL_LINE) else 0
        if any("payload" in o for o in lines):
            return 0
        if any(
            o.get("type") in ("user", "assistant") and "uuid" in o and "sessionId" in o and "message" in o
            for o in lines
        ):
            return 95
        if all(
            o.get("type") in _BOOKKEEPING + _TREE_TYPES and ("sessionId" in o or "messageId" in o or "leafUuid" in o)
            for o in lines
        ):
            return 60
        return 0

    def resembles(self, path: Path, head: bytes) -> bool:
        """A JSONL line with three of a conversation line's keys (``type``, ``uuid``, ``parentUuid``,
        ``sessionId``, ``message``)."""
        return any(sum(k in o for k in _LINE_KEYS) >= 3 for o in head_jsonl(head))

    def parse(self, path: Path, data: bytes) -> ParsedSession:
        """Parse the whole file; ``TranscriptError`` names the line and field of the first problem."""
        text = decode_text(path, data)
        lines: list[_Line] = []
        session_id = cwd = version = branch = None
        seen: set[str] = set()
        for n, obj in iter_jsonl(path, text, live=self.live):
            line = _read_line(Loc(path, f"line {n}"), n, obj)
            if line.uuid is not None:
                if line.uuid in seen:
                    continue  # a line written twice (same uuid): the first copy is the line
                seen.add(line.uuid)
            lines.append(line)
            if line.type in _TREE_TYPES:
                session_id = session_id or obj.get("sessionId")
                cwd = cwd or obj.get("cwd")
                version = version or obj.get("version")
                branch = branch or obj.get("gitBranch")
        main = [ln for ln in lines if ln.uuid and not ln.sidechain and ln.type in _TREE_TYPES]
        key = f"{FORMAT}:{session_id}" if isinstance(session_id, str) else None
        agent = None
        if not any(ln.type in _CONVERSATION for ln in main):
            # a sub-agent file: its sidechain is the conversation
            main = [ln for ln in lines if ln.uuid and ln.sidechain and ln.type in _TREE_TYPES]
            agent = next((ln.obj.get("agentId") for ln in main if isinstance(ln.obj.get("agentId"), str)), None)
            if key and agent:
                key = f"{key}:agent-{agent}"
        if not any(ln.type in _CONVERSATION for ln in main):
            if self.live:  # only metadata written so far: nothing to store yet
                return ParsedSession(
                    external_key=key or head_key(FORMAT, text),
                    format=FORMAT,
                    source=str(path.resolve()),
                    events=[],
                    stats=compute_stats([]),
                    settled=0,
                )
            raise TranscriptError(path, None, "no conversation lines (user/assistant/system with a uuid)")
        chosen = _active_branch(main)
        builder = SessionBuilder(path, FORMAT)
        slots = _emit(builder, path, chosen)
        last = next(ln for ln in reversed(main) if ln.type != "progress")
        if last.type == "assistant":
            # nothing after the last response yet: its next block may follow, whatever its stop_reason
            # (2.1.109+ repeats the final stop_reason and usage on every line of a response)
            slot = slots.get(_response_key(last))
            if slot is not None:
                builder.hold(slot)
        skipped = sum(ln.type in _CONVERSATION for ln in lines) - sum(ln.type in _CONVERSATION for ln in chosen)
        meta: dict[str, str | int] = {
            k: v
            for k, v in (("session_id", session_id), ("version", version), ("git_branch", branch), ("agent_id", agent))
            if isinstance(v, str)
        }
        meta["lines_not_on_active_branch"] = skipped
        if agent:  # agent-acompact-<id>.jsonl is the thread of the auto-compaction agent, not a Task sub-agent
            meta["agent_kind"] = "compaction" if agent.startswith("acompact") else "subagent"
        parsed = builder.finish(
            external_key=key or head_key(FORMAT, text),
            workspace=cwd if isinstance(cwd, str) else None,
            meta=meta,
            growing=True,
        )
        if agent and isinstance(session_id, str):
            parsed.parent_key = f"{FORMAT}:{session_id}"  # subagents/agent-<id>.jsonl of <sessionId>.jsonl
        return parsed


def _read_line(loc: Loc, n: int, obj: JSONObject) -> _Line:
    """Validate the envelope and the message fields the importer reads."""
    typ = loc.str(obj, "type", required=True)
    line = _Line(
        n=n,
        type=typ,
        obj=obj,
        uuid=loc.str(obj, "uuid"),
        parent=loc.str(obj, "parentUuid"),
        logical_parent=loc.str(obj, "logicalParentUuid"),
        sidechain=loc.bool(obj, "isSidechain"),
        ts=loc.str(obj, "timestamp"),
    )
    loc.str(obj, "sessionId")
    if typ in ("user", "assistant"):
        msg = loc.obj(obj, "message", required=True)
        content = loc.text_or_list(msg, "content", "message", required=True)
        if isinstance(content, list):
            for i in range(len(content)):
                _check_block(loc, loc.item_obj(content, i, "message.content"), f"message.content[{i}]")
        if typ == "assistant":
            loc.str(msg, "id", "message")
            loc.str(msg, "model", "message")
            loc.str(msg, "stop_reason", "message")
            usage = loc.obj(msg, "usage", "message")
            if usage is not None:
                anthropic_usage(loc, usage, "message.usage")
        line.content = content
    elif typ == "system":
        loc.str(obj, "subtype")
        cm = loc.obj(obj, "compactMetadata")
        if cm is not None:
            loc.str(cm, "trigger", "compactMetadata")
            loc.int(cm, "preTokens", "compactMetadata")
            loc.int(cm, "postTokens", "compactMetadata")
    elif typ == "attachment":
        att = loc.obj(obj, "attachment", required=True)
        loc.str(att, "type", "attachment", required=True)
    return line


def _check_block(loc: Loc, block: JSONObject, label: str) -> None:
    kind = loc.str(block, "type", label, required=True)
    if kind == "text":
        loc.str(block, "text", label, required=True)
    elif kind == "tool_use":
        loc.str(block, "id", label, required=True)
        loc.str(block, "name", label, required=True)
        loc.obj(block, "input", label)
    elif kind == "tool_result":
        loc.str(block, "tool_use_id", label, required=True)
        loc.bool(block, "is_error", label)
        inner = loc.text_or_list(block, "content", label)
        if isinstance(inner, list):
            for j in range(len(inner)):
                _check_block(loc, loc.item_obj(inner, j, f"{label}.content"), f"{label}.content[{j}]")
    elif kind == "image":
        source = loc.obj(block, "source", label, required=True)
        if loc.str(source, "type", f"{label}.source") == "base64":
            loc.str(source, "data", f"{label}.source", required=True)
            loc.str(source, "media_type", f"{label}.source")


def _response_key(ln: _Line) -> str:
    """The key of the response an assistant line is a block of: its ``message.id``, else the line's ``uuid``
    (every line of the tree has one; the line number stands in for a line without)."""
    msg_id = ln.obj["message"].get("id")
    if isinstance(msg_id, str) and msg_id:
        return msg_id
    return ln.uuid or f"line:{ln.n}"


def _active_branch(lines: list[_Line]) -> list[_Line]:
    """Lines of the active branch in file order, plus off-branch results of calls made on it."""
    by_uuid = {ln.uuid: ln for ln in lines}
    position = {ln.uuid: i for i, ln in enumerate(lines)}
    leaf = next(ln for ln in reversed(lines) if ln.type in _CONVERSATION)
    on: set[str | None] = set()  # uuids: every line of the tree has one
    cur: _Line | None = leaf
    while cur is not None and cur.uuid not in on:
        on.add(cur.uuid)
        nxt = cur.parent if cur.parent is not None else cur.logical_parent
        if nxt and nxt not in by_uuid and position[cur.uuid] > 0:
            # a dangling parent (a uuid no line of the file has: entire-image line 121, a hook_progress line):
            # the file is append-only, so the chain continues at the line written just before
            cur = lines[position[cur.uuid] - 1]
            continue
        cur = by_uuid.get(nxt) if nxt else None
    msg_ids = {ln.obj["message"].get("id") for ln in lines if ln.uuid in on and ln.type == "assistant"} - {None}
    keep = set(on)
    for ln in lines:  # first every block of a response on the branch (a later block may chain off it) ...
        if ln.uuid not in on and ln.type == "assistant" and ln.obj["message"].get("id") in msg_ids:
            keep.add(ln.uuid)
    kept = [ln for ln in lines if ln.uuid in keep]
    # ... then the calls of all those blocks, so that the result of a parallel call whose tool_use block
    # is off the chain (the chain runs through a sibling block's result) is kept too
    calls = {
        b["id"]
        for ln in kept
        if ln.type == "assistant" and isinstance(ln.content, list)
        for b in ln.content
        if b["type"] == "tool_use"
    }
    calls -= {
        b["tool_use_id"]
        for ln in kept
        if ln.type == "user" and isinstance(ln.content, list)
        for b in ln.content
        if b["type"] == "tool_result"
    }
    for ln in lines:
        if (
            ln.uuid not in keep
            and ln.type == "user"
            and isinstance(ln.content, list)
            and any(b["type"] == "tool_result" and b["tool_use_id"] in calls for b in ln.content)
        ):
            keep.add(ln.uuid)  # result of a parallel call, chained to its own tool_use line
    return [ln for ln in lines if ln.uuid in keep]


def _emit(b: SessionBuilder, path: Path, lines: list[_Line]) -> dict[str, AssistantSlot]:
    """Emit the chosen lines; returns the response slots by ``message.id`` (else line uuid)."""
    slots: dict[str, AssistantSlot] = {}
    subagents: dict[str, tuple[AssistantSlot, JSONObject, str, str | None]] = {}
    agent_results: dict[str, JSONObject] = {}
    boundaries = {ln.uuid for ln in lines if ln.type == "system" and ln.obj.get("subtype") == "compact_boundary"}
    summaries = {
        ln.parent: ln
        for ln in lines
        if ln.type == "user" and ln.obj.get("isCompactSummary") is True and ln.parent in boundaries
    }
    for ln in lines:
        loc = Loc(path, f"line {ln.n}")
        ref = f"line:{ln.n}"
        obj = ln.obj
        if ln.type == "assistant":
            msg = obj["message"]
            model = msg.get("model")
            if model == "<synthetic>" or obj.get("isApiErrorMessage") is True:
                subtype = "api_error" if obj.get("isApiErrorMessage") is True else "synthetic"
                b.add(SystemNote(text=_blocks_text(ln.content), subtype=subtype), ref, ln.ts)
                continue
            text, calls, reasoning = _assistant_blocks(loc, ln.content)
            key = _response_key(ln)
            slot = slots.get(key)
            if slot is None:
                slot = slots[key] = b.assistant(ref, ln.ts, text=text, calls=calls, reasoning=reasoning, model=model)
            else:
                b.extend(slot, text=text, calls=calls, reasoning=reasoning)
            for block in ln.content if isinstance(ln.content, list) else ():
                if block["type"] == "tool_use" and block["name"] in _SUBAGENT_TOOLS:
                    subagents[block["id"]] = (slot, block.get("input") or {}, ref, ln.ts)
            usage = msg.get("usage")
            if usage and any(v for k, v in usage.items() if k.endswith("_tokens") and isinstance(v, int)):
                b.set_usage(
                    slot,
                    anthropic_usage(loc, usage, "message.usage", model=model, request_id=loc.str(obj, "requestId")),
                    f"{slot.ref}#usage",
                    ln.ts,
                )
        elif ln.type == "user":
            if summaries.get(ln.parent) is ln:
                continue  # folded into the CompactionMarker of its boundary
            _user_line(b, loc, ln, ref, agent_results)
        elif ln.type == "system":
            _system_line(b, loc, ln, ref, summaries.get(ln.uuid))
        elif ln.type == "attachment":
            _attachment(b, ln, ref)
    for call_id, (slot, inp, ref, ts) in subagents.items():
        result = agent_results.get(call_id, {})
        b.after_results(
            slot,
            SubagentMarker(
                call_id=call_id,
                agent_id=str_value(result, "agentId"),
                agent_type=str_value(inp, "subagent_type") or str_value(result, "agentType"),
                description=str_value(inp, "description", ""),
            ),
            f"{ref}#subagent",
            ts,
        )
    return slots


def _assistant_blocks(loc: Loc, content: str | JSONArray) -> tuple[str, list[ToolCall], bool]:
    if isinstance(content, str):
        return content, [], False
    texts: list[str] = []
    calls: list[ToolCall] = []
    reasoning = False
    for i, block in enumerate(content):
        kind = block["type"]
        if kind == "text":
            texts.append(block["text"])
        elif kind in ("thinking", "redacted_thinking"):
            reasoning = True
        elif kind == "tool_use":
            arguments = dump_json(loc, block.get("input") or {}, f"message.content[{i}].input")
            calls.append(ToolCall(id=block["id"], name=block["name"], arguments=arguments))
        else:
            texts.append(f"[{kind}]")
    return "\n".join(t for t in texts if t), calls, reasoning


def _blocks_text(content: str | JSONArray) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(b["text"] for b in content if b["type"] == "text")


def _media(b: SessionBuilder, loc: Loc, block: JSONObject, label: str) -> MediaRef | None:
    source = block["source"]
    if source.get("type") != "base64":
        return None
    return b.media(decode_base64(loc, source["data"], f"{label}.source.data"), source.get("media_type"))


def _user_line(b: SessionBuilder, loc: Loc, ln: _Line, ref: str, agent_results: dict[str, JSONObject]) -> None:
    obj = ln.obj
    content = ln.content
    texts: list[str] = []
    media: list[MediaRef] = []
    if isinstance(content, str):
        texts.append(content)
    else:
        for i, block in enumerate(content):
            kind = block["type"]
            label = f"message.content[{i}]"
            if kind == "tool_result":
                rtext, rmedia = _result_content(b, loc, block.get("content"), label)
                is_error = block.get("is_error") is True
                m = _EXIT_CODE.match(rtext) if is_error else None
                tur = obj.get("toolUseResult")
                if isinstance(tur, dict) and tur.get("agentId"):
                    agent_results[block["tool_use_id"]] = tur
                b.result(
                    block["tool_use_id"],
                    rtext,
                    ref,
                    ln.ts,
                    is_error=is_error,
                    media=tuple(rmedia),
                    exit_code=int(m.group(1)) if m else None,
                )
            elif kind == "text":
                texts.append(block["text"])
            elif kind == "image":
                ref_ = _media(b, loc, block, label)
                if ref_ is not None:
                    media.append(ref_)
                else:
                    texts.append("[image]")
            else:
                texts.append(f"[{kind}]")
    text = "\n".join(texts)
    if not text and not media:
        return
    is_meta = (
        obj.get("isMeta") is True or obj.get("isCompactSummary") is True or text.lstrip().startswith(_META_PREFIXES)
    )
    if not is_meta:
        b.close_open("the user sent a new prompt before the tool returned", ln.ts)
    b.add(UserMessage(text=text, media=tuple(media), is_meta=is_meta), ref, ln.ts)


def _result_content(
    b: SessionBuilder, loc: Loc, content: str | JSONArray | None, label: str
) -> tuple[str, list[MediaRef]]:
    if content is None:
        return "", []
    if isinstance(content, str):
        return content, []
    texts: list[str] = []
    media: list[MediaRef] = []
    for j, item in enumerate(content):
        if item["type"] == "text":
            texts.append(item["text"])
        elif item["type"] == "image":
            ref = _media(b, loc, item, f"{label}.content[{j}]")
            if ref is not None:
                media.append(ref)
            else:
                texts.append("[image]")
        else:
            texts.append(f"[{item['type']}]")
    return "\n".join(texts), media


def _system_line(b: SessionBuilder, loc: Loc, ln: _Line, ref: str, summary: _Line | None) -> None:
    obj = ln.obj
    subtype = obj.get("subtype") or "note"
    if subtype == "compact_boundary":
        cm = obj.get("compactMetadata") or {}
        b.add(
            CompactionMarker(
                trigger=cm.get("trigger"),
                pre_tokens=cm.get("preTokens"),
                post_tokens=cm.get("postTokens"),
                summary=_blocks_text(summary.content) if summary is not None else "",
            ),
            ref,
            ln.ts,
        )
    elif subtype == "api_error":
        err = obj.get("error")
        detail = err if isinstance(err, str) else dump_json(loc, err, "error") if err is not None else ""
        text = obj["content"] if isinstance(obj.get("content"), str) else "API error"
        retry = obj.get("retryAttempt"), obj.get("maxRetries")
        if all(isinstance(x, int) for x in retry):
            text += f" (retry {retry[0]}/{retry[1]})"
        b.add(SystemNote(text=f"{text}: {detail}" if detail else text, subtype="api_error"), ref, ln.ts)
    elif subtype != "turn_duration" and isinstance(obj.get("content"), str) and obj["content"]:
        b.add(SystemNote(text=obj["content"], subtype=subtype), ref, ln.ts)


def _attachment(b: SessionBuilder, ln: _Line, ref: str) -> None:
    att = ln.obj["attachment"]
    kind = att["type"]
    name = att.get("filename") or att.get("displayPath") or ""
    if kind == "file":
        body = att.get("content")
        if isinstance(body, dict):  # {type:"text", file:{content}} in some versions
            body = (body.get("file") or {}).get("content") if isinstance(body.get("file"), dict) else None
        if isinstance(body, str):
            b.add(UserMessage(text=f"[file {name}]\n{body}", is_meta=True), ref, ln.ts)
    elif kind == "edited_text_file" and isinstance(att.get("snippet"), str):
        b.add(UserMessage(text=f"[edited {name}]\n{att['snippet']}", is_meta=True), ref, ln.ts)
    elif kind == "queued_command" and isinstance(att.get("prompt"), str):
        is_meta = att.get("commandMode") not in (None, "prompt")
        if not is_meta:
            b.close_open("the user sent a new prompt before the tool returned", ln.ts)
        b.add(UserMessage(text=att["prompt"], is_meta=is_meta), ref, ln.ts)
    elif kind in _LISTINGS:
        text = _listing_text(kind, att)
        if text:
            b.add(SystemNote(text=text, subtype=ATTACHMENT_NOTE + kind), ref, ln.ts)


_LISTINGS = ("deferred_tools_delta", "mcp_instructions_delta", "skill_listing", "agent_listing_delta")
"""Attachment types that list what the harness offers (tools, MCP servers' instructions, skills, agents): the
only record of that text in the transcript."""


def _strings(value: Any) -> list[str]:
    """The non-blank strings of a list (a name, or the ``name`` of an object such as a failed MCP server)."""
    if not isinstance(value, list):
        return []
    out = []
    for v in value:
        if isinstance(v, dict):
            v = v.get("name")
        if isinstance(v, str) and v.strip():
            out.append(v)
    return out


def _listing_text(kind: str, att: JSONObject) -> str:
    """The searchable text of a listing attachment: what it adds (its rendered lines or blocks where it has
    them, else the names), then what it removes and the MCP servers it names, one labelled line each; ``""``
    when it holds no text. Fields of another type than these are left out (no error: nothing the model saw
    depends on them)."""
    parts: list[str] = []
    if kind == "skill_listing":
        content = att.get("content")
        parts.append(content if isinstance(content, str) and content.strip() else ", ".join(_strings(att.get("names"))))
    elif kind == "mcp_instructions_delta":
        parts.append("\n\n".join(_strings(att.get("addedBlocks"))) or ", ".join(_strings(att.get("addedNames"))))
    else:  # deferred_tools_delta (addedLines/addedNames), agent_listing_delta (addedLines/addedTypes)
        added = _strings(att.get("addedLines")) or _strings(att.get("addedNames")) or _strings(att.get("addedTypes"))
        parts.append("\n".join(added))
    for label, key in (
        ("removed", "removedNames"),
        ("removed", "removedTypes"),
        ("pending MCP servers", "pendingMcpServers"),
        ("MCP servers needing auth", "needsAuthMcpServers"),
        ("failed MCP servers", "failedMcpServers"),
    ):
        names = _strings(att.get(key))
        if names:
            parts.append(f"{label}: {', '.join(names)}")
    return "\n".join(p for p in parts if p)


IMPORTERS = [ClaudeCodeImporter]
