"""``latch tui``: a textual app over one store, following sessions live by polling the store by seq. It writes
only the commands a user sends a running ``latch run``.

Screens:

* the sessions list (a table, what ``latch sessions`` shows: id, start, harness, model, requests, cost, status,
  title; children under their parent); Enter opens a session;
* a session: one tab per panel, every one built from :func:`latch.host.reducers.session_view` (the reducers
  the web page and ``latch show --json`` use, nothing else):

  - ``transcript``: the conversation items (user, assistant, tool, system, compaction), with tool calls;
  - ``state``: the canonical state as ``latch state`` prints it, activity (reasoning reported, tools running or
    interrupted), the validation evidence and verdict as ``latch evidence`` gives them and, for a session of an
    agent group, the group (members, tasks, claims:
    :func:`latch.agent.group.group_view`, what the web sidebar shows);
  - ``usage``: per request the provider's tokens (uncached input, cache read, cache write, output) and dollars;
  - ``context``: per request what filled the context (tokens by kind, transcript characters by role);
  - ``epochs``: the provider cache epochs and the cache breaks with their reasons.

Commands (the ones ``latch web`` sends, through the same durable inbox, :meth:`latch.host.runs.RunCommands.send`
with ``source="tui"``): on a session screen ``i`` opens the steering input (Enter sends the text, Escape
closes it), ``k`` asks the run to compact before its next request and ``x`` asks it to stop, after a
confirmation (``y``/``n``). Each command is queued as an event with a receipt id; the running ``latch run``
applies it at its next safe boundary (steer: delivered before the next request; compact: the next request
rotates; stop: the run ends with exit 0, outcome ``stopped``). The ``#receipts`` line under the title lists
every command of the session with its status from the durable events (:func:`latch.host.reducers.commands`:
``queued``, ``delivered``, ``applied``, ``moot``); a refused command (an empty steer, a stop with no running run)
is a one-line notification and leaves the store unchanged.

Every ``poll_interval`` seconds the open session reads the events after the last seq it has (``after_seq``)
and, when there are new ones (or while the session's run is running), rebuilds the panels. Whether the session
is live comes from its durable run lifecycle (:func:`latch.host.runs.session_liveness`: the latest
``run_started`` has no ``run_ended`` and its process is alive; a killed run is ``interrupted``); a session no
``latch run`` recorded is live while events keep arriving after the app started. A tool call without a result
is ``running`` only while the session is live, else ``interrupted``. Transcript text is passed through
:func:`latch.textsafe.safe` and shown as rich ``Text`` (never parsed as markup), so ``[bold]`` or an escape
sequence in a transcript renders literally.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.cells import cell_len, set_cell_size
from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import DataTable, Footer, Header, Input, Static, TabbedContent, TabPane

from ...accounting.pricing import format_usd
from ...agent.group import group_view
from ...host import reducers as R
from ...host.kernel import kernel_cache
from ...host.runs import NoRunningRun, RunCommands, session_liveness
from ...host.state_text import CERTIFIED, NOT_CERTIFIED, evidence_lines
from ...host.summaries import listed_sessions, short_ids
from ...kernel import canonical_state
from ...kernel.tombstones import forgotten_message, tombstoned_sessions
from ...store import EventStore
from ...textsafe import plural, safe

__all__ = ["LatchTUI", "SessionScreen", "SessionsScreen", "ConfirmStop", "transcript_text", "receipts_text", "PANELS"]

PANELS = ("transcript", "state", "usage", "context", "epochs")
"""The tab ids of a session screen, in order."""

_ROLE_STYLE = {
    "user": "bold cyan",
    "assistant": "bold green",
    "tool": "bold yellow",
    "system": "bold magenta",
    "compaction": "bold red",
}


def _n(value: Any) -> str:
    return "?" if value is None else f"{value:,}" if isinstance(value, int) else str(value)


def transcript_text(items: list[dict[str, Any]]) -> Text:
    """The transcript panel's content: one block per item, ``seq role`` then its text; each tool call is one line,
    ``→ name(command or path) ⇒ its result in one line`` (``⇒ …`` while it has no result), and a tool result is
    its header and its result in one line (``latch show SESSION --event SEQ`` prints it whole). Every string
    from the transcript is made :func:`~latch.textsafe.safe` and appended as plain text (rich markup is not
    parsed)."""
    results = {item["call_id"]: item["line"] for item in items if item["role"] == "tool"}
    out = Text()
    for item in items:
        role = item["role"]
        head = f"#{item['seq']} {role}"
        if role == "tool":
            head += f" {safe(item.get('name') or '')} ({safe(item.get('call_id') or '')})"
            head += " ERROR" if item.get("is_error") else ""
        elif role == "assistant" and item.get("reasoning_reported"):
            head += " · reasoning reported"
        out.append(head + "\n", style=_ROLE_STYLE.get(role, "bold"))
        if role == "tool":
            out.append(safe(item["line"]) + "\n", style="red" if item.get("is_error") else "")
        elif item.get("text"):
            out.append(safe(item["text"], multiline=True) + "\n")
        for call in item.get("tool_calls") or ():
            out.append(f"  → {safe(call['summary'])}", style="yellow")
            out.append(f" ⇒ {safe(results.get(call['id'], '…'))}\n")
        out.append("\n")
    return out


def receipts_text(commands: list[dict[str, Any]]) -> Text:
    """The ``#receipts`` line: ``commands:`` then each command (:func:`latch.host.reducers.commands`) as
    ``command id status``, a steer with its text (made :func:`~latch.textsafe.safe`, cut at 40 characters);
    empty when the session has none."""
    out = Text()
    if not commands:
        return out
    out.append("commands:", style="bold")
    for c in commands:
        text = f" {safe(c['text'])[:40]!r}" if c["command"] == "steer" and c["text"] else ""
        out.append(f" · {c['command']} {safe(c['id'])}{text} ")
        out.append(c["status"], style="green" if c["status"] in ("applied", "delivered") else "yellow")
    return out


class ConfirmStop(ModalScreen[bool]):
    """``stop the running latch run of session ID? y/n``: dismissed with ``True`` for ``y``, ``False`` for ``n``
    or Escape."""

    BINDINGS = [
        Binding("y", "answer(True)", "stop it"),
        Binding("n", "answer(False)", "keep running"),
        Binding("escape", "answer(False)", "keep running"),
    ]
    DEFAULT_CSS = (
        "ConfirmStop { align: center middle; } ConfirmStop > Static { width: auto; border: thick $error;"
        " padding: 1 2; background: $surface; }"
    )

    def __init__(self, session_id: str):
        super().__init__()
        self.session_id = session_id

    def compose(self) -> ComposeResult:
        yield Static(Text(f"stop the running latch run of session {safe(self.session_id)}? y/n"), id="confirm")

    def action_answer(self, answer: bool) -> None:
        self.dismiss(answer)


class SteerInput(Input):
    """The steering text input of a session screen; Escape closes it without sending."""

    BINDINGS = [Binding("escape", "close", "close", show=False)]
    DEFAULT_CSS = "SteerInput { display: none; }"  # hidden (so never auto-focused) until ``i`` opens it

    def action_close(self) -> None:
        self.value = ""
        self.display = False
        self.screen.focus_next()


def _group_text(group: dict[str, Any] | None) -> Text:
    """The group block of the state panel (:func:`latch.agent.group.group_view`): members, then each task with
    its status and the agent that claimed it; empty when the session is in no group."""
    out = Text()
    if group is None:
        return out
    m = group["messages"]
    out.append("\ngroup\n", style="bold")
    out.append(
        f"root {safe(group['root'])} · {plural(len(group['members']), 'member')} · {plural(len(group['tasks']), 'task')} · "
        f"messages {m['delivered']}/{m['queued']} delivered\n"
    )
    for member in group["members"]:
        out.append(f"  member {safe(member['agent'])}: session {safe(member['session'] or '-')}\n")
    for t in group["tasks"]:
        owner = f" · claimed by {safe(t['owner'])}" if t["owner"] else ""
        after = f" · after {', '.join(safe(d) for d in t['depends_on'])}" if t["depends_on"] else ""
        out.append(f"  task {safe(t['id'])} {t['status']}{owner}{after}: {safe(t['title'])}\n")
    return out


def _state_text(view: dict[str, Any], group: dict[str, Any] | None = None) -> Text:
    """The state panel: the canonical state as ``latch state`` prints it (its head and counts, then each section
    of the rendered state under its heading), activity, the evidence and verdict as ``latch evidence`` gives
    them (:func:`latch.host.state_text.evidence_lines`) and the group."""
    c, a = view["canonical"], view["activity"]
    out = Text()
    head, counts, *body = c["lines"]
    out.append(safe(head) + "\n", style="bold")
    out.append(safe(counts) + "\n")
    for line in body:
        heading = not line.startswith(("- ", "  ")) and line.endswith(":")
        out.append(safe(line) + "\n", style="bold" if heading or line == "Canonical state" else "")
    out.append("\nactivity\n", style="bold")
    out.append(
        f"reasoning reported: {'yes' if a['reasoning_reported'] else 'no'} · running {a['running']} · "
        f"interrupted {a['interrupted']}\n"
    )
    for t in a["tools"]:
        out.append(
            f"  tool {safe(t['name'])} ({safe(t['call_id'])}) at #{t['seq']}: {t['status']}\n",
            style="yellow" if t["status"] == "running" else "red",
        )
    lines = evidence_lines(c["evidence"])
    out.append("\n" + safe(lines[0]) + "\n", style="bold")
    for line in lines[1:]:
        style = (
            "bold green"
            if line == CERTIFIED
            else "bold red"
            if line == NOT_CERTIFIED
            else "yellow"
            if line.endswith(")") and ", STALE (set " in line
            else ""
        )
        out.append(safe(line) + "\n", style=style)
    out.append_text(_group_text(group))
    return out


SESSION_COLUMNS = ("id", "started", "harness", "model", "requests", "cost", "status", "title")
"""The sessions list's columns: what ``latch sessions`` shows (:class:`latch.host.summaries.SessionSummary`)."""
TITLE_CELLS = 60
"""The most terminal cells of a title in the sessions list (cut with ``…``)."""


