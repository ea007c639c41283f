"""Codex ``exec`` JavaScript cells: each ``tools.*`` call inside one derives as that tool would."""

from __future__ import annotations

import re
from typing import Any

from ...events import ToolCall, ToolResult
from ..events import ProcessStarted
from ..shell import command_text
from .common import Run, _excerpt, _one_line, call_arguments, error_signature, shell_facts
from .facts import ToolFailure, ToolSuccess
from .files import _patch_facts
from .plans import _plan_facts
from .rules import DerivationContext, DerivationRule
from .shell_rules import _cell_command, _nested_calls, _session_ids, _stdin_facts


class CodexExecRule(DerivationRule):
    """Codex's ``exec`` JavaScript cell: each ``tools.NAME(...)`` it calls is derived in order.

    The cell's result starts ``Script completed``, ``Script failed`` or
    ``Script running with cell ID N`` (a managed process until a ``wait`` says it ended).
    """

    PLUGIN_NAME = "codex_exec"
    tools = frozenset({"exec"})

    def derive(self, call: ToolCall, result: ToolResult, ctx: DerivationContext) -> list[Any]:
        code = str(call_arguments(call).get("input", call.arguments))
        content = result.content
        failed = content.startswith("Script failed") or (result.is_error and not result.missing)
        running = re.match(r"Script running with cell ID (\d+)", content)
        pid = f"cell:{running.group(1)}" if running else None
        body = content.split("Output:\n", 1)[1] if "Output:\n" in content else content
        run = Run(body, None, failed, result.missing)
        command = _cell_command(code)
        facts: list[Any] = [ProcessStarted(process_id=pid, command=command)] if pid else []
        for fn, arg in _nested_calls(code):
            if fn == "exec_command" and isinstance(arg, dict):
                script = command_text(arg.get("cmd", arg.get("command")))
                if script is not None:
                    facts += shell_facts("exec_command", script, run, ctx, process_id=pid)
            elif fn == "apply_patch":
                facts += _patch_facts(arg if isinstance(arg, str) else code, body, failed, result.missing, ctx)
            elif fn == "update_plan" and isinstance(arg, dict) and not failed:
                facts += _plan_facts(arg.get("plan"), "update_plan")
            elif fn == "write_stdin" and isinstance(arg, dict) and "session_id" in arg and not pid:
                facts += _stdin_facts(arg, body, code, ctx)
        if pid:
            ctx.running.setdefault(pid, ("exec", command, ()))
        else:
            facts += _session_ids(body, command, ctx)
        if not result.missing and not pid and not any(isinstance(f, (ToolFailure, ToolSuccess)) for f in facts):
            actions = (_one_line(code),)
            facts.append(
                ToolFailure("exec", error_signature(body), actions, _excerpt(body))
                if failed
                else ToolSuccess("exec", actions)
            )
        return facts
