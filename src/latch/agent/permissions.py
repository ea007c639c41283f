"""Permission policy with hard-deny rules (spec invariant tier: "safety hard-deny").

A :class:`PermissionPolicy` decides, for one tool call, ``allow``, ``ask`` or
``deny``. Hard-deny rules are checked first and win whatever the mode (even
``bypass``) and whatever the model asks: no argument, mode or earlier approval
can turn a hard deny into an allow. Rules match the tool name and a regular
expression over a *normalized* command (whitespace collapsed, quotes removed),
so trivial obfuscation (``rm  -rf   /``, ``'rm' -rf /``) is still caught.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import field

from ..events import RawArguments, parse_arguments
from ..records import dataclass

__all__ = [
    "Rule",
    "Decision",
    "PermissionPolicy",
    "DEFAULT_HARD_DENY",
    "MODES",
    "WRITE_TOOLS",
    "READ_TOOLS",
    "LOOKUP_TOOLS",
    "SHELL_TOOLS",
]

MODES = ("default", "accept_edits", "bypass", "read_only")

SHELL_TOOLS = frozenset({"bash", "shell", "exec_command", "execute_bash", "run", "local_shell", "container.exec"})
WRITE_TOOLS = frozenset(
    {
        "edit",
        "write",
        "multiedit",
        "notebookedit",
        "apply_patch",
        "str_replace_editor",
        "create",
        "write_file",
        "edit_file",
    }
)
READ_TOOLS = frozenset({"read", "grep", "glob", "ls", "view", "read_file", "search"})
LOOKUP_TOOLS = frozenset({"search_history", "read_artifact"})
"""Tools that only read the session's own store (its history, its stored artifacts): allowed in every mode,
``read_only`` included."""


@dataclass(frozen=True, slots=True)
class Rule:
    """A hard-deny rule: ``pattern`` is searched in the normalized command text of matching tools."""

    name: str
    pattern: str
    reason: str
    tools: frozenset[str] = SHELL_TOOLS

    def matches(self, tool: str, text: str) -> bool:
        return tool.lower() in self.tools and re.search(self.pattern, text) is not None


_SHELL = r"(sudo\s+)?(\S*/)?(env\s+)?(ba|z|da|k|fi)?sh\b"
"""A shell interpreter as a pipe's or process substitution's consumer: ``sh``, ``/bin/bash``, ``sudo zsh``, ..."""
_ROOTS = r"(/+|/+\*|/+\.|~/?|\$home/?|\$\{home\}/?)"
"""The filesystem root or the home directory as a command's target: ``/``, ``//``, ``/*``, ``~``, ``$HOME``."""

DEFAULT_HARD_DENY: tuple[Rule, ...] = (
    Rule(
        "rm-root",
        r"(^|[\s;&|(`])(-[a-z]*r[a-z]*|--recursive)\b[^|;&]*\s" + _ROOTS + r"(\s|$|[;&|)`])",
        "recursive delete (or any recursive command) of the filesystem root or home directory",
    ),
    Rule(
        "find-delete-root",
        r"\bfind\s+" + _ROOTS + r"(\s.*)?\s-(delete|exec\s+rm)\b",
        "deleting files from the filesystem root or home directory",
    ),
    Rule("mkfs", r"\bmkfs(\.\w+)?\b", "formatting a filesystem"),
    Rule("dd-device", r"\bdd\b.*\bof=/dev/(sd|nvme|hd|vd|disk)", "writing raw bytes to a block device"),
    Rule("fork-bomb", r":\(\)\s*\{\s*:\|:&\s*\}\s*;\s*:", "fork bomb"),
    Rule(
        "curl-pipe-shell",
        r"\b(curl|wget)\b[^|;&]*\|\s*" + _SHELL + r"|\b(ba|z|da)?sh\s+<\(\s*(curl|wget)\b"
        r"|(\bsource|(^|[\s;&])\.)\s+<\(\s*(curl|wget)\b|\beval\s+.?\$\(\s*(curl|wget)\b",
        "piping a download into a shell",
    ),
    Rule(
        "decode-pipe-shell",
        r"\b(base64\s+(-d|--decode|-D)|xxd\s+-r|openssl\s+(base64|enc)\s.*-d)\b[^;&]*\|\s*" + _SHELL,
        "running decoded text as a shell script",
    ),
    Rule("force-push-main", r"\bgit\s+push\b.*(--force|-f\b|\+)(.*\b(main|master)\b)", "force-pushing the main branch"),
    Rule("chmod-root", r"\bchmod\s+(-r\s+)?777\s+/(\s|$)", "making the filesystem root world-writable"),
    Rule(
        "ssh-keys",
        r"((~|\$home|/home/[^/\s]+|/root)/|(^|[\s=:]))\.ssh/(id_|authorized_keys)",
        "touching SSH keys",
        SHELL_TOOLS | WRITE_TOOLS | READ_TOOLS,
    ),
)


