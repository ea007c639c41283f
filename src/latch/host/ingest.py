"""Ingest: append a parsed transcript to the store (the host side of :mod:`latch.importers`).

:func:`import_file` reads a file, picks the importer (``format=`` or the highest ``sniff`` score
among the registered importers), parses it completely, then appends the session in one
transaction. Errors raise :class:`~latch.importers.TranscriptError` and leave the store unchanged.
See :mod:`latch.importers` for how a grown transcript is re-imported.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path
from typing import Any

from .. import __version__
from .. import importers as _importers
from ..events import Event, JSONNestingError, SubagentMarker, canonical_json, json_loads, same_event
from ..importers.base import Importer, ParsedSession, SessionForgotten, TranscriptError
from ..kernel.tombstones import tombstoned_sessions
from ..plugins import get_plugin_manager, registered_importers
from ..store import EventLog, EventStore, PendingEvent

__all__ = [
    "import_file",
    "import_all",
    "import_group",
    "import_parsed",
    "parse_file",
    "parse_all_file",
    "available_importers",
    "SessionForgotten",
    "same_record",
    "HEAD_RECORDS",
    "imported_session_ids",
    "FINGERPRINTED_FORMATS",
]

HEAD_RECORDS = 4
"""How many of a session's first records identify it (with its format's own id and its source path)."""


def available_importers(importers: list[type[Importer]] | None = None) -> list[type[Importer]]:
    """``importers``, or the importers registered with the plugin manager when ``None``."""
    return list(registered_importers().values()) if importers is None else importers


def parse_file(
    path: str | Path, format: str | None = None, importers: list[type[Importer]] | None = None, *, live: bool = False
) -> ParsedSession:
    """:func:`latch.importers.parse_file` over the registered importers (when ``importers`` is ``None``)."""
    return _importers.parse_file(path, format, available_importers(importers), live=live)


def parse_all_file(
    path: str | Path, format: str | None = None, importers: list[type[Importer]] | None = None, *, live: bool = False
) -> list[ParsedSession]:
    """:func:`latch.importers.parse_all_file` over the registered importers (when ``importers`` is ``None``)."""
    return _importers.parse_all_file(path, format, available_importers(importers), live=live)


def import_file(
    store: EventStore,
    path: str | Path,
    format: str | None = None,
    importers: list[type[Importer]] | None = None,
    *,
    final: bool = False,
    as_new: bool = False,
) -> tuple[str, ParsedSession, list[int]]:
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

    Identity: a session is its format's own id (``parsed.external_key``), its source path and its first
    records (:data:`HEAD_RECORDS` events). A file at another path whose id is stored but whose first
    records differ is a different transcript reusing the id: :class:`TranscriptError` naming both files
    (store unchanged), or with ``as_new`` its own session (key ``<id>#<hash of its first record>``; later
    imports of that file find it again, with or without ``as_new``; ``as_new`` changes nothing else). A copy at another path that reads the same once line endings and
    trailing whitespace are set aside (:func:`same_record`: a BOM, CRLF, UTF-16, re-indented JSON) is the same
    session, and a format with no id of its own (a content hash) finds the stored copy by its first
    records. ``parsed.external_key`` is set to the key the session is stored under.
    A file holding several sessions (a Goose or OpenCode database, an Aider history) imports only the session its
    importer's ``parse`` returns; :func:`import_all` imports every one.
    """
    parsed = parse_file(path, format, importers, live=not final)
    sid, seqs = import_parsed(store, path, parsed, final=final, as_new=as_new)
    return sid, parsed, seqs


def import_parsed(
    store: EventStore, path: str | Path, parsed: ParsedSession, *, final: bool = False, as_new: bool = False
) -> tuple[str, list[int]]:
    """Append ``parsed``, one session :func:`parse_all_file` read from ``path``, as :func:`import_file` appends the
    session it parses itself (identity, ``final``, ``as_new``, re-imports append only new events): for a file of
    several sessions parsed once, one of them without parsing the file again. Returns ``(session_id, new_seqs)``;
    raises like :func:`import_file`, the store unchanged."""
    plan = _plan(store, Path(path), parsed, final, as_new)
    if plan is None:
        return store.session_id_for(parsed.external_key), []  # nothing settled yet: no empty session
    return store.import_session(**plan)


