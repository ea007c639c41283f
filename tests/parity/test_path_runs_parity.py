"""Parity: the native path-run scanner (``latch._native.ascii_path_runs``) gives exactly the reference's runs
(``latch.hotpaths._py.ascii_path_runs``), and the episode index's file entities are the same on both backends.

Skips when the native module is not built (a ``LATCH_PURE_BUILD=1`` install).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from latch import hotpaths
from latch.hotpaths import _py

native = pytest.importorskip("latch._native", reason="latch._native is not built (pure-Python install)")

# Names with and without known extensions in any case, the characters a run holds and the ones that end it,
# dots and slashes in a row, and extensions continued by a word character or a slash.
_PIECES = st.one_of(
    st.sampled_from(hotpaths.PATH_EXTENSIONS).map(lambda e: "." + e),
    st.sampled_from([".PY", ".Json", ".DockerFile", ".pyx", ".py_", ".py/", "..", "./", "../", "~/", "//", ".", "/"]),
    st.text(alphabet="abXY09_.@+~/-", min_size=1, max_size=12),
    st.text(alphabet=" \t\n,:;'\"()[]{}<>=*#!?\\|`$%^&\x00\x7f", min_size=1, max_size=3),
)
ASCII_TEXTS = st.one_of(
    st.lists(_PIECES, max_size=40).map("".join),
    st.text(alphabet=st.characters(max_codepoint=0x7F), max_size=400),
)


@settings(max_examples=1000, deadline=None)
@given(text=ASCII_TEXTS)
def test_ascii_path_runs_match_reference(text):
    assert native.ascii_path_runs(text) == _py.ascii_path_runs(text)


def test_ascii_path_runs_examples():
    text = "see src/a.py and foo.PY, x.py/ y.pyx, a.b.json: ok; ~/x v1.2 .py a.py_ b.Dockerfile"
    want = [4, 12, 17, 23, 25, 30, 38, 46, 52, 55, 61, 64, 71, 83]
    assert _py.ascii_path_runs(text) == want
    assert native.ascii_path_runs(text) == want
    assert [text[a:b] for a, b in zip(want[::2], want[1::2], strict=True)] == [
        "src/a.py",
        "foo.PY",
        "x.py/",
        "a.b.json",
        "~/x",
        ".py",
        "b.Dockerfile",
    ]


def test_path_extensions_are_the_same_on_both_backends():
    assert native.PATH_EXTENSIONS == hotpaths.PATH_EXTENSIONS
    assert all(e.isascii() and e.isalnum() and e == e.lower() for e in hotpaths.PATH_EXTENSIONS)


@pytest.mark.parametrize("impl", [_py.ascii_path_runs, native.ascii_path_runs], ids=["reference", "native"])
def test_ascii_path_runs_errors(impl):
    with pytest.raises(ValueError, match="ascii_path_runs: text must be ASCII"):
        impl("caf\u00e9/latte.py")
    with pytest.raises(TypeError, match="ascii_path_runs: text must be str, not bytes"):
        impl(b"a/b.py")


@settings(max_examples=300, deadline=None)
@given(text=ASCII_TEXTS | st.text(max_size=200))
def test_episode_paths_same_on_both_backends(text):
    from latch.engine import episodes as E

    E._RUN_PATHS.clear()
    native_paths = E._paths(text)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(hotpaths, "ascii_path_runs", _py.ascii_path_runs)
        E._RUN_PATHS.clear()
        assert E._paths(text) == native_paths