@dataclass(frozen=True, slots=True)
class Decision:
    """``action`` is ``allow``, ``ask`` or ``deny``; ``rule`` names the hard-deny rule that fired."""

    action: str
    reason: str
    rule: str | None = None

    @property
    def hard_denied(self) -> bool:
        return self.rule is not None


def _normalize(arguments: str | Mapping[str, object]) -> str:
    if isinstance(arguments, str):
        arguments = parse_arguments(arguments)
        if isinstance(arguments, RawArguments):  # not JSON, or nested too deeply
            return " ".join(arguments.replace('"', "").replace("'", "").split()).lower()
    parts: list[str] = []

    def walk(v: object) -> None:
        if isinstance(v, str):
            parts.append(v)
        elif isinstance(v, Mapping):
            for x in v.values():
                walk(x)
        elif isinstance(v, (list, tuple)):
            parts.append(" ".join(str(x) for x in v))

    walk(arguments)
    text = " ".join(parts).replace('"', "").replace("'", "").replace("\\\n", " ")
    return " ".join(text.split()).lower()


@dataclass
class PermissionPolicy:
    """Decide tool calls. ``mode`` is one of :data:`MODES`; ``hard_deny`` rules always win.

    ``read_only`` allows only :data:`READ_TOOLS` and :data:`LOOKUP_TOOLS`; ``accept_edits`` also allows
    :data:`WRITE_TOOLS` (Latch's ``write_file`` and ``edit_file`` among them) without asking; ``bypass``
    allows everything hard-deny does not refuse; ``default`` asks for the rest.
    """

    mode: str = "default"
    hard_deny: Sequence[Rule] = field(default_factory=lambda: DEFAULT_HARD_DENY)
    always_allow: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"unknown permission mode {self.mode!r}; known: {', '.join(MODES)}")

    def decide(self, tool: str, arguments: str | Mapping[str, object]) -> Decision:
        """Decide one call. ``arguments`` is the JSON string (or dict) the model sent."""
        text = _normalize(arguments)
        for rule in self.hard_deny:
            if rule.matches(tool, text):
                return Decision("deny", f"hard-deny {rule.name}: {rule.reason}", rule.name)
        t = tool.lower()
        if self.mode == "read_only" and t not in READ_TOOLS and t not in LOOKUP_TOOLS:
            return Decision("deny", "read-only mode")
        if self.mode == "bypass" or t in self.always_allow or t in READ_TOOLS or t in LOOKUP_TOOLS:
            return Decision("allow", f"mode {self.mode}")
        if self.mode == "accept_edits" and t in WRITE_TOOLS:
            return Decision("allow", "accept_edits mode")
        return Decision("ask", "needs approval")

    def decide_all(self, calls: Iterable[tuple[str, str]]) -> list[Decision]:
        return [self.decide(name, args) for name, args in calls]
