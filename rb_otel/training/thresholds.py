"""A fitted model's FSM thresholds, chosen from its own out-of-fold scores for the budgets the user sets.

SKIP is what an operator may act on (``on_skip="stop"``), so the budget must hold on runs the threshold never saw,
not only on average: its threshold is the lowest one at which, replaying the real
:class:`~rb_otel.steering.fsm.DifficultyFSM` over the out-of-fold scores, an *upper confidence bound* on the share
of successful runs that would have reached SKIP (Wilson, z = 1: about 84% one-sided) is within
``max_false_stops``. How many steps the risk must hold (:data:`SKIP_WINDOWS`) is chosen the same way, on the same
training-side scores: the hold that stops the most failing runs within the bound. When no threshold stops at least
:data:`MIN_USEFUL_STOPS` of the failing runs within the bound, SKIP is off (its threshold 1.0, which a probability
never exceeds) and the model file says so. SLOW (guidance and routing, not a stop) gets a looser budget
(``max_false_slows``, as a plain share); FAST is the lowest tenth of all scores.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from rb_otel.evaluation.metrics import wilson_upper
from rb_otel.steering.fsm import DifficultyFSM
from rb_otel.training.dataset import LabelledRun
from rb_otel.types import FSMState

__all__ = [
    "BOUND_STRICTNESS",
    "MIN_USEFUL_STOPS",
    "SKIP_OFF",
    "SKIP_WINDOW",
    "SKIP_WINDOWS",
    "SLOW_WINDOW",
    "choose_fsm",
    "cross_fitted_states",
    "fold_thresholds",
    "fsm_states",
    "holding_bound",
    "reaches",
]

SLOW_WINDOW = 2
#: The holds SKIP may use (steps the risk must stay above its threshold), chosen per fit on its training side.
SKIP_WINDOWS = (2, 3, 5)
#: The hold of a model whose SKIP is off, and the default where no choice is made.
SKIP_WINDOW = 3
FAST_WINDOW = 6
#: SKIP is on only when it would stop at least this share of the failing runs within the false-stop bound.
MIN_USEFUL_STOPS = 0.02
#: The SKIP threshold of a model whose SKIP is off: a probability is never above it.
SKIP_OFF = 1.0


def fsm_states(fsm: DifficultyFSM, scores: Sequence[float]) -> list[str]:
    """The state after each step of a run scored ``scores``."""
    return [state.value for state in fsm.replay(scores)]


def reaches(fsm: DifficultyFSM, scores: Sequence[float], state: FSMState) -> int | None:
    """The 0-based step at which the FSM first enters ``state`` (SLOW counts SKIP too) over ``scores``."""
    for i, current in enumerate(fsm.replay(scores)):
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


def _count(fsm: DifficultyFSM, runs: Sequence[Sequence[float]], state: FSMState) -> int:
    return sum(reaches(fsm, s, state) is not None for s in runs)


def choose_fsm(
    successful: Sequence[Sequence[float]],
    every: Sequence[Sequence[float]],
    *,
    max_false_stops: float,
    max_false_slows: float = 0.15,
    failing: Sequence[Sequence[float]] | None = None,
    z: float | None = 1.0,
) -> dict[str, float]:
    """FSM thresholds and windows from out-of-fold probabilities (``successful``: those of successful runs;
    ``failing``: of failing runs, for the choice of SKIP's hold; without them the hold is :data:`SKIP_WINDOW`;
    ``z``: how strict the bound is (:func:`holding_bound` raises it until the budget holds on the cross-fitted
    folds; ``None``: no strictness held it, SKIP is off).
    SKIP is off when its threshold is :data:`SKIP_OFF` (module docstring)."""
    flat = np.concatenate([np.asarray(s, dtype=np.float64) for s in every if len(s)])
    peaks = [max(min(s[i : i + SLOW_WINDOW]) for i in range(len(s) - SLOW_WINDOW + 1)) for s in successful if
             len(s) >= SLOW_WINDOW]  # fmt: skip
    fast = float(np.quantile(flat, 0.10))
    n_ok = len(successful)

    def fsm(slow: float, skip: float, window: int = SKIP_WINDOW) -> DifficultyFSM:
        margin = min(0.05, max((slow - fast) / 2, 0.0))
        return DifficultyFSM(fast_threshold=min(fast, slow - 1e-6), slow_threshold=slow, skip_threshold=skip,
                             hysteresis_margin=margin, fast_window=FAST_WINDOW, slow_window=SLOW_WINDOW,
                             skip_window=window)  # fmt: skip

    slow = _lowest(peaks, lambda t: _share(fsm(t, 1.0), successful, FSMState.SLOW) <= max_false_slows, fast + 1e-3)
    options = []
    for window in (SKIP_WINDOWS if failing is not None else (SKIP_WINDOW,)) if z is not None else ():

        def within(t: float, window: int = window) -> bool:
            stops = _count(fsm(slow, t, window), successful, FSMState.SKIP)
            return wilson_upper(stops, n_ok, z or 1.0) <= max_false_stops

        skip = _lowest(peaks, within, slow)
        stopped = _share(fsm(slow, skip, window), failing, FSMState.SKIP) if failing else 1.0
        if within(skip):
            options.append((stopped, -abs(window - SKIP_WINDOW), window, skip))
    useful = [o for o in options if o[0] >= MIN_USEFUL_STOPS] if z is not None else []
    if useful:
        _, _, window, skip = max(useful)
        on = 1.0
    else:
        window, skip, on = SKIP_WINDOW, SKIP_OFF, 0.0
    chosen = fsm(slow, min(max(skip, slow), SKIP_OFF), window).thresholds
    return {
        "fast_threshold": round(chosen.fast_threshold, 6),
        "slow_threshold": round(chosen.slow_threshold, 6),
        "skip_threshold": round(chosen.skip_threshold, 6) if on else SKIP_OFF,
        "hysteresis_margin": round(chosen.hysteresis_margin, 6),
        "fast_window": FAST_WINDOW,
        "slow_window": SLOW_WINDOW,
        "skip_window": window,
    }


#: How strict the false-stop bound is made, in turn, until it holds on the cross-fitted folds (Wilson's ``z``).
BOUND_STRICTNESS = (1.0, 2.0, 3.0)


def fold_thresholds(
    runs: Sequence[LabelledRun],
    probabilities: Sequence[Sequence[float]],
    folds: NDArray[np.int64],
    max_false_stops: float,
    z: float | None = 1.0,
) -> dict[int, dict[str, float]]:
    """The FSM thresholds each fold's runs are judged by: chosen from the *other* folds' out-of-fold scores only."""
    out = {}
    for f in np.unique(folds):
        others = [i for i in range(len(runs)) if folds[i] != f]
        out[int(f)] = choose_fsm(
            [probabilities[i] for i in others if not runs[i].failed],
            [probabilities[i] for i in others],
            max_false_stops=max_false_stops,
            failing=[probabilities[i] for i in others if runs[i].failed],
            z=z,
        )
    return out


def cross_fitted_states(
    runs: Sequence[LabelledRun],
    probabilities: Sequence[Sequence[float]],
    folds: NDArray[np.int64],
    max_false_stops: float,
    z: float | None = 1.0,
) -> list[list[str]]:
    """Each run's FSM states under thresholds chosen from the other folds' out-of-fold scores."""
    states: list[list[str]] = [[] for _ in runs]
    for f, thresholds in fold_thresholds(runs, probabilities, folds, max_false_stops, z).items():
        fsm = DifficultyFSM(**thresholds)
        for i in np.flatnonzero(folds == f).tolist():
            states[i] = fsm_states(fsm, probabilities[i])
    return states


def holding_bound(
    runs: Sequence[LabelledRun],
    probabilities: Sequence[Sequence[float]],
    folds: NDArray[np.int64],
    max_false_stops: float,
    strictness: Sequence[float] = BOUND_STRICTNESS,
    *,
    judge: float = 1.0,
) -> tuple[float | None, list[list[str]]]:
    """The least strict bound under which SKIP keeps the budget on runs its thresholds never saw (the Wilson
    upper bound, z = ``judge``, of the cross-fitted false stops within ``max_false_stops``) and still stops a
    useful share of the failing runs; ``None`` (SKIP off) when none does. Returns it with the cross-fitted states
    it gives (with SKIP off, the states SKIP off gives)."""
    ok = [i for i, r in enumerate(runs) if not r.failed]
    bad = [i for i, r in enumerate(runs) if r.failed]
    for z in strictness:
        states = cross_fitted_states(runs, probabilities, folds, max_false_stops, z)
        stops = sum("SKIP" in states[i] for i in ok)
        stopped = sum("SKIP" in states[i] for i in bad) / max(len(bad), 1)
        if wilson_upper(stops, len(ok), judge) <= max_false_stops and stopped >= MIN_USEFUL_STOPS:
            return z, states
    return None, cross_fitted_states(runs, probabilities, folds, max_false_stops, None)
