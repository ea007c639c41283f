"""What the PostgreSQL store's people search (``search_hits``) computes outside the server, so that it returns
what the SQLite store returns:

* :class:`Bm25`: FTS5's ``bm25()`` order (``order="relevance"``). FTS5 scores a row from the whole index's
  statistics (rows, tokens, the rows holding each phrase) and the row's own (its tokens, each phrase's
  instances), with ``k1 = 1.2``, ``b = 0.75`` and every operation in the order of SQLite's ``fts5_aux.c``, so the
  ranks are the same floats. The row and phrase statistics come from FTS5 itself (an in-memory table of the
  same tokenizer, its ``docsize`` and ``fts5vocab`` instances); the index's token total is the store's counter
  (``latch_sequence`` row :data:`TOKENS`), moved in every append transaction by the FTS5 token count of the
  events it indexes.
* :class:`JulianDay`: the ``since``/``until`` filters compare SQLite's own ``julianday()`` of the event's
  timestamp and of the bound (the same parse of every ISO 8601 form, a timestamp SQLite cannot read leaving
  the event out), as the SQLite store's query does.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Sequence
from functools import lru_cache

from .fts import TOKENIZE, prepare_text

__all__ = ["Bm25", "JulianDay", "TOKENS", "K1", "B", "phrase_tokens"]

TOKENS = "events_fts.tokens"
"""The ``latch_sequence`` row holding the FTS5 token total of the index (FTS5's ``xColumnTotalSize``)."""
K1 = 1.2
B = 0.75


def phrase_tokens(phrase: str) -> list[str]:
    """The quoted tokens of one phrase of an FTS5 expression built by :mod:`latch.store.fts` (``"a" + "b"`` →
    ``["a", "b"]``; the builder quotes every token and tokens hold no space)."""
    return [t[1:-1].replace('""', '"') for t in phrase.split(" + ")]


def _varint(blob: bytes) -> int:
    """The first SQLite varint of ``blob`` (FTS5's ``docsize`` record: one per column)."""
    value = 0
    for i, byte in enumerate(blob[:9]):
        if i == 8:
            return (value << 8) | byte
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            break
    return value


class Bm25:
    """FTS5's ``bm25()`` over candidate rows (see the module). Not thread-safe: the store calls it under its
    lock."""

    def __init__(self) -> None:
        self._db: sqlite3.Connection | None = None

    def _conn(self) -> sqlite3.Connection:
        if self._db is None:
            db = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
            for table in ("r", "q"):
                db.execute(f"CREATE VIRTUAL TABLE {table} USING fts5(text, content='', tokenize=\"{TOKENIZE}\")")
                db.execute(f"CREATE VIRTUAL TABLE {table}v USING fts5vocab({table}, 'instance')")
            self._db = db
        return self._db

    def _load(self, table: str, rows: Sequence[tuple[int, str]]) -> None:
        db = self._conn()
        db.execute(f"INSERT INTO {table}({table}) VALUES ('delete-all')")
        db.executemany(f"INSERT INTO {table}(rowid, text) VALUES (?, ?)", rows)

    def sizes(self, prepared: Sequence[tuple[int, str]]) -> dict[int, int]:
        """FTS5's token count (``xColumnSize``) of each text ``(seq, prepared text)`` as the index gets it
        (:func:`~latch.store.fts.prepare_text`)."""
        db = self._conn()
        db.execute("BEGIN")
        try:
            self._load("r", prepared)
            return {int(i): _varint(sz) for i, sz in db.execute("SELECT id, sz FROM r_docsize")}
        finally:
            db.execute("COMMIT")

    def counts(
        self, phrases: Sequence[str], texts: Sequence[tuple[int, str]]
    ) -> tuple[dict[int, int], list[dict[int, int]]]:
        """For the searchable texts ``(seq, text)``: their FTS5 token counts, and per phrase of ``phrases`` (FTS5
        phrases, ``"a" + "b"``) its instances in each text that holds it (``{seq: n}``, FTS5's ``xInst``)."""
        db = self._conn()
        db.execute("BEGIN")
        try:
            self._load("r", [(seq, prepare_text(t)) for seq, t in texts if t])
            self._load("q", [(i + 1, " ".join(phrase_tokens(p))) for i, p in enumerate(phrases)])
            terms: dict[int, list[str]] = {}
            for term, doc, _offset in db.execute("SELECT term, doc, offset FROM qv ORDER BY doc, offset"):
                terms.setdefault(int(doc) - 1, []).append(term)
            at: dict[str, dict[int, set[int]]] = {}
            for term in {t for ts in terms.values() for t in ts}:
                where = at.setdefault(term, {})
                for doc, offset in db.execute("SELECT doc, offset FROM rv WHERE term = ?", (term,)):
                    where.setdefault(int(doc), set()).add(int(offset))
            sizes = {int(i): _varint(sz) for i, sz in db.execute("SELECT id, sz FROM r_docsize")}
        finally:
            db.execute("COMMIT")
        freqs: list[dict[int, int]] = []
        for i in range(len(phrases)):
            seq_terms = terms.get(i, [])
            found: dict[int, int] = {}
            if seq_terms:
                first = at.get(seq_terms[0], {})
                rest = [at.get(t, {}) for t in seq_terms[1:]]
                for doc, starts in first.items():
                    n = sum(1 for p in starts if all(p + k + 1 in r.get(doc, ()) for k, r in enumerate(rest)))
                    if n:
                        found[doc] = n
            freqs.append(found)
        return sizes, freqs

    @staticmethod
    def idf(rows: int, hits: int) -> float:
        """A phrase's IDF as FTS5 computes it: ``log((N - n + 0.5) / (n + 0.5))``, at least ``1e-6``."""
        value = math.log((rows - hits + 0.5) / (hits + 0.5))
        return value if value > 0.0 else 1e-6

    @staticmethod
    def rank(idfs: Sequence[float], freqs: Sequence[int], size: int, avgdl: float) -> float:
        """``bm25()`` of one row: ``-sum(idf * f * (k1 + 1) / (f + k1 * (1 - b + b * D / avgdl)))``, in FTS5's
        operation order."""
        score = 0.0
        d = float(size)
        for idf, f in zip(idfs, freqs, strict=True):
            fr = float(f)
            score += idf * ((fr * (K1 + 1.0)) / (fr + K1 * (1 - B + B * d / avgdl)))
        return -1.0 * score

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None


class JulianDay:
    """SQLite's ``julianday()`` of timestamps (``None`` when SQLite cannot read one), memoized."""

    def __init__(self) -> None:
        self._db = sqlite3.connect(":memory:", check_same_thread=False)
        self.of = lru_cache(maxsize=4096)(self._of)

    def _of(self, ts: str | None) -> float | None:
        if ts is None:
            return None
        value = self._db.execute("SELECT julianday(?)", (ts,)).fetchone()[0]
        return None if value is None else float(value)

    def within(self, ts: str | None, since: str | None, until: str | None) -> bool:
        """``julianday(ts) >= julianday(since)`` and ``julianday(ts) < julianday(until)`` (a ``None`` bound: no
        such test); false when either side is unreadable, as SQL's NULL comparison."""
        day = self.of(ts)
        if since is not None:
            low = self.of(since)
            if day is None or low is None or not day >= low:
                return False
        if until is not None:
            high = self.of(until)
            if day is None or high is None or not day < high:
                return False
        return True