def import_all(
    store: EventStore,
    path: str | Path,
    format: str | None = None,
    importers: list[type[Importer]] | None = None,
    *,
    final: bool = False,
    forgotten: list[str] | None = None,
    as_new: bool = False,
) -> list[tuple[str, ParsedSession, list[int]]]:
    """Parse and append EVERY session of ``path`` to ``store`` in one transaction (all or nothing).

    Returns ``[(session_id, parsed, new_seqs)]``, one per session of the file in the file's order
    (:meth:`~latch.importers.base.Importer.parse_all`: one for most formats, each session of a Goose
    or OpenCode database). Each session is checked and appended as :func:`import_file` does (``final``,
    ``live`` parsing, identity and ``as_new``, re-imports append only new events); a session with nothing to store yet creates
    none and has no seqs. Raises :class:`TranscriptError` or :class:`SessionForgotten` (store
    unchanged: no session of the file is stored) for the first session that cannot be imported.
    Given a ``forgotten`` list, a tombstoned session is skipped instead (left out of the result, its
    session id appended to the list), so forgetting one session of a database does not block the rest.
    """
    return import_group(store, [path], format, importers, final=final, forgotten=forgotten, as_new=as_new)[0]


FINGERPRINTED_FORMATS = frozenset(
    {
        "claude-code",
        "codex",
        "openai-chat",
        "anthropic-messages",
        "gemini-cli",
        "copilot-cli",
        "aider",
        "swe-agent",
        "mini-swe-agent",
        "openhands",
        "antigravity",
        "merged-messages",
    }
)
"""The formats whose parse reads nothing but the file's own bytes, so that the bytes alone say a re-import finds
nothing new (:func:`imported_session_ids`). Not Cline (it reads ``ui_messages.json`` beside the file) nor the
SQLite containers (Goose, OpenCode: a ``-wal`` file beside them holds changes the main file's bytes lack)."""


def imported_session_ids(
    store: EventStore,
    path: str | Path,
    format: str | None = None,
    *,
    final: bool = False,
    forgotten: list[str] | None = None,
    companions: bool = False,
) -> list[str]:
    """The session ids :func:`import_all` ``(store, path, format, final=final, forgotten=forgotten)`` returns, in
    file order, after importing ``path`` the same way; raises what it raises.

    With ``companions``, the files :func:`companion_files` names (a Claude Code session's sub-agent files
    ``<sessionId>/subagents/agent-*.jsonl``) are imported with ``path`` in one transaction, as ``latch import``
    does (:func:`import_group`: a sub-agent file that does not parse leaves the parent unimported too), and
    their sessions' ids follow the file's, in :func:`companion_files` order. Not with a ``format`` other than
    ``claude-code``.

    A re-import of the same bytes is not parsed again: each import of a file whose sessions are all of
    :data:`FINGERPRINTED_FORMATS` records the SHA-256 and size of the bytes it read
    (:meth:`~latch.store.EventStore.record_import_fingerprint`, keyed by the file's resolved path and the
    options: ``format``, ``final``, the Latch version and the loaded plugins with their versions); when the
    file's bytes are those recorded and every recorded session is still stored, parsing them again would find
    the same sessions (same path, same first records: the same identity) and no new event, so
    their ids are returned from the record (for a group: when every file of it is so). A forgotten session
    (``latch forget``) is still refused (:class:`SessionForgotten`) or, with ``forgotten``, skipped and listed
    there. Any other file, option or store state imports as :func:`import_all` does. Costs one read and one
    SHA-256 of each file (milliseconds for megabytes) over :func:`import_all` on a first import.
    """
    p = Path(path)
    group = [p, *(companion_files(p) if companions and format in (None, "claude-code") else [])]
    seen = [_fingerprint(q) for q in group]
    options = _fingerprint_options(format, final)
    recorded_ids: list[str] = []
    for q, fp in zip(group, seen, strict=True):
        recorded = store.import_fingerprint(str(q.resolve()), options) if fp is not None else None
        if (
            recorded is None
            or fp is None
            or recorded[:2] != fp[:2]
            or not recorded[2]
            or not all(_stored(store, key) for key in recorded[2])
        ):
            break
        recorded_ids.extend(store.session_id_for(key) for key in recorded[2])
    else:
        dead = tombstoned_sessions(store)
        if forgotten is None and dead.intersection(recorded_ids):
            raise SessionForgotten(p, next(sid for sid in recorded_ids if sid in dead))
        if forgotten is not None:
            forgotten.extend(sid for sid in recorded_ids if sid in dead)
        return [sid for sid in recorded_ids if sid not in dead]
    results = import_group(store, list(group), format, final=final, forgotten=forgotten)
    for q, fp, imported in zip(group, seen, results, strict=True):
        if (
            fp is not None
            and imported
            and not forgotten
            and _fingerprint_stat(q) == fp[2]
            and all(
                parsed.format in FINGERPRINTED_FORMATS and _stored(store, parsed.external_key)
                for _, parsed, _ in imported
            )
        ):
            store.record_import_fingerprint(
                str(q.resolve()), options, fp[0], fp[1], [parsed.external_key for _, parsed, _ in imported]
            )
    return [sid for imported in results for sid, _, _ in imported]


