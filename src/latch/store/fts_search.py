"""Newest-first full-text search that stops at the newest ``limit`` matches, for long logs.

FTS5 evaluates a phrase (``"src" + "pkg7" + "mod3" + "py"``) or an AND by moving every token's doclist to its
next common row. When a token is *dense* (``src``, ``py``: in most events), every such move decodes a page of
its doclist, and a query with few matches moves through the whole history: 8.7 ms at 10^6 events for a path
phrase that matches 32 rows. A query with only rare tokens costs little.

:class:`CandidateSearch` therefore runs two steps, with the same hits as the exact query:

1. *Candidates*: an FTS5 query over the rare tokens alone (a token is rare when its 256th newest row lies more
   than :data:`DENSE_SPAN` rows back; measured once per token and kept): for ``mode="and"`` the AND of the
   rare tokens of every phrase, for ``mode="or"`` the OR over phrases of each phrase's rare tokens. Every row
   matching the exact query holds those tokens, so the candidates are a superset, listed newest first.
2. *Verification*: each chunk of candidates (twice ``limit`` first, doubling up to :data:`CHUNK`) has its prepared text (:func:`~latch.store.fts.
   prepare_text` of the event's searchable text, the text the index got) put in an in-memory FTS5 table of the
   same tokenizer, and the exact query runs there: FTS5's own matching, on a few rows.

The scan stops at ``limit`` matches. It is bounded: after :data:`MAX_CANDIDATES` candidates without
``limit`` matches, the exact query runs on the rows older than the last candidate (the old plan, on what is
left). A query whose phrases are single tokens that are all kept, or that has no rare token, runs as the
exact query directly (FTS5 is fast there).

A store written before migration ``m006_fts_glued_terms`` that kept its old index (it holds an event kind
this process cannot decode) is verified against today's preparation; its old text differs only for glued
and dotted terms.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from typing import Any

from .fts import TOKENIZE, match_phrases, prepare_text, quote_token

__all__ = ["CandidateSearch", "CHUNK", "MAX_CANDIDATES", "DENSE_SPAN", "PROBE_ROWS"]

CHUNK = 128
"""Candidates verified per step at most (rows)."""
FIRST_CHUNK = 8
"""Candidates verified by the first step at least (it verifies twice the ``limit`` up to :data:`CHUNK`; each
later step twice the one before)."""
MAX_CANDIDATES = 1024
"""Candidates verified at most before the exact query takes over for the older rows."""
PROBE_ROWS = 256
"""A token's density is measured over its newest this many rows."""
DENSE_SPAN = 64 * PROBE_ROWS
"""A token whose newest :data:`PROBE_ROWS` rows span fewer seqs than this is dense (in more than 1 row of 64)."""
MAX_KEPT = 4096
"""Token densities kept per store (the table is emptied past it)."""
RARE_PER_PHRASE = 3
"""Rare tokens of one phrase that go into the candidate query at most (the rarest)."""

Rows = Callable[[str, Sequence[Any]], list[Any]]


