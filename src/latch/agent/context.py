"""The agent's stable system prompt and its session context (spec: "Port boundary", R1).

The system prompt (:data:`SYSTEM_PROMPT`) is session-independent: no timestamp, no path, no model
name, nothing that differs between two sessions or two days, so system + tools stay byte-identical
and the provider's prefix cache is shared across sessions. What is specific to the session (the
workspace, the permission mode and the repository instructions) is a
:class:`~latch.port.SessionContext`, which the engine renders as the first provider-visible message.

The session's Agent Skills (names and descriptions) follow the repository instructions in the same
text, never the system prompt.

Repository instructions are ``AGENTS.md`` and then ``CLAUDE.md`` from the workspace root, each when
present, read as UTF-8 (undecodable bytes replaced) and bounded to :data:`INSTRUCTIONS_LIMIT_BYTES`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from ..events import SkillEntry
from ..port import SessionContext
from .skills import skills_section

__all__ = [
    "SYSTEM_PROMPT",
    "INSTRUCTION_FILES",
    "INSTRUCTIONS_LIMIT_BYTES",
    "repository_instructions",
    "session_context",
]

SYSTEM_PROMPT = """\
You are a coding agent working in the user's workspace through tools. Latch manages your context: \
every request holds the canonical task state (goal, constraints, decisions, hypotheses, evidence), \
the recent conversation and recalled history; nothing is ever deleted, and search_history finds any \
earlier event exactly.

Work in small verified steps:
- Read a file (read_file) before editing it; edits are refused when the file changed since you read it.
- Run commands with shell; use background: true for servers and long jobs. Their exit is reported to you.
- Record what matters with the kernel tools: set_goal when the task is clear, add_constraint for rules \
the user gives, record_decision for choices not to reopen, propose_hypothesis / reject_hypothesis while \
debugging, plan_action for the plan.
- Validate changes by running the project's tests or checks; claim success only on evidence.
- When the task is done, or you need the user, answer in plain text without a tool call.
"""
"""The session-independent system prompt (byte-identical across sessions, workspaces and days)."""

INSTRUCTION_FILES = ("AGENTS.md", "CLAUDE.md")
INSTRUCTIONS_LIMIT_BYTES = 64 * 1024


def repository_instructions(workspace: str | os.PathLike[str]) -> tuple[str, list[str]]:
    """``(text, warnings)``: the workspace's ``AGENTS.md`` and ``CLAUDE.md`` (in that order, each under a
    ``# <name>`` heading), each cut to :data:`INSTRUCTIONS_LIMIT_BYTES` bytes with a note saying so.
    A file that cannot be read is skipped with a one-line warning naming it. Never raises."""
    root = Path(workspace)
    parts: list[str] = []
    warnings: list[str] = []
    for name in INSTRUCTION_FILES:
        path = root / name
        if not path.is_file():
            continue
        try:
            with open(path, "rb") as fh:
                data = fh.read(INSTRUCTIONS_LIMIT_BYTES + 1)
        except OSError as exc:
            warnings.append(f"{path}: not read ({exc.strerror or exc})")
            continue
        cut = len(data) > INSTRUCTIONS_LIMIT_BYTES
        text = data[:INSTRUCTIONS_LIMIT_BYTES].decode("utf-8", errors="replace").strip()
        if _binary(data[:INSTRUCTIONS_LIMIT_BYTES], text):
            warnings.append(f"{path}: not text (NUL bytes, control bytes or invalid UTF-8); not sent to the model")
            continue
        if cut:
            text += f"\n[{name} is longer than {INSTRUCTIONS_LIMIT_BYTES} bytes; the rest is not shown]"
            warnings.append(f"{path}: longer than {INSTRUCTIONS_LIMIT_BYTES} bytes, cut")
        if text:
            parts.append(f"# {name}\n\n{text}")
    return "\n\n".join(parts), warnings


def _binary(data: bytes, text: str) -> bool:
    """Whether instruction bytes are not text: a NUL byte, or more than 1% of the characters are invalid
    UTF-8 (U+FFFD) or C0 controls other than tab, newline and carriage return. A cut in the middle of a
    multi-byte character at the size limit is not counted."""
    if b"\x00" in data:
        return True
    bad = sum(1 for ch in text if ch == "\ufffd" or (ord(ch) < 32 and ch not in "\t\n\r"))
    return bad > max(1, len(text) // 100)


def session_context(
    workspace: str | os.PathLike[str], mode: str = "default", skills: Sequence[SkillEntry] = ()
) -> tuple[SessionContext, list[str]]:
    """``(SessionContext, warnings)`` of a session in ``workspace`` (absolute path) with permission ``mode``.

    ``skills`` (the session's fixed list, :func:`latch.agent.skills.session_skills`) are listed by name and
    description after the repository instructions (:func:`latch.agent.skills.skills_section`), in the given
    order; the port's :class:`~latch.port.SessionContext` is unchanged, so every engine renders them."""
    text, warnings = repository_instructions(workspace)
    listing = skills_section(skills)
    if listing:
        text = f"{text}\n\n{listing}" if text else listing
    return SessionContext(workspace=str(Path(workspace).resolve()), repository_instructions=text, mode=mode), warnings
