"""SWE-agent ``.traj`` importer (FORMATS.md §9): both layouts.

The conversation comes from ``history[]`` (the chat sent to the model), one
record per message, ``source_ref`` ``"history:<index>"``:

* ``system`` → ``SystemNote(subtype="system_prompt")``; ``is_demo`` messages →
  ``SystemNote(subtype="demonstration")``; other ``user`` messages → ``UserMessage``.
* **v1.x function calling**: an ``assistant`` message's ``tool_calls[]`` become
  ``ToolCall`` s; ``role:"tool"`` messages answer them by ``tool_call_ids``.
  SWE-agent reuses call ids (the marshmallow run sends ``call_5iDd…`` four
  times): each reuse gets a ``"#2"``, ``"#3"`` … suffix, and a result answers
  the oldest open call with its id.
* **Legacy / EnIGMA**: no tool calls. An ``assistant`` message with an ``action``
  gets a synthesized ``ToolCall(id="step-<k>", name=<command>, arguments=
  {"command": action})`` where ``k`` is the step index (``trajectory[k]``) and
  the name is the action's first word when the system prompt's ``COMMANDS:``
  section defines it (``create``, ``edit``, ``submit`` …), else ``"bash"``. The
  next ``user`` message is its observation (linked by order). The assistant
  text is the ``thought`` (the fenced command moves into the call).
* A call still open at the end is answered by ``trajectory[k].observation``
  when the trajectory recorded one (the legacy file's final ``submit``),
  ``source_ref`` ``"trajectory:<k>"``; otherwise it stays pending (no result).

SWE-agent reports no exit codes or error flags, no timestamps (``ts`` is None)
and only per-run token totals (``info.model_stats``), which cannot be attributed
to a request: no ``Usage`` events are emitted and the totals go to
``ParsedSession.meta["model_stats"]``. ``info.exit_status`` ends the session as
``SystemNote(subtype="exit_status")``. ``workspace`` is the first step's
``state.working_dir`` (a dict, JSON or Python-repr string). The file has no
session id: ``external_key`` is ``"swe-agent:sha256:<content hash>"``.
A whole JSON document, written at once and rewritten rather than appended to, so a
content hash is a sound identity (a re-saved, longer document is another session;
growth-stable identities are for the JSONL/markdown logs agents append to).
"""

from __future__ import annotations

import re
from pathlib import Path

from ..events import SystemNote, ToolCall, UserMessage, canonical_arguments
from ._common import JSONObject, Loc, SessionBuilder, dump_json, head_text, json_type
from ._pyrepr import literal_mapping
from .base import Importer, ParsedSession, content_key, decode_text, load_json

__all__ = ["SweAgentImporter", "IMPORTERS"]

_COMMAND_RE = re.compile(r"(?m)^(\w+):\n  docstring:")
_ROLES = ("system", "user", "assistant", "tool")


def _text(loc: Loc, m: JSONObject) -> str:
    """``content`` as text: a string, or a list of ``{type, text}`` parts (other parts become a marker)."""
    content = loc.text_or_list(m, "content") or ""
    if isinstance(content, str):
        return content
    parts = []
    for j in range(len(content)):
        part = loc.item_obj(content, j, "content")
        kind = loc.str(part, "type", f"content[{j}]", required=True)
        parts.append(
            loc.str(part, "text", f"content[{j}]", required=True) if kind == "text" else f"[{kind} part not imported]"
        )
    return "\n".join(parts)


def _calls(loc: Loc, m: JSONObject) -> list[tuple[str, str, str]]:
    """``(native id, name, arguments JSON)`` of a v1.x assistant message's ``tool_calls``."""
    out = []
    tool_calls = loc.list(m, "tool_calls", required=True)
    for j in range(len(tool_calls)):
        tc = loc.item_obj(tool_calls, j, "tool_calls")
        prefix = f"tool_calls[{j}]"
        fn = loc.obj(tc, "function", prefix, required=True)
        args = fn.get("arguments", "{}")
        if isinstance(args, dict):
            args = dump_json(loc, args, f"{prefix}.function.arguments")
        elif not isinstance(args, str):
            raise loc.fail(
                f"field '{prefix}.function.arguments' must be a JSON string or an object, got {json_type(args)}"
            )
        out.append(
            (loc.str(tc, "id", prefix, required=True), loc.str(fn, "name", f"{prefix}.function", required=True), args)
        )
    return out


class _CallIds:
    """Session-unique call ids: a reused native id gets ``#2``, ``#3``…; results answer the oldest open call."""

    def __init__(self) -> None:
        self.used: set[str] = set()
        self.open: dict[str, list[str]] = {}

    def new(self, native: str) -> str:
        unique, n = native, 1
        while unique in self.used:
            n += 1
            unique = f"{native}#{n}"
        self.used.add(unique)
        self.open.setdefault(native, []).append(unique)
        return unique

    def answer(self, native: str) -> str:
        pending = self.open.get(native)
        return pending.pop(0) if pending else native


