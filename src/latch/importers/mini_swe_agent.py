"""mini-SWE-agent trajectory importer (``*.traj.json``).

The layout follows SWE-agent/mini-swe-agent's source: ``DefaultAgent.serialize`` in
``src/minisweagent/agents/default.py`` writes ``{"info": {"model_stats": {"instance_cost", "api_calls"},
"config", "mini_version", "exit_status", "submission"}, "messages": [...], "trajectory_format":
"mini-swe-agent-1.1"}`` after every step; 1.x (``trajectory_format: "mini-swe-agent-1"``,
``run/utils/save.py``) wrote the same top level. ``messages`` is the chat the model was sent, one record per
message, ``source_ref`` ``"messages[<i>]"``:

* ``system`` → ``SystemNote(subtype="system_prompt")`` before the first model request (``"system"`` later);
  ``user`` → :class:`UserMessage` (text, and ``image_url`` parts whose ``data:`` images become artifacts).
* ``assistant`` (one per model call, ``LitellmModel.query``): its ``tool_calls`` become ``ToolCall`` s (the
  ``bash`` tool, ``{"command": ...}``), followed by the call's :class:`Usage` from ``extra.response.usage``
  (LiteLLM's chat completion: :func:`~._common.litellm_usage`), its model and response id; ``ts`` is
  ``extra.timestamp`` (Unix seconds). Without tool calls (the text-based models of
  ``litellm_textbased_model.py`` and 1.x) the one fenced command (``mswea_bash_command`` or ``bash``) is a
  synthesized call ``step-<k>`` (``k``: the model call's index) named ``bash``; the text keeps the
  reasoning around it, and the next ``user`` message is its observation.
* ``tool`` (``tool_call_id``) → :class:`ToolResult` with ``exit_code`` ``extra.returncode``; ``is_error``
  when it is non-zero or ``extra.exception_info`` is set (a timeout, ``action was not executed``).
* A ``user`` message with ``extra.interrupt_type == "FormatError"`` that carries ``extra.response`` is a
  billed model call whose answer mini-SWE-agent rejected and did not keep: that response becomes an
  :class:`AssistantMessage` with its usage, its calls get ``missing`` results (they never ran), then the
  format-error text is the user message the model read next.
* ``exit`` (``Submitted``, ``LimitsExceeded``, ``RepeatedFormatError``, an uncaught exception's name) ends
  the run. ``Submitted`` is raised by the command whose output starts with
  ``COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT`` (``environments/*.py`` ``_check_finished``), so its ``content``
  (the submission) is that call's result (exit code 0); any other call still open never returned a result
  (``missing``). Then ``SystemNote(subtype="exit_status")`` ``"mini-SWE-agent run ended:
  exit_status=<status>"``. A 1.x file has no ``exit`` message: ``info.exit_status`` makes the note.
* Responses-API models (``litellm_response_model.py``) store the response object itself (``object:
  "response"``: ``output`` items ``message``/``function_call``/``reasoning``, usage ``input_tokens`` with
  ``input_tokens_details.cached_tokens``) and ``function_call_output`` items (``call_id``, ``output``).

Tool calls imply the ``bash`` tool schema mini-SWE-agent sends with every request
(``models/utils/actions_toolcall.py`` ``BASH_TOOL``, or ``BASH_TOOL_RESPONSE_API``): it becomes
``SystemNote(subtype="tools")`` after the conversation. ``info.model_stats`` (run totals: cost in USD, API
calls), ``exit_status``, ``mini_version`` and the model name go to ``ParsedSession.meta``; the workspace is
``info.config.environment.cwd``. The file has no session id: ``external_key`` is
``"mini-swe-agent:sha256:<content hash>"`` (the whole document is rewritten after each step, like
SWE-agent's ``.traj``).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..events import SystemNote, ToolCall, UserMessage, canonical_arguments
from ._common import (
    JSONArray,
    JSONObject,
    Loc,
    SessionBuilder,
    count_field,
    dump_json,
    head_text,
    json_type,
    litellm_usage,
    openai_usage,
    peek_json,
    tool_schemas_note,
)
from .base import Importer, ParsedSession, content_key, decode_text, load_json
from .openai_chat import message_content

__all__ = ["MiniSweAgentImporter", "IMPORTERS", "BASH_TOOL"]

FORMAT = "mini-swe-agent"
_ROLES = ("system", "user", "assistant", "tool", "exit")
_SUBMIT = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
# the action regexes of litellm_textbased_model.py (2.x) and of the 1.x DefaultAgent.parse_action
_FENCE = re.compile(r"```(?:mswea_bash_command|bash)\s*\n(.*?)\n```", re.DOTALL)
_MARKERS = re.compile(r'"trajectory_format"\s*:\s*"mini-swe-agent|"mini_version"\s*:|"minisweagent\.')

BASH_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "bash",
        "description": "Execute a bash command",
        "parameters": {
            "type": "object",
            "properties": {"command": {"type": "string", "description": "The bash command to execute"}},
            "required": ["command"],
        },
    },
}
"""The one tool mini-SWE-agent's tool-calling models send (``minisweagent/models/utils/actions_toolcall.py``)."""