def _cut(text: str, width: int) -> str:
    return text if cell_len(text) <= width else set_cell_size(text, width - 1).rstrip() + "…"


class SessionsScreen(Screen[None]):
    """The sessions list, as ``latch sessions`` lists them (:func:`latch.host.summaries.listed_sessions`): newest
    first, each child under its parent (``└``), the shortest unique id, start, harness, model, requests, cost,
    status and title; forgotten sessions (tombstoned, and their descendants) are not listed. Enter (or a click)
    opens one."""

    BINDINGS = [Binding("r", "reload", "reload")]

    def compose(self) -> ComposeResult:
        yield Header()
        yield DataTable(id="sessions", cursor_type="row")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#sessions", DataTable)
        table.add_columns(*SESSION_COLUMNS)
        self.action_reload()

    def action_reload(self) -> None:
        table = self.query_one("#sessions", DataTable)
        table.clear()
        listed = listed_sessions(self.app.store)  # type: ignore[attr-defined]
        shorts = short_ids([s.id for s, _ in listed])
        for s, depth in listed:
            lead = "" if depth == 0 else "  " * (depth - 1) + "└ "
            table.add_row(
                Text(lead + safe(shorts[s.id])),
                s.started_text(),
                Text(safe(s.harness or "?")),
                Text(safe(s.model or "no model")),
                f"{s.requests:,}",
                s.cost_text(),
                s.status,
                Text(_cut(safe(s.title) if s.title else "(no title)", TITLE_CELLS)),
                key=s.id,
            )

    def on_data_table_row_selected(self, message: DataTable.RowSelected) -> None:
        if message.row_key.value is not None:
            self.app.push_screen(SessionScreen(message.row_key.value))


