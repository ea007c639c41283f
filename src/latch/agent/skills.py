"""Agent Skills (spec: "Agent Skills and MCP"): discovered once per session, listed in the session context,
loaded only through durable tool results.

A skill is a folder holding ``SKILL.md``: YAML front matter (between two ``---`` lines) with ``name`` and
``description``, then a Markdown body, and optional resource files beside it (scripts, references).
Folders are searched in :func:`skill_roots` order: the workspace's ``.latch/skills/``, the user's config
folder ``skills/`` (beside ``config.toml``: ``$LATCH_HOME`` or the platformdirs user config folder), then the
workspace's ``.claude/skills/`` (compatibility). A name found twice keeps the first one (a one-line warning);
a ``SKILL.md`` with invalid front matter is skipped with a one-line warning naming the file.

The list is fixed when the session starts: :func:`session_skills` appends one
:class:`~latch.events.SkillsListed` (entries sorted by name) and every later call, resume included, reads
that event back, so a skill added or edited mid-session changes nothing already sent. The names and
descriptions go into the session context (:func:`skills_section`), never into the system prompt (which stays
byte-identical across sessions). ``load_skill(name)`` returns the body and ``read_skill_resource(name,
path)`` a file of the skill, each one bounded page (24 KiB / 8,000 tokens, like ``read_file``) in the
ordinary durable :class:`~latch.events.ToolResult`, so both survive resume and are found by recall.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, cast

import yaml

from ..config import config_path
from ..events import SkillEntry, SkillsListed
from ..kernel.files import PAGE_LIMIT_BYTES, PAGE_LIMIT_TOKENS, bounded_page
from ..store import EventLog
from .tools.base import ToolContext, ToolError, ToolOutcome, schema

__all__ = [
    "Skill",
    "discover_skills",
    "skill_roots",
    "parse_skill_file",
    "session_skills",
    "skills_section",
    "LoadSkill",
    "ReadSkillResource",
    "skill_tools",
    "SKILL_FILE",
    "NAME_RE",
    "DESCRIPTION_LIMIT",
    "SKILL_FILE_LIMIT_BYTES",
    "RESOURCE_LIST_LIMIT",
]

SKILL_FILE = "SKILL.md"
NAME_RE = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
"""A skill name (Agent Skills format): lowercase letters, digits and single hyphens, at most 64 characters."""
NAME_LIMIT = 64
DESCRIPTION_LIMIT = 1024
"""The longest description in characters (Agent Skills format)."""
SKILL_FILE_LIMIT_BYTES = 1024 * 1024
"""A ``SKILL.md`` larger than this is skipped with a warning (bytes)."""
RESOURCE_LIST_LIMIT = 50
"""The most resource files ``load_skill`` names after the body."""

Skill = SkillEntry
"""A discovered skill (:class:`latch.events.SkillEntry`: name, description, folder path, source)."""


def skill_roots(
    workspace: str | os.PathLike[str], user_dir: str | os.PathLike[str] | None = None
) -> list[tuple[str, Path]]:
    """``[(source, folder)]`` searched for skills, in precedence order: ``("workspace", WS/.latch/skills)``,
    ``("user", USER)`` (``user_dir``, default ``skills/`` beside :func:`latch.config.config_path`),
    ``("claude", WS/.claude/skills)``."""
    ws = Path(workspace)
    user = Path(user_dir) if user_dir is not None else config_path().parent / "skills"
    return [("workspace", ws / ".latch" / "skills"), ("user", user), ("claude", ws / ".claude" / "skills")]


def _split_front_matter(text: str) -> tuple[str, str]:
    """``(front matter, body)``; ``ValueError`` when the file does not open with a ``---`` block."""
    lines = text.lstrip("\ufeff").splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        raise ValueError("no front matter (the file must start with a '---' line)")
    for i in range(1, len(lines)):
        if lines[i].strip() == "---":
            return "".join(lines[1:i]), "".join(lines[i + 1 :])
    raise ValueError("front matter is not closed by a '---' line")


def parse_skill_file(path: str | os.PathLike[str], source: str = "workspace") -> tuple[SkillEntry, str]:
    """``(entry, body)`` of one ``SKILL.md``. ``ValueError`` (one line, without the path) for a file that
    cannot be read, is not UTF-8, or whose front matter is not YAML or lacks a valid ``name`` (see
    :data:`NAME_RE`) or a non-empty ``description`` of at most :data:`DESCRIPTION_LIMIT` characters."""
    p = Path(path)
    try:
        size = p.stat().st_size
        if size > SKILL_FILE_LIMIT_BYTES:
            raise ValueError(f"larger than {SKILL_FILE_LIMIT_BYTES:,} bytes ({size:,})")
        text = p.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise ValueError(f"not read ({exc.strerror or exc})") from None
    head, body = _split_front_matter(text)
    try:
        meta = yaml.safe_load(head)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 2}" if mark is not None else ""
        raise ValueError(f"front matter is not valid YAML{where}: {getattr(exc, 'problem', None) or exc}") from None
    if not isinstance(meta, Mapping):
        raise ValueError("front matter must be a YAML mapping with name and description")
    name, description = meta.get("name"), meta.get("description")
    if not isinstance(name, str) or not name.strip():
        raise ValueError("front matter has no name")
    name = name.strip()
    if len(name) > NAME_LIMIT or not NAME_RE.match(name):
        raise ValueError(
            f"name {name!r} must be lowercase letters, digits and hyphens, at most {NAME_LIMIT} characters"
        )
    if not isinstance(description, str) or not description.strip():
        raise ValueError("front matter has no description")
    description = " ".join(description.split())
    if len(description) > DESCRIPTION_LIMIT:
        raise ValueError(f"description is longer than {DESCRIPTION_LIMIT} characters ({len(description)})")
    return SkillEntry(name, description, str(p.parent.resolve()), source), body


def discover_skills(
    workspace: str | os.PathLike[str], user_dir: str | os.PathLike[str] | None = None
) -> tuple[list[SkillEntry], list[str]]:
    """``(skills sorted by name, warnings)`` found under :func:`skill_roots`: every direct subfolder holding a
    ``SKILL.md``. Each warning is one line naming the file (invalid front matter, unreadable, a name shadowed
    by an earlier root). Never raises."""
    found: dict[str, SkillEntry] = {}
    warnings: list[str] = []
    for source, root in skill_roots(workspace, user_dir):
        try:
            folders = sorted(d for d in root.iterdir() if (d / SKILL_FILE).is_file())
        except OSError:
            continue
        for folder in folders:
            path = folder / SKILL_FILE
            try:
                entry, _ = parse_skill_file(path, source)
            except ValueError as exc:
                warnings.append(f"{path}: skill skipped: {exc}")
                continue
            if entry.name in found:
                warnings.append(
                    f"{path}: skill {entry.name!r} skipped: the same name is already loaded from "
                    f"{found[entry.name].path}"
                )
                continue
            found[entry.name] = entry
    return [found[n] for n in sorted(found)], warnings


def session_skills(
    store: EventLog, session_id: str, discover: Callable[[], tuple[Sequence[SkillEntry], Sequence[str]]] | None = None
) -> tuple[tuple[SkillEntry, ...], list[str]]:
    """``(skills, warnings)`` of the session, fixed at its start.

    The session's first :class:`~latch.events.SkillsListed` when it has one (resume: the same list, whatever
    the folders hold now). Otherwise ``discover()`` (default: :func:`discover_skills` of the session's
    workspace) is run once and its skills, sorted by name, are appended as that event, but only while the
    session has no assistant turn yet: a session that started without skills (no event) keeps having none,
    so its session context never changes mid-session.
    """
    for s in store.events(session_id, kinds=[SkillsListed.KIND]):
        if isinstance(s.event, SkillsListed):
            return tuple(s.event.skills), []
    started = any(True for _ in store.events(session_id, kinds=["assistant_message"]))
    skills: Sequence[SkillEntry] = ()
    warnings: list[str] = []
    if not started:
        if discover is None:
            workspace = store.session(session_id).workspace or os.getcwd()
            skills, warnings = discover_skills(workspace)
        else:
            skills, w = discover()
            warnings = list(w)
    ordered = tuple(sorted(skills, key=lambda e: e.name))
    if ordered:  # nothing to fix when there is nothing: a session without skills gets no event
        store.append(session_id, [SkillsListed(ordered)])
    return ordered, warnings


def skills_section(skills: Sequence[SkillEntry]) -> str:
    """The session-context text listing ``skills`` (``""`` when there are none): a ``# Agent skills`` heading,
    how to use them, then one ``- NAME: DESCRIPTION`` line each, in the given (stored) order."""
    if not skills:
        return ""
    lines = [
        "# Agent skills",
        "",
        "Skills are instructions for particular tasks. When a task matches a skill's description, load it "
        "with load_skill(name) and follow it; read the files it mentions with read_skill_resource(name, path).",
        "",
    ]
    lines += [f"- {s.name}: {s.description}" for s in skills]
    return "\n".join(lines)


def _entry(ctx: ToolContext, name: str) -> SkillEntry:
    skills: tuple[SkillEntry, ...] = ()
    for s in ctx.store.events(ctx.session_id, kinds=[SkillsListed.KIND]):
        skills = cast(SkillsListed, s.event).skills
        break
    for e in skills:
        if e.name == name:
            return e
    known = ", ".join(e.name for e in skills) or "none"
    raise ToolError(
        f"no skill {name!r} in this session (skills: {known}; a skill added after the session "
        "started is offered from the next session)"
    )


def _page(data: bytes, offset: int, ctx: ToolContext, what: str) -> str:
    try:
        content, _next, _tokens = bounded_page(data, offset, ctx.estimate, label=what)
    except ValueError as exc:
        raise ToolError(str(exc)) from None
    return content


def _resources(folder: Path) -> list[str]:
    out: list[str] = []
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for f in sorted(filenames):
            rel = (Path(dirpath) / f).relative_to(folder).as_posix()
            if rel != SKILL_FILE and not f.startswith("."):
                out.append(rel)
    return out


class LoadSkill:
    """``load_skill(name, offset=0)``: the body of a skill of the session's list (one bounded page)."""

    NAME: ClassVar[str] = "load_skill"
    MUTATES: ClassVar[bool] = False
    SCHEMA: ClassVar[Mapping[str, Any]] = schema(
        "load_skill",
        "Load the instructions of an agent skill listed in the session context, by name. Returns the skill's "
        f"SKILL.md body (one page: at most {PAGE_LIMIT_BYTES // 1024} KiB and {PAGE_LIMIT_TOKENS:,} tokens; a "
        "longer one ends with the offset to continue from) and the names of its resource files.",
        {
            "name": {"type": "string", "minLength": 1, "description": "The skill's name."},
            "offset": {"type": "integer", "minimum": 0, "description": "Byte offset in the body (default 0)."},
        },
        ["name"],
    )

    def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolOutcome:
        entry = _entry(ctx, args["name"])
        folder = Path(entry.path)
        try:
            _, body = parse_skill_file(folder / SKILL_FILE, entry.source)
        except ValueError as exc:
            raise ToolError(f"skill {entry.name}: {folder / SKILL_FILE}: {exc}") from None
        offset = args.get("offset", 0)
        page = _page(body.strip("\n").encode("utf-8"), offset, ctx, "skill")
        parts = [f"[skill {entry.name}: {folder}]", page]
        if offset == 0:
            files = _resources(folder)
            if files:
                more = len(files) - RESOURCE_LIST_LIMIT
                listed = ", ".join(files[:RESOURCE_LIST_LIMIT]) + (f" (and {more} more)" if more > 0 else "")
                parts.append(f"[resources (read_skill_resource): {listed}]")
        return ToolOutcome("\n".join(parts))


