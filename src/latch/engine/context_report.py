"""The /context report of one view (spec: "Bounded materialization", "Context metrics").

:func:`context_report` turns a :class:`~latch.port.ContextView` into JSON-ready data: the
token breakdown per component (approximate, ``≈``, until the provider reports usage for that very
request), the first retained seq, the tokens that left working memory since the previous request,
reserve, headroom, event and episode counts, the cache epoch and the status. It reads only the
port's view, so it works for any engine; fields an engine does not report are ``None``.
"""

from __future__ import annotations

from typing import Any

from ..port import ContextView

__all__ = ["COMPONENTS", "context_report"]

COMPONENTS = (
    "instructions_tokens",
    "state_tokens",
    "recent_tokens",
    "recall_tokens",
    "episode_tokens",
    "tools_tokens",
    "extension_tokens",
    "harness_tokens",
)
"""Component keys in the spec's priority order; ``episode_tokens`` is inside ``recall_tokens``;
``harness_tokens`` is the host's inferred harness overhead (0 unless inferred, see
:class:`~latch.port.ComponentTokens`)."""


def context_report(view: ContextView, *, provider_prompt_tokens: int | None = None) -> dict[str, Any]:
    """JSON-ready /context data of ``view``.

    ``provider_prompt_tokens`` is the provider-reported prompt size of this exact request when
    known; without it every token figure is an estimate (``approximate`` is True), unless the engine
    counted with an exact tokenizer (``exact_tokenizer`` in its metrics, e.g. ``"tiktoken:cl100k_base…"``).
    ``harness_inferred`` is true when ``components["harness_tokens"]`` holds an overhead the host inferred from
    provider usage (never an exact count).
    """
    m = view.metrics
    total = view.tokens.total_tokens
    hard = view.budget.hard_limit_tokens
    return {
        "session": view.session_id,
        "approximate": provider_prompt_tokens is None and not m.get("exact_tokenizer"),
        "exact_tokenizer": m.get("exact_tokenizer"),
        "components": {k: getattr(view.tokens, k) for k in COMPONENTS},
        "harness_inferred": view.tokens.harness_tokens > 0,
        "total_tokens": total,
        "provider_prompt_tokens": provider_prompt_tokens,
        "context_window_tokens": view.budget.context_window_tokens,
        "reserve_tokens": view.budget.reserve_tokens,
        "hard_limit_tokens": hard,
        "headroom_tokens": hard - total,
        "recent_limit_tokens": m.get("recent_limit_tokens", view.budget.recent_tokens),
        "first_retained_seq": view.first_retained_seq,
        "left_tokens": m.get("left_tokens"),
        "epoch": view.epoch,
        "epoch_start_seq": m.get("epoch_start_seq"),
        "rotation_reason": m.get("rotation_reason"),
        "retained_tokens": m.get("retained_tokens"),
        "span_user_turns": m.get("span_user_turns"),
        "cacheability": m.get("cacheability"),
        "events": m.get("events"),
        "episodes": m.get("episodes"),
        "messages": len(view.messages),
        "image_count": m.get("image_count"),
        "image_tokens": m.get("image_tokens"),
        "provider": m.get("provider"),
        "status": view.status,
    }
