"""Text that can always be written to a terminal, a pipe or a UTF-8 file: the CLI's one output module.

JSON allows lone UTF-16 surrogates (``"\\ud800"``), and file names with undecodable bytes reach
Python as surrogate escapes, so stored text can hold code points that UTF-8 cannot encode
(``UnicodeEncodeError``). Every CLI output path goes through this module: rich output through
:func:`console` (whose stream applies :func:`printable` to everything written), plain lines through
:func:`echo`, JSON through :func:`dumps`. Each lone surrogate becomes U+FFFD REPLACEMENT CHARACTER;
stored events keep their original text, only what is printed changes.

On top of that, for the commands (``latch.cli``):

* :func:`safe` is the one escape for every string that comes from a transcript, a file name or a
  plugin: control characters and bidi overrides become visible escapes (``\\x1b``, ``\\u202e``), so no
  ANSI/OSC sequence, bell or right-to-left override reaches the terminal. :func:`markup` is
  :func:`safe` plus rich's markup escape, for strings embedded in rich markup (``[bold]`` in a
  transcript prints literally); a table cell takes :func:`cell` (a rich ``Text``, never parsed).
* :func:`warn` is the one warning format: ``warning: MESSAGE`` on stderr.
* :class:`Table` never ellipsizes: every column folds (``overflow="fold"``), and on a narrow console
  the widths keep every word of every cell whole while they can (a number is one word); only a
  console too narrow for the longest words folds them.
* :func:`console` is full width without hard wraps when its stream is not a terminal (a pipe, a
  file, click's ``CliRunner``), unless ``COLUMNS`` or ``width`` says otherwise; rich emoji codes
  (``:smile:``) are never replaced.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, cast

import click
import rich.table
from rich import box
from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderResult
from rich.markup import escape as _markup_escape
from rich.measure import Measurement
from rich.segment import Segment
from rich.text import Text

from .lazyre import lazy_compile

__all__ = [
    "printable",
    "safe",
    "markup",
    "cell",
    "warn",
    "dumps",
    "echo",
    "console",
    "Table",
    "PrintableStream",
    "PIPE_WIDTH",
    "Column",
    "fitted_table",
    "plural",
    "atomic_path",
    "write_text",
]

_SURROGATE = re.compile("[\ud800-\udfff]")
# C0 controls but \n and \t, DEL, C1 controls, ALM, LRM/RLM, LRE..RLO, LRI..PDI
_UNSAFE_BODY = lazy_compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")  # messages
_UNSAFE_LINE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")  # what rich lays out itself (newlines, tabs) or strips

PIPE_WIDTH = 32_768
"""Console width when output is not a terminal and ``COLUMNS`` is unset: wide enough that nothing wraps."""


def printable(text: str) -> str:
    """``text`` with every lone surrogate (U+D800-U+DFFF) replaced by U+FFFD; otherwise unchanged."""
    return _SURROGATE.sub("\ufffd", text) if _SURROGATE.search(text) else text


def _visible(match: re.Match[str]) -> str:
    ch = match.group()
    return _NAMED.get(ch) or (f"\\x{ord(ch):02x}" if ord(ch) < 0x100 else f"\\u{ord(ch):04x}")


def safe(text: Any, *, multiline: bool = False) -> str:
    """``str(text)`` that cannot drive a terminal: :func:`printable`, then each unsafe character escaped.

    Escaped (as ``\\xNN``, or ``\\uNNNN`` above U+00FF; ``\\n``, ``\\t``, ``\\r`` by name): C0 controls
    U+0000-U+001F (NUL, BEL, ESC and so every ANSI CSI/OSC sequence), DEL, C1 controls U+0080-U+009F, and
    the bidi controls U+061C, U+200E, U+200F, U+202A-U+202E, U+2066-U+2069. With ``multiline`` (a message
    body printed over several lines) ``\\n`` and ``\\t`` are kept; ``\\r`` never is. Lone surrogates become
    U+FFFD. Backslashes are not doubled (a path stays readable), so the escape is for display only.
    Idempotent; ``None`` gives ``"None"`` (callers substitute their own placeholder first).
    """
    s = printable(text if isinstance(text, str) else str(text))
    pattern = _UNSAFE_BODY if multiline else _UNSAFE_LINE
    return pattern.sub(_visible, s) if pattern.search(s) else s


def markup(text: Any, *, multiline: bool = False) -> str:
    """:func:`safe` ``text`` with rich markup escaped, for embedding in a string rich parses as markup."""
    return _markup_escape(safe(text, multiline=multiline))


def plural(n: int, noun: str, many: str | None = None, *, fmt: str = "") -> str:
    """``n`` and ``noun`` for a count in a message: ``"1 file"``, ``"0 files"``, ``"2 files"``. ``many``: the
    plural when it is not ``noun + "s"`` (``plural(n, "child", "children")``); ``fmt``: the format spec of the
    number (``","``: ``"1,234 events"``)."""
    return f"{n:{fmt}} {noun if n == 1 else many or noun + 's'}"


def cell(text: Any, *, multiline: bool = False, style: str = "") -> Text:
    """:func:`safe` ``text`` as a rich ``Text`` (a table cell or a printable that is never parsed as markup)."""
    return Text(safe(text, multiline=multiline), style=style)


def warn(message: str) -> None:
    """The one warning format of the CLI: ``warning: MESSAGE`` (made :func:`safe`) as one line on stderr."""
    click.echo(f"warning: {safe(message)}", err=True)


def error(message: str) -> None:
    """The one error format of the CLI, click's: ``Error: MESSAGE`` (made :func:`safe`) as one line on stderr, for
    a command that reports an error and goes on to exit with its own status."""
    click.echo(f"Error: {safe(message)}", err=True)


_JSON_UNSAFE = lazy_compile("[\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def dumps(value: Any, **kwargs: Any) -> str:
    """``json.dumps(value, ensure_ascii=False, **kwargs)`` made printable (see :func:`printable`).

    JSON already escapes C0 controls; DEL, C1 controls and bidi controls (which it leaves raw) are
    written as ``\\uNNNN`` too: the same JSON value, but nothing that can drive a terminal.
    """
    text = printable(json.dumps(value, ensure_ascii=False, **kwargs))
    return _JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text) if _JSON_UNSAFE.search(text) else text


def echo(text: str, *, err: bool = False) -> None:
    """``click.echo`` of :func:`printable` ``text`` (stdout, or stderr with ``err``)."""
    click.echo(printable(text), err=err)


@contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """A temporary path beside ``path`` (same folder, same suffix) to write the whole output to; when the block
    ends without an exception it replaces ``path`` in one step (``os.replace``), else it is removed and ``path``
    is left as it was (a new file gets the permissions ``open(path, "w")`` gives, an existing one keeps its own).
    A reader never sees a half-written file, and a failed write destroys nothing."""
    target = Path(path)
    import tempfile  # lazy: most commands write no file (its import, with shutil and random: about 3 ms)

    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=f".tmp{target.suffix}", dir=target.parent or ".")
    os.close(fd)
    try:
        try:
            mode = os.stat(target).st_mode & 0o7777  # an existing file keeps its permissions
        except OSError:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask  # what open(path, "w") would have made
        os.chmod(tmp, mode)
        yield Path(tmp)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write :func:`printable` ``text`` as UTF-8 to ``path`` atomically (:func:`atomic_path`). ``OSError`` when
    the folder refuses the file."""
    with atomic_path(path) as tmp:
        tmp.write_text(printable(text), encoding="utf-8")


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
        written: int = self.target.write(printable(text))
        return written

    def flush(self) -> None:
        self.target.flush()

    def isatty(self) -> bool:
        tty: bool = self.target.isatty()
        return tty

    def fileno(self) -> int:
        fd: int = self.target.fileno()
        return fd

    @property
    def encoding(self) -> str:
        return getattr(self.target, "encoding", None) or "utf-8"


