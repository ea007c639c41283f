"""``python -m latch`` and the ``latch`` command (:func:`run`)."""

from __future__ import annotations

import sys
from collections.abc import Sequence

__all__ = ["local_bench", "run"]


def local_bench(argv: Sequence[str]) -> bool:
    """Whether the command line ``argv`` (without the program) runs ``latch bench`` on the local task server: the
    first word after the group's options (``--db PATH``) is ``bench``, with neither ``--scheduler`` (the jobs run
    on Dask) nor ``-h``/``--help``."""
    words = iter(argv)
    for word in words:
        if word == "--db":
            next(words, None)
        elif word.startswith("--db="):
            continue
        else:
            rest = list(words)
            return word == "bench" and not any(
                a in ("-h", "--help", "--scheduler") or a.startswith("--scheduler=") for a in rest
            )
    return False


def run() -> None:
    """The ``latch`` command: for a local ``latch bench`` (:func:`local_bench`) the task server starts first
    (:func:`latch.bench.executor.start_task_server`), so its warm-up runs while the command's own modules load,
    then :func:`latch.cli.main`."""
    if local_bench(sys.argv[1:]):
        from .bench.executor import start_task_server

        start_task_server()
    from .cli import main

    main()


if __name__ == "__main__":
    run()
