"""What companion middleware (TokenSavingMiddleware, GeneralMonitorMiddleware) tells the run's telemetry.

They run as their own LangChain middleware; the run they belong to is recorded by ``ReasonBlocksMiddleware``.
A note goes through the process-wide guard (``guard().note(node_run_id(), note)``) to whichever middleware
records that agent graph run, which puts it on the run span or on the next ``chat`` span.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["HintGiven", "TokensSaved"]


@dataclass(frozen=True, slots=True)
class TokensSaved:
    """TokenSavingMiddleware shrank the history (deltas, for this one model call)."""

    chars_saved: int
    compressions: int
    early_exits: int


@dataclass(frozen=True, slots=True)
class HintGiven:
    """GeneralMonitorMiddleware added a corrective hint before the next model call."""

    rule: str
    text: str
