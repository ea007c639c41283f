"""Text that can always be written to a terminal, a pipe or a UTF-8 file.

JSON allows lone UTF-16 surrogates (``"\\ud800"``), and file names with undecodable bytes reach
Python as surrogate escapes, so stored text can hold code points that UTF-8 cannot encode
(``UnicodeEncodeError``). Every CLI output path goes through this module: rich output through
:func:`console` (whose stream applies :func:`printable` to everything written), plain lines through
:func:`echo`, JSON through :func:`dumps`. Each lone surrogate becomes U+FFFD REPLACEMENT CHARACTER;
stored events keep their original text, only what is printed changes.
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any

import click
from rich.console import Console

__all__ = ["printable", "dumps", "echo", "console", "PrintableStream"]

_SURROGATE = re.compile("[\ud800-\udfff]")


def printable(text: str) -> str:
    """``text`` with every lone surrogate (U+D800-U+DFFF) replaced by U+FFFD; otherwise unchanged."""
    return _SURROGATE.sub("\ufffd", text) if _SURROGATE.search(text) else text


def dumps(value: Any, **kwargs: Any) -> str:
    """``json.dumps(value, ensure_ascii=False, **kwargs)`` made printable (see :func:`printable`)."""
    return printable(json.dumps(value, ensure_ascii=False, **kwargs))


def echo(text: str, *, err: bool = False) -> None:
    """``click.echo`` of :func:`printable` ``text`` (stdout, or stderr with ``err``)."""
    click.echo(printable(text), err=err)


class PrintableStream:
    """A text stream that writes :func:`printable` text to ``sys.stdout`` (or ``sys.stderr``).

    The target is looked up on every call, so a swapped ``sys.stdout`` (click's ``CliRunner``,
    pytest's capture) is honoured like rich's own default, and so is a rich ``Live`` display's
    proxy (``rich_proxied_file``: the stream behind it, else writing would loop through the proxy).
    """

    def __init__(self, stderr: bool = False):
        self._stderr = stderr

    @property
    def target(self) -> Any:
        stream = sys.stderr if self._stderr else sys.stdout
        return getattr(stream, "rich_proxied_file", stream)

    def write(self, text: str) -> int:
        return self.target.write(printable(text))

    def flush(self) -> None:
        self.target.flush()

    def isatty(self) -> bool:
        return self.target.isatty()

    def fileno(self) -> int:
        return self.target.fileno()

    @property
    def encoding(self) -> str:
        return getattr(self.target, "encoding", None) or "utf-8"


def console(*, stderr: bool = False, **kwargs: Any) -> Console:
    """A rich ``Console`` (``kwargs`` as rich takes them) on a :class:`PrintableStream`."""
    return Console(file=PrintableStream(stderr), **kwargs)
