"""FTS5 text preparation and safe query building.

The index uses :data:`TOKENIZE`: ``unicode61`` whose token characters are letters,
numbers, private-use characters and other symbols (``So``: emoji, dingbats, ✓ ★ ©),
so emoji are searchable. ``unicode61`` keeps a run of token characters as one
token, so a two-character CJK word inside a longer run would never match and an
emoji glued to a word (``fix🔥``) would hide the word. Latch therefore indexes a
*prepared* text in which every CJK/kana/hangul character and every symbol of
:data:`_SYMBOL_RANGES` stands alone (separated by spaces), and a query goes
through the same preparation: ``"数 据"`` matches the word 数据 anywhere in 大数据库,
``🔥`` matches ``fix🔥now``, and 👩‍💻 (woman, zero-width joiner, laptop) is the
phrase ``"👩" + "💻"``.

Glued terms: ``C++``, ``C#`` and ``.NET`` are searchable as themselves (see :func:`prepare_text`;
migration ``m006_fts_glued_terms`` re-indexes stores written before), and so are dotted terms: a query that is
one dotted term (``node.js``, ``v1.2.3``, ``os.path``, ``main.py``) finds that term only, inside a longer one too
(``os.path`` finds ``os.path.join``), not ``node js`` (:func:`dotted_terms`; migration ``m007_fts_dotted_terms``
re-indexes stores written before).

Queries: any user string is valid. :func:`build_match_query` extracts the same
tokens ``unicode61`` would (letters, digits, symbols, marks glued to them), quotes
every token, so FTS keywords (``AND``, ``NEAR``), brackets, ``*``, ``:`` and quotes
are literal, and joins the tokens of one whitespace-separated chunk as a phrase
(``src/main.py`` → ``"src" + "main" + "py"``). It returns ``None`` when the query
holds no token: the caller then returns no rows, never an SQL error.
"""

from __future__ import annotations

import functools
import os
import re
import unicodedata
from collections.abc import Callable, Sequence

from ..lazyre import lazy_compile

try:
    from .. import _native  # the optional C++ extension (no Python layer): the FTS5 preparation
except ImportError:  # pragma: no cover - depends on build
    _native = None

__all__ = [
    "TOKENIZE",
    "GLUE",
    "prepare_text",
    "token_key",
    "index_keys",
    "prepared_keys",
    "MAX_KEY_CHARS",
    "dotted_terms",
    "MAX_DOTTED_PARTS",
    "query_tokens",
    "build_match_query",
    "match_phrases",
    "quote_token",
    "quoted_chunks",
    "build_phrase_query",
    "phrase_query_phrases",
    "is_cjk",
    "is_symbol",
    "MAX_QUERY_CHARS",
    "MAX_PHRASES",
    "MAX_PHRASE_TOKENS",
]

TOKENIZE = "unicode61 remove_diacritics 2 categories 'L* N* Co So'"
"""The FTS5 tokenizer of ``events_fts`` (migration ``m002_events_fts``)."""

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

