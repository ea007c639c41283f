"""The ``shell`` tool and ``process_output`` (spec: "Agent Skills and MCP", "Kernel validation evidence").

Foreground (default): :meth:`ProcessManager.run` with ``timeout`` seconds (default
:data:`DEFAULT_TIMEOUT_SECONDS`, at most :data:`MAX_TIMEOUT_SECONDS`); the outcome is the bounded output
and an ``Exit code: N`` line, ``exit_code`` set, ``is_error`` for a non-zero exit, a timeout or a signal.
Its facts are derived once from the call and its result by :class:`latch.kernel.derive.ShellRule` (the tool
is named ``shell`` with ``command``): the possible mutations of the command (counted in the current
generation from the moment the call is stored, before it runs), its validation evidence at the generation
of the result (with the result's exit code), the files it reads. The tool appends nothing itself.

``background: true``: :meth:`ProcessManager.start` appends ProcessStarted and returns at once with the
process id; the exit (ProcessExited, and the validation evidence of a validating command) is appended by
the manager when it happens. Its output is read with ``process_output`` (id, optional offset), which also
says whether it still runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from .base import ToolContext, ToolError, ToolOutcome, schema

__all__ = ["Shell", "ProcessOutput", "DEFAULT_TIMEOUT_SECONDS", "MAX_TIMEOUT_SECONDS"]

DEFAULT_TIMEOUT_SECONDS = 120
MAX_TIMEOUT_SECONDS = 600


class Shell:
    """``shell(command, timeout=120, background=false)``."""

    NAME: ClassVar[str] = "shell"
    MUTATES: ClassVar[bool] = True
    SCHEMA: ClassVar[Mapping[str, Any]] = schema(
        "shell",
        "Run a command with /bin/sh in the workspace root (stdin closed, stderr merged into stdout). The "
        "output is cut to its head and tail when long. A foreground command is killed, with its process group, "
        "after timeout seconds. Set background to start a server or a long job: it returns at once with a "
        "process id; read its output with process_output. Its exit is recorded without polling.",
        {
            "command": {"type": "string", "minLength": 1, "description": "The shell command line."},
            "timeout": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_TIMEOUT_SECONDS,
                "description": f"Seconds before a foreground command is killed (default {DEFAULT_TIMEOUT_SECONDS}).",
            },
            "background": {"type": "boolean", "description": "Start a managed background process (default false)."},
        },
        ["command"],
    )

    def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolOutcome:
        command = args["command"]
        if not command.strip():
            raise ToolError("shell: field 'command' must not be empty")
        if args.get("background", False):
            if "timeout" in args:
                raise ToolError("shell: field 'timeout' applies to foreground commands only")
            try:
                mp = ctx.processes.start(command)
            except OSError as exc:
                raise ToolError(f"shell: cannot start /bin/sh: {exc.strerror or exc}") from None
            return ToolOutcome(
                f"Started background process {mp.process_id} (pid {mp.pid}). Read its output with "
                f'process_output(process_id="{mp.process_id}"); its exit is recorded when it '
                "happens."
            )
        timeout = args.get("timeout", DEFAULT_TIMEOUT_SECONDS)
        try:
            res = ctx.processes.run(command, timeout=timeout, estimate=ctx.estimate)
        except OSError as exc:
            raise ToolError(f"shell: cannot start /bin/sh: {exc.strerror or exc}") from None
        body = res.output if res.output.endswith("\n") or not res.output else res.output + "\n"
        if res.timed_out:
            return ToolOutcome(f"{body}[timed out after {timeout} s; the process group was killed]", is_error=True)
        if res.signal is not None:
            return ToolOutcome(f"{body}[killed by signal {res.signal}]", is_error=True)
        assert res.exit_code is not None
        return ToolOutcome(f"{body}Exit code: {res.exit_code}", is_error=res.exit_code != 0, exit_code=res.exit_code)


class ProcessOutput:
    """``process_output(process_id, offset=0)``: a bounded page of a background process's log and its status."""

    NAME: ClassVar[str] = "process_output"
    MUTATES: ClassVar[bool] = False
    SCHEMA: ClassVar[Mapping[str, Any]] = schema(
        "process_output",
        "Read the output of a background process started with shell(background=true), one page at a time, "
        "and whether it is still running.",
        {
            "process_id": {"type": "string", "minLength": 1, "description": "The id shell returned (e.g. p1a2b3c)."},
            "offset": {"type": "integer", "minimum": 0, "description": "Byte offset in its output (default 0)."},
        },
        ["process_id"],
    )

    def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolOutcome:
        try:
            mp = ctx.processes.get(args["process_id"])
            page = ctx.processes.output(mp.process_id, args.get("offset", 0), ctx.estimate)
        except KeyError as exc:
            raise ToolError(f"process_output: {exc.args[0]}") from None
        except ValueError as exc:
            raise ToolError(f"process_output: {exc}") from None
        if not mp.ended:
            status = "still running"
        elif mp.signal is not None:
            status = f"ended by signal {mp.signal}"
        else:
            status = f"exited with code {mp.exit_code}"
        return ToolOutcome(
            f"[process {mp.process_id}: {status}; {page.total_bytes:,} bytes of output]\n" + page.content
        )
