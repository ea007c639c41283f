"""Newest-first full-text search that stops at the newest ``limit`` matches, for long logs.

FTS5 evaluates a phrase (``"src" + "pkg7" + "mod3" + "py"``) or an AND by moving every token's doclist to its
next common row. When a token is *dense* (``src``, ``py``: in most events), every such move decodes a page of
its doclist, and a query with few matches moves through the whole history: 8.7 ms at 10^6 events for a path
phrase that matches 32 rows. A query with only rare tokens costs little.

:class:`CandidateSearch` therefore runs two steps, with the same hits as the exact query:

1. *Candidates*: an FTS5 query over the rare tokens alone (a token is rare when its 256th newest row lies more
   than :data:`DENSE_SPAN` rows back, :data:`AND_DENSE_SPAN` for an AND; measured once per token and kept): for
   ``mode="and"`` the AND of the rare tokens of every phrase, for ``mode="or"`` the OR over phrases of each
   phrase's rare tokens. Every row matching the exact query holds those tokens, so the candidates are a superset,
   listed newest first.
2. *Verification*: each chunk of candidates (twice ``limit`` first, doubling up to :data:`CHUNK`) is decided by
   its rows' text (:meth:`CandidateSearch.verify`: the exact query on an in-memory FTS5 table of the same
   tokenizer holding the chunk alone; an ASCII text by a pattern with the same answer, :func:`plain_matches`),
   O(the chunk) whatever the history. A row whose stored payload already shows that its text cannot match (an
   ASCII payload of an event whose searchable text is one field, :class:`PayloadCheck`) is decided without being
   decoded or prepared; an ASCII text whose phrases are not in it as their tokens joined by other characters, without
   being prepared. (Without the texts, the exact query
   bounded to the chunk's rowid span decides it; FTS5 does not stop an AND at the span's lower bound: with no
   match near below, it moves every doclist down to the next match, O(the history).)

The scan stops at ``limit`` matches; the matches a verified chunk held beyond them are kept
(:meth:`CandidateSearch.keep`), so the same search continued below its last hit (the next page) starts from them.
It is bounded: after :data:`MAX_CANDIDATES` candidates without
``limit`` matches, the exact query runs on the rows older than the last candidate (the old plan, on what is
left). A query whose phrases are single tokens that are all kept, or that has no rare token, runs as the
exact query directly (FTS5 is fast there). So does every query on a log of at most :data:`SMALL_LOG` rows: no
doclist is longer than the log, so the exact query walks a few thousand rows at most (well under a millisecond),
while a verified chunk costs a read and a preparation of each candidate's text. So does an OR whose every phrase
holds exactly one rare token: its candidates would be every row of that token, the rows FTS5 walks itself for the
phrase, each decided there by a seek in the other tokens' doclists (microseconds) instead of a read of the row
(tens of microseconds).
"""

from __future__ import annotations

import functools
import re
import sqlite3
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

from ..events import AssistantMessage, SystemNote, ToolResult, UserMessage
from .fts import GLUE, TOKENIZE, match_phrases, prepare_text, quote_token

__all__ = [
    "CandidateSearch",
    "PayloadCheck",
    "PhrasePattern",
    "CHUNK",
    "MAX_CANDIDATES",
    "DENSE_SPAN",
    "AND_DENSE_SPAN",
    "PROBE_ROWS",
    "MAX_RESUMES",
    "SMALL_LOG",
]

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
AND_DENSE_SPAN = 16 * PROBE_ROWS
"""The same bound for the candidate query of ``mode="and"`` (dense: in more than 1 row of 16). That query is one AND of
every phrase's rare tokens, and a search that finds fewer matches than its limit reads and checks every candidate
(a row read each): a token in 1 row of 16 to 64 still cuts the candidates, for a seek in its doclist per candidate."""
MAX_KEPT = 4096
"""Token densities kept per store (the table is emptied past it)."""
RARE_PER_PHRASE = 3
"""Rare tokens of one phrase that go into the candidate query at most (the rarest)."""
ONE_RARE_ON_FTS5 = True
"""An OR whose phrases hold one rare token each runs as the exact query (see the module); ``False``: by candidates."""
SMALL_LOG = 4096
"""A log of at most this many rows (every session's) is searched by the exact query alone (see the module)."""
MAX_RESUMES = 32
"""Searches whose verified matches beyond their limit are kept for their next page (the oldest dropped past it)."""

