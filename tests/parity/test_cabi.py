"""The C ABI (latch.h) loaded through cffi in ABI mode: our own library against the module and the
reference, a third-party library written here in C, and the loader's errors."""

from __future__ import annotations

import ctypes.util
import itertools
import shutil
import subprocess

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from latch.estimators import cabi
from latch.hotpaths import _py

try:
    from latch import _native as native
except ImportError:  # a pure-Python install: only the third-party and loader tests run
    native = None


@pytest.fixture(scope="module")
def lib() -> cabi.AbiLibrary:
    if native is None:
        pytest.skip("latch._native is not built (pure-Python install)")
    path = cabi.default_library_path()
    assert path is not None, "the native build installs latch/_lib/liblatch_core beside latch._native"
    return cabi.load(path)


def test_our_library_speaks_version_1(lib):
    assert lib.abi_version == cabi.ABI_VERSION == native.ABI_VERSION == 1
    assert lib.profiles == _py.PROFILES == native.PROFILES
    assert lib.path.parent.name == "_lib"
    for symbol in ("latch_estimate_utf32", "latch_estimate_utf8_batch", "latch_suffix_start", "latch_score_episodes"):
        assert lib.has(symbol)


@settings(max_examples=200, deadline=None)
@given(text=st.text(alphabet=st.characters(exclude_categories=()), max_size=200), profile=st.sampled_from(_py.PROFILES))
def test_estimate_through_cffi_matches_module_and_reference(lib, text, profile):
    want = _py.estimate_tokens(text, profile)
    assert native.estimate_tokens(text, profile) == want
    assert lib.estimate(text, profile) == want  # UTF-8, surrogates passed through
    assert lib.estimate_utf32(text, profile) == want


@settings(max_examples=50, deadline=None)
@given(texts=st.lists(st.text(alphabet=st.characters(exclude_categories=()), max_size=80), max_size=10))
def test_batch_through_cffi(lib, texts):
    got = lib.estimate_batch(texts, "cjk")
    assert got.dtype == np.int64
    assert got.tolist() == native.estimate_tokens_batch(texts, "cjk").tolist()


@settings(max_examples=100, deadline=None)
@given(units=st.lists(st.integers(0, 10_000), max_size=100), budget=st.integers(-5, 10**6))
def test_suffix_start_through_cffi(lib, units, budget):
    prefix = list(itertools.accumulate(units, initial=0))
    assert lib.suffix_start(prefix, budget) == native.suffix_start(prefix, budget) == _py.suffix_start(prefix, budget)


def test_score_episodes_through_cffi(lib):
    # Scores by hand (now_seq 100): ep0 2*1000 + 300 + 500 = 2800; ep1 1000 + 700 + 900 = 2600;
    # ep2 2500 + 200 = 2700.
    case = dict(
        term_indptr=[0, 3, 4, 4],
        term_ids=[1, 2, 3, 2],
        file_indptr=[0, 1, 1, 3],
        file_ids=[10, 10, 11],
        markers=[0b000001, 0b100000, 0],
        last_seq=[50, 90, 20],
        query_terms=[2, 3, 99],
        current_files=[11],
        now_seq=100,
        k=3,
    )
    assert _py.score_episodes(**case) == [0, 2, 1]
    assert native.score_episodes(**case) == [0, 2, 1]
    assert lib.score_episodes(**case) == [0, 2, 1]
    assert lib.score_episodes(**{**case, "k": 0}) == []
    with pytest.raises(ValueError, match="points outside its id array"):
        lib.score_episodes(**{**case, "term_indptr": [0, 3, 9, 9]})


def test_errors_are_values_not_crashes(lib):
    with pytest.raises(ValueError, match="unknown estimator profile 'gpt'"):
        lib.estimate("x", "gpt")
    # Raw calls: malformed UTF-8 reports the offset of the first bad sequence; NULL is refused.
    out = cabi.ffi().new("int64_t *")
    assert lib._lib.latch_estimate_utf8(b"ok \xff", 4, b"openai", out) == cabi.LATCH_E_ENCODING
    assert out[0] == 3
    assert lib._lib.latch_estimate_utf8(cabi.ffi().NULL, 5, b"openai", out) == -1
    assert lib._lib.latch_estimate_utf8(cabi.ffi().NULL, 0, b"openai", out) == 0 and out[0] == 0
    too_big = np.array([0x110000], dtype=np.uint32)
    assert lib._lib.latch_estimate_utf32(cabi.ffi().from_buffer("uint32_t[]", too_big), 1, b"openai", out) == -3
    assert cabi.ffi().string(lib._lib.latch_strerror(-2)) == b"unknown estimator profile"


