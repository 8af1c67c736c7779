"""Client-side guardrails applied after a monitor backend has decided (docs/steering.md, "Guardrails")."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rb_otel.types import FSMState, MonitorEvaluation

__all__ = ["COOLDOWN_BY_STATE", "MonitorGuardrails", "e1_gate_open"]

#: Model calls required between two monitor injections, by the current FSM state.
COOLDOWN_BY_STATE: Mapping[FSMState, int] = {
    FSMState.INIT: 3,
    FSMState.FAST: 5,
    FSMState.NORMAL: 3,
    FSMState.SLOW: 2,
    FSMState.SKIP: 2,
    FSMState.END: 3,
}
DEFAULT_MAX_PER_RUN = 5
DEFAULT_E1_GATE_COMPOSITE = 0.15


class MonitorGuardrails:
    """Per-run cap, per-state cooldown and duplicate suppression for monitor injections.

    An injection is allowed when fewer than ``max_per_run`` were queued, its text differs from the last queued
    one, and there was no earlier injection or ``step - last_step >= cooldown(state)`` (docs/steering.md, "cooldown").
    """

    __slots__ = ("last_step", "last_text", "max_per_run", "queued")

    def __init__(self, max_per_run: int = DEFAULT_MAX_PER_RUN) -> None:
        self.max_per_run = max_per_run
        self.queued = 0
        self.last_text: str | None = None
        self.last_step: int | None = None

    def allows(self, text: str, step: int, state: FSMState) -> bool:
        if self.queued >= self.max_per_run or text == self.last_text:
            return False
        return self.last_step is None or step - self.last_step >= COOLDOWN_BY_STATE[state]

    def record(self, text: str, step: int) -> None:
        self.queued += 1
        self.last_text = text
        self.last_step = step


def e1_gate_open(
    history: Sequence[MonitorEvaluation],
    *,
    monitors_configured: bool,
    composite_threshold: float = DEFAULT_E1_GATE_COMPOSITE,
) -> bool:
    """Whether E1 may query this step: unconditionally only when no monitor injection is configured
    (docs/steering.md, "E1 gate backward compatibility").

    ``history[-1]`` is the current evaluation; the two before it are the lookback.
    """
    if not monitors_configured:
        return True
    if not history:
        return False
    current = history[-1]
    if current.fired or current.composite > composite_threshold:
        return True
    for earlier in history[-3:-1]:  # noqa: SIM110 (a loop, not any(<generator>): this runs on every step)
        if earlier.fired:
            return True
    return False