Rows = Callable[[str, Sequence[Any]], list[Any]]

# The prepared text of an ASCII text holds ASCII and the glue characters of ``prepare_text`` (private use: token
# characters) alone; ``unicode61`` tokenizes it into the runs of these characters, folded by ASCII lower-casing, and
# everything else in it separates tokens. Its phrase matches are decided by a pattern, the same as FTS5 decides them,
# on its UTF-8 bytes lower-cased: there a byte of 0x80 or more is a byte of a glue character.
_PLAIN_TOKEN = re.compile("[A-Za-z0-9" + "".join(GLUE.values()) + "]+")
_TOKEN_BYTE = b"[a-z0-9\x80-\xff]"
_SEPARATORS = b"[^a-z0-9\x80-\xff]+"


class PhrasePattern:
    """A phrase's pattern over a lower-cased UTF-8 text, compiled at its first use: most phrases of a query are
    decided on every row by a token missing from it (compiling a pattern costs more than searching a row). Every
    match holds each of ``literals`` as it is, so a text lacking one is decided without the pattern."""

    __slots__ = ("literals", "_source", "_pattern")

    def __init__(self, literals: Sequence[bytes], source: bytes):
        self.literals = tuple(sorted(set(literals), key=len, reverse=True))  # (the longest, most telling, first)
        self._source = source
        self._pattern: re.Pattern[bytes] | None = None

    def found(self, low: bytes) -> bool:
        """Whether the pattern finds the phrase in ``low``."""
        for t in self.literals:
            if t not in low:
                return False
        if self._pattern is None:
            self._pattern = re.compile(self._source)
        return self._pattern.search(low) is not None


def phrase_patterns(phrases: Sequence[Sequence[str]]) -> list[PhrasePattern] | None:
    """One pattern per phrase (its tokens, unquoted, as :func:`~latch.store.fts.match_phrases` gives them) that
    finds the phrase in the prepared text of an ASCII text (see :func:`plain_matches`); ``None`` when a token holds
    another character (such a query is left to FTS5)."""
    out = []
    for toks in phrases:
        if not toks or not all(_PLAIN_TOKEN.fullmatch(t) for t in toks):
            return None
        out.append(_phrase_pattern(tuple(toks)))
    return out


@functools.lru_cache(maxsize=4096)
def _phrase_pattern(toks: tuple[str, ...]) -> PhrasePattern:
    parts = [t.lower().encode() for t in toks]
    # the first token's literal leads (a fast scan); the byte before it must not be a token's
    head = re.escape(parts[0]) + b"(?<!" + _TOKEN_BYTE + b"[\\s\\S]{%d})" % len(parts[0])
    body = b"".join(_SEPARATORS + re.escape(x) for x in parts[1:])
    return PhrasePattern(parts, head + body + b"(?!" + _TOKEN_BYTE + b")")


def plain_matches(patterns: Sequence[PhrasePattern], mode: str, prepared: str) -> bool:
    """Whether ``prepared``, the prepared text (:func:`~latch.store.fts.prepare_text`) of an ASCII text, matches
    the phrases of ``patterns`` (``mode="and"``: every phrase, ``"or"``: any), as FTS5 with
    :data:`~latch.store.fts.TOKENIZE` decides it. (Other letters are folded by FTS5's own tables: FTS5 decides
    those texts.)"""
    low = prepared.encode().lower()
    hit = (p.found(low) for p in patterns)
    return all(hit) if mode == "and" else any(hit)