class SessionScreen(Screen[None]):
    """One session's panels (:data:`PANELS`), following new events by seq."""

    AUTO_FOCUS = "Tabs"  # the panel tabs, never the (hidden) steering input

    BINDINGS = [
        Binding("escape", "app.pop_screen", "sessions"),
        Binding("t", "show('transcript')", "transcript"),
        Binding("s", "show('state')", "state"),
        Binding("u", "show('usage')", "usage"),
        Binding("c", "show('context')", "context"),
        Binding("e", "show('epochs')", "epochs"),
        Binding("i", "steer", "steer"),
        Binding("k", "compact", "compact"),
        Binding("x", "stop", "stop"),
    ]

    def __init__(self, session_id: str):
        super().__init__()
        self.session_id = session_id
        self.events: list[Any] = []
        self.last_seq = 0
        self.view: dict[str, Any] | None = None
        self.run: dict[str, Any] | None = None  # latch.host.reducers.run_status of the session

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(id="title")
        yield Static(id="receipts")
        yield SteerInput(
            placeholder="steering text for the running agent (Enter sends, Escape closes)", id="steer-text"
        )
        with TabbedContent(initial="transcript"):
            with TabPane("transcript", id="transcript"):
                yield VerticalScroll(Static(id="transcript-text"))
            with TabPane("state", id="state"):
                yield VerticalScroll(Static(id="state-text"))
            with TabPane("usage", id="usage"):
                yield Static(id="usage-total")
                yield DataTable(id="usage-table")
            with TabPane("context", id="context"):
                yield DataTable(id="context-table")
            with TabPane("epochs", id="epochs"):
                yield Static(id="epochs-text")
                yield DataTable(id="epochs-table")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#usage-table", DataTable).add_columns(
            "request", "seq", "model", "uncached", "cache read", "cache write", "output", "prompt", "usd"
        )
        self.query_one("#context-table", DataTable).add_columns(
            "request",
            "seq",
            "prompt",
            "cache read",
            "cache write",
            "uncached",
            "output",
            "user chars",
            "assistant chars",
            "tool chars",
            "system chars",
            "items",
        )
        self.query_one("#epochs-table", DataTable).add_columns("request", "seq", "epoch", "cache", "reason")
        self.poll()
        self.set_interval(self.app.poll_interval, self.poll)  # type: ignore[attr-defined]

    def action_show(self, panel: str) -> None:
        self.query_one(TabbedContent).active = panel

    def send(self, command: str, text: str | None = None) -> dict[str, Any] | None:
        """Queue ``command`` through :meth:`latch.host.runs.RunCommands.send` (``source="tui"``), notify its
        receipt (``steer queued: receipt ID``) and refresh the panels; a refused command is an error
        notification and ``None``."""
        app: LatchTUI = self.app  # type: ignore[assignment]
        try:
            receipt = RunCommands(app.store, self.session_id).send(command, text, source="tui")
        except (NoRunningRun, ValueError) as exc:
            self.notify(safe(str(exc)), severity="error")
            return None
        self.notify(f"{command} {receipt['status']}: receipt {receipt['id']}")
        self.poll()
        return receipt

    def action_steer(self) -> None:
        box = self.query_one("#steer-text", SteerInput)
        box.display = True
        box.focus()

    def on_input_submitted(self, message: Input.Submitted) -> None:
        if message.input.id != "steer-text":
            return
        if self.send("steer", message.value) is not None:
            message.input.value = ""
            message.input.display = False
            self.focus_next()

    def action_compact(self) -> None:
        self.send("compact")

    def action_stop(self) -> None:
        def answered(yes: bool | None) -> None:
            if yes:
                self.send("stop")

        self.app.push_screen(ConfirmStop(self.session_id), answered)

    def poll(self) -> None:
        """Read the events after :attr:`last_seq`; rebuild the panels when there are any (or on the first call)."""
        app: LatchTUI = self.app  # type: ignore[assignment]
        new = list(app.store.events(self.session_id, after_seq=self.last_seq))
        if any(e.kind == "tombstone" for e in new):  # forgotten while open: its history is no longer shown
            self.events, self.view, self.last_seq = [], None, new[-1].seq
            self.query_one("#title", Static).update(Text(forgotten_message(self.session_id)))
            self.query_one("#transcript-text", Static).update(Text(""))
            self.query_one("#state-text", Static).update(Text(""))
            return
        if self.view is None and self.last_seq and not self.events:
            return  # forgotten earlier in this screen
        if new:
            self.events.extend(new)
            self.last_seq = new[-1].seq
        running = self.run is not None and self.run["phase"] == "running"
        if new or self.view is None or running:  # a running run is re-checked: its process may have died
            live, self.run = session_liveness(self.events, observed=app.live(self.session_id))
            if new or self.view is None or self.view["live"] != live:
                state = canonical_state(app.store, self.session_id, cache=kernel_cache())
                self.view = R.session_view(self.events, state, live=live)
                self.render_view(self.view)

    def render_view(self, view: dict[str, Any]) -> None:
        """Fill every panel from ``view`` (:func:`latch.host.reducers.session_view`)."""
        u, costs = view["usage"], view["costs"]
        self.query_one("#title", Static).update(
            Text(
                f"session {safe(self.session_id)} · last seq {view['last_seq']} · {len(view['transcript'])} items · "
                f"{u['requests']} requests" + (" · live" if view["live"] else "") + _run_phase(self.run)
            )
        )
        self.query_one("#receipts", Static).update(receipts_text(R.commands(self.events)))
        self.query_one("#transcript-text", Static).update(transcript_text(view["transcript"]))
        group = group_view(self.app.store, self.session_id)  # type: ignore[attr-defined]
        self.query_one("#state-text", Static).update(_state_text(view, group))
        tot = costs["totals"]
        self.query_one("#usage-total", Static).update(
            Text(
                f"{u['requests']} requests · uncached {_n(u['input_tokens'])} · cache read {_n(u['cache_read_tokens'])} · "
                f"cache write {_n(u['cache_write_tokens'])} · output {_n(u['output_tokens'])} tokens · "
                f"cost {format_usd(tot['usd'])} ({tot['priced_requests']} priced)"
            )
        )
        table = self.query_one("#usage-table", DataTable)
        table.clear()
        for i, (r, c) in enumerate(zip(view["requests"], costs["requests"], strict=False), 1):
            table.add_row(
                str(i),
                str(r["seq"]),
                Text(safe(r["model"] or "")),
                _n(r["input_tokens"]),
                _n(r["cache_read_tokens"]),
                _n(r["cache_write_tokens"]),
                _n(r["output_tokens"]),
                _n(r["prompt_tokens"]),
                format_usd(c["usd"]),
            )
        table = self.query_one("#context-table", DataTable)
        table.clear()
        for r in view["context"]:
            ch = r["chars"]
            table.add_row(
                str(r["request"]),
                str(r["seq"]),
                _n(r["prompt_tokens"]),
                _n(r["cache_read_tokens"]),
                _n(r["cache_write_tokens"]),
                _n(r["uncached_tokens"]),
                _n(r["output_tokens"]),
                _n(ch["user"]),
                _n(ch["assistant"]),
                _n(ch["tool"]),
                _n(ch["system"]),
                _n(r["items"]),
            )
        cache = view["cache"]
        lines = [f"{len(cache['epochs'])} cache epochs · {len(cache['breaks'])} cache breaks"]
        lines += [
            f"epoch {e['epoch']}: requests {e['first_request']}-{e['last_request']} (seq {e['start_seq']}-"
            f"{e['end_seq']}) · cache read {_n(e['cache_read_tokens'])} · cache write "
            f"{_n(e['cache_write_tokens'])}"
            for e in cache["epochs"]
        ]
        lines += [
            f"break at request {b['request']} (seq {b['seq']}): {b['reason']} · read {_n(b['cache_read_tokens'])}"
            f" of {_n(b['previous_cached_tokens'])} cached"
            for b in cache["breaks"]
        ]
        self.query_one("#epochs-text", Static).update(Text("\n".join(lines)))
        table = self.query_one("#epochs-table", DataTable)
        table.clear()
        for r in cache["requests"]:
            table.add_row(str(r["request"]), str(r["seq"]), str(r["epoch"]), r["cache"], r["reason"] or "")


