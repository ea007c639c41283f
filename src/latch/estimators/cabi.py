"""Load any shared library implementing the Latch C ABI (``latch.h``) through cffi in ABI mode.

This is how a native tokenizer plugs into Latch without Python bindings: build a
shared library exporting at least ``latch_abi_version`` (returning 1) and
``latch_estimate_utf8`` (see ``native/include/latch/latch.h`` and
``docs/c-abi.md``), then point Latch at it with env ``LATCH_CABI_LIBRARY=/path/to/lib``
and select the ``cabi`` estimator plugin. Without a path, :func:`load` opens
Latch's own ``liblatch_core`` (installed in ``latch/_lib/`` by the native build).

Errors: :class:`CabiError` (a subclass of ``OSError``) when the library cannot
be opened, lacks a required symbol or speaks another ABI version; ``ValueError``
for an unknown profile or text the library rejects.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import cffi
import numpy as np

import latch
from latch.estimators import anthropic_image_tokens, openai_image_tokens
from latch.hotpaths._py import IntArray

__all__ = ["ABI_VERSION", "CDEF", "CabiError", "AbiLibrary", "AbiEstimator", "default_library_path", "ffi", "load"]

ABI_VERSION = 1
ENV_LIBRARY = "LATCH_CABI_LIBRARY"
ENV_PROFILE = "LATCH_CABI_PROFILE"

#: The declarations of latch.h (version 1) that cffi needs.
CDEF = """
uint32_t latch_abi_version(void);
const char *latch_strerror(int code);
const char *latch_profiles(void);
int latch_estimate_utf8(const char *text, size_t len, const char *profile, int64_t *out_tokens);
int latch_estimate_utf32(const uint32_t *text, size_t len, const char *profile, int64_t *out_tokens);
int latch_estimate_utf8_batch(const char *data, const int64_t *offsets, size_t n, const char *profile,
                              int64_t *out_tokens);
int latch_suffix_start(const int64_t *prefix_sums, size_t len, int64_t budget, int64_t *out_start);
int latch_score_episodes(const int64_t *term_indptr, const int64_t *term_ids, size_t term_ids_len,
                         const int64_t *file_indptr, const int64_t *file_ids, size_t file_ids_len,
                         const int64_t *markers, const int64_t *last_seq, size_t n,
                         const int64_t *query_terms, size_t n_query, const int64_t *current_files,
                         size_t n_files, int64_t now_seq, size_t k, int64_t *out_indices,
                         size_t *out_count);
"""

LATCH_OK = 0
LATCH_E_PROFILE = -2
LATCH_E_ENCODING = -3


@functools.cache
def ffi() -> cffi.FFI:
    """The ``cffi.FFI`` that declares :data:`CDEF`, built on first use: parsing the declarations imports pycparser
    (about 40 ms), which a process that registers the plugin without opening a library never pays."""
    built = cffi.FFI()
    built.cdef(CDEF)
    return built


class CabiError(OSError):
    """A shared library could not be used as a Latch C-ABI library."""


def _library_filename() -> str:
    if sys.platform == "win32":
        return "latch_core.dll"
    if sys.platform == "darwin":
        return "liblatch_core.dylib"
    return "liblatch_core.so"


def default_library_path() -> Path | None:
    """Latch's own ``latch/_lib/liblatch_core`` (beside the package or beside ``latch._native``), or None."""
    folders = [Path(latch.__file__).parent]
    try:
        from latch import _native  # the optional C++ extension
    except ImportError:
        pass
    else:
        folders.append(Path(_native.__file__).parent)
    for folder in folders:
        candidate = folder / "_lib" / _library_filename()
        if candidate.is_file():
            return candidate
    return None


def _int64(values: Any) -> np.ndarray:
    return np.ascontiguousarray(values, dtype=np.int64)


