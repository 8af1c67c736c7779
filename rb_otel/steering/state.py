"""Per-run trace state (docs/reference.md, "Steps and states"): scored steps, difficulty history, tokens and the
optional budget."""

from __future__ import annotations

import uuid

from rb_otel.types import FSMState, StepRecord, TraceState

__all__ = ["TraceStateManager"]


class TraceStateManager:
    """Owns one run's :class:`TraceState`. The token budget is tracked, never enforced."""

    __slots__ = ("state",)

    def __init__(self, trace_id: str | None = None, *, token_budget: int | None = None) -> None:
        if token_budget is not None and (isinstance(token_budget, bool) or not isinstance(token_budget, int)):
            raise TypeError(f"token_budget must be an int or None, got {type(token_budget).__name__}")
        if token_budget is not None and token_budget <= 0:
            raise ValueError(f"token_budget must be positive, got {token_budget}")
        self.state = TraceState(trace_id=trace_id or str(uuid.uuid4()), token_budget=token_budget)

    @property
    def trace_id(self) -> str:
        return self.state.trace_id

    def record_step(self, record: StepRecord) -> None:
        """Append a scored step; its difficulty joins the history (the caller then sets the new state)."""
        self.state.steps.append(record)
        self.state.difficulty_history.append(record.difficulty)

    def add_tokens(self, tokens: int, *, to_latest_record: bool = False) -> None:
        """Count ``tokens`` from one model call towards the run (and optionally the newest record)."""
        self.state.total_tokens += tokens
        if to_latest_record and self.state.steps:
            self.state.steps[-1].tokens_used += tokens

    def set_state(self, state: FSMState) -> None:
        self.state.current_state = state

    def get_budget_used(self) -> float | None:
        """Fraction of ``token_budget`` consumed, or ``None`` when no budget was set."""
        budget = self.state.token_budget
        return None if budget is None else self.state.total_tokens / budget
