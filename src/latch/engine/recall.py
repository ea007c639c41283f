"""Deterministic recall of original events by FTS (spec: "Summaries are indexes, not truth").

:func:`query_terms` turns request text (the latest user turn, the goal, open files, recent errors,
an explicit query) into a bounded list of search terms: identifiers first (*specific* terms: paths,
dotted, dashed and snake_case names, CamelCase, numbers, hashes and error codes), then content words
of four or more characters (a small English stop list removed), then CJK bigrams (two-character CJK
terms must match). :func:`recall` searches the archival region only (``seq < before_seq``: material
no longer in the provider-visible epoch), identifiers before words, so an old event holding the
exact identifiers is not crowded out by newer rows that merely repeat common words: first the rows
holding every identifier (an FTS AND of identifier phrases; for a query without identifiers, every
word), then rows holding any identifier, then rows holding any other term. A row *matches* when it holds a specific term or at least two of the
other terms (one when the query has only one), so a lone common word never pulls a row in. Each
search lists the newest rows first (a later revision wins over an older turn that repeats a term),
at most :data:`SEARCH_ROWS`; recall takes matching rows in that order, at most
:data:`RECALL_ROWS`, follows tool call ↔ result links so a recalled call brings its results and a
recalled result its call, stops at the token bound, and returns the selection in chronological
order. Foreign compaction summaries (indexes, not truth) and harness notes other than API errors
are never recalled. No embeddings; the same store and query always give the same events.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence
from typing import Any

from ..events import AssistantMessage, ToolResult
from ..lazyre import lazy_compile
from ..port import RecalledEvent, SessionReader
from .recall_search import SEARCH_PAGE, SEARCH_ROWS, SearchCache, newest_hits

__all__ = [
    "MAX_TERMS",
    "SEARCH_ROWS",
    "RECALL_ROWS",
    "PARTNER_WINDOW",
    "SEARCH_PAGE",
    "RecallCache",
    "query_terms",
    "render_recalled",
    "recalled_seqs",
    "recall",
]

MAX_TERMS = 24
"""Search terms per query (each an FTS phrase)."""
RECALL_ROWS = 12
"""Matching rows recalled at most per recall (their call/result partners come on top)."""
PARTNER_WINDOW = 512
"""How far (in seq) a call and its result may lie apart and still be linked."""
KEEP_ROWS = True
""":class:`RecallCache` keeps each listed row's lower-cased text and its partners per bound (``False``: both made
again at every recall, the same values)."""
PROBE = True
"""Look a partner up in the few seqs next to its event first (the same partners, fewer events read)."""

_STOP = frozenset(
    """
