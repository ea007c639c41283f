"""Sealed port handles: the reader, writer and count cache an engine is given (spec: "Port boundary").

The port exposes no EventStore or SQLite handle, so a replacement engine cannot mutate durable session
truth outside its structured view. The host's adapters (:mod:`latch.host.session`) hold the store; an
engine gets them only through these handles, which hold nothing but their ``session_id``:

* no ``__dict__`` and no slot holding the adapter, the store or a connection;
* methods are plain functions of the class (no closure cell, no bound adapter);
* ``events`` returns a sealed iterator, not the store's generator (whose frame holds the store);
* pickling and copying raise ``TypeError``.

The adapter behind a handle lives in a module-private table keyed by the handle's identity and is
dropped with the handle. Limits: this closes every path through the handle's own state
(attributes, ``vars``, ``gc.get_referents``, closures, frames, ``__reduce_ex__``); Python code in the same
process can still import :mod:`latch.store` and open the database file itself, which no in-process
boundary prevents.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from ..events import MediaRef
from ..port import CanonicalStateView, KernelWriter, SessionReader, TokenCountCache

__all__ = ["seal_reader", "seal_writer", "seal_token_counts", "SealedReader", "SealedWriter", "SealedTokenCounts"]

_HELD: dict[int, Any] = {}
"""The adapter behind each live handle, keyed by ``id(handle)`` (an entry leaves with its handle)."""


class _Sealed:
    __slots__ = ()

    def _hold(self, target: Any) -> None:
        _HELD[id(self)] = target

    def __del__(self) -> None:
        _HELD.pop(id(self), None)

    def __reduce_ex__(self, protocol: Any) -> Any:
        raise TypeError(f"a sealed {type(self).__name__} cannot be pickled or copied")

    def __copy__(self) -> Any:
        raise TypeError(f"a sealed {type(self).__name__} cannot be copied")

    def __deepcopy__(self, memo: Any) -> Any:
        raise TypeError(f"a sealed {type(self).__name__} cannot be copied")


def _target(handle: _Sealed) -> Any:
    return _HELD[id(handle)]


class _SealedIterator(_Sealed):
    """An iterator over events whose generator (and the store its frame holds) is not reachable from it."""

    __slots__ = ()

    def __init__(self, it: Iterator[Any]):
        self._hold(it.__next__)  # the bound method (it holds the generator): one call per event read

    def __iter__(self) -> _SealedIterator:
        return self

    def __next__(self) -> Any:
        return _HELD[id(self)]()


class SealedReader(_Sealed):
    """:class:`~latch.port.SessionReader` of one session, over a host adapter it does not expose."""

    __slots__ = ("session_id",)

    def __init__(self, reader: SessionReader):
        self.session_id = reader.session_id
        self._hold(reader)

    def events(
        self, *, after_seq: int = 0, until_seq: int | None = None, kinds: Sequence[str] | None = None
    ) -> Iterator[Any]:
        """This session's events with ``after_seq < seq <= until_seq``, in seq order."""
        return _SealedIterator(iter(_target(self).events(after_seq=after_seq, until_seq=until_seq, kinds=kinds)))

    def search(
        self,
        query: str,
        *,
        limit: int = 20,
        before_seq: int | None = None,
        until_seq: int | None = None,
        mode: str = "or",
    ) -> list[Any]:
        """FTS over this session, newest first (a list)."""
        return list(_target(self).search(query, limit=limit, before_seq=before_seq, until_seq=until_seq, mode=mode))

    def max_seq(self) -> int:
        """The newest seq of this session (0 when it has no events)."""
        return int(_target(self).max_seq())

    def get_artifact(self, sha256: str) -> tuple[MediaRef, bytes]:
        """An artifact's reference and exact bytes; ``KeyError`` when unknown."""
        ref, data = _target(self).get_artifact(sha256)
        return ref, bytes(data)

    def canonical_state(self, until_seq: int | None = None) -> CanonicalStateView:
        """The kernel's canonical state as of ``until_seq`` (it holds no store)."""
        state: CanonicalStateView = _target(self).canonical_state(until_seq)
        return state


class SealedWriter(_Sealed):
    """:class:`~latch.port.KernelWriter` of one stream, over a host adapter it does not expose."""

    __slots__ = ("session_id",)

    def __init__(self, writer: KernelWriter):
        self.session_id = getattr(writer, "session_id", None)
        self._hold(writer)

    def append(self, kind: str, at_seq: int, payload: Mapping[str, Any]) -> int:
        """Append one ``(kind, at_seq, payload)`` record; return its id."""
        return int(_target(self).append(kind, at_seq, payload))

    def append_many(self, records: Sequence[tuple[str, int, Mapping[str, Any]]]) -> list[int]:
        """Append records in one transaction (all or nothing); return their ids."""
        return list(_target(self).append_many(records))

    def records(
        self, kinds: Sequence[str] | None = None, *, after_id: int = 0
    ) -> list[tuple[int, str, int, dict[str, Any]]]:
        """``(id, kind, at_seq, payload)`` of this stream with ``id > after_id``, in append order."""
        return list(_target(self).records(kinds, after_id=after_id))


class SealedTokenCounts(_Sealed):
    """:class:`~latch.port.TokenCountCache` of one session, over a host cache it does not expose."""

    __slots__ = ()

    def __init__(self, counts: TokenCountCache):
        self._hold(counts)

    def get(self, tokenizer: str, seq: int, digest: str) -> int | None:
        """The recorded count (tokens) of that rendering of event ``seq``, else ``None``."""
        got = _target(self).get(tokenizer, seq, digest)
        return None if got is None else int(got)

    def put(self, tokenizer: str, seq: int, digest: str, tokens: int) -> None:
        """Record ``tokens`` for that rendering (a recorded count is kept)."""
        _target(self).put(tokenizer, seq, digest, tokens)


def seal_reader(reader: SessionReader) -> SealedReader:
    """The handle an engine gets for ``reader`` (see the module docstring)."""
    return reader if isinstance(reader, SealedReader) else SealedReader(reader)


def seal_writer(writer: KernelWriter) -> SealedWriter:
    """The handle an engine gets for ``writer``; the host keeps ``writer`` itself (finish, stored, ...)."""
    return writer if isinstance(writer, SealedWriter) else SealedWriter(writer)


def seal_token_counts(counts: TokenCountCache | None) -> SealedTokenCounts | None:
    """The handle an engine gets for ``counts`` (``None`` stays ``None``); the host keeps ``flush``."""
    if counts is None or isinstance(counts, SealedTokenCounts):
        return counts
    return SealedTokenCounts(counts)