def _fingerprint_stat(path: Path) -> tuple[int, int, int] | None:
    """``(size, mtime in ns, inode)`` of a regular file, else ``None``."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_size, st.st_mtime_ns, st.st_ino) if stat.S_ISREG(st.st_mode) else None


def _fingerprint(path: Path) -> tuple[str, int, tuple[int, int, int]] | None:
    """``(SHA-256 hex, size, stat)`` of the regular file ``path`` as it reads now, or ``None`` (not a regular
    file, over the size limit, unreadable, changed while read, or an SQLite file: :func:`import_all` then says
    what it says)."""
    before = _fingerprint_stat(path)
    if before is None or before[0] > _importers.MAX_TRANSCRIPT_BYTES:
        return None
    digest, size = hashlib.sha256(), 0
    try:
        with open(path, "rb") as fh:  # hashed in chunks: memory stays bounded whatever the file's size
            first = fh.read(1 << 20)
            if first.startswith(b"SQLite format 3\0"):
                return None
            chunk = first
            while chunk:
                digest.update(chunk)
                size += len(chunk)
                chunk = fh.read(1 << 20)
    except OSError:
        return None
    if _fingerprint_stat(path) != before or size != before[0]:
        return None
    return digest.hexdigest(), size, before


def _fingerprint_options(format: str | None, final: bool) -> str:
    """The options an import fingerprint is valid for (see :func:`imported_session_ids`), as one string."""
    plugins = sorted(f"{info.name} {info.version or ''}" for info in get_plugin_manager().infos.values())
    return json.dumps({"format": format, "final": final, "latch": __version__, "plugins": plugins}, sort_keys=True)


def import_group(
    store: EventStore,
    paths: list[str | Path],
    format: str | None = None,
    importers: list[type[Importer]] | None = None,
    *,
    final: bool = False,
    forgotten: list[str] | None = None,
    as_new: bool = False,
) -> list[list[tuple[str, ParsedSession, list[int]]]]:
    """:func:`import_all` of several files in ONE transaction: every session of every file is stored, or none.

    For a Claude Code session and its sub-agent files (:func:`companion_files`): a sub-agent file that does not
    parse leaves the parent unimported too, so the store never holds a parent whose children are missing.
    Returns one :func:`import_all` result per path, in order. Raises :class:`TranscriptError` (its ``path`` is
    the file at fault) or :class:`SessionForgotten`, the store unchanged.
    """
    files = [(Path(path), parse_all_file(Path(path), format, importers, live=not final)) for path in paths]
    dead = tombstoned_sessions(store) if forgotten is not None else set()
    per_file: list[list[ParsedSession]] = []
    for _, sessions in files:
        keep = []
        for parsed in sessions:
            sid = store.session_id_for(parsed.external_key)
            if forgotten is not None and sid in dead:
                forgotten.append(sid)
            else:
                keep.append(parsed)
        per_file.append(keep)
    plans = [
        [_plan(store, p, parsed, final, as_new) for parsed in sessions]
        for (p, _), sessions in zip(files, per_file, strict=False)
    ]
    stored = iter(store.import_sessions([plan for group in plans for plan in group if plan is not None]))
    out: list[list[tuple[str, ParsedSession, list[int]]]] = []
    for sessions, group in zip(per_file, plans, strict=False):
        done: list[tuple[str, ParsedSession, list[int]]] = []
        for parsed, plan in zip(sessions, group, strict=False):
            if plan is None:
                done.append((store.session_id_for(parsed.external_key), parsed, []))
            else:
                sid, seqs = next(stored)
                done.append((sid, parsed, seqs))
        out.append(done)
    return out


def _plan(
    store: EventStore, path: Path, parsed: ParsedSession, final: bool, as_new: bool = False
) -> dict[str, Any] | None:
    """The :meth:`EventStore.import_session` arguments for ``parsed`` (only its new events), or ``None``
    when there is nothing to store and no session yet. Raises like :func:`import_file`."""
    parsed.external_key = _identity(store, path, parsed, as_new)
    _refuse_forgotten(store, path, parsed.external_key)
    events = _new_events(store, path, parsed.external_key, parsed.events if final else parsed.settled_events)
    if not events and not final and not _stored(store, parsed.external_key):
        return None
    return dict(
        external_key=parsed.external_key,
        source=parsed.source,
        format=parsed.format,
        workspace=parsed.workspace,
        events=events,
        meta=parsed.meta,
        artifacts=parsed.artifacts,
        parent_key=parsed.parent_key,
    )


def companion_files(path: str | Path) -> list[Path]:
    """Transcripts that belong with ``path`` and are imported with it: a Claude Code session
    ``<sessionId>.jsonl``'s sub-agent files ``<sessionId>/subagents/agent-*.jsonl`` (sorted), else ``[]``."""
    p = Path(path)
    folder = p.with_suffix("") / "subagents"
    if p.suffix != ".jsonl" or not folder.is_dir():
        return []
    return sorted(q for q in folder.glob("agent-*.jsonl") if q.is_file())