# Other symbols (So) of Unicode 14.0, each range extended over the unassigned code points around it,
# plus the emoji skin-tone modifiers (Sk, U+1F3FB-U+1F3FF), minus U+166D (a separator for SQLite).
# A fixed table (not unicodedata at run time) keeps the index identical across Python versions.
_SYMBOL_RANGES = (
    (0xA6, 0xA6),
    (0xA9, 0xA9),
    (0xAE, 0xAE),
    (0xB0, 0xB0),
    (0x482, 0x482),
    (0x58D, 0x58E),
    (0x60E, 0x60F),
    (0x6DE, 0x6DE),
    (0x6E9, 0x6E9),
    (0x6FD, 0x6FE),
    (0x7F6, 0x7F6),
    (0x9FA, 0x9FA),
    (0xB70, 0xB70),
    (0xBF3, 0xBF8),
    (0xBFA, 0xBFA),
    (0xC7F, 0xC7F),
    (0xD4F, 0xD4F),
    (0xD79, 0xD79),
    (0xF01, 0xF03),
    (0xF13, 0xF13),
    (0xF15, 0xF17),
    (0xF1A, 0xF1F),
    (0xF34, 0xF34),
    (0xF36, 0xF36),
    (0xF38, 0xF38),
    (0xFBE, 0xFC5),
    (0xFC7, 0xFCF),
    (0xFD5, 0xFD8),
    (0x109E, 0x109F),
    (0x1390, 0x1399),
    (0x1940, 0x1940),
    (0x19DE, 0x19FF),
    (0x1B61, 0x1B6A),
    (0x1B74, 0x1B7C),
    (0x2100, 0x2101),
    (0x2103, 0x2106),
    (0x2108, 0x2109),
    (0x2114, 0x2114),
    (0x2116, 0x2117),
    (0x211E, 0x2123),
    (0x2125, 0x2125),
    (0x2127, 0x2127),
    (0x2129, 0x2129),
    (0x212E, 0x212E),
    (0x213A, 0x213B),
    (0x214A, 0x214A),
    (0x214C, 0x214D),
    (0x214F, 0x214F),
    (0x218A, 0x218B),
    (0x2195, 0x2199),
    (0x219C, 0x219F),
    (0x21A1, 0x21A2),
    (0x21A4, 0x21A5),
    (0x21A7, 0x21AD),
    (0x21AF, 0x21CD),
    (0x21D0, 0x21D1),
    (0x21D3, 0x21D3),
    (0x21D5, 0x21F3),
    (0x2300, 0x2307),
    (0x230C, 0x231F),
    (0x2322, 0x2328),
    (0x232B, 0x237B),
    (0x237D, 0x239A),
    (0x23B4, 0x23DB),
    (0x23E2, 0x244A),
    (0x249C, 0x24E9),
    (0x2500, 0x25B6),
    (0x25B8, 0x25C0),
    (0x25C2, 0x25F7),
    (0x2600, 0x266E),
    (0x2670, 0x2767),
    (0x2794, 0x27BF),
    (0x2800, 0x28FF),
    (0x2B00, 0x2B2F),
    (0x2B45, 0x2B46),
    (0x2B4D, 0x2BFF),
    (0x2CE5, 0x2CEA),
    (0x2E50, 0x2E51),
    (0x2E80, 0x2FFB),
    (0x3004, 0x3004),
    (0x3012, 0x3013),
    (0x3020, 0x3020),
    (0x3036, 0x3037),
    (0x303E, 0x303F),
    (0x3190, 0x3191),
    (0x3196, 0x319F),
    (0x31C0, 0x31E3),
    (0x3200, 0x321E),
    (0x322A, 0x3247),
    (0x3250, 0x3250),
    (0x3260, 0x327F),
    (0x328A, 0x32B0),
    (0x32C0, 0x33FF),
    (0x4DC0, 0x4DFF),
    (0xA490, 0xA4C6),
    (0xA828, 0xA82B),
    (0xA836, 0xA837),
    (0xA839, 0xA839),
    (0xAA77, 0xAA79),
    (0xFD40, 0xFD4F),
    (0xFDCF, 0xFDCF),
    (0xFDFD, 0xFDFF),
    (0xFFE4, 0xFFE4),
    (0xFFE8, 0xFFE8),
    (0xFFED, 0xFFEE),
    (0xFFFC, 0xFFFD),
    (0x10137, 0x1013F),
    (0x10179, 0x10189),
    (0x1018C, 0x101FC),
    (0x10877, 0x10878),
    (0x10AC8, 0x10AC8),
    (0x1173F, 0x1173F),
    (0x11FD5, 0x11FDC),
    (0x11FE1, 0x11FF1),
    (0x16B3C, 0x16B3F),
    (0x16B45, 0x16B45),
    (0x1BC9C, 0x1BC9C),
    (0x1CF50, 0x1D164),
    (0x1D16A, 0x1D16C),
    (0x1D183, 0x1D184),
    (0x1D18C, 0x1D1A9),
    (0x1D1AE, 0x1D241),
    (0x1D245, 0x1D245),
    (0x1D300, 0x1D356),
    (0x1D800, 0x1D9FF),
    (0x1DA37, 0x1DA3A),
    (0x1DA6D, 0x1DA74),
    (0x1DA76, 0x1DA83),
    (0x1DA85, 0x1DA86),
    (0x1E14F, 0x1E14F),
    (0x1ECAC, 0x1ECAC),
    (0x1ED2E, 0x1ED2E),
    (0x1F000, 0x1F0F5),
    (0x1F10D, 0x1FBCA),
)

