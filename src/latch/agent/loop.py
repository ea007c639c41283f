"""The agent loop: one model request after another, through the configured context engine (spec:
"Port boundary").

Each :meth:`AgentLoop.step`:

1. delivers queued steering messages when the session is at a safe boundary
   (:class:`~latch.agent.steering.SteeringInbox`);
2. asks the session's engine for the view (``materialize``); the engine was built by the
   :class:`~latch.agent.supervisor.Supervisor`'s factory, never constructed here, and there is no
   fallback to the default engine;
3. renders exactly that view in the provider's wire format (:func:`latch.providers.to_openai_chat`
   or :func:`latch.providers.to_anthropic_messages`) and sends it: the provider sees the view the
   engine returned, byte for byte, with nothing added;
4. appends the response as ONE :class:`~latch.events.AssistantMessage` and its
   :class:`~latch.events.Usage` (normalized: ``input_tokens`` uncached, ``cache_read_tokens`` and
   ``cache_write_tokens`` disjoint; unknown stays ``None``), then one
   :class:`~latch.events.ToolResult` per call, in call order: a call a hard-deny rule refuses
   (:class:`~latch.agent.permissions.PermissionPolicy`) gets an error result and never runs; the
   others go to ``tool_runner(call) -> ToolResult`` (no runner: an error result saying so).

The loop writes conversation events only; kernel-context records are the engine's own, written
through the :class:`~latch.port.KernelWriter` the loop hands it (stream
``"<engine>:main"``), so a replacement engine never gets default-engine kernel context behind its
back. :meth:`AgentLoop.spawn_child` starts a child session from a compact delegation brief; its
engine comes from the supervisor's child policy, as does a resumed child's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..host.session import StoreKernelWriter, StoreSessionReader
from ..events import AssistantMessage, Event, ToolCall, ToolResult, Usage, UserMessage, canonical_arguments
from ..port import ContextEngine, ContextRequest, ContextView, EngineProfile, SessionContext
from ..providers import to_anthropic_messages, to_openai_chat
from ..store import EventStore
from .permissions import PermissionPolicy
from .steering import SteeringInbox
from .supervisor import Supervisor

__all__ = ["AgentLoop", "Step", "WIRE_FORMATS", "parse_response", "engine_stream"]

WIRE_FORMATS = ("openai-chat", "anthropic-messages")
ToolRunner = Callable[[ToolCall], ToolResult]


@dataclass(frozen=True)
class Step:
    """One request: the engine's ``view``, the wire ``body`` sent, the provider's ``response`` and the
    seqs of the events appended (assistant message, usage, results)."""

    view: ContextView
    body: Mapping[str, Any]
    response: Mapping[str, Any]
    seqs: tuple[int, ...]
    message: AssistantMessage


def engine_stream(factory: Callable[..., Any]) -> str:
    """The kernel-record stream of a session's live engine: ``"<PLUGIN_NAME>:main"``."""
    owner = getattr(factory, "__self__", None)
    name = getattr(owner, "PLUGIN_NAME", None) or getattr(factory, "__qualname__", "engine")
    return f"{name}:main"


def _int(value: Any, where: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"provider response: {where} must be a non-negative integer, got {value!r}")
    return value