# A JSON string of an ASCII text holds each letter and digit as it is; every other character is itself or an escape
# (``\\n``, ``\\"``, ``\\\\``, ``\\u001b``): a run of separators between two tokens is a run of these.
_JSON_SEPARATORS = b"(?:[^a-z0-9\\\\]|\\\\(?:u[0-9a-f]{4}|[^u]))+"
_UNGLUE = {v: k for k, v in GLUE.items()}
SINGLE_TEXT = frozenset({ToolResult.KIND, UserMessage.KIND, SystemNote.KIND})
"""Event kinds whose searchable text is one string field of their payload, as it is."""
_NO_CALLS = '"tool_calls":[]}'


class PayloadCheck:
    """Whether a stored row *may* match the phrases of a query, read from its canonical JSON payload alone (no
    decoding, no preparation): ``False`` only when its searchable text cannot match (``mode="and"``: some phrase,
    ``"or"``: every phrase is absent).

    It decides rows of the :data:`SINGLE_TEXT` kinds and ``assistant_message`` rows without tool calls whose
    payload is ASCII with no ``\\u`` escape: their searchable text is one ASCII string field, held in the payload
    as a JSON string. A phrase of letters and digits alone found by FTS5 in the prepared text lies in the text as
    those tokens joined by separators (the preparation of an ASCII text only inserts glued tokens and appends
    dotted ones, :func:`~latch.store.fts.prepare_text`), so in the payload as the tokens joined by runs of
    separators or escapes, the first and the last a whole run of letters and digits (or the first right after an
    escape); a glued or dotted token lies in the text (and the payload) as its characters with the
    glue spelled ``+``, ``#`` or ``.``. Every other row: ``True`` (decided from its text)."""

    def __init__(self, mode: str, phrases: Sequence[Sequence[str]]):
        self.mode = mode
        self._phrases = [_payload_phrase(tuple(toks)) for toks in phrases]

    def may_match(self, kind: str, payload: Any) -> bool:
        """Whether the row of ``kind`` and ``payload`` (its stored canonical JSON) may match (see the class)."""
        if not isinstance(payload, str) or not (
            kind in SINGLE_TEXT or kind == AssistantMessage.KIND and payload.endswith(_NO_CALLS)
        ):
            return True
        if not payload.isascii() or "\\u" in payload:
            return True
        decided, i = _phrases_decide(self._phrases, self.mode, payload.encode().lower())
        if i > 0:  # the deciding phrase is tried first on the next row (rows of one search tend to agree)
            self._phrases.insert(0, self._phrases.pop(i))
        return decided


_PhraseCheck = PhrasePattern | tuple[bytes, ...] | None


# In an ASCII text a token is a whole run of letters and digits: a phrase's first token is not right after another
# letter or digit, its last one not right before one. In a JSON string a letter before the first token can also be
# the letter of an escape (``\\n``: a separator in the text); a ``\\u`` escape never occurs in a payload checked.
_NO_TOKEN_BEFORE = b"(?<![a-z0-9][\\s\\S]{%d})"
_ESCAPE_BEFORE = b"(?<=\\\\[bfnrt][\\s\\S]{%d})"
_NO_TOKEN_AFTER = b"(?![a-z0-9])"


@functools.lru_cache(maxsize=4096)
def _spelled_phrase(toks: tuple[str, ...], separators: bytes, escaped: bool = False) -> _PhraseCheck:
    """A phrase's pattern over a lower-cased text, its tokens (letters and digits) joined by runs of ``separators``,
    the first and the last one whole (``escaped``: a JSON string, where an escape may stand right before the first),
    or its tokens as they are spelled in the text (a glued or dotted one), or ``None`` (another character: not
    decided without preparing the text)."""
    if not toks or not all(_PLAIN_TOKEN.fullmatch(t) for t in toks):
        return None
    raw = ["".join(_UNGLUE.get(c, c) for c in t).lower() for t in toks]
    if all(t.isalnum() for t in raw):
        # the first token's literal leads (a fast scan); the bytes before it are checked from its end
        head = re.escape(raw[0].encode())
        before = _NO_TOKEN_BEFORE % len(raw[0])
        if escaped:
            before = b"(?:" + before + b"|" + _ESCAPE_BEFORE % len(raw[0]) + b")"
        body = b"".join(separators + re.escape(t.encode()) for t in raw[1:])
        return PhrasePattern([t.encode() for t in raw], head + before + body + _NO_TOKEN_AFTER)
    return tuple(t.encode() for t in raw)


