"""A minimal third-party context engine for Latch: ``keep-last-units``, on the engine SDK.

It sends the newest ``units`` whole conversation units (default 20) that fit the hard budget. A
*unit* is a user message, an assistant message, or a tool-call turn with all of its results:
keeping or dropping whole units keeps every request protocol-valid. The SDK base class
(:class:`latch.engine.sdk.PolicyEngine`) owns the port: units kept incrementally across requests,
the session context, budget, ``ContextOverflow``, cache epochs and FTS recall. Copy this file to
write your own engine; configure it with ``[engine] name = "keep-last-units"`` and
``[engines.keep-last-units] units = 20``.
"""

from latch.engine.sdk import PolicyEngine
from latch.hookspecs import hookimpl


class KeepLastUnits(PolicyEngine):
    """The newest N whole units that fit ``context_window_tokens - reserve_tokens``."""

    PLUGIN_NAME = "keep-last-units"
    DESCRIPTION = "Example engine: the newest N whole units (default 20) that fit the budget."
    DEFAULTS = {"units": 20}

    def select(self, units, room):
        return self.fit(units[-int(self.options["units"]) :], room)


@hookimpl
def latch_register_engines() -> list[type]:
    return [KeepLastUnits]