class ReadSkillResource:
    """``read_skill_resource(name, path, offset=0)``: a file inside a skill's folder (one bounded page)."""

    NAME: ClassVar[str] = "read_skill_resource"
    MUTATES: ClassVar[bool] = False
    SCHEMA: ClassVar[Mapping[str, Any]] = schema(
        "read_skill_resource",
        "Read a file of an agent skill (a script, reference or template in the skill's folder), one page at a "
        f"time (at most {PAGE_LIMIT_BYTES // 1024} KiB and {PAGE_LIMIT_TOKENS:,} tokens).",
        {
            "name": {"type": "string", "minLength": 1, "description": "The skill's name."},
            "path": {"type": "string", "minLength": 1, "description": "The file, relative to the skill's folder."},
            "offset": {"type": "integer", "minimum": 0, "description": "Byte offset to start from (default 0)."},
        },
        ["name", "path"],
    )

    def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolOutcome:
        entry = _entry(ctx, args["name"])
        raw = args["path"]
        if "\x00" in raw:
            raise ToolError("path contains a NUL byte")
        root = Path(os.path.realpath(entry.path))
        target = Path(os.path.realpath(root / raw))
        try:
            rel = target.relative_to(root).as_posix()
        except ValueError:
            raise ToolError(f"{raw}: outside the folder of skill {entry.name} (refused)") from None
        if target.is_dir():
            raise ToolError(f"{rel}: is a directory of skill {entry.name}")
        try:
            data = target.read_bytes()
        except FileNotFoundError:
            raise ToolError(f"{rel}: no such file in skill {entry.name}") from None
        except OSError as exc:
            raise ToolError(f"{rel}: {exc.strerror or exc}") from None
        if not data:
            return ToolOutcome(f"({rel} of skill {entry.name} is empty)")
        return ToolOutcome(_page(data, args.get("offset", 0), ctx, "file"))


_SKILL_TOOLS: tuple[Any, ...] = (LoadSkill(), ReadSkillResource())


def skill_tools() -> tuple[Any, ...]:
    """``(load_skill, read_skill_resource)``: offered after the built-in tools when the session has skills."""
    return _SKILL_TOOLS
