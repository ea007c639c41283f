"""The ``latch`` command: :func:`main` and the lazy command group :data:`cli` (:mod:`latch.cli.main`), one module per
command (``latch.cli.replay``, ``latch.cli.run``, ...; each exposes ``register(cli)``), shared option types
(:mod:`latch.cli.params`) and output-file checks (:mod:`latch.cli.outputs`). Terminal output goes through
:mod:`latch.textsafe`, which the UIs share.
"""

from __future__ import annotations

from .main import (
    BUILTIN_COMMANDS,
    OUTPUTS_KEY,
    AppContext,
    LatchCommand,
    LatchGroup,
    OneLineUsageError,
    cli,
    main,
    pass_app,
)
from .main import _load_commands as _load_commands  # noqa: E402

__all__ = [
    "main",
    "cli",
    "pass_app",
    "AppContext",
    "BUILTIN_COMMANDS",
    "OUTPUTS_KEY",
    "LatchCommand",
    "LatchGroup",
    "OneLineUsageError",
]