_STANDALONE = sorted(_CJK_RANGES + _SYMBOL_RANGES)
# Two classes: re tests a character class's astral ranges one by one, so the astral class runs only on
# text that holds an astral character at all (emoji), keeping plain text at the BMP class's speed.
_BMP_RE = lazy_compile("([" + "".join(f"{chr(a)}-{chr(min(b, 0xFFFF))}" for a, b in _STANDALONE if a <= 0xFFFF) + "])")
_ASTRAL_RE = lazy_compile(
    "(?=[\U00010000-\U0010ffff])(["
    + "".join(f"{chr(max(a, 0x10000))}-{chr(b)}" for a, b in _STANDALONE if b > 0xFFFF)
    + "])"
)
_ANY_ASTRAL = lazy_compile("[\U00010000-\U0010ffff]")
_SURROGATES = lazy_compile("[\ud800-\udfff]")


def _in(ch: str, ranges: Sequence[tuple[int, int]]) -> bool:
    cp = ord(ch)
    return any(a <= cp <= b for a, b in ranges)


def is_cjk(ch: str) -> bool:
    """True when ``ch`` is one CJK/kana/hangul code point indexed as its own token."""
    return _in(ch, _CJK_RANGES)


def is_symbol(ch: str) -> bool:
    """True when ``ch`` is one symbol code point (emoji, dingbat, ©, ✓) indexed as its own token."""
    return _in(ch, _SYMBOL_RANGES)


def _standalone(ch: str) -> bool:
    return ch >= "\xa6" and _in(ch, _STANDALONE)  # no ASCII character stands alone (the first range is U+00A6)


# Glued terms: ``unicode61`` drops '+', '#' and '.', so ``C++`` and ``C#`` would be the bare
# letter c and ``.NET`` the word net. Before a word that ends in ``++``/``#``, or that starts with a dot at the
# start of a word (``.NET``, ``.env``; not the dot inside ``main.py``), the prepared text gets one more token:
# the word with those characters spelled as private-use code points (token characters of TOKENIZE), e.g.
# ``C++`` → ``C\ue02b\ue02b C++`` (tokens ``c\ue02b\ue02b``, ``c``) and ``.NET`` → ``\ue02eNET .NET``. A query
# goes through the same preparation, so ``C++`` is the phrase ``"c\ue02b\ue02b" + "c"`` and finds C++ only,
# while ``c`` still finds every c (C++ included). A dot inside a word separates, as before: ``node.js`` is the
# phrase ``"node" + "js"``, those two tokens next to each other (``node.js``; not ``node and js``).
GLUE = {"+": "\ue02b", "#": "\ue023", ".": "\ue02e"}
"""The private-use character each of ``+``, ``#`` and ``.`` becomes where it glues a token (a token character)."""
# The patterns are written for Python's matcher: a word's run is possessive (``*+``: a shorter run can never be
# followed by ``++``, ``#`` or ``.``, so backtracking through it only costs time), and ``_DOT_RE`` opens with its
# literal dot (its lookbehind then checks the character before it), so the matcher jumps from dot to dot.
_SUFFIX_RE = lazy_compile(r"(?<![A-Za-z0-9])([A-Za-z][A-Za-z0-9]*+)(\+\+|#)(?![A-Za-z0-9+#])")
_SUFFIX_HINT_RE = lazy_compile(r"#(?<=[A-Za-z0-9]#)|\+\+(?<=[A-Za-z0-9]\+\+)")
"""A ``#`` or ``++`` right after an ASCII letter or digit: every match of ``_SUFFIX_RE`` holds one."""
_DOT_RE = lazy_compile(r"\.(?<![A-Za-z0-9.]\.)([A-Za-z][A-Za-z0-9]*+)(?![A-Za-z0-9])")


_DOT_ALNUM_RE = lazy_compile(r"\.[A-Za-z0-9]")


