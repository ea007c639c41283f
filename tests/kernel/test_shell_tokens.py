"""Shell command reading without the lexer: the plain-script tokens equal :mod:`shlex`'s, on the corpus's
commands and on generated ones, and so does every classification built on them."""

from __future__ import annotations

import re
from unittest import mock

from corpus_support import importable_corpus_files, require_corpus
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from latch.events import AssistantMessage
from latch.importers import TranscriptError, parse_all_file
from latch.kernel import shell
from latch.kernel.derive import call_arguments
from latch.kernel.shell import classify_command, command_text, split_segments

_lexer_tokens = shell._shlex_tokens
"""The reference reading: :class:`shlex.shlex` as the kernel configures it (what every script took before the
plain reader, and what a script that is not plain still takes)."""


def _lexer_classification(script: str) -> list[shell.Segment]:
    """``classify_command(script)`` with every script read by the lexer (no cache)."""
    with mock.patch.object(shell, "_tokens", _lexer_tokens):
        return list(shell._classified_plain.__wrapped__(shell._without_heredocs(script)))


# every character class the lexer treats apart: word characters, operators, blanks, newlines, quotes,
# escapes, comments, expansions, Latin-1 word characters and other scripts
_ALPHABET = "ab yz09_~-./*?=[]{}:,+@%^!();<>|&\t\r\n'\"\\#$`éÿ漢\f\v"
_PLAIN = "abz09_~-./*?=[]{}:,+@%^!();<>|& \t\r\n"

_scripts = st.one_of(
    st.text(alphabet=_ALPHABET, max_size=40),
    st.text(alphabet=_PLAIN, max_size=60),
    st.lists(
        st.sampled_from(
            ["pytest", "-q", "tests/x.py", "&&", "||", ";", "|", ">", ">>", "2>&1", "<<", "EOF", "\n", "sed", "-i"]
            + ["'a b'", '"c d"', "rm", "-rf", "build", "cat", "f.txt", "#", "$X", "make", "fmt", "(", ")", "&"]
        ),
        max_size=12,
    ).map(" ".join),
)


@given(_scripts)
@example("python -m pytest -q tests/test_billing_rounding.py")
@example("git status --short\n\ngit log --oneline -8 | head")
@example("a;b&&c||d|e&f>g>>h<i 2>&1 ;; |& ;&")
@example("echo a#b")
@example("cat naïve.txt")
@settings(max_examples=2_000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_tokens_equal_the_lexers(script):
    assert shell._tokens(script) == _lexer_tokens(script)


@given(_scripts)
@settings(max_examples=500, deadline=None)
def test_classification_equals_the_lexers(script):
    assert classify_command(script) == _lexer_classification(script)


def _corpus_scripts() -> list[str]:
    scripts: dict[str, None] = {}
    for path in importable_corpus_files():
        try:
            parsed = parse_all_file(path)
        except TranscriptError:
            continue
        for session in parsed:
            for pe in session.events:
                if not isinstance(pe.event, AssistantMessage):
                    continue
                for call in pe.event.tool_calls:
                    args = call_arguments(call)
                    script = command_text(args.get("command", args.get("cmd")))
                    if script:
                        scripts[script] = None
    return list(scripts)


def test_corpus_commands_read_and_classify_as_the_lexer_does():
    require_corpus()
    scripts = _corpus_scripts()
    assert len(scripts) > 100  # the corpus's shell commands, every format
    plain = 0
    for script in scripts:
        heredocs_gone = shell._HEREDOC_RE.sub(lambda m: "<< " + m.group(2) + m.group(3), script)
        plain += bool(shell._PLAIN_SCRIPT_RE.fullmatch(heredocs_gone))
        assert shell._tokens(heredocs_gone) == _lexer_tokens(heredocs_gone), script
        assert classify_command(script) == _lexer_classification(script), script
    assert plain > len(scripts) // 4  # the shortcut reads a good share of real commands


_CHARACTER_AT_A_TIME_HEREDOC = re.compile(
    r"<<-?\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1([^\n]*)\n.*?\n[ \t]*\2[ \t]*(?=\n|$)", re.S
)
"""A heredoc as the shell reads it: its body taken a character at a time (the line-at-a-time pattern must agree)."""

_heredoc_scripts = st.lists(
    st.sampled_from(
        ["<<", "<<-", "<< ", "'EOF'", '"EOF"', "EOF", "EO", "E", "X1", "\n", " ", "\t", "cat", "python3 -", "x = 1"]
        + ["EOF\n", "\nEOF", " EOF ", "\tEOF", "&&", "|", ";", "'", '"', "<<EOF\nbody\nEOF\n", "a\nb", "-"]
    ),
    max_size=24,
).map("".join)


@given(_heredoc_scripts)
@example("python3 - <<'EOF'\nprint(1)\nEOF")
@example("cat <<EOF\n\nEOF\necho done")
@example("cat <<EOF\nEOF")
@example("cat <<EOF\na\nE\nEOF")
@example("cat <<-'END' > out.txt\n\tline\n\tEND\nls")
@settings(max_examples=2_000, deadline=None)
def test_heredoc_bodies_go_as_the_character_at_a_time_pattern_drops_them(script):
    want = _CHARACTER_AT_A_TIME_HEREDOC.sub(lambda m: "<< " + m.group(2) + m.group(3), script)
    assert shell._without_heredocs(script) == want
    assert split_segments(script) == shell._split_plain(want)


def test_scripts_that_differ_only_in_their_heredoc_bodies_classify_alike_and_as_each_alone():
    scripts = [f"python3 - <<'EOF'\nprint({i})\nEOF" for i in range(3)] + ["rm -rf build <<EOF\nx\nEOF\n"]
    for script in scripts:
        assert classify_command(script) == _lexer_classification(script)
    assert classify_command(scripts[0]) == classify_command(scripts[1])
    assert [s.kind for s in classify_command(scripts[3])] == ["mutate"]
