"""Derivation rules: kernel facts read from the conversation of every imported format.

A :class:`DerivationRule` is small and named: ``matches(call) -> bool`` picks
the tool calls it understands and ``derive(call, result, ctx) -> list[facts]``
turns one call and its :class:`~latch.events.ToolResult` into facts. Facts are
kernel records (:class:`~latch.kernel.events.FileObservation`,
:class:`~latch.kernel.events.Mutation`, :class:`~latch.kernel.events.ValidationEvidence`,
:class:`~latch.kernel.events.ProcessStarted`/``Exited``) or the derived-only
:class:`ToolFailure`, :class:`ToolSuccess`, :class:`ActionsReplaced` and :class:`ActionChanged`.
Derivation reads conversation events and never writes them: derived facts exist
only inside the reduction (:mod:`latch.kernel.ledger`).

Rules are tried in order and the first match derives. A plugin adds rules for
another harness's tool names through the ``latch_register_derivation_rules``
hook (:mod:`latch.hookspecs`); the host (:func:`latch.host.kernel.kernel_cache`) tries
third-party rules first, so they can also override the built-ins, then
:data:`BUILTIN_RULES`, which the built-in plugin registers through the same hook.
The kernel itself never asks the plugin manager: it derives with the rules its
caller passes (:class:`latch.kernel.ledger.KernelCache`), else with the built-ins. When a rule reports neither a
failure nor a success, the call's ``is_error`` decides (spec: "Episodes",
failure supervision: same tool + same error signature form one lineage).

Built-in rules cover Claude Code (Read, Edit, MultiEdit, Write, NotebookEdit,
Bash with background shells, BashOutput/KillShell/KillBash and 2.1.x TaskOutput/TaskStop, TodoWrite and
2.1.x TaskCreate/TaskUpdate), Codex
(exec_command/shell with ``cmd``/``command`` arrays, write_stdin, apply_patch,
update_plan and the ``exec`` JavaScript cell calling ``tools.*``, ``wait``),
SWE-agent (str_replace_editor view/create/str_replace/insert/undo_edit, open,
create, edit, insert, bash), OpenHands (execute_bash, str_replace_editor, edit,
read, write, run), Aider (synthesized ``edit`` calls with a ``path``), Gemini CLI (read_file, write_file,
replace, run_shell_command with its ``Exit Code: N`` report, write_todos), GitHub Copilot CLI (view, edit,
create, bash with its ``<exited with exit code N>`` trailer, update_todo) and Goose (developer ``shell``,
``write``, ``edit`` and ``developer__shell``/``developer__text_editor``, ``todo__todo_write``).

The rules live in modules by family: :mod:`.shell_rules` (shells and processes), :mod:`.codex_exec` (Codex
``exec`` cells), :mod:`.files` (reads, edits, writes, patches), :mod:`.plans` (plans and tasks); :mod:`.rules`
holds the contract, :mod:`.facts` the derived-only facts, :mod:`.common` what rules share and :mod:`.deriver`
the built-in order and :class:`SessionDeriver`.
"""

from __future__ import annotations

from ..events import Mutation
from .codex_exec import CodexExecRule
from .common import Run, call_arguments, error_signature, patch_paths, process_exit_facts, shell_facts, strip_ansi
from .deriver import BUILTIN_RULES, SessionDeriver, builtin_rules, derives_nothing
from .facts import (
    AGENT_EXPLICIT_TOOLS,
    AGENT_FORMAT,
    ERROR_FLAG_FORMATS,
    INSTRUCTION_CHARS,
    ActionChanged,
    ActionsReplaced,
    ToolFailure,
    ToolSuccess,
    UserInstruction,
    instruction_text,
)
from .files import ApplyPatchRule, FileToolRule
from .plans import TASK_SOURCE, PlanRule, checklist_items
from .rules import KERNEL_RECORDS, DerivationContext, DerivationRule, check_rules, register_rule, unregister_rule
from .shell_rules import ProcessPollRule, ShellRule, process_id_text

__all__ = [
    "ToolFailure",
    "ToolSuccess",
    "ActionsReplaced",
    "ActionChanged",
    "UserInstruction",
    "instruction_text",
    "INSTRUCTION_CHARS",
    "DerivationContext",
    "DerivationRule",
    "BUILTIN_RULES",
    "builtin_rules",
    "check_rules",
    "SessionDeriver",
    "derives_nothing",
    "call_arguments",
    "error_signature",
    "patch_paths",
    "checklist_items",
    "process_id_text",
    "TASK_SOURCE",
    "AGENT_FORMAT",
    "AGENT_EXPLICIT_TOOLS",
    "Mutation",
    "Run",
    "process_exit_facts",
    "shell_facts",
    "strip_ansi",
    "CodexExecRule",
    "ERROR_FLAG_FORMATS",
    "ApplyPatchRule",
    "FileToolRule",
    "PlanRule",
    "KERNEL_RECORDS",
    "register_rule",
    "unregister_rule",
    "ProcessPollRule",
    "ShellRule",
]
