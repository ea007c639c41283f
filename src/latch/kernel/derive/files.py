"""File rules (reads, edits, writes and patches of every harness)."""

from __future__ import annotations

import re
from typing import Any

from ...events import ToolCall, ToolResult, argument_paths
from ...lazyre import lazy_compile
from ..events import FileObservation, Mutation
from .common import _excerpt, call_arguments, error_signature, patch_paths
from .facts import AGENT_EXPLICIT_TOOLS, AGENT_FORMAT, ToolFailure, ToolSuccess
from .rules import KERNEL_RECORDS, DerivationContext, DerivationRule


class ApplyPatchRule(DerivationRule):
    """Codex ``apply_patch`` (function or custom tool): the files its patch names."""

    PLUGIN_NAME = "apply_patch"
    tools = frozenset({"apply_patch"})

    def may_mutate(self, call: ToolCall, ctx: DerivationContext) -> bool:
        return True

    def derive(self, call: ToolCall, result: ToolResult, ctx: DerivationContext) -> list[Any]:
        args = call_arguments(call)
        patch = args.get("input", args.get("patch", ""))
        return _patch_facts(
            patch if isinstance(patch, str) else "", result.content, result.is_error, result.missing, ctx
        )


_PATCH_REJECTED_RE = lazy_compile(r"verification failed|Invalid patch", re.I)
_PATCH_TARGET_RE = lazy_compile(r"Failed to find expected lines in (\S+?):?$", re.M)


def _patch_facts(patch: str, output: str, failed: bool, missing: bool, ctx: DerivationContext) -> list[Any]:
    """A patch that applied (or may have: no result) is one Mutation of its files; a rejected
    one is an ``apply_patch`` failure on the file it names, and a success closes such failures."""
    paths = tuple(ctx.path(p) for p in patch_paths(patch))
    rejected = _PATCH_REJECTED_RE.search(output)
    if missing or not (failed or rejected):
        return [Mutation(paths=paths, tool="apply_patch")] + ([] if missing else [ToolSuccess("apply_patch", paths)])
    if rejected:
        found = _PATCH_TARGET_RE.search(output)
        target = found.group(1) if found else None
        return [
            ToolFailure(
                "apply_patch", error_signature(output), (ctx.path(target),) if target else paths, _excerpt(output)
            )
        ]
    return [Mutation(paths=paths, tool="apply_patch")]


_EDIT_REJECTED_RE = lazy_compile(
    r"\n(?:No replacement was performed|ERROR:|Error:|Invalid `path`|The path \S+ does not exist|"
    r"Your proposed edit has introduced new syntax error)"
)
r"""An editor's refusal at the start of a line, searched in the text after a ``\n`` (:func:`_edit_rejected`)."""


def _edit_rejected(head: str) -> bool:
    r"""Whether a line of ``head`` starts with an editor's refusal: :data:`_EDIT_REJECTED_RE` led by the ``\n``
    before each line (a multi-line ``^`` instead is tried at every character; the ``\n`` is found in C)."""
    return _EDIT_REJECTED_RE.search("\n" + head) is not None


def _path_arg(args: dict[str, Any]) -> str | None:
    """The first file path the arguments name (:data:`latch.events.PATH_KEYS` order)."""
    return next(iter(argument_paths(args)), None)


def _swe_trailer(content: str, ctx: DerivationContext) -> str | None:
    """SWE-agent appends ``(Open file: X)`` and ``(Current directory: D)``; update ``ctx``."""
    if _TRAILER_RE.search(content) is None:  # one scan for both
        return ctx.open_file
    if "(Current directory: " in content:
        cwd = _CWD_RE.findall(content)
        if cwd and ctx.workspace is None:
            ctx.cwd = cwd[-1].strip().rstrip("/")
    if "(Open file: " in content:
        opened = _OPEN_FILE_RE.findall(content)
        if opened and opened[-1].strip() not in ("n/a", ""):
            ctx.open_file = opened[-1].strip()
    return ctx.open_file


_TRAILER_RE = lazy_compile(r"\((?:Current directory|Open file): ")
"""Where either trailer of :func:`_swe_trailer` may start (each holds one of its texts)."""
_CWD_RE = lazy_compile(r"\(Current directory: ([^)\n]+)\)")
_OPEN_FILE_RE = lazy_compile(r"\(Open file: ([^)\n]+)\)")


