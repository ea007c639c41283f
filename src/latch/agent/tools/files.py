"""The file tools: ``read_file``, ``read_artifact``, ``write_file``, ``edit_file`` (spec: "File state and
compaction").

Each fact is recorded once, by the tool, when it happens: ``read_file`` through
:func:`latch.kernel.files.read_file` (one :class:`~latch.events.FileObservation` with SHA-256 and size of
a file up to 64 KiB), the writes through :func:`latch.kernel.files.guarded_write` (the hash is recomputed
just before writing; a mismatch with what the model last saw appends an
:class:`~latch.events.ExternalChange` and the write is refused; otherwise one
:class:`~latch.events.Mutation` is committed before the bytes are written). Derivation adds no copy for
these calls in an agent session (:data:`latch.kernel.derive.AGENT_EXPLICIT_TOOLS`).

"What the model last saw" of a path is the SHA-256 of its newest FileObservation with a hash, or of the
newest guarded Mutation (``sha256_after``), in this session.

The path is resolved once (:func:`latch.agent.tools.base.workspace_path`); the kernel opens it from the workspace
root through directory file descriptors with ``O_NOFOLLOW``, so a symlink swapped in after that (by a process
racing the call) is refused, never followed out of the workspace (:mod:`latch.kernel.files`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, cast

from ...kernel.files import (
    PAGE_LIMIT_BYTES,
    PAGE_LIMIT_TOKENS,
    StaleFileError,
    current_bytes,
    guarded_write,
    read_artifact,
    read_file,
)
from .base import ToolContext, ToolError, ToolOutcome, schema, workspace_path

__all__ = ["ReadFile", "ReadArtifact", "WriteFile", "EditFile", "last_seen"]

_MISSING = object()


def last_seen(ctx: ToolContext, rel: str) -> Any:
    """What the model last saw of workspace-relative ``rel`` in this session: the SHA-256 hex string of its
    newest hashed observation or guarded write; ``("large", size)`` when that was a page of a file over
    64 KiB (no whole-file hash); the module's ``_MISSING`` marker when it never saw the file."""
    seen: Any = _MISSING
    for s in ctx.store.events(ctx.session_id, kinds=["file_observation", "mutation"]):
        e: Any = s.event  # a FileObservation or a Mutation
        if getattr(e, "path", None) == rel:
            seen = e.sha256 if e.sha256 is not None else ("large", e.size)
        elif rel in getattr(e, "paths", ()) and e.tool == "guarded_write":
            seen = e.sha256_after
    return seen


def _expected(ctx: ToolContext, rel: str, absolute: Path) -> str | None:
    """The hash a guarded write of ``rel`` expects, or ``ToolError`` when the model must read it first."""
    seen = last_seen(ctx, rel)
    if isinstance(seen, tuple):
        raise ToolError(
            f"{rel}: larger than 64 KiB and read in pages without a whole-file hash, so a write "
            "cannot be guarded; change it with the shell tool instead"
        )
    if seen is _MISSING:
        if absolute.exists():
            raise ToolError(
                f"{rel}: exists and was not read in this session; read it with read_file first (nothing was written)"
            )
        return None
    return cast(str, seen)


def _stale(exc: StaleFileError) -> ToolOutcome:
    return ToolOutcome(
        f"{exc.path}: changed outside the agent since you last read it; re-read it with "
        "read_file, then redo the change (nothing was written)",
        is_error=True,
    )


def _page_tokens(ctx: ToolContext) -> int:
    """Tokens one page may hold: the room the next view has for a result (:attr:`ToolContext.room`), else
    :data:`PAGE_LIMIT_TOKENS`."""
    room = ctx.room() if ctx.room is not None else None
    return PAGE_LIMIT_TOKENS if room is None else room


def _target(ctx: ToolContext, raw: str) -> tuple[Path, str]:
    absolute, rel = workspace_path(ctx, raw)
    if absolute.is_dir():
        raise ToolError(f"{rel}: is a directory")
    return absolute, rel


