"""Child agent sessions: creation from a durable profile, the typed report, what the parent receives
(spec: "Sessions & continuity": every child has its own complete L0-L3 stack; "Port boundary").

A child of the parent's ``spawn_agent`` call ``call_id`` is the session of import key
:func:`child_key` (so the same call always names the same child: a retried or resumed spawn never makes
a second one). :func:`create_child` stores, in ONE transaction, the session (``source`` "latch agent",
``format`` "latch", the parent's workspace, meta ``agent_child: true``), its
:class:`~latch.events.AgentProfile` and the brief as its first user message. Nothing of the parent is
copied: no history, no canonical state, and the kernel hides the parent's disproofs from it
(:meth:`latch.kernel.ledger.Ledger.isolated`).

A child ends with an :class:`~latch.events.AgentReport` appended to its own session
(:func:`build_report`); :func:`render_report` is the text the parent's call result carries, bounded to
:data:`REPORT_LIMIT_BYTES`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

from ..events import (
    AGENT_REPORT_STATUSES,
    AgentProfile,
    AgentReport,
    AgentValidation,
    AssistantMessage,
    Mutation,
    PendingEvent,
    SubagentMarker,
    UserMessage,
    ValidationEvidence,
    canonical_json,
)
from ..host.ingest import subagent_call
from ..host.kernel import kernel_cache
from ..kernel.ledger import ledger_for
from ..store import EventLog
from .tools.base import bound_text

__all__ = [
    "CHILD_SOURCE",
    "CHILD_MAX_TURNS",
    "REPORT_LIMIT_BYTES",
    "SUMMARY_LIMIT_CHARS",
    "child_key",
    "find_child",
    "create_child",
    "child_profile",
    "child_report",
    "build_report",
    "render_report",
    "child_tools",
    "child_link",
    "child_result",
]

CHILD_SOURCE = "latch agent"
CHILD_MAX_TURNS = 40
"""The most model requests one child makes before it reports ``max_turns``."""
REPORT_LIMIT_BYTES = 8 * 1024
"""The most UTF-8 bytes of the rendered report a parent receives."""
SUMMARY_LIMIT_CHARS = 4_000
"""The most characters of the report's summary (the child's final text)."""


def child_key(parent_session_id: str, call_id: str) -> str:
    """The import key of the child of ``parent_session_id``'s call ``call_id``."""
    return f"latch-agent:{parent_session_id}:{call_id}"


def find_child(store: EventLog, parent_session_id: str, call_id: str) -> str | None:
    """The session id of the child of that call, or ``None`` when it was never created."""
    sid = store.session_id_for(child_key(parent_session_id, call_id))
    try:
        return str(store.session(sid).id) if child_profile(store, sid) is not None else None
    except KeyError:
        return None


def create_child(store: EventLog, parent_session_id: str, profile: AgentProfile) -> str:
    """Store the child session of ``profile`` (its profile and brief, one transaction); returns its id.
    Idempotent: a child that already exists for ``profile.call_id`` is returned unchanged.
    ``ValueError`` for an empty brief or a config that is not a JSON object (store unchanged)."""
    if not profile.brief.strip():
        raise ValueError("spawn_agent: the brief is empty")
    if not isinstance(profile.config, Mapping):
        raise ValueError("spawn_agent: the child config must be a JSON object")
    canonical_json(profile.config)  # ValueError for NaN / Infinity before anything is stored
    info = store.session(parent_session_id)
    key = child_key(parent_session_id, profile.call_id)
    sid: str
    sid, _ = store.import_session(
        external_key=key,
        source=CHILD_SOURCE,
        format="latch",
        workspace=info.workspace,
        parent_id=parent_session_id,
        meta={"agent_child": True, "parent_call_id": profile.call_id},
        events=[PendingEvent(profile, "agent:profile"), PendingEvent(UserMessage(profile.brief), "agent:brief")],
    )
    return sid


def child_profile(store: EventLog, session_id: str) -> AgentProfile | None:
    """The child's durable :class:`AgentProfile` (its first such event), or ``None`` for another session."""
    for s in store.events(session_id, kinds=[AgentProfile.KIND]):
        return cast(AgentProfile, s.event)
    return None


def child_report(store: EventLog, session_id: str) -> AgentReport | None:
    """The child's :class:`AgentReport`, or ``None`` while it has not ended."""
    for s in store.events(session_id, kinds=[AgentReport.KIND]):
        return cast(AgentReport, s.event)
    return None


def build_report(store: EventLog, session_id: str, status: str, *, error: str | None = None) -> AgentReport:
    """The report of child ``session_id`` from its own log: ``summary`` the last assistant text (or
    ``error``), files from its mutations, validations from its validation evidence, ``turns`` its assistant
    messages (across resumes). ``ValueError`` for a
    status outside :data:`~latch.events.AGENT_REPORT_STATUSES`. Nothing is appended."""
    if status not in AGENT_REPORT_STATUSES:
        raise ValueError(f"unknown report status {status!r} (known: {', '.join(AGENT_REPORT_STATUSES)})")
    files: dict[str, None] = {}
    validations: list[AgentValidation] = []
    last_text, turns = "", 0
    for s in store.events(session_id, kinds=[AssistantMessage.KIND]):
        turns += 1
        if isinstance(s.event, AssistantMessage) and s.event.text.strip():
            last_text = s.event.text.strip()
    # the kernel's facts of the child's own log: its stored and its derived mutations and validations
    for _, fact in ledger_for(store, kernel_cache()).session_facts(session_id, store):
        if isinstance(fact, Mutation):
            for p in fact.paths:
                files.setdefault(p, None)
        elif isinstance(fact, ValidationEvidence):
            validations.append(AgentValidation(fact.command, fact.status, fact.exit_code))
    summary = error if error is not None else last_text
    if len(summary) > SUMMARY_LIMIT_CHARS:
        summary = summary[:SUMMARY_LIMIT_CHARS] + f"\n[summary cut to {SUMMARY_LIMIT_CHARS:,} characters]"
    return AgentReport(
        status=status, summary=summary, files_touched=tuple(files), validations=tuple(validations), turns=turns
    )


