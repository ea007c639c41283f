"""Latch: a context engine for LLM agents.

Durable SQLite event log (L3), episode index (L2), canonical task state (L1) and a
freshly materialized, token-bounded view (L0) for every model request.
"""

__version__ = "0.1.0"
