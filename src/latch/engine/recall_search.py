"""Recall's searches, kept across requests: newest-first FTS rows below a seq bound, fetched once.

The archival region a recall searches (``seq < before_seq``) only ever gains rows at its top: the log is
append-only and seqs grow, so the rows of a search below a bound never change, and when the bound moves up (a new
cache epoch) only the rows between the old and the new bound are new. :class:`SearchCache` keeps, per search,
the newest rows fetched so far (a complete newest-first prefix of the matches below its bound) and fetches more
only when a recall reads past them; when the bound moved, the rows above the old bound come first, fetched as a
recall reads them (a recall that is done early never fetches the rest).

An OR search of several terms is the union of each term's rows (each whitespace-free term is one FTS phrase,
:func:`~latch.store.fts.match_phrases`), so :meth:`SearchCache.newest` merges per-term rows: a request whose query
gains one term (a new file path, a new error) searches that term alone, not the whole query again. An AND
search is kept whole, and skipped when one of its terms has no row at all, or when the terms whose every row is
fetched have no row in common. The result
is the same rows, in the same order, as paging ``reader.search(" ".join(terms), mode=mode)`` (the parity tests
pin it).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator, Sequence
from typing import Any

from ..port import SessionReader

__all__ = ["SearchCache", "newest_hits", "SEARCH_ROWS", "SEARCH_PAGE", "MAX_SEARCHES"]

SEARCH_ROWS = 64
"""FTS rows listed per search, newest first (a recall runs up to three searches)."""
SEARCH_PAGE = 16
"""Rows read per store search: a recall that is done early never decodes the rest of :data:`SEARCH_ROWS`."""
FIRST_PAGE = 4
"""Rows read by a term's first store search (most terms are merged past after a few rows)."""
GAP_AS_READ = True
"""After the bound moved up, fetch a search's rows between the old and the new bound as a recall reads them
(``False``: up to :data:`SEARCH_ROWS` of them at once, when the search is first read at the new bound)."""
CHECK_ROWS = SEARCH_ROWS
"""An AND's check that each of its terms has a row reads a term's first page of up to this many rows (1: one
row; the OR search of the same terms reads that page next)."""
AND_FROM_KEPT = True
"""An AND whose terms' kept rows (every row of a term below the bound, for the terms whose rows are all fetched) have
no row in common is empty without its store search (``False``: searched)."""
MAX_SEARCHES = 512
"""Searches kept per cache (the least recently used one is dropped past it)."""
_SPLIT_CHARS = 4096  # a joined query longer than this is cut by the store: search it whole
_SPLIT_TERMS = 64  # the store keeps this many phrases of a query


def newest_hits(reader: SessionReader, query: str, mode: str, before_seq: int, until_seq: int | None) -> Iterator[Any]:
    """The newest :data:`SEARCH_ROWS` rows of ``reader.search(query)`` below ``before_seq`` (and at most
    ``until_seq``), newest first, read in pages of :data:`SEARCH_PAGE` (each page continues below the last row
    of the one before). The straightforward plan, searched afresh on every call."""
    left, below = SEARCH_ROWS, before_seq
    while left > 0:
        page = reader.search(query, limit=min(SEARCH_PAGE, left), before_seq=below, until_seq=until_seq, mode=mode)
        yield from page
        if len(page) < min(SEARCH_PAGE, left):
            return
        left -= len(page)
        below = page[-1].seq


class _Rows:
    """The newest rows of one search below ``bound``, as far as fetched: ``rows`` is every match in
    ``[rows[-1].seq, bound)``, newest first, and every match below ``bound`` when ``done``.

    After the bound moved up, the rows kept below the old bound wait in ``older`` (every match in
    ``[older[-1].seq, older_bound)``, and every match below ``older_bound`` when ``older_done``) until the rows
    fetched from the new bound reach ``older_bound``: the rows between the bounds are fetched as a recall reads
    them, not all at once."""

    __slots__ = ("bound", "rows", "done", "older", "older_bound", "older_done")

    def __init__(self, bound: int):
        self.bound = bound
        self.rows: list[Any] = []
        self.done = False
        self.older: list[Any] | None = None
        self.older_bound = 0
        self.older_done = False


