"""Transcript importers, auto-detected (see :mod:`latch.importers.base` for the contract).

:func:`import_file` reads a file, picks the importer (``format=`` or the highest
``sniff`` score), parses it completely, then appends the session in one
transaction. Errors raise :class:`TranscriptError` and leave the store unchanged.

Agents append to their transcripts, and importing a grown file again appends
only its new events to the same session: the store then holds exactly what one
import of the grown file holds. Three things make that hold. The identity
(``external_key``) of a growing format never changes as the file grows (the
transcript's session id, or a hash of its first line). ``source_ref`` s are
line-based. Only the events the transcript has settled are stored
(``ParsedSession.settled``): a response still being written, a call still
running and an Aider turn still printing wait for the next import. A re-import
whose settled events disagree with the ones stored earlier (the file was edited,
or it is another transcript with the same identity) is a ``TranscriptError``.
"""

from __future__ import annotations

from pathlib import Path

from .base import Importer, JSONNestingError, ParsedSession, TranscriptError

__all__ = ["Importer", "ParsedSession", "TranscriptError", "SessionForgotten", "builtin_importers", "detect",
           "parse_file", "import_file"]


def builtin_importers() -> list[type[Importer]]:
    """The importer classes shipped with Latch (registered as plugins by default_plugins)."""
    found: list[type[Importer]] = []
    import importlib

    for mod in ("claude_code", "codex", "openai_chat", "anthropic", "swe_agent", "openhands", "aider", "copilot_cli"):
        try:
            m = importlib.import_module(f"{__name__}.{mod}")
        except ModuleNotFoundError as exc:
            if exc.name == f"{__name__}.{mod}":
                continue
            raise
        found.extend(getattr(m, "IMPORTERS", ()))
    return found


def _available(importers: list[type[Importer]] | None) -> list[type[Importer]]:
    if importers is not None:
        return importers
    try:
        from ..plugins import registered_importers
    except ImportError:
        return builtin_importers()
    return list(registered_importers().values())


def detect(path: Path, data: bytes, importers: list[type[Importer]] | None = None) -> Importer:
    """The importer with the highest ``sniff`` score.

    Raises :class:`TranscriptError`: ``JSON nested too deeply`` when no importer claims the file and
    a sniffer could not parse it for its nesting (a sniffer hitting that is "not mine"), else
    ``unrecognized transcript format``.
    """
    best: tuple[int, Importer] | None = None
    too_deep = False
    head = data[:65536]
    for cls in _available(importers):
        imp = cls()
        try:
            score = imp.sniff(path, head)
        except (JSONNestingError, RecursionError):
            too_deep = True
            continue
        if score > 0 and (best is None or score > best[0]):
            best = (score, imp)
    if best is None:
        if too_deep:
            raise TranscriptError(path, None, "JSON nested too deeply")
        names = ", ".join(sorted(c.PLUGIN_NAME for c in _available(importers)))
        raise TranscriptError(path, None, f"unrecognized transcript format (known: {names}); pass --format")
    return best[1]


def parse_file(path: str | Path, format: str | None = None, importers: list[type[Importer]] | None = None, *,
               live: bool = False) -> ParsedSession:
    """Parse ``path`` without touching any store; ``live=True`` when the file is still being written
    (:attr:`Importer.live`: a half-written last JSONL line is open tail, no conversation yet is no events).

    Raises :class:`TranscriptError` (``FILE: cannot read: REASON``, ``FILE: file is empty`` for a file
    of only whitespace, whatever the format, an unknown or undetectable format, or the importer's
    own error).
    """
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise TranscriptError(p, None, f"cannot read: {exc.strerror or exc}") from None
    if not _decoded_text(data).strip():
        raise TranscriptError(p, None, "file is empty")
    if format:
        classes = {c.PLUGIN_NAME: c for c in _available(importers)}
        if format not in classes:
            raise TranscriptError(p, None, f"unknown format {format!r} (known: {', '.join(sorted(classes))})")
        imp = classes[format]()
    else:
        imp = detect(p, data, importers)
    imp.live = live
    return imp.parse(p, data)


def _decoded_text(data: bytes) -> str:
    """Best-effort text of ``data`` (BOMs and UTF-16 understood) for the emptiness check."""
    if data.startswith(b"\xef\xbb\xbf"):
        return data[3:].decode("utf-8", "replace")
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return data.decode("utf-16", "replace")
    return data.decode("utf-8", "replace")


def import_file(store, path: str | Path, format: str | None = None,
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
    """
    parsed = parse_file(path, format, importers, live=not final)
    _refuse_forgotten(store, Path(path), parsed.external_key)
    events = _new_events(store, Path(path), parsed.external_key, parsed.events if final else parsed.settled_events)
    if not events and not final and not _stored(store, parsed.external_key):
        return store.session_id_for(parsed.external_key), parsed, []  # nothing settled yet: no empty session
    sid, seqs = store.import_session(
        external_key=parsed.external_key, source=parsed.source, format=parsed.format,
        workspace=parsed.workspace, events=events, meta=parsed.meta, artifacts=parsed.artifacts)
    return sid, parsed, seqs


class SessionForgotten(TranscriptError):
    """The transcript's session is tombstoned (``latch forget``); ``session_id`` names it."""

    def __init__(self, path: str | Path, session_id: str):
        self.session_id = session_id
        super().__init__(path, None, f"session {session_id} is forgotten (tombstoned by `latch forget`); "
                                     "nothing imported")

    def __reduce__(self):
        return type(self), (self.path, self.session_id), self.__dict__


def _refuse_forgotten(store, path: Path, external_key: str) -> None:
    from ..kernel.tombstones import tombstoned_sessions

    sid = store.session_id_for(external_key)
    if sid in tombstoned_sessions(store):
        raise SessionForgotten(path, sid)


def _where(source_ref: str) -> str:
    """A ``source_ref`` as an error location like the parsers': ``line:30#usage`` → ``line 30#usage``."""
    kind, _, rest = source_ref.partition(":")
    return f"{kind} {rest}" if rest else kind


def _stored(store, external_key: str) -> bool:
    try:
        store.session(store.session_id_for(external_key))
    except KeyError:
        return False
    return True


def _new_events(store, path: Path, external_key: str, events: list) -> list:
    """The ``events`` not stored yet for this session, after checking that the stored ones are a prefix.

    Each event stored earlier must read the same and come before every new one. Stored events the
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
        old = stored.get(pe.source_ref)
        if old is not None and getattr(old, "eof_placeholder", False):
            old = None  # superseded: the parse places its own event (a result or a placeholder) here
        if old is None:
            first_new = first_new or pe.source_ref
        elif first_new is not None:
            raise TranscriptError(path, _where(pe.source_ref), f"already imported, but it now comes after "
                                  f"{_where(first_new)}, which is new: the file changed before its end")
        elif old != pe.event:
            raise TranscriptError(path, _where(pe.source_ref), "reads differently from when it was imported: the "
                                  "file was edited, or another transcript has the same identity "
                                  f"({external_key}); import a transcript that is still being written with --live")
    return [pe for pe in events if pe.source_ref not in stored]
