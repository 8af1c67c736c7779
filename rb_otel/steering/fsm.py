"""The difficulty FSM (docs/steering.md, "The FSM"): INIT -> NORMAL <-> FAST / SLOW -> SKIP, with hysteresis exits.

Comparisons are strict (docs/steering.md, "Choices where ReasonBlocks leaves them open", "FSM boundaries"); windows are
the trailing entries of the whole scored history, including scores recorded in earlier states. The FSM never returns
``END`` and never reads tokens or monitor signals.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, fields
from itertools import repeat
from typing import Any

from rb_otel.types import FSMState

__all__ = ["DifficultyFSM", "FSMThresholds"]


@dataclass(frozen=True, slots=True)
class FSMThresholds:
    """Validated FSM parameters; the defaults are ReasonBlocks'."""

    fast_threshold: float = 0.2
    slow_threshold: float = 0.6
    skip_threshold: float = 0.85
    hysteresis_margin: float = 0.1
    fast_window: int = 6
    slow_window: int = 5
    skip_window: int = 35

    def __post_init__(self) -> None:
        for name in ("fast_threshold", "slow_threshold", "skip_threshold", "hysteresis_margin"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
                raise ValueError(f"DifficultyFSM: {name} must be a finite number, got {value!r}")
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"DifficultyFSM: {name} must be within [0, 1], got {value!r}")
        for name in ("fast_window", "slow_window", "skip_window"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"DifficultyFSM: {name} must be an integer, got {value!r}")
            if value < 1:
                raise ValueError(f"DifficultyFSM: {name} must be at least 1, got {value!r}")
        if not self.fast_threshold < self.slow_threshold:
            raise ValueError(
                "DifficultyFSM: fast_threshold must be below slow_threshold "
                f"({self.fast_threshold!r} >= {self.slow_threshold!r})"
            )


_KNOWN = frozenset(f.name for f in fields(FSMThresholds))


class DifficultyFSM:
    """Pure transition function over the difficulty history.

    ``DifficultyFSM(**thresholds)`` accepts exactly the keys of :class:`FSMThresholds`; an unknown key or a
    nonsensical value raises ``ValueError`` naming it. The object holds no per-run state, so one instance can
    serve many runs.
    """

    __slots__ = ("thresholds",)

    def __init__(self, **thresholds: Any) -> None:
        unknown = sorted(set(thresholds) - _KNOWN)
        if unknown:
            raise ValueError(
                f"DifficultyFSM: unknown threshold key(s) {', '.join(unknown)}; accepted: {', '.join(sorted(_KNOWN))}"
            )
        self.thresholds = FSMThresholds(**thresholds)

    def __repr__(self) -> str:
        return f"DifficultyFSM({self.thresholds!r})"

    def transition(self, current: FSMState, history: Sequence[float]) -> FSMState:
        """Return the state after the newest score ``history[-1]`` (the history includes it).

        Cost is bounded by the largest window, whatever the length of ``history``.
        """
        if not history:
            return current
        t = self.thresholds
        score = history[-1]
        if current is FSMState.INIT:
            return FSMState.NORMAL
        if current is FSMState.FAST:
            return FSMState.NORMAL if score > t.fast_threshold + t.hysteresis_margin else FSMState.FAST
        if current in (FSMState.SLOW, FSMState.SKIP):
            if score < t.slow_threshold - t.hysteresis_margin:
                return FSMState.NORMAL
            if current is FSMState.SLOW and _trailing_all_above(history, t.skip_window, t.skip_threshold):
                return FSMState.SKIP
            return current
        if current is FSMState.NORMAL:
            if _trailing_all_below(history, t.fast_window, t.fast_threshold):
                return FSMState.FAST
            if _trailing_all_above(history, t.slow_window, t.slow_threshold):
                return FSMState.SLOW
            return FSMState.NORMAL
        return current  # END (only set by hand) is sticky

    def replay(self, scores: Iterable[float]) -> Iterator[FSMState]:
        """The state after each of ``scores``, from INIT: a run's states from its scores alone (what training,
        evaluation and the research scripts replay; a live session transitions step by step the same way)."""
        current, history = FSMState.INIT, []
        for value in scores:
            history.append(float(value))
            current = self.transition(current, history)
            yield current


def _trailing(history: Sequence[float], window: int) -> Sequence[float] | None:
    """The last ``window`` scores, or ``None`` when there are fewer."""
    n = len(history)
    if n < window:
        return None
    if isinstance(history, list | tuple):
        return history[n - window :]
    return [history[i] for i in range(n - window, n)]  # any other Sequence (a deque cannot be sliced)


# all(map(operator.lt, ...)) compares at C speed, with exactly the semantics of ``score < threshold`` (a NaN
# compares false); these run on every scored step.
def _trailing_all_below(history: Sequence[float], window: int, threshold: float) -> bool:
    tail = _trailing(history, window)
    return tail is not None and all(map(operator.lt, tail, repeat(threshold)))


def _trailing_all_above(history: Sequence[float], window: int, threshold: float) -> bool:
    tail = _trailing(history, window)
    return tail is not None and all(map(operator.gt, tail, repeat(threshold)))
