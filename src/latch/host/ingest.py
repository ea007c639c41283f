"""Ingest: append a parsed transcript to the store (the host side of :mod:`latch.importers`).

:func:`import_file` reads a file, picks the importer (``format=`` or the highest ``sniff`` score
among the registered importers), parses it completely, then appends the session in one
transaction. Errors raise :class:`~latch.importers.TranscriptError` and leave the store unchanged.
See :mod:`latch.importers` for how a grown transcript is re-imported.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .. import importers as _importers
from ..events import SubagentMarker, same_event
from ..importers.base import Importer, ParsedSession, SessionForgotten, TranscriptError
from ..kernel.tombstones import tombstoned_sessions
from ..plugins import registered_importers
from ..store import EventStore, PendingEvent

__all__ = ["import_file", "import_all", "parse_file", "parse_all_file", "available_importers", "SessionForgotten"]


def available_importers(importers: list[type[Importer]] | None = None) -> list[type[Importer]]:
    """``importers``, or the importers registered with the plugin manager when ``None``."""
    return list(registered_importers().values()) if importers is None else importers


def parse_file(path: str | Path, format: str | None = None, importers: list[type[Importer]] | None = None, *,
               live: bool = False) -> ParsedSession:
    """:func:`latch.importers.parse_file` over the registered importers (when ``importers`` is ``None``)."""
    return _importers.parse_file(path, format, available_importers(importers), live=live)


def parse_all_file(path: str | Path, format: str | None = None, importers: list[type[Importer]] | None = None, *,
                   live: bool = False) -> list[ParsedSession]:
    """:func:`latch.importers.parse_all_file` over the registered importers (when ``importers`` is ``None``)."""
    return _importers.parse_all_file(path, format, available_importers(importers), live=live)


def import_file(store: EventStore, path: str | Path, format: str | None = None,
                importers: list[type[Importer]] | None = None, *,
                final: bool = False) -> tuple[str, ParsedSession, list[int]]:
    """Parse and append ``path`` to ``store`` in one transaction.

    Returns ``(session_id, parsed, new_seqs)``; importing the same file again
    returns the same session id and no new seqs, and importing it after it grew
    appends only the new events. Only ``parsed.settled_events`` are stored
    unless ``final`` is true: the caller declares that the file will not grow
    (a finished session), so its open tail (for example a last answer that no
    later line confirms as complete) is stored too; a file that grows after a
    final import may then disagree with the store. Without ``final`` the file is parsed ``live``
    (:func:`parse_file`): a half-written last line waits, and a file with nothing to store yet (only
    metadata lines) creates no session and returns no seqs.

    Raises :class:`TranscriptError` (store unchanged) when the file cannot be
    parsed, or when an event stored by an earlier import of the same session
    reads differently now or the new events would not come after it;
    :class:`SessionForgotten` (a ``TranscriptError``) when the file's session
    was tombstoned (``latch forget``): a forgotten session takes no new events.
    A file holding several sessions (a Goose or OpenCode database) imports only the session its
    importer's ``parse`` returns; :func:`import_all` imports every one.
    """
    parsed = parse_file(path, format, importers, live=not final)
    plan = _plan(store, Path(path), parsed, final)
    if plan is None:
        return store.session_id_for(parsed.external_key), parsed, []  # nothing settled yet: no empty session
    sid, seqs = store.import_session(**plan)
    return sid, parsed, seqs


def import_all(store: EventStore, path: str | Path, format: str | None = None,
               importers: list[type[Importer]] | None = None, *,
               final: bool = False, forgotten: list[str] | None = None) -> list[tuple[str, ParsedSession, list[int]]]:
    """Parse and append EVERY session of ``path`` to ``store`` in one transaction (all or nothing).

    Returns ``[(session_id, parsed, new_seqs)]``, one per session of the file in the file's order
    (:meth:`~latch.importers.base.Importer.parse_all`: one for most formats, each session of a Goose
    or OpenCode database). Each session is checked and appended as :func:`import_file` does (``final``,
    ``live`` parsing, re-imports append only new events); a session with nothing to store yet creates
    none and has no seqs. Raises :class:`TranscriptError` or :class:`SessionForgotten` (store
    unchanged: no session of the file is stored) for the first session that cannot be imported.
    Given a ``forgotten`` list, a tombstoned session is skipped instead (left out of the result, its
    session id appended to the list), so forgetting one session of a database does not block the rest.
    """
    p = Path(path)
    sessions = parse_all_file(p, format, importers, live=not final)
    if forgotten is not None:
        dead = tombstoned_sessions(store)
        keep = []
        for parsed in sessions:
            sid = store.session_id_for(parsed.external_key)
            if sid in dead:
                forgotten.append(sid)
            else:
                keep.append(parsed)
        sessions = keep
    plans = [_plan(store, p, parsed, final) for parsed in sessions]
    stored = iter(store.import_sessions([plan for plan in plans if plan is not None]))
    out: list[tuple[str, ParsedSession, list[int]]] = []
    for parsed, plan in zip(sessions, plans):
        if plan is None:
            out.append((store.session_id_for(parsed.external_key), parsed, []))
        else:
            sid, seqs = next(stored)
            out.append((sid, parsed, seqs))
    return out


def _plan(store: EventStore, path: Path, parsed: ParsedSession, final: bool) -> dict[str, Any] | None:
    """The :meth:`EventStore.import_session` arguments for ``parsed`` (only its new events), or ``None``
    when there is nothing to store and no session yet. Raises like :func:`import_file`."""
    _refuse_forgotten(store, path, parsed.external_key)
    events = _new_events(store, path, parsed.external_key, parsed.events if final else parsed.settled_events)
    if not events and not final and not _stored(store, parsed.external_key):
        return None
    return dict(external_key=parsed.external_key, source=parsed.source, format=parsed.format,
                workspace=parsed.workspace, events=events, meta=parsed.meta, artifacts=parsed.artifacts,
                parent_key=parsed.parent_key)


def companion_files(path: str | Path) -> list[Path]:
    """Transcripts that belong with ``path`` and are imported with it: a Claude Code session
    ``<sessionId>.jsonl``'s sub-agent files ``<sessionId>/subagents/agent-*.jsonl`` (sorted), else ``[]``."""
    p = Path(path)
    folder = p.with_suffix("") / "subagents"
    if p.suffix != ".jsonl" or not folder.is_dir():
        return []
    return sorted(q for q in folder.glob("agent-*.jsonl") if q.is_file())