def _dotted_chunks(text: str) -> list[str]:
    """The whitespace-separated chunks of ``text`` that hold a dot, each once, in order: every match of
    ``_DOT_RE`` and ``_DOTTED_RE`` lies inside one (whitespace is no letter, digit or dot), so scanning them is
    scanning the text, without running a regex over every word. None when no dot is followed by a letter or
    digit (both regexes need one: prose whose dots end sentences is not split at all)."""
    if "." not in text or not _DOT_ALNUM_RE.search(text):
        return []
    return [w for w in dict.fromkeys(text.split()) if "." in w]


def _glue(text: str, chunks: list[str] | None = None) -> str:
    if chunks is None:
        chunks = _dotted_chunks(text)
    if any(_DOT_RE.search(w) for w in chunks):
        text = _DOT_RE.sub(_dot_glued, text)
    if ("++" in text or "#" in text) and _SUFFIX_HINT_RE.search(text):  # _SUFFIX_RE needs one of them
        text = _SUFFIX_RE.sub(_suffix_glued, text)
    return text


def _dot_glued(m: re.Match[str]) -> str:
    return f" \ue02e{m.group(1)} .{m.group(1)}"


def _suffix_glued(m: re.Match[str]) -> str:
    return m.group(1) + "".join(GLUE[c] for c in m.group(2)) + " " + m.group(0)


# Dotted terms: a run of ASCII letters and digits joined by single dots (``node.js``, ``v1.2.3``,
# ``os.path.join``). The main text keeps its tokens (``node``, ``js``: every phrase query matches as before), and
# the prepared text ends with one extra token per contiguous sub-run of two or more parts, dots spelled as
# U+E02E (``node\ue02ejs``; ``os.path.join`` gives ``os\ue02epath``, ``path\ue02ejoin``, ``os\ue02epath\ue02ejoin``).
# A query chunk that is one dotted term is that single token, so it finds the term only.
_DOTTED_RE = lazy_compile(r"(?<![A-Za-z0-9])[A-Za-z0-9]++(?:\.[A-Za-z0-9]++)++(?![A-Za-z0-9])")
_DOTTED_QUERY_RE = lazy_compile(r"[A-Za-z0-9]+(?:\.[A-Za-z0-9]+)+")
_QUERY_TRIM = "\"'`()[]{}<>,;:!?."
MAX_DOTTED_PARTS = 8
"""Parts of a dotted term that get sub-run tokens (a longer run: its first ones), bounding the extra tokens."""


def dotted_terms(text: str) -> list[str]:
    """The extra index tokens of the dotted terms of ``text`` (see above), in order of appearance, each once."""
    return _dotted_terms(_dotted_chunks(text))


def _dotted_terms(chunks: list[str]) -> list[str]:
    out: dict[str, None] = {}
    # one scan over the chunks joined by spaces: a space is no letter or digit, so the matches are each chunk's
    for term in _DOTTED_RE.findall(" ".join(chunks)):
        if term.count(".") == 1:  # the common case (main.py, node.js): its one sub-run is the term itself
            out[term.replace(".", "\ue02e")] = None
            continue
        parts = term.split(".")[:MAX_DOTTED_PARTS]
        for i in range(len(parts) - 1):
            for j in range(i + 2, len(parts) + 1):
                out.setdefault("\ue02e".join(parts[i:j]))
    return list(out)


def _prepare_glued(text: str, chunks: list[str] | None = None) -> str:
    # each step of _glue runs only when its pattern can match (cheap substring checks, no scan per character)
    return _prepare_v1(_glue(text, chunks))


def prepare_text(text: str) -> str:
    """Text as stored in the FTS5 index: glued terms (``C++``, ``C#``, ``.NET``) get their own token, dotted terms
    (``node.js``) their tokens at the end (:func:`dotted_terms`), CJK characters and symbols are split apart, lone
    surrogates dropped. Deterministic; O(len(text)). The native module's ``fts_prepare_text`` when it is built
    (``LATCH_IMPL=python``: never), else :func:`_prepare_text_py`: the same text either way."""
    try:
        return _prepare(text)
    except UnicodeEncodeError:  # a lone surrogate (no UTF-8): the reference replaces it
        return _prepare_text_py(text)