class ReadFile:
    """``read_file(path, offset=0)``: one bounded page (24 KiB, 8,000 tokens, and at most what the next view has
    room for: :attr:`ToolContext.room`) from byte ``offset``."""

    NAME: ClassVar[str] = "read_file"
    MUTATES: ClassVar[bool] = False
    SCHEMA: ClassVar[Mapping[str, Any]] = schema(
        "read_file",
        f"Read a text file of the workspace, one page at a time (at most {PAGE_LIMIT_BYTES // 1024} KiB and "
        f"{PAGE_LIMIT_TOKENS:,} tokens). A longer file ends with a note giving the offset to continue from.",
        {
            "path": {"type": "string", "minLength": 1, "description": "The file, relative to the workspace root."},
            "offset": {"type": "integer", "minimum": 0, "description": "Byte offset to start from (default 0)."},
        },
        ["path"],
    )

    def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolOutcome:
        absolute, rel = _target(ctx, args["path"])
        try:
            page = read_file(
                ctx.store,
                ctx.session_id,
                absolute,
                offset=args.get("offset", 0),
                estimate=ctx.estimate,
                limit_tokens=_page_tokens(ctx),
            )
        except FileNotFoundError:
            raise ToolError(f"{rel}: no such file{_nearby(ctx, absolute)}") from None
        except (OSError, ValueError) as exc:
            raise ToolError(f"{rel}: {getattr(exc, 'strerror', None) or exc}") from None
        if page.total_bytes == 0:
            return ToolOutcome(f"({rel} is empty)")
        return ToolOutcome(page.content)


_SHA256 = re.compile(r"[0-9a-f]{64}")


class ReadArtifact:
    """``read_artifact(sha256, offset=0)``: one bounded page of a stored artifact (a tool output too large for
    the window is stored whole and its result names the artifact), sized like ``read_file``'s pages."""

    NAME: ClassVar[str] = "read_artifact"
    MUTATES: ClassVar[bool] = False
    SCHEMA: ClassVar[Mapping[str, Any]] = schema(
        "read_artifact",
        "Read a stored artifact (a tool output too large for the context, kept whole) one page at a time, from "
        "a byte offset. A page that does not reach the end ends with a note giving the offset to continue from.",
        {
            "sha256": {
                "type": "string",
                "minLength": 64,
                "maxLength": 64,
                "description": "The artifact's SHA-256, as the cut output names it.",
            },
            "offset": {"type": "integer", "minimum": 0, "description": "Byte offset to start from (default 0)."},
        },
        ["sha256"],
    )

    def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolOutcome:
        sha = str(args["sha256"]).strip().lower()
        if not _SHA256.fullmatch(sha):
            raise ToolError("sha256: must be the 64 hexadecimal digits the cut output names")
        try:
            page = read_artifact(
                ctx.store, sha, offset=args.get("offset", 0), estimate=ctx.estimate, limit_tokens=_page_tokens(ctx)
            )
        except KeyError:
            raise ToolError(f"no artifact {sha[:12]}… in this store") from None
        except ValueError as exc:
            raise ToolError(str(exc)) from None
        return ToolOutcome(page.content)


class WriteFile:
    """``write_file(path, content)``: create a file or replace one the model has read (guarded)."""

    NAME: ClassVar[str] = "write_file"
    MUTATES: ClassVar[bool] = True
    SCHEMA: ClassVar[Mapping[str, Any]] = schema(
        "write_file",
        "Create a file, or replace the whole content of one you have read in this session. Refused when the "
        "file changed since you read it: read it again first.",
        {
            "path": {"type": "string", "minLength": 1, "description": "The file, relative to the workspace root."},
            "content": {"type": "string", "description": "The complete new content."},
        },
        ["path", "content"],
    )

    def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolOutcome:
        absolute, rel = _target(ctx, args["path"])
        expected = _expected(ctx, rel, absolute)
        data = args["content"].encode("utf-8")
        try:
            res = guarded_write(ctx.store, ctx.session_id, absolute, data, expected)
        except StaleFileError as exc:
            return _stale(exc)
        except OSError as exc:
            raise ToolError(f"{rel}: {exc.strerror or exc}") from None
        what = "unchanged (same bytes)" if not res.changed else "created" if expected is None else "updated"
        return ToolOutcome(f"{rel}: {what}, {len(data):,} bytes")