def console(*, stderr: bool = False, **kwargs: Any) -> Console:
    """A rich ``Console`` (``kwargs`` as rich takes them) on a :class:`PrintableStream`.

    Emoji codes are left alone (``emoji=False`` unless given). When the stream is not a terminal
    and neither ``width`` nor ``COLUMNS`` is given, the console is :data:`PIPE_WIDTH` wide with
    ``soft_wrap=True``: tables print at their natural width and lines are never hard-wrapped.
    """
    stream = PrintableStream(stderr)
    kwargs.setdefault("emoji", False)
    if "width" not in kwargs and not kwargs.get("force_terminal") and "COLUMNS" not in os.environ:
        try:
            piped = not stream.isatty()
        except (AttributeError, ValueError):  # a closed or exotic stream
            piped = True
        if piped:
            kwargs.update(width=PIPE_WIDTH, soft_wrap=True)
    return _Console(file=cast(IO[str], stream), **kwargs)


class _Console(Console):
    """rich's ``Console``, except that a reader closing the pipe (``latch show S | head -1``) ends the
    command with status 0, like other CLI tools, instead of rich's ``SystemExit(1)``."""

    def on_broken_pipe(self) -> None:
        if self.quiet:
            return
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # later writes (and the interpreter's flush) go nowhere
        raise SystemExit(0)