def subagent_call(store: EventLog, session_id: str) -> str | None:
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
    stored = {
        e.source_ref: e.event for e in store.events(store.session_id_for(external_key)) if e.source_ref is not None
    }
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
            raise TranscriptError(
                path,
                _where(pe.source_ref),
                f"already imported, but it now comes after "
                f"{_where(first_new)}, which is new: the file changed before its end",
            )
        elif not same_record(old, pe.event):  # arguments by value: stores predate canonical_arguments
            raise TranscriptError(
                path,
                _where(pe.source_ref),
                "reads differently from when it was imported: the "
                "file was edited, or another transcript has the same identity "
                f"({external_key}); import a transcript that is still being written with --live",
            )
    return [pe for pe in events if pe.source_ref not in stored]


def _normalized(value: Any) -> Any:
    """``value`` with every string's line endings made ``\\n``, each line's trailing whitespace removed, runs
    of blank lines made one and leading/trailing blank lines dropped, recursively (dicts, lists; tool-call
    ``arguments`` that are JSON by their parsed value)."""
    if isinstance(value, str):
        lines = [line.rstrip() for line in value.replace("\r\n", "\n").replace("\r", "\n").split("\n")]
        # a run of blank lines counts as one: a reader may keep a whitespace-only line that it drops when empty
        return "\n".join(line for i, line in enumerate(lines) if line or i == 0 or lines[i - 1]).strip("\n")
    if isinstance(value, dict):
        return {k: _normalized(_arguments(v) if k == "arguments" else v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_normalized(v) for v in value]
    return value


def _arguments(value: Any) -> Any:
    """A tool call's ``arguments``: the parsed JSON value when it parses, else ``value`` itself."""
    if not isinstance(value, str):
        return value
    try:
        return json_loads(value)
    except (ValueError, JSONNestingError):
        return value


def same_record(old: Event, new: Event) -> bool:
    """Whether a stored event and a re-parsed one are the same record of a transcript: :func:`same_event`
    (tool-call arguments by value), or equal once line endings and trailing whitespace in every string are
    set aside (the same transcript saved with CRLF or with trailing whitespace)."""
    if same_event(old, new):
        return True
    if old.KIND != new.KIND:
        return False
    return canonical_json(_normalized(old.to_payload())) == canonical_json(_normalized(new.to_payload()))


def _first_record_hash(events: list[PendingEvent]) -> str:
    """12 hex digits of SHA-256 over the first event's ``source_ref``, kind and normalized payload."""
    pe = events[0]
    text = canonical_json([pe.source_ref, pe.event.KIND, _normalized(pe.event.to_payload())])
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:12]