class AbiLibrary:
    """An opened C-ABI library. ``path`` is where it was loaded from; ``profiles`` the names it knows
    (empty when it does not export ``latch_profiles``)."""

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path)
        try:
            self._ffi = ffi()
            self._lib = self._ffi.dlopen(str(self.path))
        except OSError as exc:
            raise CabiError(f"{self.path}: cannot load shared library: {exc}") from None
        for required in ("latch_abi_version", "latch_estimate_utf8"):
            if not self.has(required):
                raise CabiError(f"{self.path}: not a Latch C-ABI library (missing symbol {required})")
        self.abi_version = int(self._lib.latch_abi_version())
        if self.abi_version != ABI_VERSION:
            raise CabiError(
                f"{self.path}: speaks Latch C ABI version {self.abi_version}; this Latch needs version {ABI_VERSION}"
            )
        profiles = self._ffi.string(self._lib.latch_profiles()).decode() if self.has("latch_profiles") else ""
        self.profiles: tuple[str, ...] = tuple(p for p in profiles.split(",") if p)

    def __repr__(self) -> str:
        return f"AbiLibrary({str(self.path)!r}, abi_version={self.abi_version})"

    def has(self, symbol: str) -> bool:
        """Whether the library exports ``symbol`` (every function but the two required ones is optional)."""
        try:
            getattr(self._lib, symbol)
        except AttributeError:
            return False
        return True

    def _check(self, rc: int, what: str, profile: str | None = None) -> None:
        if rc == LATCH_OK:
            return
        if rc == LATCH_E_PROFILE:
            known = ", ".join(self.profiles) or "see the library's documentation"
            raise ValueError(f"unknown estimator profile {profile!r} for {self.path.name}; known: {known}")
        msg = self._ffi.string(self._lib.latch_strerror(rc)).decode() if self.has("latch_strerror") else f"error {rc}"
        raise ValueError(f"{self.path.name}: {what} failed: {msg} (code {rc})")

    def estimate(self, text: str, profile: str = "openai") -> int:
        """Tokens of ``text`` under ``profile`` (UTF-8 with lone surrogates passed through)."""
        data = text.encode("utf-8", "surrogatepass")
        out = self._ffi.new("int64_t *")
        self._check(self._lib.latch_estimate_utf8(data, len(data), profile.encode(), out), "estimate", profile)
        return int(out[0])

    def estimate_utf32(self, text: str, profile: str = "openai") -> int:
        """Tokens of ``text`` passed as UTF-32 code points (requires ``latch_estimate_utf32``)."""
        data = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
        out = self._ffi.new("int64_t *")
        ptr = self._ffi.from_buffer("uint32_t[]", data)
        self._check(self._lib.latch_estimate_utf32(ptr, len(data), profile.encode(), out), "estimate", profile)
        return int(out[0])

    def estimate_batch(self, texts: Iterable[str], profile: str = "openai") -> np.ndarray:
        """Tokens of every text as an int64 array: one call when ``latch_estimate_utf8_batch`` exists."""
        encoded = [t.encode("utf-8", "surrogatepass") for t in texts]
        if not self.has("latch_estimate_utf8_batch"):
            out = np.empty(len(encoded), dtype=np.int64)
            one = self._ffi.new("int64_t *")
            for i, data in enumerate(encoded):
                self._check(self._lib.latch_estimate_utf8(data, len(data), profile.encode(), one), "estimate", profile)
                out[i] = one[0]
            return out
        offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
        np.cumsum([len(b) for b in encoded], out=offsets[1:])
        out = np.empty(len(encoded), dtype=np.int64)
        rc = self._lib.latch_estimate_utf8_batch(
            b"".join(encoded),
            self._ffi.from_buffer("int64_t[]", offsets),
            len(encoded),
            profile.encode(),
            self._ffi.from_buffer("int64_t[]", out),
        )
        self._check(rc, "estimate_batch", profile)
        return out

    def suffix_start(self, prefix_sums: Sequence[int], budget: int) -> int:
        """As :func:`latch.hotpaths.suffix_start` (``budget`` must fit int64)."""
        arr = _int64(prefix_sums)
        out = self._ffi.new("int64_t *")
        self._check(
            self._lib.latch_suffix_start(self._ffi.from_buffer("int64_t[]", arr), len(arr), budget, out), "suffix_start"
        )
        return int(out[0])

    def score_episodes(
        self,
        term_indptr: IntArray,
        term_ids: IntArray,
        file_indptr: IntArray,
        file_ids: IntArray,
        markers: IntArray,
        last_seq: IntArray,
        query_terms: IntArray,
        current_files: IntArray,
        now_seq: int,
        k: int,
    ) -> list[int]:
        """As :func:`latch.hotpaths.score_episodes`."""
        arrs = [
            _int64(a)
            for a in (term_indptr, term_ids, file_indptr, file_ids, markers, last_seq, query_terms, current_files)
        ]
        ti, tid, fi, fid, mk, ls, q, cf = arrs
        n = len(mk)
        if len(ti) != n + 1 or len(fi) != n + 1 or len(ls) != n:
            raise ValueError("score_episodes: term_indptr/file_indptr need n+1 entries and last_seq n entries")
        take = min(max(k, 0), n)
        out = np.empty(max(take, 1), dtype=np.int64)
        count = self._ffi.new("size_t *")
        buf = [self._ffi.from_buffer("int64_t[]", a) for a in arrs]
        rc = self._lib.latch_score_episodes(
            buf[0],
            buf[1],
            len(tid),
            buf[2],
            buf[3],
            len(fid),
            buf[4],
            buf[5],
            n,
            buf[6],
            len(q),
            buf[7],
            len(cf),
            now_seq,
            take,
            self._ffi.from_buffer("int64_t[]", out),
            count,
        )
        self._check(rc, "score_episodes")
        return [int(i) for i in out[: count[0]]]