def parse_response(wire: str, response: Mapping[str, Any]) -> tuple[AssistantMessage, Usage | None]:
    """The assistant message and usage of a chat-completions or Messages API response body.

    ``ValueError`` naming the field for a malformed response (nothing is appended then).
    """
    if not isinstance(response, Mapping):
        raise ValueError(f"provider response must be a JSON object, got {type(response).__name__}")
    model = response.get("model") if isinstance(response.get("model"), str) else None
    if wire == "openai-chat":
        choices = response.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
            raise ValueError("provider response: choices[0] is missing")
        msg = choices[0].get("message")
        if not isinstance(msg, Mapping):
            raise ValueError("provider response: choices[0].message is missing")
        text = msg.get("content") or ""
        calls = []
        for i, c in enumerate(msg.get("tool_calls") or ()):
            fn = c.get("function") if isinstance(c, Mapping) else None
            if not isinstance(fn, Mapping) or not isinstance(c.get("id"), str) or not isinstance(fn.get("name"), str):
                raise ValueError(f"provider response: choices[0].message.tool_calls[{i}] needs id and function.name")
            calls.append(ToolCall(c["id"], fn["name"], fn.get("arguments") or "{}"))
        reasoning = bool(msg.get("reasoning_content") or msg.get("reasoning"))
        u = response.get("usage")
        usage = None
        if isinstance(u, Mapping):
            prompt = _int(u.get("prompt_tokens"), "usage.prompt_tokens")
            details = u.get("prompt_tokens_details") if isinstance(u.get("prompt_tokens_details"), Mapping) else {}
            cached = _int(details.get("cached_tokens"), "usage.prompt_tokens_details.cached_tokens")
            usage = Usage(input_tokens=prompt - cached if prompt is not None and cached is not None else prompt,
                          output_tokens=_int(u.get("completion_tokens"), "usage.completion_tokens"),
                          cache_read_tokens=cached, model=model, request_id=response.get("id"))
    elif wire == "anthropic-messages":
        blocks = response.get("content")
        if not isinstance(blocks, list):
            raise ValueError("provider response: content must be a list of blocks")
        texts, calls, reasoning = [], [], False
        for i, b in enumerate(blocks):
            kind = b.get("type") if isinstance(b, Mapping) else None
            if kind == "text":
                texts.append(str(b.get("text", "")))
            elif kind == "tool_use":
                if not isinstance(b.get("id"), str) or not isinstance(b.get("name"), str):
                    raise ValueError(f"provider response: content[{i}] tool_use needs id and name")
                try:
                    arguments = canonical_arguments(b.get("input", {}))
                except ValueError:
                    raise ValueError(f"provider response: content[{i}] tool_use input holds NaN or Infinity") from None
                calls.append(ToolCall(b["id"], b["name"], arguments))
            elif kind in ("thinking", "redacted_thinking"):
                reasoning = True
        text = "".join(texts)
        u = response.get("usage")
        usage = None
        if isinstance(u, Mapping):
            usage = Usage(input_tokens=_int(u.get("input_tokens"), "usage.input_tokens"),
                          output_tokens=_int(u.get("output_tokens"), "usage.output_tokens"),
                          cache_read_tokens=_int(u.get("cache_read_input_tokens"), "usage.cache_read_input_tokens"),
                          cache_write_tokens=_int(u.get("cache_creation_input_tokens"),
                                                  "usage.cache_creation_input_tokens"),
                          model=model, request_id=response.get("id"))
    else:
        raise ValueError(f"unknown wire format {wire!r} (known: {', '.join(WIRE_FORMATS)})")
    if not isinstance(text, str):
        raise ValueError("provider response: the message content must be text")
    return AssistantMessage(text=text, tool_calls=tuple(calls), reasoning_reported=reasoning, model=model), usage