def _iso(seconds: Any) -> str | None:
    """Unix seconds (mini-SWE-agent's ``time.time()``) as ISO-8601 UTC with milliseconds; ``None`` if absent."""
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not 0 <= seconds < 1e11:
        return None
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class MiniSweAgentImporter(Importer):
    """mini-SWE-agent ``.traj.json`` trajectories (tool-calling, text-based and Responses-API models; 1.x and 2.x)."""

    PLUGIN_NAME = FORMAT
    DESCRIPTION = "mini-SWE-agent .traj.json trajectory (trajectory_format mini-swe-agent-1 / -1.1)"

    def sniff(self, path: Path, head: bytes) -> int:
        """98 for an object whose ``trajectory_format`` or ``info.mini_version`` says mini-SWE-agent (above the
        OpenAI chat importer's 80 and 95: the messages are OpenAI chat messages); 90 for an object naming
        ``minisweagent.`` classes or ``mini_version`` in its first 64 KiB; 60 for a ``*.traj.json`` object with
        ``messages``; else 0."""
        try:
            top, keys, _ = peek_json(head)
        except Exception:  # noqa: BLE001 - a sniffer never raises: the parser names the problem
            return 0
        if top != "object":
            return 0
        fmt = keys.get("trajectory_format")
        info = keys.get("info")
        if (isinstance(fmt, str) and fmt.startswith("mini-swe-agent")) or (
            isinstance(info, dict) and "mini_version" in info
        ):
            return 98
        if "messages" in keys and _MARKERS.search(head_text(head)):
            return 90
        return 60 if path.name.endswith(".traj.json") and "messages" in keys else 0

    def parse(self, path: Path, data: bytes) -> ParsedSession:
        doc = load_json(path, decode_text(path, data))
        top = Loc(path, "top level")
        if not isinstance(doc, dict):
            raise top.fail(f"expected a JSON object with 'messages' and 'info', got {json_type(doc)}")
        messages = top.list(doc, "messages", required=True)
        info = top.obj(doc, "info") or {}
        top.str(doc, "trajectory_format")
        return _Trajectory(path).finish(doc, data, messages, info)


