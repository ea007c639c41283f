"""Writer blockers from refused writes (spec: "Repeated unchanged writer blockers are supervised as failed
certification attempts, including across resume, even if their commands pass").

A write is *refused* when its tool call's error result says nothing was written:

* a write tool (``write_file``, ``edit_file``, ... :data:`~latch.agent.permissions.WRITE_TOOLS`) denied by the
  permission policy (hard-deny, ``read_only``), declined by the user or left unapproved (``[denied: ...]``,
  ``[not run: ...]``);
* a guarded edit refused by the kernel's guard (stale since the last read, or never read: ``(nothing was
  written)``) or by the operating system (``Read-only file system``, ``Permission denied``);
* a shell command failing on a read-only file system: the sandbox refused the write.

The first refusal is only its error result. The same refusal again (same tool, target and reason, whitespace
and case aside) with the workspace unchanged in between appends a :class:`~latch.kernel.events.WriterBlocker`
after its result, and every further repeat another, so the kernel supervises the streak. *Unchanged*: the
kernel workspace generation just before the repeating call's turn equals the generation just after the
previous refusal's result (a refused shell command counts as a possible mutation in the kernel, so its own
count is on the previous refusal's side). The previous refusal is read back from the durable log the first
time a loop needs it, so a repeat across resume counts too. The blocker is a second append after the result:
a crash between the two loses that one blocker, never the refusal.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from ..events import ToolCall, ToolResult, argument_paths, parse_arguments
from ..kernel.events import WriterBlocker
from ..store import EventLog
from .permissions import SHELL_TOOLS, WRITE_TOOLS

__all__ = ["refused_write", "BlockerWatch", "BLOCKER_CHARS"]

BLOCKER_CHARS = 300
"""A blocker's reason is the first line of the refusal, cut to this many characters."""

_GUARD = re.compile(r"\(nothing was written\)|read-only file system|permission denied", re.IGNORECASE)
_READ_ONLY_FS = re.compile(r"read-only file system", re.IGNORECASE)


def _first_line(text: str) -> str:
    line = next((ln for ln in text.splitlines() if ln.strip()), "")
    line = " ".join(line.split())
    return line if len(line) <= BLOCKER_CHARS else line[: BLOCKER_CHARS - 1] + "…"


def refused_write(name: str, arguments: str, content: str, is_error: bool) -> str | None:
    """The blocker text of a refused write (``"write_file src/gen.rs: [denied: read-only mode]"``), else ``None``.

    ``arguments`` is the call's JSON string, ``content`` its result (see the module docstring for what counts).
    """
    if not is_error:
        return None
    tool = name.lower()
    args = parse_arguments(arguments)
    if tool in WRITE_TOOLS:
        if not (content.startswith(("[denied:", "[not run:")) or _GUARD.search(content[:2000])):
            return None
        paths = argument_paths(args) if isinstance(args, dict) else ()
        target = f" {paths[0]}" if paths else ""
        return f"{name}{target}: {_first_line(content)}"
    if tool in SHELL_TOOLS:
        found = _READ_ONLY_FS.search(content)
        if found is None:
            return None
        command = args.get("command") if isinstance(args, dict) else None
        line = next((ln for ln in content.splitlines() if _READ_ONLY_FS.search(ln)), "")
        shown = f" `{_first_line(command)}`" if isinstance(command, str) else ""
        return f"{name}{shown}: {_first_line(line)}"
    return None


def _key(blocker: str) -> str:
    return " ".join(blocker.lower().split())


class BlockerWatch:
    """Watches one session's tool results for repeated refused writes (see the module docstring).

    ``generation(until_seq)`` is the kernel workspace generation as of a seq (``None``: now).
    """

    def __init__(self, store: EventLog, session_id: str, generation: Callable[[int | None], int]):
        self.store, self.session_id, self.generation = store, session_id, generation
        self._last: tuple[str, int] | None = None  # (key, generation) of the latest refusal
        self._seeded = False

    def _seed(self, before_seq: int) -> None:
        """The latest refusal before ``before_seq`` in the durable log (once per watch: a resumed loop)."""
        self._seeded = True
        calls: dict[str, ToolCall] = {}
        latest: tuple[int, str] | None = None
        for stored in self.store.events(
            self.session_id, until_seq=before_seq - 1, kinds=["assistant_message", "tool_result"]
        ):
            event = stored.event
            if isinstance(event, ToolResult):
                call = calls.pop(event.call_id, None)
                if call is None:
                    continue
                blocker = refused_write(call.name, call.arguments, event.content, event.is_error)
                if blocker is not None:
                    latest = (stored.seq, blocker)
            else:
                for call in getattr(event, "tool_calls", ()):
                    calls[call.id] = call
        if latest is not None:
            self._last = (_key(latest[1]), self.generation(latest[0]))

    def observe(self, call: ToolCall, result: ToolResult, seq: int, turn_seq: int) -> WriterBlocker | None:
        """After ``result`` (appended at ``seq``) of ``call`` (whose assistant turn is at ``turn_seq``): the
        blocker to append when it repeats a refusal unchanged, else ``None``. A result that is not a refused
        write ends a streak only by changing the workspace."""
        blocker = refused_write(call.name, call.arguments, result.content, result.is_error)
        if blocker is None:
            return None
        if not self._seeded:
            self._seed(seq)
        key = _key(blocker)
        repeated = self._last == (key, self.generation(turn_seq - 1))
        self._last = (key, self.generation(seq))
        return WriterBlocker(blocker=blocker) if repeated else None
