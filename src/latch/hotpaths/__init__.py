"""Hot-path dispatcher: native C++ (``latch._native``) or the pure-Python reference.

``LATCH_IMPL=auto|native|python`` (default ``auto``): ``native`` requires the
extension; ``python`` forces the reference; ``auto`` prefers native. The backend
is chosen at first use, not at import: importing this module never fails. The
first use of a dispatched entry (or of :data:`BACKEND`) with an invalid
``LATCH_IMPL``, or with ``LATCH_IMPL=native`` and no extension, raises
:class:`BackendError` (a ``ValueError`` and an ``ImportError``) with a one-line
message; every later use raises it again. So does a ``LATCH_NATIVE_KERNEL`` (the native estimator's
ASCII path: ``scalar`` or ``avx2``, see :data:`KERNELS`) that is unknown or that this CPU cannot run, when
the native backend is chosen. :func:`backend_error` returns that
message without raising. :data:`BACKEND` names the backend actually loaded.

Public entries (identical answers on both backends; ``tests/parity/test_parity.py``):

* :func:`estimate_tokens` ``(text: str, profile: str = "openai") -> int`` tokens
* :func:`estimate_tokens_batch` ``(texts: Iterable[str], profile: str = "openai") -> numpy int64 array``
* :func:`suffix_start` ``(prefix_sums, budget_tokens) -> int`` start index of the fitting suffix
* :func:`score_episodes` ``(CSR arrays..., now_seq, k) -> list[int]`` top-k episode indices
* :func:`ascii_terms` ``(text: str) -> list[str]`` the episode index's lexical terms of an ASCII text
  (``ValueError`` when ``text`` is not ASCII, ``TypeError`` when it is not a str)
* :func:`ascii_path_runs` ``(text: str) -> list[int]`` where an ASCII text may name files: ``[start, end, ...]``
  of the path-character runs holding a path hint (errors as ``ascii_terms``)
* :func:`ascii_command_classes` ``(text: str) -> int`` the command words an ASCII text holds, as bits
  (1 :data:`MUTATING_COMMANDS`, 2 :data:`TEST_COMMANDS`, 4 :data:`READ_COMMANDS`; errors as ``ascii_terms``)
* :class:`TermCounts` ``()`` the episode index's term dictionary and the open episode's term counts
  (``add``, ``add_text``, ``chosen``, ``new_episode``, ``term_id``, ``ids``; see ``_py.TermCounts``)

Array arguments accept int64 buffers (numpy int64 arrays, ``array("q")`` and memoryviews of one, read in place
without importing numpy) or sequences of ``int``. The C ABI
over the same kernels is :mod:`latch.estimators.cabi`.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from . import _tables

__all__ = [
    "BACKEND",
    "IMPL",
    "PROFILES",
    "BackendError",
    "backend_error",
    "estimate_tokens",
    "estimate_tokens_batch",
    "suffix_start",
    "score_episodes",
    "ascii_terms",
    "ascii_path_runs",
    "ascii_command_classes",
    "TermCounts",
    "MARKER_BITS",
    "STOP_WORDS",
    "PATH_EXTENSIONS",
    "MUTATING_COMMANDS",
    "TEST_COMMANDS",
    "READ_COMMANDS",
]

IMPL = os.environ.get("LATCH_IMPL", "auto").strip().lower() or "auto"
ALLOWED = ("auto", "native", "python")
PROFILES = tuple(_tables.PROFILE_TABLES)
MARKER_BITS = ("validation_passed", "validation_failed", "reground", "mutation", "evidence", "failure")
"""Episode structural markers, bit ``i`` of a marker mask being ``MARKER_BITS[i]`` (both backends)."""
STOP_WORDS = frozenset(
    """
the and for with this that you are was were from have has had not but can will what all any its our out use
into then than some just also been there their they them which when where would should could about after before
more most other such only over very your yours let lets here how why who whom does did done doing get got make
made need needs want like one two now new yes okay please thanks thank i'm it's don't can't we're you're
""".split()
)
"""Words that are never episode terms (both backends; the native module holds the same list)."""
PATH_EXTENSIONS = tuple(
    """
