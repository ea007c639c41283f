"""Regular expressions compiled at their first use (``latch.lazyre``): the same matches as ``re.compile``, nothing
compiled before, and a command whose modules define many patterns compiles only those it uses."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from latch.lazyre import lazy_compile


def test_a_lazy_pattern_matches_as_the_compiled_one(monkeypatch):
    compiled: list[tuple[str, int]] = []
    real = re.compile

    def counting(pattern, flags=0):
        compiled.append((pattern, flags))
        return real(pattern, flags)

    monkeypatch.setattr(re, "compile", counting)
    lazy = lazy_compile(r"^(\w+)=(\d+)$", re.M)
    assert compiled == []  # nothing compiled yet
    text = "a=1\nb=x\nc=3"
    eager = real(r"^(\w+)=(\d+)$", re.M)
    assert [m.groups() for m in lazy.finditer(text)] == [m.groups() for m in eager.finditer(text)]
    assert compiled == [(r"^(\w+)=(\d+)$", re.M)]  # once, at the first use
    assert lazy.search(text).group(2) == "1" and lazy.match("b=x") is None
    assert lazy.sub(r"\2", text) == eager.sub(r"\2", text) and lazy.findall(text) == eager.findall(text)
    assert (lazy.pattern, lazy.flags, lazy.groups) == (eager.pattern, eager.flags, eager.groups)
    assert len(compiled) == 1


def test_a_bad_pattern_raises_at_first_use():
    bad = lazy_compile("(unclosed")
    with pytest.raises(re.error):
        bad.search("x")


def test_the_derivation_rules_compile_nothing_at_import():
    code = (
        "import re, sys\n"
        "real = re.compile\n"
        "seen = []\n"
        "re.compile = lambda p, flags=0: seen.append(sys._getframe(1).f_globals.get('__name__')) or real(p, flags)\n"
        "import latch.kernel.derive, latch.providers, latch.host.changes, latch.config, latch.importers\n"
        "print(sorted({m for m in seen if m and m.startswith(('latch.kernel.derive', 'latch.kernel.shell', "
        "'latch.providers._sdk', 'latch.host.changes', 'latch.config', 'latch.importers'))}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_pending_patterns_are_named_and_compiled_on_demand(monkeypatch):
    from latch import lazyre

    compiled: list[str] = []
    real = re.compile
    monkeypatch.setattr(re, "compile", lambda pattern, flags=0: compiled.append(pattern) or real(pattern, flags))
    namespace = {"A": lazy_compile("a+"), "B": lazy_compile("b+"), "C": real("c+"), "n": 3}
    namespace["A"].search("aa")  # used: compiled already
    assert lazyre.pending(namespace) == ["B"]
    assert lazyre.compile_pending(namespace) == 1 and compiled == ["a+", "b+"]
    assert lazyre.pending(namespace) == [] and lazyre.compile_pending(namespace) == 0
    assert namespace["B"].fullmatch("bbb") and compiled == ["a+", "b+"]  # nothing compiled again