class SearchCache:
    """Recall's store searches by query and mode, kept across requests of one reader (see the module)."""

    def __init__(self, max_searches: int = MAX_SEARCHES):
        self.max_searches = max_searches
        self._reader: SessionReader | None = None
        self._searches: OrderedDict[tuple[str, str], _Rows] = OrderedDict()
        self.fetches = 0
        """Store searches run so far (for tests and benchmarks)."""

    def newest(
        self, reader: SessionReader, terms: Sequence[str], mode: str, before_seq: int, until_seq: int | None
    ) -> Iterator[Any]:
        """The rows of :func:`newest_hits` for ``" ".join(terms)``, from kept searches where they cover them."""
        bound = before_seq if until_seq is None else min(before_seq, until_seq + 1)
        if reader is not self._reader:
            self._reader = reader
            self._searches.clear()
        query = " ".join(terms)
        if len(terms) < 2 or len(query) > _SPLIT_CHARS or len(terms) > _SPLIT_TERMS:
            yield from self._iter(reader, query, mode, bound, SEARCH_ROWS)
            return
        if mode == "and":
            # a term with a letter or digit is at least one token, so when no row below the bound holds it,
            # no row holds every term (a term without one is left out of the store's AND and proves nothing)
            common: set[int] | None = None  # the rows every term whose rows below the bound are all kept holds
            one_chunk_each = len(query.split()) == len(terms)  # (each term is one phrase of the AND, none left out)
            for t in dict.fromkeys(terms):
                if not any(c.isalnum() for c in t):
                    continue
                got = self._entry(reader, t, "or", bound)
                # (a first page of the term, not one row: the OR search of the same terms reads it next)
                if not self._fill(reader, t, "or", got, 0, CHECK_ROWS):
                    return
                if AND_FROM_KEPT and one_chunk_each and got.done and got.older is None:
                    seqs = {r.seq for r in got.rows}
                    common = seqs if common is None else common & seqs
            if common is not None and not common:  # a row holding every term is among each such term's rows
                return
            yield from self._iter(reader, query, mode, bound, SEARCH_ROWS)
            return
        queries = list(dict.fromkeys(terms))
        kept = [self._entry(reader, t, "or", bound) for t in queries]
        for i, got in enumerate(kept):
            self._fill(reader, queries[i], "or", got, 0, SEARCH_ROWS)
        yield from self._merge(reader, queries, kept)

    def _merge(self, reader: SessionReader, queries: list[str], kept: list[_Rows]) -> Iterator[Any]:
        """The union of the searches' first :data:`SEARCH_ROWS` rows, newest first, each row once, at most
        :data:`SEARCH_ROWS`: a block at a time. A search with rows left to fetch has none above its last fetched
        row, so every row at or above the newest such last row (the threshold) is final: those are listed, then
        the searches whose last row is the threshold fetch their next page."""
        pos = [0] * len(kept)
        left = SEARCH_ROWS
        while left > 0:
            open_ = [i for i, got in enumerate(kept) if not got.done and len(got.rows) < SEARCH_ROWS]
            threshold = max((kept[i].rows[-1].seq for i in open_), default=None)
            block: dict[int, Any] = {}
            for i, got in enumerate(kept):
                rows, p = got.rows, pos[i]
                end = min(len(rows), SEARCH_ROWS)
                while p < end and (threshold is None or rows[p].seq >= threshold):
                    block.setdefault(rows[p].seq, rows[p])
                    p += 1
                pos[i] = p
            for seq in sorted(block, reverse=True):
                yield block[seq]
                left -= 1
                if left <= 0:
                    return
            if threshold is None:
                return
            for i in open_:
                got = kept[i]
                if got.rows[-1].seq == threshold:
                    self._fill(reader, queries[i], "or", got, len(got.rows), SEARCH_ROWS)

    def _entry(self, reader: SessionReader, query: str, mode: str, bound: int) -> _Rows:
        key = (mode, query)
        got = self._searches.get(key)
        if got is None:
            got = self._searches[key] = _Rows(bound)
            if len(self._searches) > self.max_searches:
                self._searches.popitem(last=False)
        else:
            self._searches.move_to_end(key)
        if bound > got.bound:  # the archive grew: the rows between the old bound and the new one come first
            if not GAP_AS_READ:
                self._fetch_gap(reader, query, mode, got, bound)
            else:
                if got.older is None:  # (those are fetched as they are read, then the kept rows follow them)
                    got.older, got.older_bound, got.older_done = got.rows, got.bound, got.done
                got.rows, got.done = [], False  # (a second move before the first gap was read: the gap is dropped)
        elif bound < got.bound:  # an older bound (a past request): the kept rows below it are still a prefix
            if got.older is not None and bound <= got.older_bound:
                got.rows, got.done, got.older = got.older, got.older_done, None
            got.rows = [r for r in got.rows if r.seq < bound]
        got.bound = bound
        return got

    def _fetch_gap(self, reader: SessionReader, query: str, mode: str, got: _Rows, bound: int) -> None:
        """The rows between ``got.bound`` and ``bound`` fetched at once (up to :data:`SEARCH_ROWS`), before them."""
        fresh: list[Any] = []
        below, n = bound, FIRST_PAGE
        while len(fresh) < SEARCH_ROWS:
            page = self._fetch(reader, query, mode, below, n)
            fresh.extend(r for r in page if r.seq >= got.bound)
            if len(page) < n or page[-1].seq < got.bound:
                break
            below, n = page[-1].seq, SEARCH_PAGE
        if len(fresh) >= SEARCH_ROWS:
            got.rows, got.done = fresh, False
        else:
            got.rows = fresh + got.rows

    def _fill(self, reader: SessionReader, query: str, mode: str, got: _Rows, i: int, most: int) -> bool:
        """Whether the search has a row at position ``i < most`` (fetching pages of it until it has or is done)."""
        while i < most:
            if i < len(got.rows):
                return True
            if got.done:
                return False
            below = got.rows[-1].seq if got.rows else got.bound
            n = min(FIRST_PAGE if not got.rows else SEARCH_PAGE, most - len(got.rows))
            page = self._fetch(reader, query, mode, below, n)
            if got.older is not None and (len(page) < n or page[-1].seq < got.older_bound):
                # the fetched rows reached the old bound: below it, the page and the kept rows are both the newest
                # matches (the page all of them when it is short): the longer of the two continues the rows
                below_old = [r for r in page if r.seq < got.older_bound]
                if len(page) < n or len(below_old) >= len(got.older):
                    got.rows.extend(page)
                    got.done = len(page) < n
                else:
                    got.rows.extend(page[: len(page) - len(below_old)])
                    got.rows.extend(got.older)
                    got.done = got.older_done
                got.older = None
                if len(got.rows) > SEARCH_ROWS:  # (kept bounded: a recall reads the newest SEARCH_ROWS)
                    del got.rows[SEARCH_ROWS:]
                    got.done = False
                continue
            got.rows.extend(page)
            if len(page) < n:
                got.done = True
        return False

    def _iter(self, reader: SessionReader, query: str, mode: str, bound: int, most: int) -> Iterator[Any]:
        got = self._entry(reader, query, mode, bound)
        i = 0
        while self._fill(reader, query, mode, got, i, most):
            yield got.rows[i]
            i += 1

    def _fetch(self, reader: SessionReader, query: str, mode: str, below: int, n: int) -> list[Any]:
        self.fetches += 1
        return list(reader.search(query, limit=n, before_seq=below, mode=mode))