class Table(rich.table.Table):
    """A rich ``Table`` that never ellipsizes a cell.

    Columns default to ``overflow="fold"``. When the natural widths do not fit the console, each
    column first gets its longest word (so ``12,345`` or a path stays whole and headers wrap
    between words), and the room left is shared in proportion to what each column still lacks;
    rich's own shrinking (folding inside words) happens only when even the longest words do not fit.
    Only rich's public API: the render protocol (``__rich_console__``), :class:`rich.measure.Measurement`
    and each column's ``width`` (fixed for that one render).
    """

    def add_column(self, *args: Any, **kwargs: Any) -> None:  # noqa: D102 (rich's signature)
        kwargs.setdefault("overflow", "fold")
        super().add_column(*args, **kwargs)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        plain = self._plain_lines(console, options)
        if plain is not None:
            for line in plain:
                yield Segment(line)
                yield Segment.line()
            return
        widths = self._fitted_widths(console, options)
        if widths is None:
            yield from super().__rich_console__(console, options)
            return
        given = [column.width for column in self.columns]
        for column, width in zip(self.columns, widths, strict=False):
            column.width = width  # fixed for this render only (rich then wraps each cell inside it)
        try:
            yield from super().__rich_console__(console, options)
        finally:
            for column, original in zip(self.columns, given, strict=False):
                column.width = original

    def _plain_lines(self, console: Console, options: ConsoleOptions) -> list[str] | None:
        """The table's lines as rich would print them, computed directly, when that is plain text: the console
        emits no styles (``color_system`` ``None``: a pipe, a file, ``NO_COLOR`` terminals excepted), the natural
        widths fit and the table is plain (:meth:`_plain_cells`). ``None`` otherwise: rich renders (and measures)
        it, which costs tens of microseconds per cell (a long ``latch replay`` table: tenths of a second)."""
        if console.color_system is not None or console.record:
            return None
        texts = self._plain_cells(console)
        if texts is None:
            return None
        columns = self.columns
        pads = [self._edge_padding(index) for index in range(len(columns))]
        widths = [
            (max(map(cell_len, plain), default=0) + left + right) or 1
            for plain, (left, right) in zip(texts, pads, strict=False)
        ]
        if sum(widths) > options.max_width - self._extra_width:
            return None
        grid: list[list[str]] = []
        for column, width, (left, right), plain in zip(columns, widths, pads, texts, strict=False):
            inner, pad_l, pad_r = width - left - right, " " * left, " " * right
            if column.justify == "right":  # rich strips a right-justified line's trailing spaces
                grid.append([f"{pad_l}{' ' * (inner - cell_len(t))}{t}{pad_r}" for t in map(str.rstrip, plain)])
            else:
                grid.append([f"{pad_l}{t}{' ' * (inner - cell_len(t))}{pad_r}" for t in plain])
        rows = list(zip(*grid, strict=False))
        box = (
            self.box.substitute(options, safe=self.safe_box if self.safe_box is not None else console.safe_box)
            if self.box
            else None
        )
        box = box.get_plain_headed_box() if box and not self.show_header else box
        if box is None:
            return ["".join(row) for row in rows]
        edge = self.show_edge
        lines = [box.get_top(widths)] if edge else []
        for i, row in enumerate(rows):
            if i == 0:
                box_left, box_right, divider = box.head_left, box.head_right, box.head_vertical
            elif i == len(rows) - 1:
                box_left, box_right, divider = box.foot_left, box.foot_right, box.foot_vertical
            else:
                box_left, box_right, divider = box.mid_left, box.mid_right, box.mid_vertical
            line = divider.join(row)
            lines.append(f"{box_left}{line}{box_right}" if edge else line)
            if i == 0 and self.show_header:
                lines.append(box.get_row(widths, "head", edge=edge))
        if edge:
            lines.append(box.get_bottom(widths))
        return lines

    def _plain_cells(self, console: Console, markup: bool | None = None) -> list[list[str]] | None:
        """Each column's cells (header first) as plain text, when the table is plain: every cell is a one-line
        ``str`` (rich markup, parsed as rich does, ``markup`` as rich's ``render_str`` takes it) or ``Text``
        without control characters, and the table uses none of the options the plain paths leave to rich (title,
        caption, footer, row styles or lines, vertical padding, collapsed padding, fixed, minimum or ratio widths,
        ``expand``, ``center``/``full`` justification). ``None`` otherwise."""
        if (
            not self.columns
            or self.expand
            or self.width is not None
            or self.min_width is not None
            or self.show_footer
            or self.show_lines
            or self.leading
            or self.row_styles
            or self.collapse_padding
            or self.padding[0]
            or self.padding[2]
            or self.title
            or self.caption
            or any(row.end_section for row in self.rows)
        ):
            return None
        if any(
            c.width is not None
            or c.min_width is not None
            or c.max_width is not None
            or c.ratio is not None
            or c.justify not in ("left", "right")
            for c in self.columns
        ):
            return None
        texts: list[list[str]] = []
        for column in self.columns:
            plain: list[str] = []
            for c in (*([column.header] if self.show_header else ()), *column.cells):
                text = console.render_str(c, markup=markup, highlight=False) if isinstance(c, str) else c
                if not isinstance(text, Text) or text.justify is not None or _CONTROL.search(text.plain):
                    return None
                plain.append(text.plain)
            texts.append(plain)
        return texts

    def _edge_padding(self, index: int) -> tuple[int, int]:
        """``(left, right)`` padding of column ``index``'s cells in a plain table (:meth:`_plain_cells`)."""
        _, right, _, left = self.padding
        last = len(self.columns) - 1
        return (0 if index == 0 and not self.pad_edge else left, 0 if index == last and not self.pad_edge else right)

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        """rich's measurement (the narrowest and the natural width), computed from the plain cells when the table
        is plain (:meth:`_plain_cells`) and its natural widths fit ``options``; rich measures it otherwise (tens of
        microseconds per cell). Both give the same numbers (``tests/cli/test_cli_output.py``)."""
        texts = self._plain_cells(console, options.markup) if options.max_width >= 1 else None
        if texts is None:
            return super().__rich_measure__(console, options)
        lows: list[int] = []
        highs: list[int] = []
        for index, plain in enumerate(texts):
            pad = sum(self._edge_padding(index))
            low = high = 0
            for t in plain:  # Measurement.get of Padding(Text): a text narrower than 1 measures (0, 0)
                widest = cell_len(t)
                words = t.split()
                narrowest = min(max(map(cell_len, words)), widest) if words else widest
                if widest < 1:
                    narrowest = widest = 0
                low, high = max(low, narrowest + pad), max(high, widest + pad)
            lows.append(low)
            highs.append(high)
        extra = self._extra_width
        if not all(texts) or sum(highs) > options.max_width - extra:
            return super().__rich_measure__(console, options)  # rich shrinks the columns: its own numbers
        return Measurement(sum(lows) + extra, sum(highs) + extra)

    def _cell_padding(self, index: int, *, fixed: bool = False) -> int:
        """Columns of padding rich adds around column ``index``'s cells (its ``padding``, ``pad_edge`` and
        ``collapse_padding`` options); ``fixed``: what it adds to a column of fixed ``width`` (rich counts
        collapsed padding differently there)."""
        _, right, _, left = self.padding
        if self.collapse_padding and fixed:
            left, right = 0, abs(left - right)
        elif self.collapse_padding and index > 0:
            left = max(0, left - right)
        if not self.pad_edge:
            left = 0 if index == 0 else left
            right = 0 if index == len(self.columns) - 1 else right
        return left + right

    def _fitted_widths(self, console: Console, options: ConsoleOptions) -> list[int] | None:
        """Each column's content width when the natural widths do not fit but the longest words do, else
        ``None`` (rich's own layout: everything fits, or even the longest words do not)."""
        if self.expand or not self.columns or any(c.width is not None for c in self.columns):
            return None
        room = (self.width or options.max_width) - (2 if self.box and self.show_edge else 0)
        room -= len(self.columns) - 1 if self.box else 0
        wide = options.update_width(PIPE_WIDTH)
        pads = [self._cell_padding(i) for i in range(len(self.columns))]
        lows, highs = [], []
        for column, pad in zip(self.columns, pads, strict=False):
            cells = [
                *([column.header] if self.show_header else []),
                *column.cells,
                *([column.footer] if self.show_footer else []),
            ]
            sizes = [Measurement.get(console, wide, c) for c in cells] or [Measurement(1, 1)]
            lows.append(max(m.minimum for m in sizes) + pad)
            highs.append(max(m.maximum for m in sizes) + pad)
        if sum(highs) <= room or sum(lows) > room:
            return None
        spare, lacking = room - sum(lows), sum(highs) - sum(lows)
        widths = [lo + (hi - lo) * spare // lacking for lo, hi in zip(lows, highs, strict=False)]
        for i in sorted(range(len(widths)), key=lambda i: widths[i] - highs[i]):  # rounding leftovers
            if sum(widths) >= room:
                break
            widths[i] += 1 if widths[i] < highs[i] else 0
        return [width - self._cell_padding(i, fixed=True) for i, width in enumerate(widths)]


class Column:
    """One column of :func:`fitted_table`: its ``header``, ``justify`` and ``optional`` (0: always shown; 1, 2...:
    left out, 1 first, when the table does not fit, and said in the caller's footer). A cell wraps only between
    its words (:class:`Table`), so numbers and ids a user types stay whole."""

    def __init__(self, header: str, *, justify: str = "left", optional: int = 0):
        self.header, self.justify, self.optional = header, justify, optional


def fitted_table(
    con: Console, columns: list[Column], rows: list[list[Any]], *, title: str | None = None, **style: Any
) -> tuple[Table, list[str]]:
    """The table of ``rows`` (one cell per column) as ``latch replay`` prints its own: a simple head rule, one
    space between columns (none when that does not fit ``con``'s width), and the optional columns left out
    (lowest ``optional`` first) until it fits. ``style``: other ``rich.table.Table`` arguments (``box``...) in place
    of those. Returns the table and the headers left out (for the caller's footer)."""
    shown = list(range(len(columns)))
    while True:
        t = Table(
            **{"box": box.SIMPLE_HEAD, "pad_edge": False, "show_edge": False, "padding": (0, 1, 0, 0), **style},
            title=title,
        )
        for i in shown:
            c = columns[i]
            t.add_column(c.header, justify=c.justify)
        for r in rows:
            t.add_row(*(r[i] for i in shown))
        natural = Measurement.get(con, con.options.update_width(PIPE_WIDTH), t).maximum
        if natural > con.options.max_width:
            if "padding" not in style:  # replay's own style: the one space between columns goes first
                t.padding = (0, 0, 0, 0)
            # Table wraps a cell between its words: what must fit is every column's longest word
            natural = Measurement.get(con, con.options.update_width(PIPE_WIDTH), t).minimum
        optional = sorted((i for i in shown if columns[i].optional), key=lambda i: columns[i].optional)
        if natural <= con.options.max_width or not optional:
            return t, [c.header for i, c in enumerate(columns) if i not in shown]
        shown.remove(optional[0])