def _payload_phrase(toks: tuple[str, ...]) -> _PhraseCheck:
    """:func:`_spelled_phrase` over a payload: an ASCII text's JSON string, its separators possibly escaped."""
    return _spelled_phrase(toks, _JSON_SEPARATORS, True)


_TEXT_SEPARATORS = b"[^a-z0-9]+"


def _text_phrase(toks: tuple[str, ...]) -> _PhraseCheck:
    """:func:`_spelled_phrase` over an ASCII text itself (see :class:`PayloadCheck`)."""
    return _spelled_phrase(toks, _TEXT_SEPARATORS)


def _phrases_decide(phrases: Sequence[_PhraseCheck], mode: str, low: bytes) -> tuple[bool, int]:
    """Whether the lower-cased ``low`` may match ``phrases`` (``False`` only when some phrase (``mode="and"``) or
    every phrase (``"or"``) is absent from it), and the index of the phrase that decided it (-1: none did)."""
    want = mode == "and"  # and: the first phrase absent decides; or: the first one found
    for i, p in enumerate(phrases):
        if want != (p is None or (p.found(low) if isinstance(p, PhrasePattern) else all(t in low for t in p))):
            return not want, i
    return want, -1


@functools.lru_cache(maxsize=4096)
def _phrases(query: str) -> tuple[tuple[str, ...], ...]:
    """:func:`~latch.store.fts.match_phrases` of ``query``, kept per query (a recall searches the same terms again
    at every new bound)."""
    return tuple(tuple(p) for p in match_phrases(query))


TEXT_FIRST = True
""":meth:`CandidateSearch.verify` decides an ASCII text whose phrases cannot match from the text itself, before
preparing it (``False``: every text prepared)."""