def load(path: str | os.PathLike[str] | None = None) -> AbiLibrary:
    """Open a C-ABI library: ``path``, else env ``LATCH_CABI_LIBRARY``, else Latch's own.

    :class:`CabiError` when nothing can be loaded (e.g. a pure-Python install without ``path``).
    """
    chosen = path or os.environ.get(ENV_LIBRARY) or default_library_path()
    if not chosen:
        raise CabiError(f"Latch's C-ABI library is not installed (pure-Python build); pass a path or set {ENV_LIBRARY}")
    return AbiLibrary(chosen)


class AbiEstimator:
    """Estimator plugin backed by a C-ABI library (``PLUGIN_NAME = "cabi"``), following
    :class:`latch.estimators.Estimator`.

    The library is ``LATCH_CABI_LIBRARY`` or Latch's own; the profile name passed to it is
    ``LATCH_CABI_PROFILE`` (default ``openai``). :class:`CabiError` when no library can be
    loaded. Images use Latch's dimension-based rules: OpenAI's for the ``openai`` profile, else
    Anthropic's (the more conservative).
    """

    PLUGIN_NAME = "cabi"
    DESCRIPTION = "Token estimator from any shared library implementing latch.h (env LATCH_CABI_LIBRARY)."

    def __init__(self, library: AbiLibrary | str | os.PathLike[str] | None = None, profile: str | None = None):
        self.library = library if isinstance(library, AbiLibrary) else load(library)
        self.profile = profile or os.environ.get(ENV_PROFILE) or "openai"
        self.name = f"cabi:{self.profile}"

    def __repr__(self) -> str:
        return f"AbiEstimator({str(self.library.path)!r}, profile={self.profile!r})"

    def estimate(self, text: str) -> int:
        """Estimated tokens of ``text``."""
        return self.library.estimate(text, self.profile)

    def estimate_batch(self, texts: Iterable[str]) -> np.ndarray:
        """Estimated tokens of every text (numpy int64 array)."""
        return self.library.estimate_batch(texts, self.profile)

    def image_tokens(self, width: int | None, height: int | None) -> int:
        """Tokens of one image of ``width`` x ``height`` pixels (conservative when unknown)."""
        rule = openai_image_tokens if self.profile == "openai" else anthropic_image_tokens
        return rule(width, height)