class AgentLoop:
    """The loop of one session (see the module docstring).

    ``supervisor`` holds the engine factories; the session's engine is built (root) or resumed
    (``parent_id`` set: the child policy) from its profile. ``wire`` is one of :data:`WIRE_FORMATS`.
    """

    def __init__(self, store: EventStore, session_id: str, supervisor: Supervisor, provider: Any, *,
                 model: str | None = None, wire: str = "openai-chat", system_prompt: str = "",
                 tools: Sequence[Mapping[str, Any]] = (), session_context: SessionContext | None = None,
                 config: Mapping[str, Any] | None = None, estimator: Any = None,
                 policy: PermissionPolicy | None = None, tool_runner: ToolRunner | None = None,
                 _spawn: bool = False):
        if wire not in WIRE_FORMATS:
            raise ValueError(f"unknown wire format {wire!r} (known: {', '.join(WIRE_FORMATS)})")
        self.store, self.session_id, self.supervisor, self.provider = store, session_id, supervisor, provider
        self.model, self.wire, self.system_prompt, self.tools = model, wire, system_prompt, tuple(tools)
        self.config, self.estimator = dict(config or {}), estimator
        self.policy = policy or PermissionPolicy()
        self.tool_runner = tool_runner
        info = store.session(session_id)
        self.parent_id = info.parent_id
        self.session_context = session_context or SessionContext(workspace=info.workspace)
        self.inbox = SteeringInbox(store, session_id)
        self.engine = self._build(_spawn)

    def _profile(self) -> EngineProfile:
        factory = self.supervisor.root_factory if self.parent_id is None else self.supervisor.child_factory
        stream = engine_stream(factory) if factory is not None else "engine:main"
        return EngineProfile(session_id=self.session_id, model=self.model,
                             reader=StoreSessionReader(self.store, self.session_id),
                             writer=StoreKernelWriter(self.store, self.session_id, stream), config=self.config,
                             estimator=self.estimator, parent_session_id=self.parent_id)

    def _build(self, spawn: bool) -> ContextEngine:
        profile = self._profile()
        if self.parent_id is None:
            return self.supervisor.build_root(profile)
        return self.supervisor.spawn_child(profile) if spawn else self.supervisor.resume(profile)

    def request(self) -> ContextRequest:
        return ContextRequest(session_id=self.session_id, system_prompt=self.system_prompt,
                              session_context=self.session_context, tools=self.tools)

    def render(self, view: ContextView) -> dict[str, Any]:
        """The wire body of ``view`` (images inlined from the store's artifacts)."""
        def loader(sha256: str) -> bytes:
            return self.store.get_artifact(sha256)[1]

        if self.wire == "openai-chat":
            return to_openai_chat(view, loader, model=self.model)
        return to_anthropic_messages(view, loader, model=self.model, max_tokens=view.budget.reserve_tokens)

    def step(self) -> Step:
        """One model request and its tool results (see the module docstring)."""
        self.inbox.deliver()
        view = self.engine.materialize(self.request())
        body = self.render(view)
        response = self.provider.complete(body)
        message, usage = parse_response(self.wire, response)
        events: list[Event] = [message] + ([usage] if usage is not None else [])
        events.extend(self._run(call) for call in message.tool_calls)
        seqs = self.store.append(self.session_id, events)
        return Step(view, body, response, tuple(seqs), message)

    def _run(self, call: ToolCall) -> ToolResult:
        decision = self.policy.decide(call.name, call.arguments)
        if decision.action == "deny":
            return ToolResult(call.id, f"[denied: {decision.reason}]", is_error=True, name=call.name)
        if self.tool_runner is None:
            return ToolResult(call.id, "[no tool runner: the call was not executed]", is_error=True, name=call.name)
        return self.tool_runner(call)

    def say(self, text: str) -> int:
        """Append a user turn now (between steps the session is at a safe boundary); returns its seq."""
        (seq,) = self.store.append(self.session_id, [UserMessage(text)])
        return seq

    def spawn_child(self, brief: str, provider: Any, **options: Any) -> "AgentLoop":
        """A child session (same workspace) that starts from ``brief`` only, with an engine from the
        supervisor's child policy (:class:`~latch.agent.supervisor.ChildPolicyError` when there is none).
        ``options`` override this loop's model, wire, system prompt, tools and so on."""
        info = self.store.session(self.session_id)
        child = self.store.create_session(workspace=info.workspace, parent_id=self.session_id, source="latch agent")
        self.store.append(child, [UserMessage(brief)])
        kwargs = {"model": self.model, "wire": self.wire, "system_prompt": self.system_prompt, "tools": self.tools,
                  "config": self.config, "estimator": self.estimator, "policy": self.policy,
                  "tool_runner": self.tool_runner, **options}
        return AgentLoop(self.store, child, self.supervisor, provider, _spawn=True, **kwargs)