def subagent_call(store: EventStore, session_id: str) -> str | None:
    """The parent's tool call that spawned sub-agent session ``session_id``: the ``call_id`` of the parent's
    :class:`~latch.events.SubagentMarker` whose ``agent_id`` is the child's (``meta.agent_id``), else ``None``."""
    info = store.session(session_id)
    agent = info.meta.get("agent_id")
    if info.parent_id is None or not isinstance(agent, str):
        return None
    for e in store.events(info.parent_id, kinds=["subagent_marker"]):
        if isinstance(e.event, SubagentMarker) and e.event.agent_id == agent:
            return e.event.call_id
    return None


def _refuse_forgotten(store: EventStore, path: Path, external_key: str) -> None:

    sid = store.session_id_for(external_key)
    if sid in tombstoned_sessions(store):
        raise SessionForgotten(path, sid)


def _where(source_ref: str | None) -> str:
    """A ``source_ref`` as an error location like the parsers': ``line:30#usage`` → ``line 30#usage``."""
    kind, _, rest = (source_ref or "event").partition(":")
    return f"{kind} {rest}" if rest else kind


def _stored(store: EventStore, external_key: str) -> bool:
    try:
        store.session(store.session_id_for(external_key))
    except KeyError:
        return False
    return True


def _new_events(store: EventStore, path: Path, external_key: str, events: list[PendingEvent]) -> list[PendingEvent]:
    """The ``events`` not stored yet for this session, after checking that the stored ones are a prefix.

    Each event stored earlier must read the same (:func:`latch.events.same_event`: tool-call arguments
    compare by their parsed value, so a store written before :func:`latch.events.canonical_arguments`
    still matches) and come before every new one. Stored events the
    parse no longer has (a Claude Code branch abandoned by a rewind, a legacy end-of-file
    placeholder) are allowed: the store keeps them. Only new events go to the store, so a re-import
    spends no ``seq`` on duplicates and the seqs match those of a single import.
    """
    stored = {e.source_ref: e.event for e in store.events(store.session_id_for(external_key))
              if e.source_ref is not None}
    if not stored:
        return events
    first_new = None
    for pe in events:
        old = stored.get(pe.source_ref) if pe.source_ref is not None else None
        if old is not None and getattr(old, "eof_placeholder", False):
            old = None  # superseded: the parse places its own event (a result or a placeholder) here
        if old is None:
            first_new = first_new or pe.source_ref
        elif first_new is not None:
            raise TranscriptError(path, _where(pe.source_ref), f"already imported, but it now comes after "
                                  f"{_where(first_new)}, which is new: the file changed before its end")
        elif not same_event(old, pe.event):  # arguments by value: stores predate canonical_arguments
            raise TranscriptError(path, _where(pe.source_ref), "reads differently from when it was imported: the "
                                  "file was edited, or another transcript has the same identity "
                                  f"({external_key}); import a transcript that is still being written with --live")
    return [pe for pe in events if pe.source_ref not in stored]