class CandidateSearch:
    """The candidate query and its verification for one store connection (see the module). Not thread-safe:
    the store calls it under its lock."""

    def __init__(self) -> None:
        self._span: dict[str, int | None] = {}  # token -> seqs spanned by its newest PROBE_ROWS rows (None: fewer)
        self._check: sqlite3.Connection | None = None

    # ------------------------------------------------------------------ plan
    def _token_span(self, db: sqlite3.Connection, token: str) -> int | None:
        if token not in self._span:
            if len(self._span) >= MAX_KEPT:
                self._span.clear()
            rows = db.execute(
                "SELECT rowid FROM events_fts WHERE events_fts MATCH ? ORDER BY rowid DESC "
                f"LIMIT 1 OFFSET {PROBE_ROWS - 1}",
                (quote_token(token),),
            ).fetchall()
            if not rows:
                self._span[token] = None
            else:
                newest = db.execute("SELECT max(seq) FROM events").fetchone()[0] or 0
                self._span[token] = max(0, int(newest) - int(rows[0][0]))
        return self._span[token]

    def _rare(self, db: sqlite3.Connection, tokens: Sequence[str]) -> list[tuple[int, str]]:
        """``(rank, token)`` of the rare ``tokens``, rarest first (rank 0: fewer than PROBE_ROWS rows)."""
        out: list[tuple[int, str]] = []
        for t in dict.fromkeys(tokens):
            span = self._token_span(db, t)
            if span is None:
                out.append((0, t))
            elif span >= DENSE_SPAN:
                out.append((-span, t))  # the wider the span, the rarer
        out.sort(key=lambda x: (x[0] != 0, x[0]))
        return out

    def plan(self, db: sqlite3.Connection, query: str, mode: str) -> tuple[list[str], list[str]] | None:
        """``(exact, candidates)`` MATCH expressions for ``query`` (see the module), or ``None`` when the exact
        query should run directly. ``mode="and"``: ``exact`` is empty and ``candidates`` holds one expression,
        the AND of the rare tokens. ``mode="or"``: ``exact`` holds the single-token phrases (their rows are
        matches as they are) and ``candidates`` one expression per longer phrase (the AND of its rare tokens)."""
        phrases = match_phrases(query)
        if not phrases or all(len(p) == 1 for p in phrases) and (mode != "and" or len(phrases) == 1):
            return None  # single tokens joined by OR, or one token: FTS5 stops at the newest rows by itself
        if mode == "and":
            rare_of = [[t for _, t in self._rare(db, p)][:RARE_PER_PHRASE] for p in phrases]
            chosen = list(dict.fromkeys(t for r in rare_of for t in r))
            if not chosen or (all(len(p) == 1 for p in phrases) and len(chosen) == len(phrases)):
                return None
            return [], [" AND ".join(quote_token(t) for t in chosen)]
        exact = [quote_token(p[0]) for p in phrases if len(p) == 1]
        candidates = []
        for p in phrases:
            if len(p) > 1:
                rare = [t for _, t in self._rare(db, p)][:RARE_PER_PHRASE]
                if not rare:  # a phrase of dense tokens only: its candidates would be most of the log
                    return None
                candidates.append(" AND ".join(quote_token(t) for t in rare))
        return exact, candidates

    def search(
        self,
        rowids: Callable[[str, int | None, int | None, int], list[int]],
        texts: Callable[[list[int]], dict[int, str]],
        match: str,
        exact: list[str],
        candidates: list[str],
        limit: int,
    ) -> list[int]:
        """The newest ``limit`` rowids matching ``match`` (newest first), from a :meth:`plan`.

        ``rowids(expr, below, above, n)``: the newest ``n`` rowids matching FTS expression ``expr`` (with the
        caller's filters) with ``above < rowid < below`` (``None``: unbounded); ``texts(rowids)``: their
        searchable texts."""
        out: set[int] = set()
        floor: int | None = None  # for OR: rows at or below the limit-th hit so far cannot make the result
        if exact:
            got = rowids(" OR ".join(exact), None, None, limit)
            out.update(got)
            if len(got) >= limit:
                floor = got[-1]
        for expr in candidates:
            below: int | None = None
            scanned = 0
            found = 0
            size = min(CHUNK, max(FIRST_CHUNK, 2 * limit))  # a small first page: most searches stop in it
            while True:
                if scanned >= MAX_CANDIDATES:  # bounded: the exact query takes the older rows
                    out.update(rowids(match, below, floor, limit - found))
                    break
                page = rowids(expr, below, floor, size)
                if not page:
                    break
                ok = self.verify(match, sorted(texts(page).items()))
                found += len(ok)
                out.update(ok)
                if found >= limit or len(page) < size:
                    break
                below = page[-1]
                scanned += len(page)
                size = min(CHUNK, size * 2)
            if len(out) >= limit:  # rows at or below the limit-th hit so far cannot make the result
                floor = max(floor or 0, sorted(out, reverse=True)[limit - 1])
        return sorted(out, reverse=True)[:limit]

    # ---------------------------------------------------------------- verify
    def verify(self, match: str, texts: Sequence[tuple[int, str]]) -> set[int]:
        """The rowids of ``texts`` (``(rowid, searchable text)``) whose prepared text matches ``match``."""
        if self._check is None:
            self._check = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
            self._check.execute(f"CREATE VIRTUAL TABLE c USING fts5(text, content='', tokenize=\"{TOKENIZE}\")")
        db = self._check
        db.execute("BEGIN")
        try:
            db.execute("INSERT INTO c(c) VALUES ('delete-all')")
            db.executemany("INSERT INTO c(rowid, text) VALUES (?, ?)", [(r, prepare_text(t)) for r, t in texts if t])
            return {r[0] for r in db.execute("SELECT rowid FROM c WHERE c MATCH ?", (match,))}
        finally:
            db.execute("COMMIT")

    def close(self) -> None:
        if self._check is not None:
            self._check.close()
            self._check = None