about above after again against also been before being below between both could does doing down during each
either else even ever every from have having here hers herself himself into itself just more most much must
myself never only other ought ours ourselves over same shall should some such than that their theirs them
themselves then there these they this those through under until very want what when where which while whom
whose will with within without would your yours yourself yourselves please thanks thank okay sure done make
made need needs like look looks using used file files code line lines work works working still again maybe
""".split()
)
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_CJK_RUN = lazy_compile(f"[{_CJK}]+")
_TOKEN = lazy_compile(r"[^\s\"'`()\[\]{}<>,;!?|=*]+")
_WORD = lazy_compile(r"[^\W\d_]{4,32}")
_CAMEL = lazy_compile(r"[a-z][A-Z]")  # CamelCase: "ValueError", "EventStore", "iOS"


@functools.lru_cache(maxsize=8192)
def _specific(tok: str) -> bool:
    """Identifier-like: a path, a dotted, dashed or snake_case name, CamelCase, an error code or a number of
    3+ digits (``src/a.py``, ``billing.tax``, ``read-only``, ``ROUND_HALF_EVEN``, ``ValueError``,
    ``E0425``, ``7f3a9c1e``, ``1043.36``). (Kept per token: a turn's texts repeat most of the last one's.)"""
    core = tok.strip(".:-/#")
    if len(core) < 3 or len(core) > 120:
        return False
    has_digit = any(map(str.isdigit, core))
    has_alpha = any(map(str.isalpha, core))
    if "/" in core or "_" in core or ("." in core and has_alpha) or ("-" in core and has_alpha):
        return True
    if _CAMEL.search(core):
        return True
    return has_digit and (has_alpha or len(core) >= 3)


def query_terms(texts: Iterable[str], max_terms: int = MAX_TERMS) -> list[str]:
    """Search terms from ``texts`` (in priority order), deduplicated case-insensitively, at most ``max_terms``."""
    plain: list[str] = []
    runs: list[list[str]] = []
    for text in texts:
        if text:
            text = text[:8192]
            runs.append(_CJK_RUN.findall(text))
            plain.append(_CJK_RUN.sub(" ", text) if runs[-1] else text)
    out: list[str] = []
    seen: set[str] = set()
    # every text's identifiers, then every text's words, then CJK bigrams; each read only while terms are missing
    groups: tuple[Iterable[str], ...] = (
        (tok for p in plain for tok in (m.group().strip(".:-#") for m in _TOKEN.finditer(p)) if _specific(tok)),
        (w for p in plain for w in _WORD.findall(p) if w.lower() not in _STOP),
        (run[i : i + 2] for rs in runs for run in rs for i in range(len(run) - 1)),
    )
    for group in groups:
        for t in group:
            k = t.lower()
            if k not in seen:
                seen.add(k)
                out.append(t)
                if len(out) >= max_terms:
                    return out
    return out


def render_recalled(stored: Any) -> str:
    """One recalled original as text: ``[seq N · kind] content`` (tool calls as ``name(arguments)``)."""
    e, seq = stored.event, stored.seq
    if stored.kind == "user_message":
        body = e.text
        head = "user (meta)" if e.is_meta else "user"
    elif isinstance(e, AssistantMessage):
        head = "assistant"
        calls = [f"call {c.id} {c.name}({c.arguments})" for c in e.tool_calls]
        body = "\n".join([e.text, *calls] if e.text else calls)
    elif isinstance(e, ToolResult):
        flags = "".join(
            (" error" if e.is_error else "", " orphan" if e.orphan else "", " missing" if e.missing else "")
        )
        head = f"tool result {e.call_id}{flags}"
        body = e.content
    else:
        sub = getattr(e, "subtype", None)
        head = f"{stored.kind} {sub}" if sub else stored.kind
        body = e.searchable_text()
    media = getattr(e, "media", ()) or ()
    if media:
        body += "".join(f"\n[{r.media_type} {r.sha256[:12]} {r.width or '?'}x{r.height or '?'}]" for r in media)
    return f"[seq {seq} · {head}] {body}"


_RECALLED_LINE = lazy_compile(r"^\[seq (\d+) · ", re.M)
_RECALL_SECTION = lazy_compile(r"<(recalled-originals|loaded-skills)[^>\n]*>\n(.*?)\n</\1>", re.S)


def recalled_seqs(text: str) -> list[int]:
    """Seqs of the originals :func:`render_recalled` quoted in ``text``, in order, each once.

    Inside ``<recalled-originals>`` and ``<loaded-skills>`` sections (the continuity engine's KernelContext)
    only those sections are read; a text without one (a ``recall``-kind view message) is read whole. A quoted
    body line that itself starts with ``[seq N · `` would be counted too (the rendering has no closing marker).
    """
    sections = (
        [body for _, body in _RECALL_SECTION.findall(text)]
        if "<recalled-originals" in text or "<loaded-skills" in text
        else [text]
    )
    return list(dict.fromkeys(int(m) for body in sections for m in _RECALLED_LINE.findall(body)))


def _linked(reader: SessionReader, stored: Any, lo: int, hi: int) -> list[Any]:
    e = stored.event
    if isinstance(e, AssistantMessage):
        ids = {c.id for c in e.tool_calls}
        first: dict[str, Any] = {}
        for s in reader.events(after_seq=lo, until_seq=hi, kinds=("tool_result",)):
            if s.event.call_id in ids and not s.event.orphan:
                first.setdefault(s.event.call_id, s)
        return sorted(first.values(), key=lambda s: s.seq)
    calls = [
        s
        for s in reader.events(after_seq=lo, until_seq=hi, kinds=("assistant_message",))
        if any(c.id == e.call_id for c in s.event.tool_calls)
    ]
    return calls[-1:]


class RecallCache:
    """Rendered originals and call ↔ result links by seq, so an archival event is rendered,
    estimated and linked once per engine (events never change), cleared past :data:`MAX` entries; and
    recall's searches (:class:`~latch.engine.recall_search.SearchCache`), kept across requests.
    ``keep_searches=False`` searches the store afresh on every recall (the same rows, slower)."""

    MAX = 16_384
    TEXT_CHARS = 1 << 22
    """Characters of the rows' lower-cased searchable texts kept (:meth:`text`; emptied past it)."""

    def __init__(self, counter: Any, *, keep_searches: bool = True):
        self.counter = counter
        self.searches = SearchCache() if keep_searches else None
        self._items: dict[int, RecalledEvent] = {}
        self._links: dict[tuple[int, int, int], list[Any]] = {}
        self._texts: dict[int, str] = {}
        self._partners: dict[tuple[int, int], list[Any]] = {}
        self._text_chars = 0

    def text(self, stored: Any) -> str:
        """``stored.event.searchable_text().lower()``, kept by seq (a row a search lists again is not rendered
        again: an assistant turn's text re-encodes its calls' arguments)."""
        got = self._texts.get(stored.seq) if KEEP_ROWS else None
        if got is None:
            got = stored.event.searchable_text().lower()
            if self._text_chars + len(got) > self.TEXT_CHARS:
                self._texts.clear()
                self._text_chars = 0
            self._texts[stored.seq] = got
            self._text_chars += len(got)
        return got

    def item(self, stored: Any) -> RecalledEvent:
        got = self._items.get(stored.seq)
        if got is None:
            if len(self._items) >= self.MAX:
                self._items.clear()
            text = render_recalled(stored)
            got = self._items[stored.seq] = RecalledEvent(
                seq=stored.seq, kind=stored.kind, text=text, tokens=self.counter.text(text + "\n")
            )
        return got

    def partners(self, reader: SessionReader, stored: Any, before_seq: int) -> list[Any]:
        """The linked events of ``stored`` inside the archival region (a call's results, a result's call),
        looked up in a short window first, then up to :data:`PARTNER_WINDOW` seqs away (kept by seq and bound)."""
        got = self._partners.get((stored.seq, before_seq)) if KEEP_ROWS else None
        if got is None:
            got = self._partners_of(reader, stored, before_seq)
            if len(self._partners) >= self.MAX:
                self._partners.clear()
            self._partners[stored.seq, before_seq] = got
        return got

    def _partners_of(self, reader: SessionReader, stored: Any, before_seq: int) -> list[Any]:
        e, seq = stored.event, stored.seq
        if isinstance(e, AssistantMessage) and e.tool_calls:
            want = len({c.id for c in e.tool_calls})
            windows = [(seq, min(seq + w, before_seq - 1)) for w in (16, PARTNER_WINDOW)]
            # the results mostly follow the call at once: when a window's first few seqs hold one result of
            # every call, those are the first of each in the whole window (the lookup reads less)
            probe = (seq, min(seq + want + 2, windows[0][1]))
        elif isinstance(e, ToolResult) and not e.orphan:
            want = 1
            windows = [(max(0, seq - w - 1), seq - 1) for w in (16, PARTNER_WINDOW)]
            # the call mostly comes just before: a call in the window's last seqs is the newest one in the window
            probe = (max(windows[0][0], seq - 4), seq - 1)
        else:
            return []
        found: list[Any] = []
        for n, (lo, hi) in enumerate(windows):
            key = (seq, lo, hi)
            if key not in self._links:
                if len(self._links) >= self.MAX:
                    self._links.clear()
                near = _linked(reader, stored, *probe) if PROBE and n == 0 and probe != (lo, hi) else []
                self._links[key] = near if len(near) >= want else _linked(reader, stored, lo, hi)
            found = self._links[key]
            if len(found) >= want:
                break
        return found


def _recallable(stored: Any) -> bool:
    """Conversation, sub-agent and kernel facts; not foreign summaries or harness notes (API errors excepted)."""
    if stored.kind == "compaction_marker":
        return False
    if stored.kind == "system_note":
        return getattr(stored.event, "subtype", "") == "api_error"
    return True


def recall(
    reader: SessionReader,
    cache: RecallCache,
    terms: Sequence[str],
    *,
    before_seq: int,
    limit_tokens: int,
    until_seq: int | None = None,
    exclude: Iterable[int] = (),
) -> list[RecalledEvent]:
    """Recalled originals for ``terms`` from the archival region ``seq < before_seq``, chronological.

    Rows holding every identifier of ``terms`` (without identifiers: every term) first, then rows
    holding any identifier, then rows holding any other term, each search newest first; a row is taken
    together with its call/result partners, or not at all, while the total stays within
    ``limit_tokens`` (tokens of :func:`render_recalled` text plus a newline, by the cache's counter).
    Seqs in ``exclude`` (already recalled) are skipped.
    """
    if not terms or limit_tokens <= 0 or before_seq <= 1:
        return []
    ids = [t for t in terms if _specific(t)]
    others = [t for t in terms if not _specific(t)]
    every = ids or others  # every identifier (a query without one: every other term), then any of each
    searches = [(every, "and")] if len(every) > 1 else []  # (an AND of one term is its OR)
    searches += [(group, "or") for group in (ids, others) if group]
    specific = [t.lower() for t in ids]
    words = [t.lower() for t in others]
    need = min(2, len(words))
    taken: dict[int, RecalledEvent] = {}
    skip = set(exclude)
    judged: set[int] = set()  # rows an earlier search already offered
    used = rows = 0
    for group_terms, mode in searches:
        if rows >= RECALL_ROWS:
            break
        hits = (
            newest_hits(reader, " ".join(group_terms), mode, before_seq, until_seq)
            if cache.searches is None
            else cache.searches.newest(reader, group_terms, mode, before_seq, until_seq)
        )
        for hit in hits:
            if rows >= RECALL_ROWS:
                break
            if hit.seq in judged or hit.seq in taken or hit.seq in skip:
                continue
            judged.add(hit.seq)
            if not _recallable(hit):
                continue
            text = cache.text(hit)
            if not any(t in text for t in specific) and (not need or sum(w in text for w in words) < need):
                continue
            partners = cache.partners(reader, hit, before_seq)
            items = [cache.item(s) for s in (hit, *partners) if s is hit or (s.seq not in taken and s.seq not in skip)]
            cost = sum(r.tokens for r in items)
            if used + cost > limit_tokens:
                continue
            used += cost
            rows += 1
            for r in items:
                taken[r.seq] = r
    return [taken[s] for s in sorted(taken)]
