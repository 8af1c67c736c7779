"""A fitted model's FSM thresholds, chosen from its own out-of-fold scores for the budgets the user sets.

SKIP is what an operator may act on (``on_skip="stop"``), so its threshold is the lowest one at which, replaying
the real :class:`~rb_otel.steering.fsm.DifficultyFSM` over the out-of-fold scores, at most ``max_false_stops`` of
the successful runs would have reached SKIP. SLOW (guidance and routing, not a stop) gets a looser budget
(``max_false_slows``); FAST is the lowest tenth of all scores.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rb_otel.steering.fsm import DifficultyFSM
from rb_otel.types import FSMState

__all__ = ["SKIP_WINDOW", "SLOW_WINDOW", "choose_fsm", "reaches"]

SLOW_WINDOW = 2
#: Steps the risk must stay above SKIP's threshold. Persistence lets a lower threshold keep the same false-stop
#: budget: on the development data's half splits, 3 stopped more failing runs than 2 (and than 5) at the budget.
SKIP_WINDOW = 3
FAST_WINDOW = 6


def reaches(fsm: DifficultyFSM, scores: Sequence[float], state: FSMState) -> int | None:
    """The 0-based step at which the FSM first enters ``state`` (SLOW counts SKIP too) over ``scores``."""
    current, history = FSMState.INIT, []
    for i, value in enumerate(scores):
        history.append(float(value))
        current = fsm.transition(current, history)
        if current is state or (state is FSMState.SLOW and current is FSMState.SKIP):
            return i
    return None


def _share(fsm: DifficultyFSM, runs: Sequence[Sequence[float]], state: FSMState) -> float:
    return sum(reaches(fsm, s, state) is not None for s in runs) / max(len(runs), 1)


def _lowest(values: Sequence[float], fits: object, start: float) -> float:
    """The lowest of ``values`` (ascending, >= start) for which ``fits(t)`` holds, else just above the highest."""
    candidates = sorted({round(float(v), 6) for v in values if v >= start})
    if not candidates:
        return min(max(start, 0.0), 0.999)
    lo, hi = 0, len(candidates) - 1
    if not fits(candidates[hi]):  # type: ignore[operator]
        return min(candidates[hi] + 1e-6, 0.999999)
    while lo < hi:  # the shares fall as the threshold rises: bisect for the lowest that fits
        mid = (lo + hi) // 2
        if fits(candidates[mid]):  # type: ignore[operator]
            hi = mid
        else:
            lo = mid + 1
    return candidates[lo]


def choose_fsm(
    successful: Sequence[Sequence[float]],
    every: Sequence[Sequence[float]],
    *,
    max_false_stops: float,
    max_false_slows: float = 0.15,
) -> dict[str, float]:
    """FSM thresholds and windows from out-of-fold probabilities (``successful``: those of successful runs)."""
    flat = np.concatenate([np.asarray(s, dtype=np.float64) for s in every if len(s)])
    peaks = [max(min(s[i : i + SLOW_WINDOW]) for i in range(len(s) - SLOW_WINDOW + 1)) for s in successful if
             len(s) >= SLOW_WINDOW]  # fmt: skip
    fast = float(np.quantile(flat, 0.10))

    def fsm(slow: float, skip: float) -> DifficultyFSM:
        margin = min(0.05, max((slow - fast) / 2, 0.0))
        return DifficultyFSM(fast_threshold=min(fast, slow - 1e-6), slow_threshold=slow, skip_threshold=skip,
                             hysteresis_margin=margin, fast_window=FAST_WINDOW, slow_window=SLOW_WINDOW,
                             skip_window=SKIP_WINDOW)  # fmt: skip

    slow = _lowest(peaks, lambda t: _share(fsm(t, 1.0), successful, FSMState.SLOW) <= max_false_slows, fast + 1e-3)
    skip = _lowest(peaks, lambda t: _share(fsm(slow, t), successful, FSMState.SKIP) <= max_false_stops, slow)
    chosen = fsm(slow, skip).thresholds
    return {
        "fast_threshold": round(chosen.fast_threshold, 6),
        "slow_threshold": round(chosen.slow_threshold, 6),
        "skip_threshold": round(chosen.skip_threshold, 6),
        "hysteresis_margin": round(chosen.hysteresis_margin, 6),
        "fast_window": FAST_WINDOW,
        "slow_window": SLOW_WINDOW,
        "skip_window": SKIP_WINDOW,
    }
