"""A run's summary, error signature and excerpt read from one split of its output equal the readings of the
whole list of lines: the last marked line (else the last line) and the best error line."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from latch.kernel.derive import common

_LINES = [
    "",
    "   ",
    "FAILED tests/test_tax.py::test_round - AssertionError: assert 1 == 2",
    "1 failed, 12 passed in 0.31s",
    "12 passed in 0.20s",
    "error: could not compile `shop`",
    "Traceback (most recent call last):",
    "KeyError: 'currency'",
    "npm ERR! code ELIFECYCLE",
    "\x1b[31mFAIL\x1b[0m src/a.test.ts",
    "Process exited with code 1",
    "Output:",
    "Wall time 0.2 seconds",
    "collected 14 items",
    "ok   shop/billing 0.012s",
    "warning: unused variable",
    "permission denied: /var/log/app.log",
    "x" * 250,
    "plain text line",
]

_outputs = st.lists(st.sampled_from(_LINES), max_size=30).map("\n".join)


def _summary_of_every_line(output: str) -> str:
    """The reading over the whole list: every marked line collected, the last one (else the last line) kept."""
    lines = common._meaningful_lines(output)
    marked = [s for s in lines if common._FAIL_RE.search(s) or common._PASS_RE.search(s)]
    line = (marked or lines or [""])[-1]
    return line if len(line) <= 200 else line[:199] + "…"


@given(_outputs)
@settings(max_examples=1_000, deadline=None)
def test_summary_is_the_last_marked_line(output):
    assert common._summary(output) == _summary_of_every_line(output)


@given(_outputs)
@settings(max_examples=1_000, deadline=None)
def test_signature_and_excerpt_read_once_equal_each_read_alone(output):
    assert common._signature_and_excerpt(output) == (common.error_signature(output), common._excerpt(output))


_PIECES = [
    *_LINES,
    *"FAIL fail error ERR Traceback make: *** panicked at Segmentation fault Diff in BUILD npm test result:".split(" "),
    *"FAILED ERROR errors 0 3 12 x _ é - [E12]: TS7: ! ( ) ok".split(" "),
    *"Diff in a.rs|test result: FAILED|BUILD FAILED|--- FAIL|npm error|error TS12:|1 failed|timed out".split("|"),
    " ",
    "\n",
    "\t",
    "\r\n",
]
_texts = st.lists(st.sampled_from(_PIECES), max_size=24).map("".join)
_PLAIN_FAIL = re.compile(common._FAIL_RE.pattern, re.M)
_PLAIN_ERRORISH = re.compile(common._ERRORISH, re.I)


@given(_texts)
@settings(max_examples=2_000, deadline=None)
def test_failure_search_finds_what_the_plain_pattern_finds(text):
    plain, found = _PLAIN_FAIL.search(text), common._fail_search(text)
    assert (found and found.span()) == (plain and plain.span())
    plain, found = _PLAIN_ERRORISH.search(text), common._errorish_search(text)
    assert (found and found.span()) == (plain and plain.span())


@given(_texts)
@settings(max_examples=1_000, deadline=None)
def test_error_line_is_the_first_line_each_pattern_matches_in_turn(text):
    lines = common._meaningful_lines(text)
    expected = next(
        (
            line
            for pick in (common._LEADING_ERROR_RE.match, _PLAIN_FAIL.search, _PLAIN_ERRORISH.search)
            for line in lines
            if pick(line)
        ),
        lines[0] if lines else "",
    )
    assert common._error_line(lines) == expected


@given(st.one_of(_texts, _outputs))
@settings(max_examples=1_000, deadline=None)
def test_error_line_read_line_by_line_equals_the_reading_of_every_line(text):
    lines = common._meaningful_lines(text)
    assert common._text_error_line(text) == (common._error_line(lines) if lines else None)


_SPACES = [" ", "  ", "\t", "\n", "\r\n", "\x0b", "\x1c", "\x85", "\u2028", "\u3000"]
_long_texts = st.lists(
    st.one_of(st.sampled_from(_SPACES), st.text(alphabet="ab\u00e9\u6f22-_", min_size=1, max_size=12)),
    max_size=700,
).map("".join)


@given(_long_texts)
@settings(max_examples=500, deadline=None)
def test_one_line_from_a_prefix_equals_the_whole_texts_collapsed_start(text):
    assert common._one_line(text) == " ".join(text.split())[: common.ONE_LINE_CHARS]
    padded = " \n" * 700 + text  # whitespace beyond the prefix read first
    assert common._one_line(padded) == " ".join(padded.split())[: common.ONE_LINE_CHARS]


def test_one_line_where_the_prefix_collapses_to_about_the_limit():
    """Words and whitespace runs of every width, so the prefix read first collapses to just under, at and just
    over :data:`~latch.kernel.derive.common.ONE_LINE_CHARS` characters."""
    for word in range(1, 9):
        for gap in range(1, 40):
            for shift in range(0, 3):
                text = "\t" * shift + ("w" * word + " " * gap) * (3_000 // (word + gap) + 1)
                assert common._one_line(text) == " ".join(text.split())[: common.ONE_LINE_CHARS], (word, gap, shift)


_LINE_STARTS = ["", " ", "  \t", "\x1f", "\x0c", "\r", "\u3000", "\x1b[31m", "é "]
_LEADS = [
    *"error Error: ERROR errors errorless fatal: Panic exception Exceptional Failed fail fail: failure".split(" "),
    *"KeyError: a.b.ValueError x.Exception my.error. npm ok x ~/a.py Script Output: Chunk".split(" "),
    "npm err",
    "npm ERR!",
    "npm  err",
    "my error",
    "Script error:",
    "Script failed",
    "Process exited with code 1",
    "",
]
_ENDS = ["", " ", "\t", " x", "_y", ".z", "!", "\x1f", "é"]
_led_texts = st.lists(
    st.tuples(st.sampled_from(_LINE_STARTS), st.sampled_from(_LEADS), st.sampled_from(_ENDS)).map("".join),
    max_size=12,
).flatmap(lambda lines: st.sampled_from(["\n", "\r\n", "\n\n", "\x0b"]).map(lambda sep: sep.join(lines)))


@given(_led_texts)
@settings(max_examples=2_000, deadline=None)
def test_error_line_found_where_a_line_starts_like_an_error_equals_the_reading_of_every_line(text):
    """Lines led by whitespace of every kind and by words that start like an error or almost: the first error-led
    line found in the whole text is the one the lines read in turn give."""
    lines = common._meaningful_lines(text)
    assert common._text_error_line(text) == (common._error_line(lines) if lines else None)


_REFUSALS = [
    "No replacement was performed",
    "ERROR:",
    "Error:",
    "Invalid `path`",
    "The path /a/b.py does not exist",
    "The path  does not exist",
    "Your proposed edit has introduced new syntax error",
    "error:",
    " Error:",
    "x",
    "The file a.py has been edited.",
]
_PLAIN_REFUSAL = re.compile(
    r"^(?:No replacement was performed|ERROR:|Error:|Invalid `path`|The path \S+ does not exist|"
    r"Your proposed edit has introduced new syntax error)",
    re.M,
)


@given(st.lists(st.sampled_from(_REFUSALS + ["\n", "\r\n", " "]), max_size=10).map("".join))
@settings(max_examples=1_000, deadline=None)
def test_an_editor_refusal_is_found_where_the_multiline_pattern_finds_it(text):
    from latch.kernel.derive import files

    assert files._edit_rejected(text) == (_PLAIN_REFUSAL.search(text) is not None)