@pytest.mark.skipif(native is not None, reason="the native library is installed")
def test_pure_install_has_no_default_library(monkeypatch):
    monkeypatch.delenv(cabi.ENV_LIBRARY, raising=False)
    assert cabi.default_library_path() is None
    with pytest.raises(cabi.CabiError, match="pure-Python build.*LATCH_CABI_LIBRARY"):
        cabi.load()


def test_our_library_as_estimator_plugin(lib):
    from latch.estimators import Estimator

    est = cabi.AbiEstimator(lib, profile="openai")
    assert isinstance(est, Estimator)
    text = "Estimate this: 漢字, \ud800 and HTTPServer."
    assert est.estimate(text) == _py.estimate_tokens(text, "openai")
    assert est.estimate_batch([text, ""]).tolist() == [_py.estimate_tokens(text, "openai"), 0]
    assert est.image_tokens(512, 512) == 85 + 170 * 1  # OpenAI's rule: one 512-px tile


def test_loader_errors(tmp_path, monkeypatch):
    with pytest.raises(cabi.CabiError, match="cannot load shared library"):
        cabi.load(tmp_path / "missing.so")
    libc = ctypes.util.find_library("c")  # a real shared library that is not a Latch one
    if libc:
        with pytest.raises(cabi.CabiError, match="missing symbol latch_abi_version"):
            cabi.load(libc)
    monkeypatch.setenv(cabi.ENV_LIBRARY, str(tmp_path / "nope.so"))
    with pytest.raises(cabi.CabiError, match="nope.so"):
        cabi.AbiEstimator()


THIRD_PARTY_C = r"""
#include <stddef.h>
#include <stdint.h>
#include <string.h>
uint32_t latch_abi_version(void) { return %(version)d; }
/* One token per started 3 bytes, whatever the profile: a stand-in for a real tokenizer. */
int latch_estimate_utf8(const char *text, size_t len, const char *profile, int64_t *out) {
    (void)text;
    if (strcmp(profile, "bytes3") != 0) return -2;
    *out = (int64_t)((len + 2) / 3);
    return 0;
}
"""


def _build(tmp_path, version: int):
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        pytest.skip("no C compiler to build a third-party library")
    src = tmp_path / f"third_party_v{version}.c"
    src.write_text(THIRD_PARTY_C % {"version": version})
    out = tmp_path / f"libthird_party_v{version}.so"
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(out), str(src)], check=True)
    return out


def test_third_party_library_as_estimator_plugin(tmp_path, monkeypatch):
    path = _build(tmp_path, 1)
    monkeypatch.setenv(cabi.ENV_LIBRARY, str(path))
    monkeypatch.setenv(cabi.ENV_PROFILE, "bytes3")
    est = cabi.AbiEstimator()
    assert est.PLUGIN_NAME == "cabi"
    assert est.library.path == path and est.library.profiles == ()
    assert est.name == "cabi:bytes3"
    assert est.estimate("abcdefg") == 3  # 7 bytes
    assert est.estimate("漢字") == 2  # 6 UTF-8 bytes
    assert est.estimate("\ud800") == 1  # surrogatepass: 3 bytes
    assert est.estimate_batch(["", "abcd"]).tolist() == [0, 2]  # no batch symbol: one call per text
    # images: the heuristic's Anthropic rule for a non-openai profile: ceil(1000*500/750) = 667
    assert (est.image_tokens(1000, 500), est.image_tokens(None, 500)) == (667, 1600)
    assert not est.library.has("latch_suffix_start")
    with pytest.raises(ValueError, match="unknown estimator profile 'openai'"):
        est.library.estimate("x", "openai")


def test_other_abi_version_is_refused(tmp_path):
    path = _build(tmp_path, 2)
    with pytest.raises(cabi.CabiError, match="speaks Latch C ABI version 2; this Latch needs version 1"):
        cabi.load(path)