def _run_phase(run: dict[str, Any] | None) -> str:
    """`` · run ended (done)`` / `` · run interrupted`` / `` · run running`` from
    :func:`latch.host.reducers.run_status`; empty when no run was recorded."""
    if not run or run["phase"] is None:
        return ""
    if run["phase"] == "ended":
        return f" · run ended ({run['run']['outcome']})"
    return f" · run {run['phase']}"


class LatchTUI(App[None]):
    """The terminal UI over the store at ``db``; ``session`` (an id or unique prefix) opens that session
    directly. ``poll_interval``: seconds between store polls of the open session. Raises ``KeyError`` for an
    unknown ``session``."""

    TITLE = "latch"
    BINDINGS = [Binding("q", "quit", "quit")]

    def __init__(self, db: str | Path, *, session: str | None = None, poll_interval: float = 0.5):
        super().__init__()
        self.store = EventStore(db)
        self.poll_interval = poll_interval
        self.start_seq = self.store.max_seq()
        self.initial = self.store.session(session).id if session is not None else None
        if self.initial is not None and self.initial in tombstoned_sessions(self.store):
            self.store.close()
            raise KeyError(forgotten_message(self.initial))

    def live(self, session_id: str) -> bool:
        """Whether events were appended to the session since the app started (transient, like the web's): the
        fallback of :func:`latch.host.runs.session_liveness` for sessions no ``latch run`` recorded."""
        return self.store.max_seq(session_id) > self.start_seq

    def on_mount(self) -> None:
        self.push_screen(SessionsScreen())
        if self.initial is not None:
            self.push_screen(SessionScreen(self.initial))

    def on_unmount(self) -> None:
        self.store.close()
