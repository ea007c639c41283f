"""Cline and Roo Code task folders (``<globalStorage>/<extension>/tasks/<taskId>/``), FORMATS.md sections 6 and 7.

A ``ui_messages.json`` alone (no history beside it) is read by :mod:`latch.importers.cline_ui`; given one
with its history beside it, the history is read. The importer reads ``api_conversation_history.json`` (what was sent to the model: a JSON array of
Anthropic-style messages with Cline's extra ``ts``, ``modelInfo`` and ``metrics``) and, when it sits beside
it, ``ui_messages.json`` (the UI event log: per-request usage and Cline's context truncation). Shapes
follow cline/cline ``apps/vscode/src/shared/messages/content.ts`` (``ClineStorageMessage``),
``shared/messages/metrics.ts``, ``shared/ExtensionMessage.ts`` (``ClineMessage``, ``ClineApiReqInfo``)
and ``sdk/legacy-task-handling.ts`` (the deleted range), and Roo-Code
``src/core/task-persistence/apiMessages.ts`` (``ApiMessage``: ``isSummary``, ``isTruncationMarker``).

* user messages: ``[<tool> for '<arg>'] Result:`` / ``[<tool>] Result:`` text blocks are the results of
  the previous assistant message's ``tool_use`` calls, **in call order** (positional linking), and
  ``tool_result`` blocks (native tool calling) link by ``tool_use_id``; ``Command failed with exit code N``
  gives ``exit_code`` N and ``is_error``, as do ``The tool execution failed`` and a denied operation. The
  other text blocks become one :class:`UserMessage` (``<environment_details>`` and other harness
  injections in a separate ``is_meta`` one), base64 images its media.
* assistant messages → one :class:`AssistantMessage` each (``text``, ``tool_use`` → :class:`ToolCall` with
  the canonical JSON of ``input``, ``thinking``/``redacted_thinking`` → ``reasoning_reported``, model from
  ``modelInfo.modelId``), followed by its :class:`Usage`: the last ``api_req_started`` of ui_messages whose
  request it answers (the first assistant message after the row's ``conversationHistoryIndex``; Roo writes
  none, so its k-th request with usage answers the k-th assistant message): ``tokensIn``, ``cacheReads``,
  ``cacheWrites``, ``tokensOut``. Cline's ``tokensIn`` is the uncached input (Anthropic semantics); Roo's is
  the total input (Roo-Code ``src/shared/cost.ts`` ``totalInputTokens``), so the cache counts are taken off
  it. Without ui_messages: ``metrics.tokens`` (``prompt`` includes ``cached``: OpenAI semantics).
* compaction: each new ``conversationHistoryDeletedRange [start, end]`` in ui_messages (Cline drops API
  messages ``start..end`` from every later request) → ``CompactionMarker(trigger="truncation")`` after the
  API message its row points at; Roo's ``isSummary`` message → ``CompactionMarker(trigger="condense")``
  holding the summary, ``isTruncationMarker`` → ``CompactionMarker(trigger="truncation")``, with
  ``pre_tokens``/``post_tokens`` from the ui row whose ``contextCondense``/``contextTruncation`` has its id
  (a ``condense_context`` row without ``condenseId``, which Roo's forced reduction after a context-window
  error writes, belongs to the next history summary no other row names). A Roo ``condense_context`` /
  ``sliding_window_truncation`` row matching no history marker, and a Cline ``say: "compaction"`` divider
  whose ``ClineCompactionInfo`` is ``status: "completed"`` (cline ``shared/ExtensionMessage.ts``; the
  ``started`` row is updated in place, ``skipped``/``failed``/``cancelled`` compacted nothing) →
  ``CompactionMarker`` of its own (``trigger`` the divider's ``mode`` ``auto``/``manual``, or
  ``condense``/``truncation``; ``tokensBefore``/``tokensAfter`` or ``prevContextTokens``/``newContextTokens``),
  placed by ``ts`` before the first history message written after it.
* ``ts`` (epoch milliseconds) → ISO-8601 UTC; the workspace is the ``# Current Working Directory (...)``
  of the first ``<environment_details>``.

Identity: ``"cline:<taskId>"`` (the folder name when it is a Cline epoch-ms or a Roo uuid task id), else a
hash of the first message. The file grows by appended messages: calls with no result yet are pending.
``meta``: ``harness`` (``cline`` or ``roo-code``), ``task_id``, ``reported_cost_usd`` (the sum of the ui
rows' ``cost``), ``ui_messages`` (that file's path, when read).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ..events import CompactionMarker, MediaRef, ToolCall, Usage, UserMessage, canonical_json
from ..records import dataclass
from ._common import (
    AssistantSlot,
    JSONArray,
    JSONObject,
    Loc,
    SessionBuilder,
    count_field,
    decode_base64,
    dump_json,
    json_type,
    openai_usage,
    peek_json,
)
from .base import (
    Importer,
    JSONNestingError,
    ParsedSession,
    TranscriptError,
    content_key,
    decode_text,
    json_loads,
    load_json,
)
from .cline_ui import epoch_ms_iso, is_ui_messages, parse_ui_messages

__all__ = ["ClineImporter", "IMPORTERS", "HISTORY_FILE", "UI_FILE", "epoch_ms_iso"]

FORMAT = "cline"
HISTORY_FILE = "api_conversation_history.json"
UI_FILE = "ui_messages.json"
ROO_EXTENSION = "rooveterinaryinc.roo-cline"
_RESULT = re.compile(r"\[(?P<name>[A-Za-z0-9_.:-]+)(?: for '(?P<arg>.*?)')?\] Result:[ \t]*\n?", re.DOTALL)
_EXIT = re.compile(r"Command failed with exit code (-?\d+)")
_FAILED = (
    "The tool execution failed",
    "The user denied this operation",
    "[ERROR]",
    "Error executing",
    "The user rejected",
)
_META = ("<environment_details>", "<system-reminder>", "<explicit_instructions", "[TASK RESUMPTION]", "<reminder>")
_CWD = re.compile(r"# Current (?:Working Directory|Workspace Directory) \((.+?)\)")
_TASK_ID = re.compile(r"\d{10,16}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_ROO_FIELDS = ("isSummary", "condenseId", "isTruncationMarker", "truncationId", "condenseParent", "truncationParent")


class ClineImporter(Importer):
    """Cline / Roo Code ``api_conversation_history.json`` (+ the ``ui_messages.json`` beside it) → Latch events."""

    PLUGIN_NAME = FORMAT
    DESCRIPTION = (
        "Cline / Roo Code task folder (VS Code globalStorage saoudrizwan.claude-dev/tasks/<id>/"
        "api_conversation_history.json, with ui_messages.json)"
    )

    def sniff(self, path: Path, head: bytes) -> int:
        """95 for a JSON array of ``{role, content}`` messages named ``api_conversation_history.json``; 88 for
        such an array whose messages carry Cline's ``ts`` and ``modelInfo``/``metrics`` (above the plain
        Anthropic importer's 85); 95 for ``ui_messages.json`` rows (``ClineMessage``: ``ts``, ``type`` say/ask),
        88 for such rows under another name; 0 otherwise."""
        try:
            top, _, items = peek_json(head)
        except Exception:  # noqa: BLE001 - a sniffer never raises: the parser names the problem
            return 0
        if top != "array":
            return 0
        if is_ui_messages(items):
            return 95 if path.name == UI_FILE else 88
        chat = bool(items) and all(isinstance(m, dict) and "role" in m and "content" in m for m in items)
        if path.name == HISTORY_FILE and (chat or not items):
            return 95
        if chat and any(isinstance(m.get("ts"), int) and ("modelInfo" in m or "metrics" in m) for m in items):
            return 88
        return 0

    def resembles(self, path: Path, head: bytes) -> bool:
        """A JSON array named ``api_conversation_history.json`` or ``ui_messages.json``, or one whose rows mostly
        carry ``ts`` with ``say``/``ask`` (``ui_messages.json``) or a row carries ``ts`` with
        ``modelInfo``/``metrics`` (Cline's history): a Cline file missing what :meth:`sniff` looks for."""
        try:
            top, _, items = peek_json(head)
        except Exception:  # noqa: BLE001 - never raises
            return False
        if top != "array":
            return False
        if path.name in (HISTORY_FILE, UI_FILE):
            return True
        rows = [r for r in items if isinstance(r, dict)]
        ui = sum("ts" in r and ("say" in r or "ask" in r or r.get("type") in ("say", "ask")) for r in rows)
        history = any(isinstance(r.get("ts"), int) and ("modelInfo" in r or "metrics" in r) for r in rows)
        return bool(rows) and (2 * ui >= len(rows) or history)

    def parse(self, path: Path, data: bytes) -> ParsedSession:
        """Parse the history (and ``ui_messages.json`` beside it). ``TranscriptError`` names the file and
        ``messages[i]`` (or the ui file and ``ui_messages[i]``) and the field of the first problem."""
        doc = load_json(path, decode_text(path, data))
        if not isinstance(doc, list):
            raise TranscriptError(path, "top level", f"expected a JSON array of messages, got {json_type(doc)}")
        if is_ui_messages(doc[:8]) or path.name == UI_FILE or _ui_like(doc[:8]):
            history = path.parent / HISTORY_FILE
            if history.is_file():  # the task folder's history, with this file beside it
                return self.parse(history, _read_bytes(history))
            task_id = path.parent.name if _TASK_ID.fullmatch(path.parent.name) else None
            roo = ROO_EXTENSION in str(path.resolve()).lower()
            return parse_ui_messages(path, doc, roo=roo, task_id=task_id, fmt=FORMAT)
        ui_path = path.parent / UI_FILE
        ui = _read_ui(ui_path) if path.name == HISTORY_FILE and ui_path.is_file() else None
        return _Task(path, doc, ui, ui_path).run()


def _ui_like(rows: JSONArray) -> bool:
    """Whether most of ``rows`` (a document's first elements) carry ``ts`` with ``say``/``ask`` and none a
    ``role``: ``ui_messages.json`` rows, one of which may be malformed (the ui reader names it)."""
    found = [r for r in rows if isinstance(r, dict)]
    ui = sum("ts" in r and ("say" in r or "ask" in r or r.get("type") in ("say", "ask")) for r in found)
    return bool(found) and 2 * ui >= len(found) and not any("role" in r for r in found)


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise TranscriptError(path, None, f"cannot read: {exc.strerror or exc}") from None


def _read_ui(path: Path) -> list[JSONObject]:
    raw = _read_bytes(path)
    doc = load_json(path, decode_text(path, raw))
    if not isinstance(doc, list):
        raise TranscriptError(path, "top level", f"expected a JSON array of UI messages, got {json_type(doc)}")
    for i, row in enumerate(doc):
        if not isinstance(row, dict):
            raise TranscriptError(path, f"ui_messages[{i}]", f"expected a JSON object, got {json_type(row)}")
    return doc


@dataclass(frozen=True, slots=True)
class _UiMarker:
    """A compaction a ui_messages row records: ``kind`` is the marker's trigger."""

    kind: str | None
    marker_id: str | None
    tokens: tuple[int | None, int | None]
    summary: str
    ref: str
    ts_ms: int | float | None


class _Task:
    """One pass over the API history, with the ui rows' usage and deleted ranges keyed by history index."""

    def __init__(self, path: Path, messages: JSONArray, ui: list[JSONObject] | None, ui_path: Path):
        self.path = path
        self.messages = messages
        self.ui = ui
        self.ui_path = ui_path
        self.b = SessionBuilder(path, FORMAT)
        self.open_calls: list[str] = []  # the previous assistant message's calls still unanswered, in order
        self.workspace: str | None = None
        self.carry_reasoning = False
        self.marker_tokens: dict[int, tuple[int | None, int | None]] = {}  # history index -> Roo's ui counts
        self.ui_markers: list[_UiMarker] = []  # Roo condense/truncation rows, in file order
        self.standalone: list[_UiMarker] = []  # compactions only ui_messages records, placed by ts

    def cline_compaction(self, loc: Loc, row: JSONObject, ts_ms: int | float | None, i: int) -> None:
        """A Cline ``say: "compaction"`` divider (``ClineCompactionInfo``); only a ``completed`` one compacted."""
        info = load_json_field(loc, loc.str(row, "text") or "", "text")
        if info.get("status") != "completed":
            return  # started (later updated in place), skipped, failed, cancelled: the context is unchanged
        mode = info.get("mode")
        tokens = (count_field(loc, info, "tokensBefore", "text"), count_field(loc, info, "tokensAfter", "text"))
        before, after = (count_field(loc, info, k, "text") for k in ("messagesBefore", "messagesAfter"))
        summary = "Cline compacted the conversation" + (
            f" from {before} to {after} messages" if before is not None and after is not None else ""
        )
        self.standalone.append(
            _UiMarker(mode if mode in ("auto", "manual") else None, None, tokens, summary, f"ui:{i}", ts_ms)
        )

    def match_markers(self) -> None:
        """Give each Roo history marker (``isSummary``/``isTruncationMarker``) the counts of its ui row: by
        ``condenseId``/``truncationId``, or, for a row without an id (Roo's forced reduction after a
        context-window error writes ``contextCondense`` without ``condenseId``), the next unmatched history
        marker of its kind. A row matching none (its history marker was dropped) is a marker of its own."""
        history = []
        for j, m in enumerate(self.messages):
            if isinstance(m, dict) and (m.get("isSummary") is True or m.get("isTruncationMarker") is True):
                kind = "condense" if m.get("isSummary") is True else "truncation"
                history.append((j, kind, m.get("condenseId" if kind == "condense" else "truncationId")))
        claimed = {um.marker_id for um in self.ui_markers if um.marker_id is not None}
        taken: set[int] = set()
        for um in self.ui_markers:
            if um.marker_id is not None:
                hit = next((j for j, kind, mid in history if kind == um.kind and mid == um.marker_id), None)
            else:
                hit = next(
                    (j for j, kind, mid in history if kind == um.kind and j not in taken and mid not in claimed), None
                )
            if hit is None or hit in taken:
                self.standalone.append(um)
            else:
                taken.add(hit)
                self.marker_tokens[hit] = um.tokens
        self.standalone.sort(key=lambda um: (um.ts_ms is None, um.ts_ms or 0))

    def flush_standalone(self, before_ms: int | float | None) -> None:
        """Add the ui-only compactions whose ``ts`` precedes ``before_ms`` (all of them when ``None``)."""
        while self.standalone and (
            before_ms is None or (self.standalone[0].ts_ms is not None and self.standalone[0].ts_ms < before_ms)
        ):
            um = self.standalone.pop(0)
            self.b.close_open(
                "the context was compacted before the tool returned",
                epoch_ms_iso(um.ts_ms) if um.ts_ms is not None else None,
            )
            self.open_calls = []
            self.b.add(
                CompactionMarker(
                    trigger=um.kind, pre_tokens=um.tokens[0], post_tokens=um.tokens[1], summary=um.summary
                ),
                um.ref,
                epoch_ms_iso(um.ts_ms) if um.ts_ms is not None else None,
            )

    # -- ui_messages
    def ui_index(
        self, roo: bool
    ) -> tuple[
        dict[int, tuple[Usage, str, str | None]], dict[int, list[tuple[list[int], str, str | None]]], float | None
    ]:
        """``(usage by assistant index, truncations by the history index they follow, total cost)``."""
        usage: dict[int, tuple[Usage, str, str | None]] = {}
        cuts: dict[int, list[tuple[list[int], str, str | None]]] = {}
        cost: float | None = None
        # (Roo condenseId or truncationId -> (prevContextTokens, newContextTokens)), filled below
        if self.ui is None:
            return usage, cuts, cost
        assistants = [i for i, m in enumerate(self.messages) if isinstance(m, dict) and m.get("role") == "assistant"]
        unindexed = 0  # Roo writes api_req_started with no conversationHistoryIndex: the k-th answers the k-th
        last_range: list[int] | None = None
        seen_ts: dict[Any, int] = {}
        for i, row in enumerate(self.ui):  # partial rows are streaming snapshots: the last row of a ts wins
            seen_ts[row.get("ts")] = i
        for i, row in enumerate(self.ui):
            loc = Loc(self.ui_path, f"ui_messages[{i}]")
            ts_ms = row.get("ts")
            if ts_ms is not None and (isinstance(ts_ms, bool) or not isinstance(ts_ms, (int, float))):
                raise loc.fail(f"field 'ts' must be a number (epoch milliseconds), got {json_type(ts_ms)}")
            index = loc.int(row, "conversationHistoryIndex")
            deleted = loc.list(row, "conversationHistoryDeletedRange")
            if deleted is not None:
                if len(deleted) != 2 or not all(isinstance(v, int) and not isinstance(v, bool) for v in deleted):
                    raise loc.fail("field 'conversationHistoryDeletedRange' must be [start, end] integers")
                if deleted != last_range:
                    last_range = list(deleted)
                    at = index if index is not None else -1
                    cuts.setdefault(at, []).append(
                        (last_range, f"ui:{i}", epoch_ms_iso(ts_ms) if ts_ms is not None else None)
                    )
            for field_name, id_key, kind in (
                ("contextCondense", "condenseId", "condense"),
                ("contextTruncation", "truncationId", "truncation"),
            ):
                done = loc.obj(row, field_name)
                if done is None:
                    continue
                marker_id = done.get(id_key) if isinstance(done.get(id_key), str) else None
                tokens = (
                    count_field(loc, done, "prevContextTokens", field_name),
                    count_field(loc, done, "newContextTokens", field_name),
                )
                if kind == "condense":
                    summary = loc.str(done, "summary", field_name) or ""
                else:
                    removed = count_field(loc, done, "messagesRemoved", field_name)
                    summary = (
                        f"Roo Code's sliding window hid {removed} messages from later requests"
                        if removed is not None
                        else "Roo Code's sliding window hid older messages"
                    )
                self.ui_markers.append(_UiMarker(kind, marker_id, tokens, summary, f"ui:{i}", ts_ms))
            if seen_ts.get(ts_ms) == i and row.get("say") == "compaction" and loc.str(row, "text"):
                self.cline_compaction(loc, row, ts_ms, i)
            if seen_ts.get(ts_ms) != i or row.get("say") != "api_req_started":
                continue
            text = loc.str(row, "text")
            if not text:
                continue
            info = load_json_field(loc, text, "text")
            c = info.get("cost")
            if c is not None:
                if isinstance(c, bool) or not isinstance(c, (int, float)):
                    raise loc.fail(f"field 'text.cost' must be a number, got {json_type(c)}")
                cost = (cost or 0.0) + c
            counts = [count_field(loc, info, k, "text") for k in ("tokensIn", "tokensOut", "cacheReads", "cacheWrites")]
            if all(v is None for v in counts):
                continue  # a request cancelled before any usage came back
            if index is None:
                target = assistants[unindexed] if unindexed < len(assistants) else None
                unindexed += 1
            else:
                target = next((a for a in assistants if a > index), None)
            if target is None:
                continue  # the request's answer is not in the history (yet)
            tokens_in = counts[0]
            if roo and tokens_in is not None and tokens_in >= (counts[2] or 0) + (counts[3] or 0):
                tokens_in -= (counts[2] or 0) + (counts[3] or 0)  # Roo's tokensIn is the total input
            usage[target] = (
                Usage(
                    input_tokens=tokens_in,
                    output_tokens=counts[1],
                    cache_read_tokens=counts[2],
                    cache_write_tokens=counts[3],
                ),
                f"ui:{i}",
                epoch_ms_iso(ts_ms) if ts_ms is not None else None,
            )
        return usage, cuts, cost

    # -- history
    def run(self) -> ParsedSession:
        b = self.b
        roo = ROO_EXTENSION in str(self.path.resolve()).lower() or any(
            isinstance(m, dict) and any(k in m for k in _ROO_FIELDS) for m in self.messages
        )
        usage, cuts, cost = self.ui_index(roo)
        self.match_markers()
        self.add_cuts(cuts.get(-1, []))  # truncations before the first request
        for i in range(len(self.messages)):
            loc = Loc(self.path, f"messages[{i}]")
            msg = loc.item_obj(self.messages, i, "messages")
            ts_ms = msg.get("ts")
            if ts_ms is not None and (isinstance(ts_ms, bool) or not isinstance(ts_ms, (int, float))):
                raise loc.fail(f"field 'ts' must be a number (epoch milliseconds), got {json_type(ts_ms)}")
            if ts_ms is not None:
                self.flush_standalone(ts_ms)
            ts = epoch_ms_iso(ts_ms) if ts_ms is not None else None
            ref = f"messages[{i}]"
            if msg.get("type") == "reasoning":  # Roo's stored reasoning item: flags the next assistant message
                self.carry_reasoning = True
                continue
            role = loc.str(msg, "role", required=True)
            content = loc.text_or_list(msg, "content", required=True)
            blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
            if msg.get("isSummary") is True or msg.get("isTruncationMarker") is True:
                text, _ = self.texts(loc, blocks)
                self.b.close_open("the context was condensed before the tool returned", ts)
                self.open_calls = []
                summary = msg.get("isSummary") is True
                pre, post = self.marker_tokens.get(i, (None, None))
                b.add(
                    CompactionMarker(
                        trigger="condense" if summary else "truncation", pre_tokens=pre, post_tokens=post, summary=text
                    ),
                    ref,
                    ts,
                )
            elif role == "assistant":
                self.assistant(loc, msg, blocks, ref, ts, usage.get(i))
            elif role == "user":
                self.user(loc, blocks, ref, ts)
            else:
                raise loc.fail(f"field 'role' must be 'user' or 'assistant', got {role!r}")
            self.add_cuts(cuts.get(i, []))
        self.flush_standalone(None)
        meta: dict[str, Any] = {"harness": "roo-code" if roo else "cline"}
        task_id = self.path.parent.name if _TASK_ID.fullmatch(self.path.parent.name) else None
        if task_id:
            meta["task_id"] = task_id
        if cost is not None:
            meta["reported_cost_usd"] = round(cost, 6)
        if self.ui is not None:
            meta["ui_messages"] = str(self.ui_path)
        if task_id:
            key = f"{FORMAT}:{task_id}"
        else:
            first = canonical_json(self.messages[0]) if self.messages else ""
            key = f"{FORMAT}:sha256:{content_key(first.encode('utf-8', 'surrogatepass'))}"
        return b.finish(external_key=key, workspace=self.workspace, meta=meta, growing=True)

    def add_cuts(self, items: list[tuple[list[int], str, str | None]]) -> None:
        for (start, end), ref, ts in items:
            self.b.add(
                CompactionMarker(
                    trigger="truncation",
                    summary=f"Cline dropped API history messages {start}-{end} from the prompt of every later request",
                ),
                ref,
                ts,
            )

    def texts(self, loc: Loc, blocks: JSONArray) -> tuple[str, tuple[MediaRef, ...]]:
        texts, media = [], []
        for j in range(len(blocks)):
            block = loc.item_obj(blocks, j, "content")
            kind = loc.str(block, "type", f"content[{j}]", required=True)
            if kind == "text":
                texts.append(loc.str(block, "text", f"content[{j}]", required=True))
            elif kind == "image":
                media.append(self.image(loc, block, f"content[{j}]"))
        return "\n".join(texts), tuple(media)

    def image(self, loc: Loc, block: JSONObject, label: str) -> MediaRef:
        source = loc.obj(block, "source", label, required=True)
        if source.get("type") != "base64":
            raise loc.fail(f"field '{label}.source.type' must be 'base64', got {source.get('type')!r}")
        data = decode_base64(loc, loc.str(source, "data", f"{label}.source", required=True), f"{label}.source.data")
        return self.b.media(data, loc.str(source, "media_type", f"{label}.source"))

    def assistant(
        self,
        loc: Loc,
        msg: JSONObject,
        blocks: JSONArray,
        ref: str,
        ts: str | None,
        usage: tuple[Usage, str, str | None] | None,
    ) -> None:
        self.b.close_open("the next request was sent before the tool returned", ts)
        self.open_calls = []
        model_info = loc.obj(msg, "modelInfo")
        model = loc.str(model_info, "modelId", "modelInfo") if model_info else None
        texts: list[str] = []
        calls: list[ToolCall] = []
        reasoning, self.carry_reasoning = self.carry_reasoning, False
        for j in range(len(blocks)):
            block = loc.item_obj(blocks, j, "content")
            label = f"content[{j}]"
            kind = loc.str(block, "type", label, required=True)
            if kind == "text":
                texts.append(loc.str(block, "text", label, required=True))
            elif kind in ("thinking", "redacted_thinking", "reasoning"):
                reasoning = True
            elif kind == "tool_use":
                call_id = loc.str(block, "id", label) or loc.str(block, "call_id", label) or f"{ref}:{j}"
                name = loc.str(block, "name", label, required=True)
                args = block.get("input", {})
                if not isinstance(args, dict):
                    raise loc.fail(f"field '{label}.input' must be an object, got {json_type(args)}")
                calls.append(ToolCall(id=call_id, name=name, arguments=dump_json(loc, args, f"{label}.input")))
        slot: AssistantSlot = self.b.assistant(
            ref, ts, text="\n".join(t for t in texts if t), calls=calls, reasoning=reasoning, model=model
        )
        self.open_calls = [c.id for c in calls]
        if usage is not None:
            u, uref, uts = usage
            self.b.set_usage(
                slot,
                Usage(
                    input_tokens=u.input_tokens,
                    output_tokens=u.output_tokens,
                    cache_read_tokens=u.cache_read_tokens,
                    cache_write_tokens=u.cache_write_tokens,
                    model=model,
                ),
                uref,
                uts,
            )
            return
        metrics = loc.obj(msg, "metrics")
        tokens = loc.obj(metrics, "tokens", "metrics") if metrics else None
        if tokens:
            prompt, completion, cached = (
                count_field(loc, tokens, k, "metrics.tokens") for k in ("prompt", "completion", "cached")
            )
            self.b.set_usage(slot, openai_usage(loc, prompt, cached, completion, model=model), f"{ref}#usage", ts)

    def user(self, loc: Loc, blocks: JSONArray, ref: str, ts: str | None) -> None:
        said: list[str] = []
        meta: list[str] = []
        media: list[MediaRef] = []
        results = 0
        for j in range(len(blocks)):
            block = loc.item_obj(blocks, j, "content")
            label = f"content[{j}]"
            kind = loc.str(block, "type", label, required=True)
            if kind == "tool_result":
                call_id = loc.str(block, "tool_use_id", label, required=True)
                body = loc.text_or_list(block, "content", label)
                text, result_media = (
                    ("", ())
                    if body is None
                    else (
                        (body, ())
                        if isinstance(body, str)
                        else self.texts(Loc(self.path, f"{loc.where} {label}"), body)
                    )
                )
                if call_id in self.open_calls:
                    self.open_calls.remove(call_id)
                self.tool_result(call_id, text, f"{ref}.{label}", ts, loc.bool(block, "is_error", label), result_media)
                results += 1
            elif kind == "text":
                text = loc.str(block, "text", label, required=True)
                m = _RESULT.match(text)
                if m:
                    body = text[m.end() :]
                    if self.open_calls:
                        call_id = self.open_calls.pop(0)
                    else:
                        call_id = f"{ref}.{label}"  # a result with no open call (an XML-era tool call)
                    self.tool_result(call_id, body, f"{ref}.{label}", ts, False, (), name=m.group("name"))
                    results += 1
                    continue
                if self.workspace is None and text.lstrip().startswith("<environment_details>"):
                    cwd = _CWD.search(text)
                    self.workspace = cwd.group(1) if cwd else None
                (meta if text.lstrip().startswith(_META) else said).append(text)
            elif kind == "image":
                media.append(self.image(loc, block, label))
        if said or media:  # the user spoke: calls still unanswered will not be
            self.b.close_open("the user sent a new message before the tool returned", ts)
            self.open_calls = []
            self.b.add(UserMessage(text="\n".join(said), media=tuple(media)), ref, ts)
        if meta:
            self.b.add(UserMessage(text="\n".join(meta), is_meta=True), f"{ref}#meta", ts)
        if results and self.open_calls:
            self.b.close_open("Cline ran one tool per message; this call was not executed", ts)
            self.open_calls = []

    def tool_result(
        self,
        call_id: str,
        text: str,
        ref: str,
        ts: str | None,
        is_error: bool,
        media: tuple[MediaRef, ...],
        name: str | None = None,
    ) -> None:
        m = _EXIT.search(text[:500])
        exit_code = int(m.group(1)) if m else None
        is_error = is_error or exit_code not in (None, 0) or text.lstrip().startswith(_FAILED)
        self.b.result(call_id, text, ref, ts, is_error=is_error, name=name, media=media, exit_code=exit_code)


def load_json_field(loc: Loc, text: str, label: str) -> JSONObject:
    """A field holding a JSON object as text (``api_req_started.text``); a ``TranscriptError`` at ``loc`` else."""
    try:
        value = json_loads(text)
    except (ValueError, JSONNestingError):
        raise loc.fail(f"field {label!r} must hold a JSON object, and is not valid JSON") from None
    if not isinstance(value, dict):
        raise loc.fail(f"field {label!r} must hold a JSON object, got {json_type(value)}")
    return value


IMPORTERS = [ClineImporter]
