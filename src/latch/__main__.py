"""``python -m latch``: the ``latch`` command."""

from .cli import main

if __name__ == "__main__":
    main()
