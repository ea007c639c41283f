"""``latch import``, ``latch show`` (``latch sessions``: :mod:`latch.cli.listing`; ``latch search``:
:mod:`latch.cli.search`)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import TypeVar

import click
from rich.console import Console

from .. import importers  # MAX_TRANSCRIPT_BYTES read at use (tests lower it)
from ..events import AssistantMessage, ToolResult, UserMessage
from ..host import reducers as R
from ..host.calls import call_summary, excerpt
from ..host.discover import claimed_format, walk, with_companions
from ..host.discover import discover as find_logs
from ..host.ingest import SessionForgotten, companion_files, import_group
from ..host.kernel import kernel_cache
from ..host.runs import session_liveness
from ..importers.base import TranscriptError
from ..kernel import canonical_state
from ..kernel.events import Tombstone
from ..kernel.tombstones import tombstoned_sessions
from ..store import EventLog, SessionInfo, StoredEvent
from ..textsafe import console, dumps, markup, plural, safe
from .main import AppContext, pass_app
from .params import Count


def _detected(path: str) -> str:
    """The format ``latch import`` would read ``path`` as (detection, as importing does it), or ``unrecognized``
    / ``unreadable`` when the import would fail before reading it."""
    try:
        return claimed_format(path, resemble=True) or "unrecognized"
    except TranscriptError:
        return "unreadable"


def _console() -> Console:
    return console(highlight=False, soft_wrap=False)


def _progress(items: list[T], err: Console, threshold: int = 2) -> Iterator[T]:
    """``items``, with a transient rich progress bar on ``err`` when it is a terminal and there are at
    least ``threshold`` of them (never in a pipe or a test)."""
    if len(items) < threshold or not err.is_terminal:
        yield from items
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    with Progress(TextColumn("importing"), BarColumn(), MofNCompleteColumn(), console=err, transient=True) as bar:
        task = bar.add_task("import", total=len(items))
        for item in items:
            yield item
            bar.advance(task)


_excerpt = excerpt

T = TypeVar("T")


def event_line(ev: StoredEvent) -> str:
    """One-line human rendering of an event (for ``show`` and ``search``), made :func:`~latch.textsafe.safe`."""
    return safe(_event_line(ev))


def _event_line(ev: StoredEvent) -> str:
    e = ev.event
    k = ev.kind
    if isinstance(e, UserMessage):
        return f"user: {_excerpt(e.text)}"
    if isinstance(e, AssistantMessage):
        calls = ", ".join(call_summary(c) for c in e.tool_calls)
        txt = _excerpt(e.text) if e.text else ""
        return f"assistant: {txt}" + (f" [calls: {calls}]" if calls else "")
    if isinstance(e, ToolResult):
        flag = " ERROR" if e.is_error else ""
        flag += " ORPHAN" if e.orphan else ""
        flag += " MISSING" if e.missing else ""
        return f"tool_result({e.call_id}){flag}: {_excerpt(e.content)}"
    text = e.searchable_text()
    return f"{k}: {_excerpt(text)}" if text else k


def _print_whole(ev: StoredEvent) -> None:
    """One event whole: a header line, then its text (and each tool call's arguments), made safe line by line."""
    e = ev.event
    con = _console()
    con.print(f"#{ev.seq} {ev.kind} {ev.ts or ''}".rstrip(), markup=False)
    if isinstance(e, ToolResult):
        con.print(
            safe(f"call {e.call_id}" + (f" ({e.name})" if e.name else "") + (" ERROR" if e.is_error else "")),
            markup=False,
        )
    text = e.text if isinstance(e, AssistantMessage) else e.searchable_text()
    if text:
        con.print(safe(text, multiline=True), markup=False)
    for c in getattr(e, "tool_calls", ()):
        con.print(safe(f"→ {c.name} [{c.id}]"), markup=False)
        con.print(
            safe(dumps(c.args(), indent=2) if isinstance(c.args(), dict) else c.arguments, multiline=True), markup=False
        )


def _stdin_copy(app: AppContext) -> Path:
    """Read stdin (bytes, at most :data:`latch.importers.MAX_TRANSCRIPT_BYTES`) into ``stdin/<sha256[:16]>``
    beside the store (a temporary folder for an in-memory store) and return that path. Raises
    ``click.ClickException`` when stdin is a terminal, empty or over the limit (nothing is written then)."""
    import hashlib
    import sys
    import tempfile

    stream = sys.stdin
    if stream is None or stream.isatty():
        raise click.ClickException("-: stdin is a terminal; pipe a transcript in (latch import - < FILE)")
    raw = getattr(stream, "buffer", None)
    limit = importers.MAX_TRANSCRIPT_BYTES
    data = raw.read(limit + 1) if raw is not None else stream.read(limit + 1).encode()
    if len(data) > limit:
        raise click.ClickException(
            f"-: stdin holds more than {limit:,} bytes, the transcript limit (LATCH_MAX_TRANSCRIPT_BYTES raises it)"
        )
    if not data.strip():
        raise click.ClickException("-: stdin is empty")
    folder = Path(tempfile.mkdtemp(prefix="latch-stdin-")) if app.db == ":memory:" else app.db_path().parent / "stdin"
    if app.db != ":memory:":
        app.created(folder)  # a failed import removes the copy and the folders it made
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / hashlib.sha256(data).hexdigest()[:16]
    if not path.is_file() or path.read_bytes() != data:
        app.created(path)
        tmp = path.with_name(path.name + ".part")
        tmp.write_bytes(data)
        os.replace(tmp, path)
    return path


def _visible_sessions(store: EventLog) -> list[SessionInfo]:
    dead = tombstoned_sessions(store)
    return [s for s in store.sessions() if s.id not in dead]


def register(cli: click.Group) -> None:
    @cli.command("import")
    @click.argument("files", nargs=-1, type=click.Path())
    @click.option("--format", "fmt", default=None, help="Transcript format (default: auto-detect).")
    @click.option(
        "--live",
        is_flag=True,
        help="The transcript is still being written: store only its settled events; the open tail "
        "(e.g. a response still streaming) waits for the next import.",
    )
    @click.option(
        "--discover",
        is_flag=True,
        help="Find the logs in each harness's default place (~/.claude/projects, ~/.codex/sessions, "
        "~/.gemini/tmp, Goose's and OpenCode's data folders, ~/.copilot/session-state).",
    )
    @click.option(
        "--since",
        type=click.DateTime(formats=["%Y-%m-%d"]),
        default=None,
        help="With --discover: only files modified on or after this day (YYYY-MM-DD, local time).",
    )
    @click.option(
        "--project",
        default=None,
        metavar="SUBSTRING",
        help="With --discover: only files whose path contains SUBSTRING.",
    )
    @click.option(
        "--dry-run",
        is_flag=True,
        help="List what would be imported (path and detected format); import nothing, create no store.",
    )
    @click.option(
        "--as-new",
        "as_new",
        is_flag=True,
        help="Import a transcript that reuses the id of a stored session from another file (its first "
        "records differ) as its own session, instead of refusing it.",
    )
    @pass_app
    def import_cmd(
        app: AppContext,
        files: tuple[str, ...],
        fmt: str | None,
        live: bool,
        discover: bool,
        since: datetime | None,
        project: str | None,
        dry_run: bool,
        as_new: bool,
    ) -> None:
        """Import transcript FILES into the store (idempotent; a forgotten session takes no new events).

        ``-`` reads one transcript from stdin (at most the transcript size limit,
        ``LATCH_MAX_TRANSCRIPT_BYTES``); it is kept as ``stdin/<sha256>`` beside the store, the session's
        source, so importing the same bytes again adds nothing.

        A FILES entry that is a folder is walked: every regular file under it that an importer
        recognizes is imported, in path order (hidden folders are not entered); the others are
        counted and listed as skipped. ``--discover`` finds the logs in each harness's default place.

        A Claude Code session file brings its sub-agent files (``<sessionId>/subagents/agent-*.jsonl``):
        they import as child sessions of it (``latch sessions`` shows the parent).

        A session is its format's own id, its source path and its first records: a copy of a stored
        transcript (moved, or saved with a BOM, CRLF, UTF-16 or other whitespace) imports as that session
        (nothing new); a different file that reuses a stored id is refused (``--as-new``: its own session).

        Every file is tried; each one that cannot be imported leaves the store unchanged and is one
        line on stderr at the end; the command then exits 1.
        """
        if discover and files:
            raise click.UsageError("give FILES or --discover, not both")
        if not discover and not files:
            raise click.UsageError("give FILES (or folders) to import, or --discover")
        if not discover and (since is not None or project is not None):
            raise click.UsageError("--since and --project go with --discover")
        stdin_copy = None  # the copy of stdin: removed when it fails to import, so an error names stdin instead
        if "-" in files:
            if files.count("-") > 1:
                raise click.UsageError("'-' (stdin) can be given once")
            if dry_run:
                raise click.UsageError("--dry-run does not read stdin ('-')")
            stdin_copy = str(_stdin_copy(app))
            files = tuple(stdin_copy if f == "-" else f for f in files)
        con, err = _console(), console(stderr=True, highlight=False)
        errors: list[str] = []
        skipped: list[str] = []
        # (path, format or None when the importer is picked at import time)
        todo: list[tuple[str, str | None]] = []
        if discover:
            candidates = [str(f.path) for f in find_logs(since=since, project=project)]
            scan = True
        else:
            candidates, scan = [], False
            for f in files:
                if os.path.isdir(f):
                    candidates.extend(str(q) for q in walk(f))
                    scan = True
                else:
                    candidates.append(f)
        explicit = set() if discover else {str(Path(f)) for f in files if not os.path.isdir(f)}
        for f in (str(q) for q in with_companions(candidates)):  # a parent's sub-agent files come right after it
            if f in explicit or fmt:
                todo.append((f, fmt))
                continue
            try:
                found = claimed_format(f)
            except TranscriptError as exc:  # unreadable
                errors.append(str(exc))
                continue
            if found is None:
                skipped.append(f)
            else:
                todo.append((f, found))
        unreadable = len(errors)
        held_back = 0
        if dry_run:
            for f, found in todo:
                click.echo(f"{safe(f)}\t{safe(found or _detected(f))}")  # PATH<TAB>FORMAT, one a line
            con.print(f"{plural(len(todo), 'file')} would be imported")
        else:
            store = app.store()
            held_back = 0  # files not imported because another file of their group is bad
            groups: list[list[str]] = []  # a Claude Code session and its sub-agent files: imported together
            companions: set[str] = set()
            for f, _found in todo:
                if groups and f in companions:
                    groups[-1].append(f)
                else:
                    groups.append([f])
                    companions = {str(c) for c in companion_files(f)}
            for group in _progress(groups, err):
                forgotten: list[str] = []
                try:
                    # every session of each file (a Goose or OpenCode database holds several), and a session's
                    # sub-agent files with it: one transaction, all or nothing
                    results = import_group(store, list(group), fmt, final=not live, forgotten=forgotten, as_new=as_new)
                except SessionForgotten as exc:
                    con.print(markup(str(exc)), style="yellow")
                    continue
                except TranscriptError as exc:
                    # the bad file is one of the group, or a file its first transcript reads itself (a Cline
                    # task's ui_messages.json beside api_conversation_history.json): then it stands for that one
                    bad = next((g for g in group if str(g) == str(exc.path)), group[0])
                    others = [g for g in group if g is not bad]
                    errors.append(
                        str(exc)
                        + (
                            f" (nothing of {group[0]} and its {len(group) - 1} sub-agent file(s) was imported)"
                            if others
                            else ""
                        )
                    )
                    held_back += len(others)
                    continue
                for sid in forgotten:
                    con.print(
                        f"{markup(group[0])}: session {markup(sid)} is forgotten (tombstoned by `latch "
                        "forget`); nothing imported",
                        style="yellow",
                    )
                for f, imported in zip(group, results, strict=False):
                    for sid, parsed, seqs in imported:
                        con.print(
                            f"{markup(f)}: session [bold]{markup(sid)}[/bold] ({markup(parsed.format)}), "
                            f"{plural(len(seqs), 'new event')}"
                        )
        if scan and skipped:
            con.print(
                f"{plural(len(skipped), 'file')} skipped (no importer recognizes them): "
                + ", ".join(markup(s) for s in skipped),
                soft_wrap=True,
                highlight=False,
            )
        elif scan and not todo and not errors:
            con.print("no transcripts found", style="yellow")
        for message in errors:
            if stdin_copy is not None:
                message = message.replace(stdin_copy, "stdin (-)")
            err.print(f"Error: {markup(message)}", soft_wrap=True)
        total = len(todo) + unreadable
        if errors and total > 1:
            err.print(f"{len(errors) + held_back} of {plural(total, 'file')} not imported")
        if errors:
            raise SystemExit(1)

    @cli.command("show")
    @click.argument("session")
    @click.option("--limit", type=Count(min=1), default=None, help="Show at most this many events.")
    @click.option(
        "--event",
        "event_seq",
        type=Count(min=1),
        default=None,
        metavar="SEQ",
        help="Print the event SEQ (as the list numbers it) whole.",
    )
    @click.option(
        "--json",
        "as_json",
        is_flag=True,
        help="Print what the UIs show as JSON: transcript, usage, costs, context, cache epochs, state.",
    )
    @pass_app
    def show_cmd(app: AppContext, session: str, limit: int | None, event_seq: int | None, as_json: bool) -> None:
        """Show the events of SESSION (id or unique prefix): each tool call with its command or path, each
        result's first line; --event SEQ prints one event whole."""
        store = app.store(create=False)
        try:
            info = store.session(session)
        except KeyError as exc:
            raise click.ClickException(str(exc.args[0])) from None
        if event_seq is not None:
            try:
                ev = store.get(event_seq)
            except KeyError:
                ev = None
            if ev is None or ev.session_id != info.id:
                raise click.ClickException(
                    f"session {info.id} has no event {event_seq} (its events are {info.first_seq}..{info.last_seq})"
                )
            if as_json:
                click.echo(
                    dumps(
                        {
                            "seq": ev.seq,
                            "session": ev.session_id,
                            "kind": ev.kind,
                            "ts": ev.ts,
                            "event": ev.event.to_payload(),
                        },
                        indent=2,
                    )
                )
                return
            _print_whole(ev)
            return
        if as_json:  # the shared reducers, as `latch web` and `latch tui` show them (--limit: the first N events)
            state = canonical_state(store, info.id, cache=kernel_cache())
            events = list(store.events(info.id, limit=limit))
            live, _ = session_liveness(events)  # the durable run lifecycle: a killed run is not live
            view = R.session_view(events, state, live=live)
            click.echo(dumps({"session": info.id, **view}, indent=2))
            return

        tombstones = sum(1 for _ in store.events(info.id, kinds=[Tombstone.KIND]))
        forgotten = (
            " [yellow]forgotten (tombstoned by `latch forget`)[/yellow]"
            if info.id in tombstoned_sessions(store)
            else ""
        )
        con = _console()
        con.print(
            f"session [bold]{markup(info.id)}[/bold] format={markup(info.format)} source={markup(info.source)} "
            f"events={info.events - tombstones}{forgotten}"
        )
        for ev in store.events(info.id, limit=limit):
            con.print(f"{ev.seq:>7}  {event_line(ev)}", markup=False)