py pyi ipynb rs go c h cc cpp cxx hpp hh cs java kt kts scala swift m mm rb php pl lua r jl dart ex exs erl hs ml clj
js mjs cjs jsx ts tsx vue svelte css scss sass less html htm xml svg json jsonl yaml yml toml ini cfg conf env lock md
rst txt csv tsv sql sh bash zsh fish ps1 bat gradle cmake mk proto graphql tf nix dockerfile patch diff log traj pem
wasm sol zig nim v sv vhd
""".split()
)
"""File extensions that mark a file entity (lower case, matched in any case; both backends: the native module holds
the same list)."""
MUTATING_COMMANDS = ("*** Begin Patch", "apply_patch", "sed -i", "git apply")
"""Command words of a call that changes files (``*** Begin Patch`` anywhere, the others between word boundaries)."""
TEST_COMMANDS = (
    *"pytest py.test unittest tox nox jest vitest mocha ctest phpunit rspec mypy pyright ruff flake8 pylint".split(),
    *"eslint tsc".split(),
    *(f"cargo {w}" for w in ("test", "check", "clippy", "build", "nextest")),
    *(f"go {w}" for w in ("test", "vet", "build")),
    *(
        f"{t} {r}{w}"
        for t in ("npm", "yarn", "pnpm", "bun")
        for r in ("", "run ")
        for w in ("test", "lint", "typecheck", "build")
    ),
    *"make test|make check|mvn test|mvn verify|gradle test|gradle check|gradlew test|gradlew check".split("|"),
    *"dotnet test|swift test|zig build test".split("|"),
)
"""Command words of a test-like call (between word boundaries)."""
READ_COMMANDS = ("cat", "head", "tail", "sed -n", "rg", "grep", "ls", "find", "nl", "wc", "less", "tree")
"""Command words of a read/search call (at a command's start, followed by whitespace)."""

# Resolved on first use by __getattr__, then bound as plain module globals (no per-call cost).
_DISPATCHED = (
    "estimate_tokens",
    "estimate_tokens_batch",
    "suffix_start",
    "score_episodes",
    "ascii_terms",
    "ascii_path_runs",
    "ascii_command_classes",
    "TermCounts",
)
_error: str | None = None

if TYPE_CHECKING:  # what __getattr__ binds (same signatures on both backends)
    from ._py import (
        TermCounts,
        ascii_command_classes,
        ascii_path_runs,
        ascii_terms,
        estimate_tokens,
        estimate_tokens_batch,
        score_episodes,
        suffix_start,
    )

    BACKEND: str


class BackendError(ImportError, ValueError):
    """The hot-path backend cannot load: an invalid ``LATCH_IMPL`` or ``LATCH_IMPL=native`` without the module."""


def _resolve() -> None:
    """Choose the backend once; bind ``BACKEND`` and the dispatched entries, or remember why not."""
    global _error
    if _error is not None or "BACKEND" in globals():
        return
    if IMPL not in ALLOWED:
        _error = f"LATCH_IMPL must be auto, native or python, not {IMPL!r}"
        return
    impl: Any = None
    backend = "python"
    if IMPL in ("auto", "native"):
        try:
            from .. import _native  # the optional C++ extension
        except ImportError:  # pragma: no cover - depends on build
            if IMPL == "native":
                _error = "LATCH_IMPL=native but the native module latch._native is not built"
                return
        else:
            impl, backend = _native, "native"
            _error = _kernel_error(_native.ESTIMATOR_KERNEL)
            if _error is not None:
                return
    if impl is None:  # the reference builds its class table at import (milliseconds): only when it serves
        from . import _py as impl
    g = globals()
    for name in _DISPATCHED:
        g[name] = getattr(impl, name)
    g["BACKEND"] = backend


KERNELS = ("scalar", "avx2")
"""The values ``LATCH_NATIVE_KERNEL`` may take (unset: the fastest kernel the CPU runs)."""


def _kernel_error(running: str) -> str | None:
    """Why ``LATCH_NATIVE_KERNEL`` cannot be honoured (one line), given the kernel the module ``running``, or ``None``."""
    wanted = os.environ.get("LATCH_NATIVE_KERNEL")
    if wanted is None or wanted == "":
        return None
    if wanted not in KERNELS:
        return f"LATCH_NATIVE_KERNEL must be scalar or avx2 (or unset), not {wanted!r}"
    if running != wanted:
        return f"LATCH_NATIVE_KERNEL={wanted} but this CPU cannot run it (the estimator runs {running}): unset it"
    return None


def backend_error() -> str | None:
    """Why the hot-path backend cannot load (one line), or ``None`` when it loads."""
    _resolve()
    return _error


def __getattr__(name: str) -> Any:
    if name == "BACKEND" or name in _DISPATCHED:
        _resolve()
        if _error is not None:
            raise BackendError(_error)
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
