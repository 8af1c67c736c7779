"""SKIP relative to the agent: the rule a pilot written by ``rb-otel train`` uses when SKIP held its budget on
agents it was not fitted to (docs/signal.md, "Leave one agent out").

SKIP fires when the risk stays above the ``q`` quantile of what *this agent's* earlier runs sustained for ``w``
steps (label-free, learned in file order; no SKIP before the agent has
:data:`~rb_otel.steering.pilot.baselines.RELATIVE_AFTER` finished runs). :func:`relative_stops` is the plain
definition over scored runs (what :meth:`~rb_otel.steering.pilot.PilotRun.fsm_thresholds` applies live for a
model with a ``skip_quantile``); :func:`choose_relative_skip` picks ``q`` and ``w`` for a false-stop budget.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict, deque
from collections.abc import Callable, Sequence

from rb_otel.evaluation.early import sustained_peak
from rb_otel.evaluation.metrics import wilson_upper
from rb_otel.steering.fsm import DifficultyFSM
from rb_otel.steering.pilot.baselines import MAX_RUNS, RELATIVE_AFTER
from rb_otel.training.dataset import LabelledRun
from rb_otel.training.thresholds import MIN_USEFUL_STOPS, SKIP_OFF, SKIP_WINDOWS, fsm_states

__all__ = ["SKIP_QUANTILES", "choose_relative_skip", "relative_stops"]

#: The quantiles of an agent's own sustained peaks SKIP may be set at (the strictest first).
SKIP_QUANTILES = (0.995, 0.99, 0.98, 0.97, 0.96, 0.95, 0.93, 0.9, 0.85, 0.8)


def relative_stops(
    runs: Sequence[LabelledRun], probabilities: Sequence[Sequence[float]], fsm: dict[str, float], q: float, window: int
) -> list[int | None]:
    """Each run's first SKIP step (``None``: never) when SKIP's threshold is relative to its agent: the ``q``
    quantile of the risk its agent's earlier runs sustained for ``window`` steps (label-free, learned in file
    order, the newest :data:`MAX_RUNS` kept; no SKIP before :data:`RELATIVE_AFTER` runs), as
    :meth:`~rb_otel.steering.pilot.PilotRun.fsm_thresholds` sets it live for a model with a ``skip_quantile``."""
    recent: dict[str, deque[float]] = defaultdict(lambda: deque(maxlen=MAX_RUNS))
    out: list[int | None] = []
    for run, scores in zip(runs, probabilities, strict=True):
        known = sorted(recent[run.agent])
        stop = None
        if len(known) >= RELATIVE_AFTER:
            skip = min(known[min(int(q * len(known)), len(known) - 1)], SKIP_OFF)
            slow = min(fsm["slow_threshold"], skip)
            fast = min(fsm["fast_threshold"], slow - 1e-6)
            machine = DifficultyFSM(**{**fsm, "fast_threshold": fast, "slow_threshold": slow,
                                       "skip_threshold": skip, "skip_window": window})  # fmt: skip
            stop = next((i for i, st in enumerate(fsm_states(machine, scores)) if st == "SKIP"), None)
        out.append(stop)
        peak = sustained_peak(scores, window)
        if peak != -math.inf:
            recent[run.agent].append(peak)
    return out


def choose_relative_skip(
    runs: Sequence[LabelledRun],
    probabilities: Sequence[Sequence[float]],
    fsm: dict[str, float],
    budget: float,
    *,
    unit: Callable[[LabelledRun], str] | None = None,
    min_successful: int = 50,
) -> tuple[float, int] | None:
    """The quantile and hold of a relative SKIP (:func:`relative_stops`) chosen on training-side out-of-fold
    scores: among those whose false stops keep the Wilson bound (z = 1) within ``budget`` and stop at least
    :data:`~rb_otel.training.thresholds.MIN_USEFUL_STOPS` of the failing runs, the one that stops the most;
    ``None`` when none does. With ``unit`` (a run's agent), the bound must hold on every agent with at least
    ``min_successful`` successful runs too, not only over all of them pooled: a rule that a large, well-behaved
    agent lets through while it stops another agent's successful runs would not hold on the next agent either."""
    ok = sum(not r.failed for r in runs)
    bad = sum(r.failed for r in runs)
    agents = [unit(r) if unit is not None else "" for r in runs]
    successful = Counter(a for a, r in zip(agents, runs, strict=True) if not r.failed)
    judged = {a: n for a, n in successful.items() if unit is not None and n >= min_successful}
    best: tuple[float, float, int] | None = None
    for window in SKIP_WINDOWS:
        for q in SKIP_QUANTILES:
            stops = relative_stops(runs, probabilities, fsm, q, window)
            false_stops = sum(s is not None for r, s in zip(runs, stops, strict=True) if not r.failed)
            if wilson_upper(false_stops, ok) > budget:
                break  # looser quantiles only stop more successful runs
            per_agent = Counter(
                a for a, r, s in zip(agents, runs, stops, strict=True) if not r.failed and s is not None
            )
            if any(wilson_upper(per_agent[a], n) > budget for a, n in judged.items()):
                break
            stopped = sum(s is not None for r, s in zip(runs, stops, strict=True) if r.failed) / max(bad, 1)
            if stopped >= MIN_USEFUL_STOPS and (best is None or stopped > best[0]):
                best = (stopped, q, window)
    return None if best is None else (best[1], best[2])
