"""What the baseline engines share: :class:`latch.engine.sdk.PolicyEngine`, the engine SDK.

The port plumbing, incremental units, accounting, epochs and the budget check live in the SDK
(:mod:`latch.engine.sdk`); :class:`BaselineEngine` is that base class under the name this package
has always exported. What follows describes every baseline's behaviour.

A baseline engine is built from an :class:`~latch.port.EngineProfile`. It reads the
session only through ``profile.reader`` and writes only ``manual_compact`` records through
``profile.writer``. Conversation units (a user message, an assistant message, or an assistant
tool-call turn with all of its results) come from :class:`latch.engine.units.UnitBuilder`, the
same segmentation the continuity engine uses, and are priced by the same
:class:`~latch.engine.units.TokenCounter`; a view therefore never splits a unit, never holds an
orphan call or result, and its ``tokens.total_tokens`` is exactly the sum a recount of its system
field, tools and messages gives.

Request layout (every baseline)::

    system:   request.system_prompt                                  (instructions_tokens)
    tools:    request.tools                                          (tools_tokens)
    messages: [session context]                                      (instructions_tokens)
              [extension]           when request.extension is set    (extension_tokens)
              [strategy-specific]   e.g. the summary message         (state_tokens)
              unit, unit, ...       the strategy's conversation      (recent_tokens)

The session context is :func:`latch.engine.units.render_session_context`, the same first message
every engine sends.

Cache epochs: the baselines rewrite their prefix (dropping, masking, summarizing), which breaks a
provider's prompt cache. They report it honestly: ``view.epoch`` counts up whenever a request's
canonical bytes (:func:`latch.engine.units.request_lines`) are not the previous request's plus a
tail, with ``metrics["rotation_reason"]`` saying why, so replay shows how often each engine
invalidates the cache. (Epochs are tracked in memory, per engine instance.)

Budget: everything above is at most ``budget.hard_limit_tokens`` (window - reserve). When even
the fixed part plus the newest whole unit cannot fit, ``materialize`` raises
:class:`~latch.port.ContextOverflow` with the breakdown: never an over-budget request.

Configuration: the profile's config is Latch's whole configuration; an engine reads its own
table ``[engines.<PLUGIN_NAME>]`` (e.g. ``[engines.observation-masking] keep_turns = 5``), and
the budget from ``[models.<name>]``/``[context]`` through :func:`latch.config.budget_for_model`.
"""

from __future__ import annotations

from latch.engine.sdk import MANUAL_COMPACT, RECALL_ROWS, PolicyEngine, Selection

__all__ = ["BaselineEngine", "Selection", "MANUAL_COMPACT", "RECALL_ROWS"]


class BaselineEngine(PolicyEngine):
    """Base class of the baselines: subclasses set ``PLUGIN_NAME``, ``DEFAULTS`` and implement ``select(units, room)``."""
