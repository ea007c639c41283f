"""What survives a rotation and a resume (spec: "Cache epochs and working memory"): the repository
instructions (the session context, the first message of every epoch) and every skill body the agent loaded
(its ``load_skill`` result, verbatim: in the conversation while the epoch holds it, then in the snapshot's
``<loaded-skills>`` section, the newest loads first within :data:`~latch.engine.continuity.SKILL_TOKENS`)."""

from __future__ import annotations

from kernel_support import session, turn

from latch.engine import ContinuityEngine
from latch.engine.continuity import SKILL_TOKENS
from latch.engine.port import ContextBudget, ContextRequest, SessionContext
from latch.host.session import StoreKernelWriter, StoreSessionReader

INSTRUCTIONS = "Run `python -m pytest -q` before every commit. Never edit generated files under gen/."
BUDGET = ContextBudget(context_window_tokens=16_000, reserve_tokens=1_000, recent_tokens=1_500)


def body(name: str, lines: int = 12) -> str:
    return "\n".join(
        [f"# {name}", *(f"{k}. step {k} of the {name} procedure: check item {k * 7}" for k in range(1, lines))]
    )


def request(sid: str, until: int) -> ContextRequest:
    return ContextRequest(
        session_id=sid,
        until_seq=until,
        budget=BUDGET,
        session_context=SessionContext(workspace="/ws", repository_instructions=INSTRUCTIONS),
    )


def engine(store, sid: str, stream: str = "continuity:retention") -> ContinuityEngine:
    return ContinuityEngine.for_model(
        None, reader=StoreSessionReader(store, sid), writer=StoreKernelWriter(store, sid, stream)
    )


def script(store, sid: str) -> tuple[list[int], dict[str, int]]:
    """Two skills loaded early, a failed load, then enough work to rotate many times; returns the request
    points and the seq at which each skill's body was loaded."""
    until, loaded = [], {}
    for name in ("release-checklist", "db-migrations"):
        loaded[name] = turn(store, sid, "load_skill", {"name": name}, body(name))
        until.append(loaded[name])
    until.append(turn(store, sid, "load_skill", {"name": "missing"}, "unknown skill 'missing'", is_error=True))
    for i in range(30):
        until.append(turn(store, sid, "Read", {"file_path": f"/ws/src/m{i}.py"}, f"# module {i}\n" + "x = 1\n" * 60))
    return until, loaded


def test_instructions_and_loaded_skills_are_in_every_view_after_rotation_and_resume(store):
    sid = session(store, fmt="claude-code")
    until, loaded = script(store, sid)
    eng = engine(store, sid)
    views = [eng.materialize(request(sid, u)) for u in until]
    assert max(v.epoch for v in views) >= 5
    for k, view in enumerate(views):
        text = "\n".join(m.content for m in view.messages)
        assert view.messages[0].kind == "session_context" and INSTRUCTIONS in view.messages[0].content
        for name, seq in loaded.items():
            if seq <= until[k]:
                assert body(name) in text, (k, name)  # verbatim, in the conversation or the snapshot
        section = next(
            (
                m.content.split("<loaded-skills", 1)[1].split("</loaded-skills>", 1)[0]
                for m in view.messages
                if "<loaded-skills" in m.content
            ),
            "",
        )
        assert "unknown skill" not in section  # a failed load is no skill
    rotated = [v for v in views if v.epoch > 1]
    assert all("<loaded-skills" in m.content for v in rotated for m in v.messages[1:2])
    # a resumed engine gives the same views
    for cut in (5, 17):
        first = engine(store, sid, f"continuity:cut{cut}")
        for u in until[:cut]:
            first.materialize(request(sid, u))
        resumed = engine(store, sid, f"continuity:cut{cut}")
        assert [resumed.materialize(request(sid, u)) for u in until[cut:]] == views[cut:]


def test_skills_past_the_cap_are_named_newest_load_first(store):
    sid = session(store, fmt="claude-code")
    eng = engine(store, sid)
    size = eng.estimator.estimate
    lines = next(n for n in range(10, 1_000) if size(body("gamma", n)) > 0.36 * SKILL_TOKENS)
    big = {name: body(name, lines) for name in ("alpha", "beta", "gamma")}  # two fit the cap, three do not
    until = [turn(store, sid, "load_skill", {"name": name}, text) for name, text in big.items()]
    for i in range(30):
        until.append(turn(store, sid, "Read", {"file_path": f"/ws/src/m{i}.py"}, f"# module {i}\n" + "x = 1\n" * 60))
    view = [
        eng.materialize(ContextRequest(session_id=sid, until_seq=u, budget=ContextBudget(64_000, 4_000, 1_500)))
        for u in until
    ][-1]
    snap = view.messages[1].content
    assert big["gamma"] in snap and big["beta"] in snap and big["alpha"] not in snap
    assert "Also loaded, left out for room (load_skill again when needed): alpha" in snap
