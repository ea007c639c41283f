"""FTS5 text preparation and safe query building.

SQLite's ``unicode61`` tokenizer keeps a run of CJK characters as one token, so
a two-character CJK word inside a longer run would never match. Latch therefore
indexes a *prepared* text in which every CJK/kana/hangul character stands alone
(separated by spaces), and turns a CJK run in a query into a phrase of single
characters: ``"数 据"`` matches the word 数据 anywhere in 大数据库.

Queries: any user string is valid. :func:`build_match_query` extracts the same
tokens ``unicode61`` would (letters, digits, marks), quotes every token, so FTS
keywords (``AND``, ``NEAR``), brackets, ``*``, ``:`` and quotes are literal, and
joins the tokens of one whitespace-separated chunk as a phrase (``src/main.py``
→ ``"src" + "main" + "py"``). It returns ``None`` when the query holds no
token: the caller then returns no rows, never an SQL error.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["prepare_text", "query_tokens", "build_match_query", "is_cjk"]

# CJK Unified Ideographs (+ext A), compatibility ideographs, kana, hangul, bopomofo.
_CJK_RANGES = (
    (0x2E80, 0x2FDF),
    (0x3040, 0x30FF),
    (0x3100, 0x312F),
    (0x3190, 0x31FF),
    (0x3400, 0x4DBF),
    (0x4E00, 0x9FFF),
    (0xA960, 0xA97F),
    (0xAC00, 0xD7AF),
    (0xF900, 0xFAFF),
    (0x20000, 0x3134F),
)

_CJK_CLASS = "".join(f"{chr(a)}-{chr(b)}" for a, b in _CJK_RANGES)
_CJK_RE = re.compile(f"([{_CJK_CLASS}])")
_SURROGATES = re.compile("[\ud800-\udfff]")


def is_cjk(ch: str) -> bool:
    """True when ``ch`` is one CJK/kana/hangul code point indexed as its own token."""
    cp = ord(ch)
    return any(a <= cp <= b for a, b in _CJK_RANGES)


def prepare_text(text: str) -> str:
    """Text as stored in the FTS5 index: CJK characters split apart; lone surrogates dropped."""
    if _SURROGATES.search(text):
        text = _SURROGATES.sub(" ", text)
    if not _CJK_RE.search(text):
        return text
    return _CJK_RE.sub(r" \1 ", text)


def _token_char(ch: str) -> bool:
    # unicode61 token characters: letters, numbers, and (by default) marks glued to them;
    # '_' is a separator in unicode61 (category Pc).
    cat = unicodedata.category(ch)
    return cat[0] in "LN" or cat[0] == "M" or cat == "Co"


def query_tokens(chunk: str) -> list[str]:
    """Tokens of one query chunk as ``unicode61`` sees them (CJK characters one each)."""
    chunk = prepare_text(chunk)
    out: list[str] = []
    cur: list[str] = []
    for ch in chunk:
        if _token_char(ch) and not is_cjk(ch):
            cur.append(ch)
        else:
            if cur:
                out.append("".join(cur))
                cur = []
            if is_cjk(ch):
                out.append(ch)
    if cur:
        out.append("".join(cur))
    return out


def _quote(token: str) -> str:
    return '"' + token.replace('"', '""') + '"'


def build_match_query(query: str, mode: str = "and") -> str | None:
    """An FTS5 MATCH expression for an arbitrary user string, or ``None`` if it has no token.

    ``mode="and"``: every chunk must match (as a phrase); ``mode="or"``: any chunk.
    """
    phrases = []
    seen = set()
    for chunk in query.split():
        toks = query_tokens(chunk)
        if not toks:
            continue
        phrase = " + ".join(_quote(t) for t in toks) if len(toks) > 1 else _quote(toks[0])
        if phrase in seen:
            continue
        seen.add(phrase)
        phrases.append(phrase)
    if not phrases:
        return None
    joiner = " AND " if mode == "and" else " OR "
    return joiner.join(phrases)