def render_report(report: AgentReport, session_id: str) -> str:
    """The text of a ``spawn_agent`` result: a header line, the summary, the files and validations,
    bounded to :data:`REPORT_LIMIT_BYTES` UTF-8 bytes."""
    lines = [
        f"[agent report: {report.status} after {report.turns} request{'s' if report.turns != 1 else ''}; "
        f"child session {session_id}]",
        report.summary or "(no summary)",
    ]
    if report.files_touched:
        lines.append("files touched: " + ", ".join(report.files_touched))
    if report.validations:
        lines.append("validations it ran (informational, not your evidence):")
        lines += [
            f"- {v.status}: {v.command}" + (f" (exit {v.exit_code})" if v.exit_code is not None else "")
            for v in report.validations
        ]
    return bound_text("\n".join(lines), REPORT_LIMIT_BYTES)


def child_tools(parent_tools: Sequence[Any], wanted: Any) -> tuple[Any, ...]:
    """The tools of a child: ``wanted`` (a list of names, ``None`` for all) among the parent's, in the
    parent's order, never ``spawn_agent`` (children do not nest). ``ValueError`` naming an unknown or
    non-string name, or an empty list."""
    offered = [t for t in parent_tools if t.NAME != "spawn_agent"]
    if wanted is None:
        return tuple(offered)
    if not isinstance(wanted, list) or not all(isinstance(n, str) for n in wanted):
        raise ValueError("spawn_agent: field 'tools' must be a list of tool names")
    known = {t.NAME for t in offered}
    unknown = [n for n in wanted if n not in known]
    if unknown:
        raise ValueError(f"spawn_agent: unknown tool {unknown[0]!r} for a child (known: {', '.join(sorted(known))})")
    if not wanted:
        raise ValueError("spawn_agent: field 'tools' must name at least one tool")
    return tuple(t for t in offered if t.NAME in wanted)


def child_link(store: EventLog, session_id: str) -> AgentProfile | None:
    """How child session ``session_id`` is linked to its parent's tool call, as an
    :class:`~latch.events.AgentProfile`: a ``spawn_agent`` child's own durable profile, or, for an imported
    sub-agent (meta ``agent_kind`` ``"subagent"``: a Claude Code ``subagents/agent-<id>.jsonl`` file, or a
    merged-messages ``assistant-subagent-<id>`` thread, :mod:`latch.importers.merged_messages`), one derived
    from the import and never stored: ``call_id`` the parent's Task call
    (:func:`latch.host.ingest.subagent_call`), ``brief`` the sub-agent's first user message, ``model`` its
    first assistant message's model, ``engine`` ``None`` (Latch did not build it), ``config`` ``{"agent_type":
    ...}`` from the parent's marker. ``None`` for a session that is neither (a root, or a compaction agent
    no tool call spawned)."""
    profile = child_profile(store, session_id)
    if profile is not None:
        return profile
    info = store.session(session_id)
    call = subagent_call(store, session_id)
    if info.parent_id is None or call is None:
        return None
    brief, model = "", None
    for s in store.events(session_id, kinds=[UserMessage.KIND, AssistantMessage.KIND]):
        if isinstance(s.event, AssistantMessage):
            model = model or s.event.model
        elif isinstance(s.event, UserMessage) and not brief and s.event.text.strip():
            brief = s.event.text
        if brief and model:
            break
    kinds = {
        m.event.agent_type
        for m in store.events(info.parent_id, kinds=[SubagentMarker.KIND])
        if isinstance(m.event, SubagentMarker) and m.event.call_id == call and m.event.agent_type
    }
    return AgentProfile(
        parent_session_id=info.parent_id,
        call_id=call,
        brief=brief,
        model=model,
        config={"agent_type": sorted(kinds)[0]} if kinds else {},
    )


def child_result(store: EventLog, session_id: str) -> AgentReport | None:
    """The report of a child: a ``spawn_agent`` child's stored :class:`~latch.events.AgentReport` (``None``
    while it runs); for an imported sub-agent (:func:`child_link`), :func:`build_report` of its own log
    (derived, never stored): ``completed`` with its final assistant text as the summary when its last
    assistant message calls no tool, else ``failed`` ("the transcript ends before a final answer")."""
    if child_profile(store, session_id) is not None:
        return child_report(store, session_id)
    if child_link(store, session_id) is None:
        return None
    last = None
    for s in store.events(session_id, kinds=[AssistantMessage.KIND]):
        if isinstance(s.event, AssistantMessage):
            last = s.event
    if last is not None and not last.tool_calls and last.text.strip():
        return build_report(store, session_id, "completed")
    return build_report(store, session_id, "failed", error="the transcript ends before a final answer")
