"""Transcript importers, auto-detected (see :mod:`latch.importers.base` for the contract).

:func:`import_file` reads a file, picks the importer (``format=`` or the highest
``sniff`` score), parses it completely, then appends the session in one
transaction. Errors raise :class:`TranscriptError` and leave the store unchanged.
"""

from __future__ import annotations

from pathlib import Path

from .base import Importer, ParsedSession, TranscriptError

__all__ = ["Importer", "ParsedSession", "TranscriptError", "builtin_importers", "detect", "parse_file", "import_file"]


def builtin_importers() -> list[type[Importer]]:
    """The importer classes shipped with Latch (registered as plugins by default_plugins)."""
    found: list[type[Importer]] = []
    import importlib

    for mod in ("claude_code", "codex", "openai_chat", "anthropic", "swe_agent", "openhands", "aider"):
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
    """The importer with the highest ``sniff`` score; :class:`TranscriptError` when none claims it."""
    best: tuple[int, Importer] | None = None
    head = data[:65536]
    for cls in _available(importers):
        imp = cls()
        score = imp.sniff(path, head)
        if score > 0 and (best is None or score > best[0]):
            best = (score, imp)
    if best is None:
        names = ", ".join(sorted(c.PLUGIN_NAME for c in _available(importers)))
        raise TranscriptError(path, None, f"unrecognized transcript format (known: {names}); pass --format")
    return best[1]


def parse_file(path: str | Path, format: str | None = None, importers: list[type[Importer]] | None = None) -> ParsedSession:
    """Parse ``path`` without touching any store."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise TranscriptError(p, None, f"cannot read: {exc.strerror or exc}") from None
    if format:
        classes = {c.PLUGIN_NAME: c for c in _available(importers)}
        if format not in classes:
            raise TranscriptError(p, None, f"unknown format {format!r} (known: {', '.join(sorted(classes))})")
        imp = classes[format]()
    else:
        imp = detect(p, data, importers)
    return imp.parse(p, data)


def import_file(store, path: str | Path, format: str | None = None,
                importers: list[type[Importer]] | None = None) -> tuple[str, ParsedSession, list[int]]:
    """Parse and append ``path`` to ``store`` in one transaction.

    Returns ``(session_id, parsed, new_seqs)``; importing the same file again
    returns the same session id and no new seqs.
    """
    parsed = parse_file(path, format, importers)
    sid, seqs = store.import_session(
        external_key=parsed.external_key, source=parsed.source, format=parsed.format,
        workspace=parsed.workspace, events=parsed.events, meta=parsed.meta, artifacts=parsed.artifacts)
    return sid, parsed, seqs
