"""``python -m latch.cli``: the ``latch`` command."""

from .main import main

if __name__ == "__main__":  # pragma: no cover
    main()