def _legacy_path(call: ToolCall, args: dict[str, Any]) -> str | None:
    """SWE-agent legacy actions keep the whole command line (``{"command": "create x.py"}``)."""
    command = args.get("command")
    if isinstance(command, str):
        words = command.split("\n", 1)[0].split()
        if len(words) >= 2 and words[0] == call.name:
            return words[1]
    return None


class FileToolRule(DerivationRule):
    """File tools of every format: reads → observations, edits/writes/creates → mutations.

    ``str_replace_editor`` and Goose's ``developer__text_editor`` decide by their ``command`` (``view``
    reads; ``create``, ``write``, ``str_replace``, ``insert``, ``undo_edit`` write). Gemini CLI's
    ``read_file``/``write_file``/``replace``, Copilot CLI's ``view``/``edit``/``create`` and Goose's
    ``write``/``edit`` name their file in ``file_path`` or ``path``. SWE-agent's ``edit``/``insert``
    have no path: they act on the open file. A mutation counts when the call
    succeeded or its result never came (it may have happened).
    """

    PLUGIN_NAME = "file_tools"
    READS = frozenset({"Read", "read", "read_file", "view_file", "open", "View", "view"})
    WRITES = frozenset(
        {
            "Edit",
            "MultiEdit",
            "Write",
            "NotebookEdit",
            "write",
            "write_file",
            "write_to_file",
            "create",
            "create_file",
            "edit",
            "edit_file",
            "insert",
            "replace_in_file",
            "apply_diff",
            "replace",
        }
    )
    EDITORS = frozenset({"str_replace_editor", "developer__text_editor"})
    EDITOR_COMMANDS = frozenset({"view", "create", "write", "str_replace", "insert", "undo_edit"})
    tools = READS | WRITES | EDITORS

    def _editor_command(self, args: dict[str, Any]) -> str | None:
        """The editor's ``command`` when it is one of :attr:`EDITOR_COMMANDS` (anything else, a list or a number
        included, is ``None``)."""
        command = args.get("command")
        return command if isinstance(command, str) and command in self.EDITOR_COMMANDS else None

    def may_mutate(self, call: ToolCall, ctx: DerivationContext) -> bool:
        if call.name in self.EDITORS:
            command = self._editor_command(call_arguments(call))
            return command is not None and command != "view"
        return call.name in self.WRITES

    def derive(self, call: ToolCall, result: ToolResult, ctx: DerivationContext) -> list[Any]:
        facts = self._derive(call, result, ctx)
        if ctx.format == AGENT_FORMAT and call.name in AGENT_EXPLICIT_TOOLS:
            return [f for f in facts if not isinstance(f, KERNEL_RECORDS)]  # the tool appended them itself
        return facts

    def _derive(self, call: ToolCall, result: ToolResult, ctx: DerivationContext) -> list[Any]:
        args = call_arguments(call)
        open_file = _swe_trailer(result.content, ctx)
        raw = _path_arg(args)
        writes = call.name in self.WRITES
        if call.name in self.EDITORS:
            command = self._editor_command(args)
            if command is None:
                return []
            writes = command != "view"
        elif raw is None:
            raw = _legacy_path(call, args) if call.name in ("open", "create") else None
            if raw is None and call.name in ("edit", "insert", "create", "open"):
                raw = open_file
        rejected = result.is_error or _edit_rejected(result.content[:500])
        path = ctx.path(raw) if raw is not None else None  # ctx's folders do not change below
        if not writes:
            if result.missing or path is None or result.content.startswith("Here's the files and directories"):
                return []
            if rejected:
                return [ToolFailure(call.name, error_signature(result.content), (path,), _excerpt(result.content))]
            if call.name == "open":
                ctx.open_file = raw
            return [FileObservation(path=path), ToolSuccess(call.name, (path,))]
        if call.name == "create" and raw and not rejected:
            ctx.open_file = raw
        paths = (path,) if raw and path is not None else ()
        if result.missing:
            return [Mutation(paths=paths, tool=call.name)]
        actions = paths or (call.name,)
        if rejected:
            return [ToolFailure(call.name, error_signature(result.content), actions, _excerpt(result.content))]
        return [Mutation(paths=paths, tool=call.name), ToolSuccess(call.name, actions)]