class SweAgentImporter(Importer):
    """SWE-agent ``.traj`` trajectories (v1.x function calling and legacy/EnIGMA)."""

    PLUGIN_NAME = "swe-agent"
    DESCRIPTION = "SWE-agent .traj trajectory JSON (v1.x function calling and legacy/EnIGMA layouts)"

    def sniff(self, path: Path, head: bytes) -> int:
        text = head_text(head)  # UTF-8 (with or without a BOM) or UTF-16 with a BOM, like decode_text
        if text.lstrip(" \t\r\n")[:1] != "{":
            return 0
        if path.suffix == ".traj":
            return 95 if ('"trajectory"' in text or '"history"' in text) else 60
        return 70 if ('"trajectory"' in text and '"history"' in text) else 0

    def parse(self, path: Path, data: bytes) -> ParsedSession:
        doc = load_json(path, decode_text(path, data))
        top = Loc(path, "top level")
        if not isinstance(doc, dict):
            raise top.fail(f"expected a JSON object with 'history' and 'trajectory', got {json_type(doc)}")
        history = top.list(doc, "history", required=True)
        trajectory = top.list(doc, "trajectory") or []
        for k in range(len(trajectory)):
            top.item_obj(trajectory, k, "trajectory")
        info = top.obj(doc, "info") or {}

        b = SessionBuilder(path, self.PLUGIN_NAME)
        ids = _CallIds()
        commands: set[str] = set()
        step = 0  # trajectory index of the next assistant action
        positional: str | None = None  # synthesized call answered by the next user message
        step_of: dict[str, int] = {}  # unique call id -> trajectory index
        for i in range(len(history)):
            loc, ref = Loc(path, f"history[{i}]"), f"history:{i}"
            m = top.item_obj(history, i, "history")
            role = loc.str(m, "role", required=True)
            if role not in _ROLES:
                raise loc.fail(f"field 'role' must be one of {', '.join(_ROLES)}, got {role!r}")
            text = _text(loc, m)
            if m.get("is_demo") or m.get("message_type") == "demonstration":
                b.add(SystemNote(text=text, subtype="demonstration"), ref, None)
            elif role == "system":
                commands.update(_COMMAND_RE.findall(text))
                b.add(SystemNote(text=text, subtype="system_prompt"), ref, None)
            elif role == "assistant":
                b.close_open("the next model request started first")
                ids.open.clear()
                action, thought = loc.str(m, "action"), loc.str(m, "thought")
                positional = None
                if m.get("tool_calls"):
                    calls = _calls(loc, m)
                elif action and action.strip():
                    command = action.rstrip("\n")
                    first = command.split(maxsplit=1)[0]
                    calls = [
                        (
                            f"step-{step}",
                            first if first in commands else "bash",
                            canonical_arguments({"command": command}),
                        )
                    ]
                    positional = calls[0][0]
                    if thought is not None and text.startswith(thought):
                        text = thought.rstrip()
                else:
                    calls = []
                tool_calls = [ToolCall(id=ids.new(native), name=name, arguments=args) for native, name, args in calls]
                for c in tool_calls:
                    step_of[c.id] = step
                b.assistant(ref, None, text=text, calls=tool_calls, reasoning=bool(m.get("thinking_blocks")))
                if action is not None or calls:
                    step += 1
            elif role == "tool":
                answered = loc.list(m, "tool_call_ids")
                if answered is None:
                    answered = [positional] if positional else []
                if not answered:
                    raise loc.fail("field 'tool_call_ids' is missing and no earlier action awaits an observation")
                for j, native in enumerate(answered):
                    if not isinstance(native, str):
                        raise loc.fail(f"field 'tool_call_ids[{j}]' must be a string, got {json_type(native)}")
                    b.result(ids.answer(native), text, ref, None)
                positional = None
            elif positional is not None:  # legacy: the observation is the user message after an action
                b.result(ids.answer(positional), text, ref, None)
                positional = None
            else:
                b.close_open("the next user message arrived first")
                ids.open.clear()
                b.add(UserMessage(text=text), ref, None)
        for unique, k in step_of.items():  # the trajectory may hold the last observation the history lacks
            obs = trajectory[k].get("observation") if k < len(trajectory) else None
            if b.is_open(unique) and isinstance(obs, str):
                b.result(unique, obs, f"trajectory:{k}", None)
        exit_status = info.get("exit_status")
        if exit_status is not None:
            b.add(
                SystemNote(text=f"SWE-agent run ended: exit_status={exit_status}", subtype="exit_status"), "info", None
            )

        workspace = None
        state = literal_mapping(trajectory[0].get("state")) if trajectory else None
        if state and isinstance(state.get("working_dir"), str):
            workspace = state["working_dir"]
        meta = {
            "environment": doc.get("environment"),
            "exit_status": exit_status,
            "model_stats": info.get("model_stats"),
            "steps": len(trajectory),
        }
        return b.finish(external_key=f"{self.PLUGIN_NAME}:sha256:{content_key(data)}", workspace=workspace, meta=meta)


IMPORTERS = [SweAgentImporter]