def _backend() -> Callable[[str], str]:
    """The native preparation, unless ``LATCH_IMPL=python`` or the extension is not built: the reference."""
    if _native is None or os.environ.get("LATCH_IMPL", "auto").strip().lower() == "python":
        return _prepare_text_py
    prepare: Callable[[str], str] = getattr(_native, "fts_prepare_text", _prepare_text_py)
    return prepare


def _prepare_text_py(text: str) -> str:
    """The reference of :func:`prepare_text` (pure Python; ``tests/parity/test_fts_prepare_parity.py``)."""
    chunks = _dotted_chunks(text)
    prepared = _prepare_glued(text, chunks)
    if chunks:
        extra = _dotted_terms(chunks)
        if extra:
            prepared = prepared + "\n" + " ".join(extra)
    return prepared


_prepare: Callable[[str], str] = _backend()


def _prepare_v1(text: str) -> str:
    """The preparation of migration ``m002_events_fts`` (no glued terms): CJK and symbols split apart."""
    if text.isascii():
        return text
    if _SURROGATES.search(text):
        text = _SURROGATES.sub(" ", text)
    text = _BMP_RE.sub(r" \1 ", text)
    return _ASTRAL_RE.sub(r" \1 ", text) if _ANY_ASTRAL.search(text) else text


def query_tokens(chunk: str) -> list[str]:
    """Tokens of one query chunk as ``unicode61`` (:data:`TOKENIZE`) sees them in a prepared text.

    CJK characters and symbols are one token each; letters, numbers and private-use characters
    form tokens, and a mark (accent, variation selector) belongs to the token before it; a mark
    with no token before it, like every other character ('_' included), separates tokens.
    """
    return _scan(_prepare_glued(chunk))


_ASCII_TOKEN_RE = lazy_compile(r"[A-Za-z0-9]+")


def _scan(prepared: str) -> list[str]:
    """The ``unicode61`` tokens of an already prepared text, unfolded (see :func:`query_tokens`)."""
    if prepared.isascii():
        return _ASCII_TOKEN_RE.findall(prepared)
    out: list[str] = []
    cur: list[str] = []
    for ch in prepared:
        cat = unicodedata.category(ch)
        if _standalone(ch):
            if cur:
                out.append("".join(cur))
                cur = []
            out.append(ch)
        elif cat[0] in "LN" or cat == "Co" or (cat[0] == "M" and cur):
            cur.append(ch)
        elif cur:
            out.append("".join(cur))
            cur = []
    if cur:
        out.append("".join(cur))
    return out


MAX_KEY_CHARS = 100
"""Characters of a token that its :func:`token_key` keeps (a longer token shares its key with its prefix)."""


def token_key(token: str) -> str:
    """A token folded at least as coarsely as FTS5's ``unicode61 remove_diacritics 2`` folds it: case folded,
    compatibility-decomposed, combining marks dropped, cut to :data:`MAX_KEY_CHARS`. Two tokens FTS5 treats as
    equal have the same key, so the keys of a text's tokens are a superset filter for an FTS5 query over it."""
    if token.isascii():
        return token.lower()[:MAX_KEY_CHARS]
    folded = unicodedata.normalize("NFKD", token.casefold())
    return "".join(c for c in folded if not unicodedata.combining(c))[:MAX_KEY_CHARS] or token[:MAX_KEY_CHARS]


def index_keys(text: str) -> list[str]:
    """The distinct :func:`token_key` of every token of searchable ``text`` as indexed (:func:`prepare_text`),
    sorted: what a token-key index (the PostgreSQL store's ``events_fts.tokens``) holds for one event."""
    return prepared_keys(prepare_text(text))


def prepared_keys(prepared: str) -> list[str]:
    """:func:`index_keys` of a text already prepared (:func:`prepare_text`)."""
    return sorted({token_key(t) for t in _scan(prepared)})


def _quote(token: str) -> str:
    return '"' + token.replace('"', '""') + '"'


MAX_QUERY_CHARS = 4096
"""Characters of a query the store reads (``latch search`` refuses a longer query)."""
MAX_PHRASES = 64
"""Whitespace-separated chunks (phrases) of one query that count; later ones are ignored."""
MAX_PHRASE_TOKENS = 64
"""Tokens of one phrase that count (its first ones): a phrase is never expanded without bound."""


