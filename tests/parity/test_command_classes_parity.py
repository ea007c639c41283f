"""Parity: the native command-word scanner (``latch._native.ascii_command_classes``) gives exactly the reference's
bits (``latch.hotpaths._py.ascii_command_classes``), the reference agrees with the episode index's command
patterns, and the call classes are the same on both backends.

Skips when the native module is not built (a ``LATCH_PURE_BUILD=1`` install).
"""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from latch import hotpaths
from latch.engine import episodes as E
from latch.events import parse_arguments
from latch.hotpaths import _py

native = pytest.importorskip("latch._native", reason="latch._native is not built (pure-Python install)")

_WORDS = (*hotpaths.MUTATING_COMMANDS, *hotpaths.TEST_COMMANDS, *hotpaths.READ_COMMANDS)
# The command words whole, cut short, in another case and glued to word characters; the characters that may
# stand before and after them (a read word's prefix, every ASCII whitespace, word characters).
_PIECES = st.one_of(
    st.sampled_from(_WORDS),
    st.sampled_from(_WORDS).map(lambda w: w[:-1]),
    st.sampled_from(_WORDS).map(str.upper),
    st.sampled_from(["*** Begin", "Patch", "sed", "-i", "-n", "run", "x", "_", "9", "ls-", "cat.", "py.test"]),
    st.text(alphabet=" \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f\"';&|()-./_:=", min_size=1, max_size=3),
)
ASCII_TEXTS = st.one_of(
    st.lists(_PIECES, max_size=30).map("".join),
    st.text(alphabet=st.characters(max_codepoint=0x7F), max_size=300),
)


def _plain_bits(text: str) -> int:
    """The bits from the episode index's plain patterns under ``re.ASCII`` (as the ASCII scanner reads them)."""
    read = E._READ_CMD.replace(r"\s", E._ASCII_SPACE)
    return (
        (1 if E._MUTATING_CMD_RE.search(text) else 0)
        | (2 if re.search(E._TEST_CMD, text, re.ASCII) else 0)
        | (4 if re.search(read, text, re.ASCII) else 0)
    )


@settings(max_examples=1000, deadline=None)
@given(text=ASCII_TEXTS)
def test_ascii_command_classes_match_reference_and_plain_patterns(text):
    bits = native.ascii_command_classes(text)
    assert bits == _py.ascii_command_classes(text)
    assert bits == _plain_bits(text)


@pytest.mark.parametrize(
    ("text", "bits"),
    [
        ("", 0),
        ("pytest -q", 2),
        ("xpytest", 0),
        ("pytest_x", 0),
        ('{"command": "cat a.py"}', 4),
        ("cat", 0),
        ("concat a", 0),
        ("*** Begin Patch\nsed -i s/a/b/ f && make test; ls\t.", 7),
        ("sed -in", 0),
        ("git apply x.diff", 1),
        ("npm run typecheck", 2),
        ("py.test", 2),
    ],
)
def test_ascii_command_classes_examples(text, bits):
    assert native.ascii_command_classes(text) == bits
    assert _py.ascii_command_classes(text) == bits


def test_command_words_are_the_same_on_both_backends():
    assert native.MUTATING_COMMANDS == hotpaths.MUTATING_COMMANDS
    assert native.TEST_COMMANDS == hotpaths.TEST_COMMANDS
    assert native.READ_COMMANDS == hotpaths.READ_COMMANDS


@pytest.mark.parametrize("impl", [_py.ascii_command_classes, native.ascii_command_classes], ids=["reference", "native"])
def test_ascii_command_classes_errors(impl):
    with pytest.raises(ValueError, match="ascii_command_classes: text must be ASCII"):
        impl("pytest caf\u00e9")
    with pytest.raises(TypeError, match="ascii_command_classes: text must be str, not bytes"):
        impl(b"pytest")


_NAMES = st.sampled_from(["Bash", "bash", "shell", "exec_command", "Read", "grep", "view", "Task", "run"])
_VALUES = ASCII_TEXTS | st.text(max_size=60) | st.lists(ASCII_TEXTS, max_size=3)
_KEYS = st.sampled_from(["command", "cmd", "input", "argv", "description", "path", "todo"])


@settings(max_examples=500, deadline=None)
@given(name=_NAMES, value=st.dictionaries(_KEYS, _VALUES, max_size=3) | ASCII_TEXTS, escape=st.booleans())
def test_call_classes_same_on_both_backends(name, value, escape):
    """A call's class with the native scanner and with the reference, on JSON arguments (escaped or not, so a raw
    ASCII text can hold a command that is not) and on raw command text."""
    arguments = value if isinstance(value, str) else json.dumps(value, ensure_ascii=escape)
    native_class = E._classify_call(name, arguments)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(hotpaths, "ascii_command_classes", _py.ascii_command_classes)
        assert E._classify_call(name, arguments) == native_class


def _plain_class(name: str, arguments: str) -> int:
    """A call's class from the plain patterns (names without ``editor``): a mutating, then a test, then a read
    command word counts when both the raw arguments and the command text hold one, searched with the scanner the
    raw arguments pick; a read tool is a read."""
    lname, args = name.lower(), arguments[: E.SCAN_CHARS]
    if lname in E._MUTATING_TOOLS:
        return E._MUTATE
    cmd = E._command_text(arguments, parse_arguments(arguments))[: E.SCAN_CHARS]
    flags = re.ASCII if args.isascii() else 0
    read = E._READ_CMD.replace(r"\s", E._ASCII_SPACE) if flags else E._READ_CMD
    if all(E._MUTATING_CMD_RE.search(t) for t in (args, cmd)):
        return E._MUTATE
    if all(re.search(E._TEST_CMD, t, flags) for t in (args, cmd)):
        return E._VALIDATE
    if lname in E._READ_TOOLS or all(re.search(read, t, flags) for t in (args, cmd)):
        return E._READ
    return E._OTHER


@settings(max_examples=500, deadline=None)
@given(name=_NAMES, value=st.dictionaries(_KEYS, _VALUES, max_size=3) | ASCII_TEXTS, escape=st.booleans())
def test_call_classes_are_the_plain_patterns_verdicts(name, value, escape):
    arguments = value if isinstance(value, str) else json.dumps(value, ensure_ascii=escape)
    assert E._classify_call(name, arguments) == _plain_class(name, arguments)