def _session_for_key(store: EventStore, key: str) -> Any:
    """The stored session whose ``external_key`` is ``key``, else ``None``."""
    try:
        info = store.session(store.session_id_for(key))
    except KeyError:
        return None
    return info if info.external_key == key else None


def _head(store: EventStore, session_id: str) -> list[Any]:
    """The session's first :data:`HEAD_RECORDS` stored events (legacy end-of-file placeholders left out)."""
    stored = store.events(session_id, limit=HEAD_RECORDS * 4)
    return [e for e in stored if not getattr(e.event, "eof_placeholder", False)][:HEAD_RECORDS]


def _head_holds(store: EventStore, session_id: str, events: list[PendingEvent]) -> bool:
    """Whether the parse still holds the stored session's first records: each of them that the parse has
    (an abandoned Claude Code branch is not in it) reads the same (:func:`same_record`), and at least one is."""
    head = _head(store, session_id)
    if not head:
        return True
    parsed = {pe.source_ref: pe.event for pe in events if pe.source_ref is not None}
    shared = [(e.event, parsed[e.source_ref]) for e in head if e.source_ref in parsed]
    return bool(shared) and all(same_record(old, new) for old, new in shared)


def _stored_copy(store: EventStore, fmt: str, events: list[PendingEvent], key: str) -> str | None:
    """The ``external_key`` of a stored session of format ``fmt`` with no id of its own (a content hash key)
    whose first records are the parse's first records, one for one (a re-encoded copy), else ``None``.
    A stored key that ``key`` extends (``<stored>:<part>``: an Aider run of a file that an earlier release
    stored as one whole-file session) names a session holding more than this one, not a copy of it."""
    want = events[:HEAD_RECORDS]
    for info in store.sessions():
        if info.format != fmt or not info.external_key or ":sha256:" not in info.external_key:
            continue
        if key.startswith(info.external_key + ":"):
            continue
        head = _head(store, info.id)
        if len(head) != len(want):
            continue
        if all(
            e.source_ref == pe.source_ref and same_record(e.event, pe.event) for e, pe in zip(head, want, strict=False)
        ):
            return info.external_key
    return None


def _identity(store: EventStore, path: Path, parsed: ParsedSession, as_new: bool) -> str:
    """The ``external_key`` ``parsed`` is stored under (see :func:`import_file`, "Identity"); raises
    :class:`TranscriptError` for a different transcript that reuses a stored id (without ``as_new``)."""
    key, events = parsed.external_key, parsed.events
    if not events:
        return key
    alias = f"{key}#{_first_record_hash(parsed.settled_events or events)}"  # settled: the same as the file grows
    if _session_for_key(store, alias) is not None:
        return alias  # imported with as_new before
    info = _session_for_key(store, key)
    if info is not None:
        if info.source is not None and Path(info.source) == Path(parsed.source):
            return key  # the same file: grown, or edited (an edit is refused by _new_events)
        if _head_holds(store, info.id, events):
            return key  # a copy of it (moved, re-encoded)
        if as_new:
            return alias
        raise TranscriptError(
            path,
            None,
            f"a different transcript with the id of session {info.id} ({key}), "
            f"imported from {info.source}: its first records differ; nothing imported "
            "(--as-new imports it as its own session)",
        )
    if ":sha256:" in key:  # no id of its own: a re-encoded copy of a stored transcript is that session
        return _stored_copy(store, parsed.format, events, key) or key
    return key
