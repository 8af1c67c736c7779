"""``ReasonBlocks``: the entry point users construct (filled in by the middleware module)."""

from __future__ import annotations

from rb_otel.steering.scoring import score_step as _score_step

__all__ = ["ReasonBlocks"]


class ReasonBlocks:
    """Builds steering middleware for LangChain agents."""

    score_step = staticmethod(_score_step)