class CandidateSearch:
    """The candidate query and its verification for one store connection (see the module). Not thread-safe:
    the store calls it under its lock."""

    def __init__(self) -> None:
        self._span: dict[str, int | None] = {}  # token -> seqs spanned by its newest PROBE_ROWS rows (None: fewer)
        self._check: sqlite3.Connection | None = None
        self.known_to: int | None = None
        """After a :meth:`search` of one candidate expression and no ``exact``: every match at or above this
        rowid (and below the search's bounds) is one the search found (0: every match); else ``None``."""
        self.surplus: list[int] = []
        """With :attr:`known_to`: the matches that search found beyond its ``limit``, newest first."""
        # (caller's key, the last hit returned) -> ((surplus, known_to), the caller's rows of the surplus)
        self._resumes: OrderedDict[tuple[Any, int], tuple[list[int], int]] = OrderedDict()

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

    def _rare(
        self, db: sqlite3.Connection, tokens: Sequence[str], dense_span: int | None = None
    ) -> list[tuple[int, str]]:
        """``(rank, token)`` of the rare ``tokens`` (their newest PROBE_ROWS rows span ``dense_span`` seqs or more),
        rarest first (rank 0: fewer than PROBE_ROWS rows). ``dense_span``: :data:`DENSE_SPAN` when ``None``."""
        if dense_span is None:
            dense_span = DENSE_SPAN
        out: list[tuple[int, str]] = []
        for t in dict.fromkeys(tokens):
            span = self._token_span(db, t)
            if span is None:
                out.append((0, t))
            elif span >= dense_span:
                out.append((-span, t))  # the wider the span, the rarer
        out.sort(key=lambda x: (x[0] != 0, x[0]))
        return out

    def plan(self, db: sqlite3.Connection, query: str, mode: str) -> tuple[list[str], list[str]] | None:
        """``(exact, candidates)`` MATCH expressions for ``query`` (see the module), or ``None`` when the exact
        query should run directly. ``mode="and"``: ``exact`` is empty and ``candidates`` holds one expression,
        the AND of the rare tokens. ``mode="or"``: ``exact`` holds the single-token phrases (their rows are
        matches as they are) and ``candidates`` one expression per longer phrase (the AND of its rare tokens)."""
        phrases = _phrases(query)
        if not phrases or all(len(p) == 1 for p in phrases) and (mode != "and" or len(phrases) == 1):
            return None  # single tokens joined by OR, or one token: FTS5 stops at the newest rows by itself
        if (db.execute("SELECT max(seq) FROM events").fetchone()[0] or 0) <= SMALL_LOG:
            return None  # a short log: the exact query walks all of it faster than candidates are read
        if mode == "and":
            rare_of = [[t for _, t in self._rare(db, p, AND_DENSE_SPAN)][:RARE_PER_PHRASE] for p in phrases]
            chosen = list(dict.fromkeys(t for r in rare_of for t in r))
            if not chosen or (all(len(p) == 1 for p in phrases) and len(chosen) == len(phrases)):
                return None
            return [], [" AND ".join(quote_token(t) for t in chosen)]
        exact = [quote_token(p[0]) for p in phrases if len(p) == 1]
        candidates = []
        narrowed = False  # a phrase whose candidates are fewer than its rarest token's rows
        for p in phrases:
            if len(p) > 1:
                rare = [t for _, t in self._rare(db, p)][:RARE_PER_PHRASE]
                if not rare:  # a phrase of dense tokens only: its candidates would be most of the log
                    return None
                narrowed = narrowed or len(rare) > 1
                candidates.append(" AND ".join(quote_token(t) for t in rare))
        if not narrowed and ONE_RARE_ON_FTS5:  # FTS5 walks the same rows, deciding each without reading it
            return None
        return exact, candidates

    def search(
        self,
        rowids: Callable[[str, int | None, int | None, int], list[int]],
        match: str,
        exact: list[str],
        candidates: list[str],
        limit: int,
        start: tuple[list[int], int] | None = None,
        check: Callable[[str, list[int]], set[int]] | None = None,
    ) -> list[int]:
        """The newest ``limit`` rowids matching ``match`` (newest first), from a :meth:`plan`.

        ``check(match, rows)``: the ``rows`` (a page of candidates, newest first) that match ``match``, decided
        from their text (:meth:`verify`): O(the page). Without it a page is verified by the exact query bounded to
        the page's span, which FTS5 answers in O(the page) only when a match lies near below the span: an AND
        with no match there moves its doclists down to the next match or the end of the history.

        ``rowids(expr, below, above, n)``: the newest ``n`` rowids matching FTS expression ``expr`` (with the
        caller's filters) with ``above < rowid < below`` (``None``: unbounded). ``start`` (one candidate expression, no ``exact``): ``(matches, below)``, every match
        at or above rowid ``below`` already known (an earlier search's :attr:`known_to`): the scan starts below
        it (``below`` 0: nothing is left to scan). Sets :attr:`known_to`."""
        single = not exact and len(candidates) == 1
        self.known_to, self.surplus = None, []
        if start is not None and single:
            known_rows, lowest = start
            if len(known_rows) >= limit or lowest == 0:
                ranked = sorted(known_rows, reverse=True)
                self.known_to, self.surplus = lowest, ranked[limit:]
                return ranked[:limit]
        else:
            start = None
        out: set[int] = set(start[0]) if start is not None else set()
        floor: int | None = None  # for OR: rows at or below the limit-th hit so far cannot make the result
        if exact:
            got = rowids(" OR ".join(exact), None, None, limit)
            out.update(got)
            if len(got) >= limit:
                floor = got[-1]
        known = 0
        for expr in candidates:
            below: int | None = start[1] if start is not None else None
            scanned = 0
            found = len(start[0]) if start is not None else 0  # (only a single expression has a start)
            size = min(CHUNK, max(FIRST_CHUNK, 2 * (limit - found)))  # a small first page: most searches stop in it
            while True:
                if scanned >= MAX_CANDIDATES:  # bounded: the exact query takes the older rows
                    tail = rowids(match, below, floor, limit - found)
                    out.update(tail)
                    known = tail[-1] if len(tail) >= limit - found else 0
                    break
                page = rowids(expr, below, floor, size)
                if not page:
                    known = 0
                    break
                # the page's rows that match ``match``: the index answers the full query over the page's span
                if check is not None:
                    ok = check(match, page)
                else:
                    ok = set(page).intersection(rowids(match, page[0] + 1, page[-1] - 1, page[0] - page[-1] + 1))
                found += len(ok)
                out.update(ok)
                if found >= limit or len(page) < size:
                    known = page[-1] if len(page) >= size else 0
                    break
                below = page[-1]
                scanned += len(page)
                size = min(CHUNK, size * 2)
            if len(out) >= limit:  # rows at or below the limit-th hit so far cannot make the result
                floor = max(floor or 0, sorted(out, reverse=True)[limit - 1])
        ranked = sorted(out, reverse=True)
        if single:
            self.known_to, self.surplus = known, ranked[limit:]
        return ranked[:limit]

    # ---------------------------------------------------------------- resume
    def resume(self, key: Any, before: int | None) -> tuple[list[int], int] | None:
        """What :meth:`keep` kept for the search ``key`` continued below its last hit ``before``: the ``start`` for
        :meth:`search`; ``None`` when nothing was kept. (Rows below a bound never change in an append-only log whose
        seqs grow.)"""
        return None if before is None else self._resumes.pop((key, before), None)

    def keep(self, key: Any, hits: Sequence[int], limit: int) -> None:
        """Keep the matches the last :meth:`search` (of the search ``key``: query and filters, not the bound) found
        beyond its ``limit`` hits, so that search continued below its last hit starts from them (:meth:`resume`)
        instead of finding them again; at most :data:`MAX_RESUMES`."""
        if self.known_to is None or len(hits) < limit:
            return
        self._resumes[key, hits[-1]] = (self.surplus, self.known_to)
        if len(self._resumes) > MAX_RESUMES:
            self._resumes.popitem(last=False)

    # ---------------------------------------------------------------- verify
    def verify(
        self,
        match: str,
        texts: Sequence[tuple[int, str]],
        phrases: tuple[str, Sequence[Sequence[str]]] | None = None,
    ) -> set[int]:
        """The rowids of ``texts`` (``(rowid, searchable text)``) whose prepared text matches ``match``.

        ``phrases``: ``(mode, phrases)`` of :func:`~latch.store.fts.match_phrases` whose
        :func:`~latch.store.fts.build_match_query` is ``match``: an ASCII text is then decided by
        :func:`plain_matches` (no FTS5 table), the others by FTS5."""
        patterns = phrase_patterns(phrases[1]) if phrases is not None else None
        in_text = [_text_phrase(tuple(p)) for p in phrases[1]] if phrases is not None and TEXT_FIRST else None
        out: set[int] = set()
        rest: list[tuple[int, str]] = []
        for r, t in texts:
            if not t:
                continue
            if patterns is None or phrases is None or not t.isascii():
                rest.append((r, prepare_text(t)))
            elif in_text is not None and not _phrases_decide(in_text, phrases[0], t.encode().lower())[0]:
                continue  # a phrase's tokens are not in the text as they would be if it matched: not prepared
            elif plain_matches(patterns, phrases[0], prepare_text(t)):
                out.add(r)
        if rest:
            out |= self._fts_verify(match, rest)
        return out

    def _fts_verify(self, match: str, prepared: Sequence[tuple[int, str]]) -> set[int]:
        """The rowids of ``prepared`` (``(rowid, prepared text)``) that match ``match`` in an FTS5 table."""
        if self._check is None:
            self._check = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
            self._check.execute(f"CREATE VIRTUAL TABLE c USING fts5(text, content='', tokenize=\"{TOKENIZE}\")")
        db = self._check
        db.execute("BEGIN")
        try:
            db.execute("INSERT INTO c(c) VALUES ('delete-all')")
            db.executemany("INSERT INTO c(rowid, text) VALUES (?, ?)", prepared)
            return {r[0] for r in db.execute("SELECT rowid FROM c WHERE c MATCH ?", (match,))}
        finally:
            db.execute("COMMIT")

    def close(self) -> None:
        if self._check is not None:
            self._check.close()
            self._check = None