class _Trajectory:
    """One pass over ``messages`` into a :class:`SessionBuilder`."""

    def __init__(self, path: Path):
        self.path = path
        self.b = SessionBuilder(path, FORMAT)
        self.calls = 0  # model calls so far (the k of step-<k>)
        self.positional: list[str] = []  # synthesized calls the next user messages answer, in order
        self.commands: dict[str, str] = {}  # call id -> command
        self.started = False
        self.tool_calling = False
        self.exited = False

    # -- the pass
    def run(self, messages: JSONArray) -> None:
        for i in range(len(messages)):
            loc, ref = Loc(self.path, f"messages[{i}]"), f"messages[{i}]"
            m = loc.item_obj(messages, i, "messages")
            extra = loc.obj(m, "extra") or {}
            if m.get("object") == "response":
                self._response_api(loc, ref, m, extra)
                continue
            if m.get("type") == "function_call_output":
                self._result(loc, ref, extra, loc.str(m, "call_id", required=True), _output_text(loc, m))
                continue
            role = loc.str(m, "role", required=True)
            if role not in _ROLES:
                raise loc.fail(f"unknown role {role!r} (expected {', '.join(_ROLES)})")
            if self.exited:
                raise loc.fail(f"a {role!r} message after the run's 'exit' message")
            if role == "system":
                self.b.add(
                    SystemNote(
                        text=message_content(self.b, loc, m)[0], subtype="system" if self.started else "system_prompt"
                    ),
                    ref,
                    None,
                )
            elif role == "assistant":
                self._assistant(loc, ref, m, extra)
            elif role == "tool":
                self._result(
                    loc, ref, extra, loc.str(m, "tool_call_id", required=True), message_content(self.b, loc, m)[0]
                )
            elif role == "exit":
                self._exit(loc, ref, m, extra)
            else:
                self._user(loc, ref, m, extra)

    def _assistant(self, loc: Loc, ref: str, m: JSONObject, extra: JSONObject) -> None:
        response = loc.obj(extra, "response", "extra")
        self._model_call(loc, ref, m, response, _iso(extra.get("timestamp")))

    def _model_call(
        self, loc: Loc, ref: str, msg: JSONObject, response: JSONObject | None, ts: str | None, rejected: bool = False
    ) -> None:
        """One model call: the message ``msg`` (an assistant message, or the first choice of a rejected
        ``response``) with its calls and the usage of ``response``."""
        self.started = True
        self.b.close_open("the next model request started first")
        self.positional.clear()
        text = message_content(self.b, loc, msg)[0]
        calls = self._tool_calls(loc, msg)
        if calls:
            self.tool_calling = True
        elif not rejected:
            fences = _FENCE.findall(text)
            if len(fences) == 1:  # mini-SWE-agent runs exactly one fenced action, else it is a format error
                call = ToolCall(
                    id=f"step-{self.calls}", name="bash", arguments=canonical_arguments({"command": fences[0].strip()})
                )
                calls = [call]
                self.positional.append(call.id)
                text = _FENCE.sub("", text, count=1).strip()
        for c in calls:
            self.commands[c.id] = c.arguments
        reasoning = bool(msg.get("reasoning_content") or msg.get("thinking_blocks"))
        model = loc.str(response, "model", "extra.response") if response else None
        slot = self.b.assistant(ref, ts, text=text, calls=calls, reasoning=reasoning, model=model)
        usage = loc.obj(response, "usage", "extra.response") if response else None
        if response is not None and usage is not None:
            self.b.set_usage(
                slot,
                litellm_usage(
                    loc,
                    usage,
                    "extra.response.usage",
                    model=model,
                    request_id=loc.str(response, "id", "extra.response"),
                ),
                f"{ref}#usage",
                ts,
            )
        self.calls += 1

    def _tool_calls(self, loc: Loc, msg: JSONObject) -> list[ToolCall]:
        out = []
        tool_calls = loc.list(msg, "tool_calls") or []
        for j in range(len(tool_calls)):
            tc = loc.item_obj(tool_calls, j, "tool_calls")
            label = f"tool_calls[{j}]"
            fn = loc.obj(tc, "function", label, required=True)
            args = fn.get("arguments")
            if isinstance(args, dict):
                args = dump_json(loc, args, f"{label}.function.arguments")
            elif args is None:
                args = "{}"
            elif not isinstance(args, str):
                raise loc.fail(
                    f"field '{label}.function.arguments' must be a JSON string or an object, got {json_type(args)}"
                )
            out.append(
                ToolCall(
                    id=loc.str(tc, "id", label, required=True),
                    name=loc.str(fn, "name", f"{label}.function", required=True),
                    arguments=args,
                )
            )
        return out

    def _response_api(self, loc: Loc, ref: str, m: JSONObject, extra: JSONObject) -> None:
        """A Responses-API response object (``LitellmResponseModel.query``): its output items, its usage."""
        self.started = True
        self.b.close_open("the next model request started first")
        self.positional.clear()
        texts: list[str] = []
        calls: list[ToolCall] = []
        reasoning = False
        output = loc.list(m, "output") or []
        for j in range(len(output)):
            item = loc.item_obj(output, j, "output")
            label = f"output[{j}]"
            kind = loc.str(item, "type", label, required=True)
            if kind == "message":
                texts.append(_output_text(loc, item, label))
            elif kind == "function_call":
                call_id = loc.str(item, "call_id", label) or loc.str(item, "id", label, required=True)
                args = loc.str(item, "arguments", label) or "{}"
                calls.append(ToolCall(id=call_id, name=loc.str(item, "name", label, required=True), arguments=args))
            elif kind == "reasoning":
                reasoning = True
        if calls:
            self.tool_calling = True
        for c in calls:
            self.commands[c.id] = c.arguments
        ts = _iso(extra.get("timestamp"))
        model = loc.str(m, "model")
        slot = self.b.assistant(
            ref, ts, text="\n".join(t for t in texts if t), calls=calls, reasoning=reasoning, model=model
        )
        usage = loc.obj(m, "usage")
        if usage is not None:
            details = loc.obj(usage, "input_tokens_details", "usage") or {}
            self.b.set_usage(
                slot,
                openai_usage(
                    loc,
                    count_field(loc, usage, "input_tokens", "usage"),
                    count_field(loc, details, "cached_tokens", "usage.input_tokens_details"),
                    count_field(loc, usage, "output_tokens", "usage"),
                    model=model,
                    request_id=loc.str(m, "id"),
                ),
                f"{ref}#usage",
                ts,
            )
        self.calls += 1

    def _result(self, loc: Loc, ref: str, extra: JSONObject, call_id: str, text: str) -> None:
        code = extra.get("returncode")
        code = code if isinstance(code, int) and not isinstance(code, bool) else None
        failed = bool(loc.str(extra, "exception_info", "extra"))
        self.b.result(
            call_id, text, ref, _iso(extra.get("timestamp")), is_error=failed or code not in (None, 0), exit_code=code
        )

    def _user(self, loc: Loc, ref: str, m: JSONObject, extra: JSONObject) -> None:
        response = extra.get("response")
        if extra.get("interrupt_type") == "FormatError" and isinstance(response, dict):
            choice = _first_choice(loc, response)
            if choice is not None:  # a billed call whose answer was rejected (LitellmModel.query)
                self._model_call(loc, f"{ref}#response", choice, response, _iso(extra.get("timestamp")), rejected=True)
                self.b.close_open("mini-SWE-agent rejected the response (FormatError): the call never ran")
        text, media = message_content(self.b, loc, m)
        if self.positional and "interrupt_type" not in extra:  # the observation of a fenced action
            self._result(loc, ref, extra, self.positional.pop(0), text)
            return
        self.started = True
        self.b.close_open("the next user message arrived first")
        self.positional.clear()
        self.b.add(UserMessage(text=text, media=media), ref, _iso(extra.get("timestamp")))

    def _exit(self, loc: Loc, ref: str, m: JSONObject, extra: JSONObject) -> None:
        status = loc.str(extra, "exit_status", "extra") or ""
        text = message_content(self.b, loc, m)[0]
        if status == "Submitted":
            submitter = next((cid for cid in self._open() if _SUBMIT in self.commands.get(cid, "")), None) or next(
                reversed(self._open()), None
            )
            if submitter is not None:
                self.b.result(submitter, text, ref, None, exit_code=0)
        self.b.close_open(f"the run ended ({status or 'exit'}) before its output was recorded")
        self.positional.clear()
        self._note(status, ref)
        self.exited = True

    def _open(self) -> list[str]:
        return [cid for cid in self.commands if self.b.is_open(cid)]

    def _note(self, status: str, ref: str) -> None:
        self.b.add(SystemNote(text=f"mini-SWE-agent run ended: exit_status={status}", subtype="exit_status"), ref, None)

    # -- the end
    def finish(self, doc: JSONObject, data: bytes, messages: JSONArray, info: JSONObject) -> ParsedSession:
        self.run(messages)
        top = Loc(self.path, "info")
        status = info.get("exit_status")
        if not self.exited and isinstance(status, str) and status:  # 1.x: no exit message
            self._note(status, "info")
        tools = tool_schemas_note(top, [BASH_TOOL], "tools") if self.tool_calling else None
        if tools is not None:
            self.b.add(tools, "tools", None)
        config = top.obj(info, "config") or {}
        env = top.obj(config, "environment", "config") or {}
        model = top.obj(config, "model", "config") or {}
        meta = {
            "trajectory_format": doc.get("trajectory_format"),
            "mini_version": info.get("mini_version"),
            "exit_status": status,
            "model_stats": info.get("model_stats"),
            "model": model.get("model_name"),
            "instance_id": doc.get("instance_id"),
        }
        workspace = env.get("cwd") if isinstance(env.get("cwd"), str) and env.get("cwd") else None
        return self.b.finish(
            external_key=f"{FORMAT}:sha256:{content_key(data)}",
            workspace=workspace,
            meta={k: v for k, v in meta.items() if v is not None},
        )


def _first_choice(loc: Loc, response: JSONObject) -> JSONObject | None:
    """The message of a chat completion's first choice (``None`` for another response shape)."""
    choices = response.get("choices")
    if not isinstance(choices, list) or not choices:
        return None
    choice = loc.item_obj(choices, 0, "extra.response.choices")
    return loc.obj(choice, "message", "extra.response.choices[0]")


def _output_text(loc: Loc, item: JSONObject, label: str = "") -> str:
    """The text of a Responses-API ``message`` item (its ``output_text``/``input_text`` parts) or of a
    ``function_call_output`` (its ``output`` string)."""
    if "output" in item and not isinstance(item.get("content"), list):
        return loc.str(item, "output", label) or ""
    content = loc.text_or_list(item, "content", label) or ""
    if isinstance(content, str):
        return content
    parts = []
    for j in range(len(content)):
        part = loc.item_obj(content, j, f"{label}.content" if label else "content")
        text = part.get("text")
        parts.append(text if isinstance(text, str) else f"[{part.get('type')}]")
    return "\n".join(parts)


IMPORTERS = [MiniSweAgentImporter]
