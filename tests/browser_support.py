"""Debian's headless Chromium under Playwright for the browser tests: :func:`launch`.

Skipped without Playwright or the browser, failed instead when CI is set (.ci/run installs both).
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/lib/chromium/chromium")


def need(what: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"CI is set but {what} is missing (.ci/run installs it)")
    pytest.skip(f"needs {what}")


@contextmanager
def launch():
    """A Playwright ``Browser`` on Debian's chromium (``--no-sandbox``), closed afterwards."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        need("playwright (the [test] extra)")
    if not CHROMIUM.is_file():
        need(f"Debian's chromium at {CHROMIUM} (apt-get install -y chromium)")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        try:
            yield b
        finally:
            b.close()