class EditFile:
    """``edit_file(path, old_string, new_string, replace_all=false)``: exact string replacement (guarded)."""

    NAME: ClassVar[str] = "edit_file"
    MUTATES: ClassVar[bool] = True
    SCHEMA: ClassVar[Mapping[str, Any]] = schema(
        "edit_file",
        "Replace an exact string in a file you have read in this session. old_string must occur exactly once "
        "(include enough context) unless replace_all is true. Refused when the file changed since you read it.",
        {
            "path": {"type": "string", "minLength": 1, "description": "The file, relative to the workspace root."},
            "old_string": {"type": "string", "minLength": 1, "description": "The exact text to replace."},
            "new_string": {"type": "string", "description": "The replacement text."},
            "replace_all": {"type": "boolean", "description": "Replace every occurrence (default false)."},
        },
        ["path", "old_string", "new_string"],
    )

    def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolOutcome:
        absolute, rel = _target(ctx, args["path"])
        expected = _expected(ctx, rel, absolute)
        if expected is None:
            raise ToolError(f"{rel}: no such file (create it with write_file)")
        try:
            current: bytes | None = current_bytes(ctx.store, ctx.session_id, absolute)
        except FileNotFoundError:
            current = None
        except OSError as exc:
            raise ToolError(f"{rel}: {exc.strerror or exc}") from None
        if current is None or _sha(current) != expected:
            try:  # the kernel's guard records the ExternalChange and refuses
                guarded_write(ctx.store, ctx.session_id, absolute, current or b"", expected)
            except StaleFileError as exc:
                return _stale(exc)
        try:
            text = (current or b"").decode("utf-8")
        except UnicodeDecodeError:
            raise ToolError(f"{rel}: not UTF-8 text; edit it with the shell tool") from None
        old, new = args["old_string"], args["new_string"]
        if old == new:
            raise ToolError(f"{rel}: old_string and new_string are the same (nothing to change)")
        count = text.count(old)
        if count == 0:
            raise ToolError(f"{rel}: old_string not found (the file is unchanged; re-read it for the exact text)")
        if count > 1 and not args.get("replace_all", False):
            raise ToolError(
                f"{rel}: old_string occurs {count} times; add surrounding context to make it unique, "
                "or set replace_all (the file is unchanged)"
            )
        updated = text.replace(old, new) if args.get("replace_all", False) else text.replace(old, new, 1)
        try:
            guarded_write(ctx.store, ctx.session_id, absolute, updated.encode("utf-8"), expected)
        except StaleFileError as exc:
            return _stale(exc)
        except OSError as exc:
            raise ToolError(f"{rel}: {exc.strerror or exc}") from None
        return ToolOutcome(
            f"{rel}: replaced {count if args.get('replace_all', False) else 1} occurrence"
            f"{'s' if count > 1 and args.get('replace_all', False) else ''}"
        )


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


NEARBY_NAMES = 200
"""At most this many names of the nearest existing folder are listed when a path does not exist."""


def _nearby(ctx: ToolContext, absolute: Path) -> str:
    """``"; <folder> holds: a, b/, ..."`` for the nearest existing folder inside the workspace (sorted names,
    folders with a trailing ``/``, hidden ones left out, at most :data:`NEARBY_NAMES`), so the model can pick
    a real path; ``""`` when that folder cannot be listed."""
    root = Path(ctx.workspace)
    folder = absolute.parent
    while folder != root and not folder.is_dir() and root in folder.parents:
        folder = folder.parent
    try:
        entries = sorted(e.name + ("/" if e.is_dir() else "") for e in folder.iterdir() if not e.name.startswith("."))
    except OSError:
        return ""
    if not entries:
        return ""
    where = "the workspace" if folder == root else str(folder.relative_to(root)) + "/"
    more = f", ... ({len(entries) - NEARBY_NAMES} more)" if len(entries) > NEARBY_NAMES else ""
    return f"; {where} holds: " + ", ".join(entries[:NEARBY_NAMES]) + more