@functools.lru_cache(maxsize=4096)  # (a pure function of its arguments: recall asks for the same terms again)
def build_match_query(query: str, mode: str = "and") -> str | None:
    """An FTS5 MATCH expression for an arbitrary user string, or ``None`` if it has no token.

    ``mode="and"``: every chunk must match (as a phrase); ``mode="or"``: any chunk. A chunk that is one dotted
    term of at most :data:`MAX_DOTTED_PARTS` parts (``node.js``, quotes and trailing punctuation set aside) is
    that term's single token. Bounded work: only
    the first :data:`MAX_QUERY_CHARS` characters, :data:`MAX_PHRASES` chunks and :data:`MAX_PHRASE_TOKENS`
    tokens of each chunk count (beyond them the match can only be wider, never an error).
    """
    phrases = match_phrases(query)
    if not phrases:
        return None
    joiner = " AND " if mode == "and" else " OR "
    return joiner.join(" + ".join(_quote(t) for t in toks) for toks in phrases)


def match_phrases(query: str) -> list[list[str]]:
    """The phrases of :func:`build_match_query` for ``query``: each a list of tokens (unquoted), in query order,
    each phrase once (same bounds). ``[]`` when the query holds no token."""
    phrases: list[list[str]] = []
    seen = set()
    for chunk in query[:MAX_QUERY_CHARS].split():
        if len(phrases) >= MAX_PHRASES:
            break
        term = chunk.strip(_QUERY_TRIM)
        dotted = term.count(".") < MAX_DOTTED_PARTS and _DOTTED_QUERY_RE.fullmatch(term)  # the index has it
        toks = [term.replace(".", "\ue02e")] if dotted else query_tokens(chunk)[:MAX_PHRASE_TOKENS]
        if not toks:
            continue
        key = " + ".join(_quote(t) for t in toks)
        if key in seen:
            continue
        seen.add(key)
        phrases.append(toks)
    return phrases


def quote_token(token: str) -> str:
    """``token`` as an FTS5 string (double quotes, inner quotes doubled): always one literal token or phrase."""
    return _quote(token)


def quoted_chunks(query: str) -> list[str]:
    """The chunks of a user query where a double-quoted span is one chunk (its inner text) and every other
    whitespace-separated word is one; an unclosed quote runs to the end. ``'"Rust library" port'`` →
    ``["Rust library", "port"]``."""
    out: list[str] = []
    for i, part in enumerate(query[:MAX_QUERY_CHARS].split('"')):
        if i % 2:
            if part.strip():
                out.append(part)
        else:
            out.extend(part.split())
    return out


def build_phrase_query(query: str) -> str | None:
    """Like :func:`build_match_query` (``mode="and"``), except that a double-quoted span is one phrase: its
    tokens must occur next to each other in that order (``"Rust library"`` is ``"rust" + "library"``), where
    :func:`build_match_query` makes every word its own phrase. ``None`` when the query holds no token. The same
    bounds apply (:data:`MAX_PHRASES` chunks, :data:`MAX_PHRASE_TOKENS` tokens each)."""
    phrases = phrase_query_phrases(query)
    return " AND ".join(phrases) if phrases else None


def phrase_query_phrases(query: str) -> list[str]:
    """The phrases :func:`build_phrase_query` joins with ``AND``, in order, each once (``[]``: no token)."""
    phrases: list[str] = []
    for chunk in quoted_chunks(query)[:MAX_PHRASES]:
        if " " in chunk.strip():
            toks = [t for word in chunk.split() for t in _chunk_tokens(word)][:MAX_PHRASE_TOKENS]
            phrase = " + ".join(_quote(t) for t in toks)
        else:
            phrase = build_match_query(chunk) or ""
        if phrase and phrase not in phrases:
            phrases.append(phrase)
    return phrases


def _chunk_tokens(word: str) -> list[str]:
    term = word.strip(_QUERY_TRIM)
    if term.count(".") < MAX_DOTTED_PARTS and _DOTTED_QUERY_RE.fullmatch(term):
        return term.split(".")  # inside a phrase, a dotted term is its parts in a row (the main text's tokens)
    return query_tokens(word)
