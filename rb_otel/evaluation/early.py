"""Early warning and stopping, measured the same way by ``rb-otel evaluate`` and ``rb-otel train``.

One definition everywhere:

* **the score at step k** is the score after the run's k-th scored step, over the runs still going at step k
  (runs with at least k steps); it is reported beside the baselines a live run could compute from the *same
  first k steps*: the characters written so far and the largest prompt so far (in tokens). Steps so far is k for
  every run still going, so it is no baseline there; at the last step it is the run's length.
* **stopping a run at its first SKIP (or SLOW)**: the share of successful runs that would have been stopped (false
  stops), of failing runs stopped, and of all steps and tokens that would not have been spent (the steps after
  the stop).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from rb_otel.evaluation.metrics import auroc, oriented_auroc

__all__ = [
    "EARLY_STEPS",
    "EarlyRow",
    "RunTrace",
    "StopFigures",
    "at_first_state",
    "early_warning",
    "first_sustained",
    "percent",
    "stop_curve",
    "stop_line",
    "stopping",
    "sustained_peak",
]

EARLY_STEPS = (5, 10, 20)


@dataclass(frozen=True, slots=True)
class RunTrace:
    """What early warning and stopping need of one run, step by step (index k-1 is after step k)."""

    failed: bool
    scores: Sequence[float]
    chars: Sequence[int]  # characters written up to and including the step
    prompt_tokens: Sequence[int]  # the largest prompt (else call) in tokens up to the step; 0 when not reported
    tokens: Sequence[int]  # tokens of each step's call
    states: Sequence[str] = ()  # the FSM state after each step, when known


@dataclass(frozen=True, slots=True)
class EarlyRow:
    """AUROC for failure at step ``k`` of the score and of the same-prefix baselines, over the runs still going."""

    k: int
    runs: int
    failed: int
    score: float
    chars: float
    prompt_tokens: float
    #: The baselines' directions (+1: more means failure, -1: less, 0: the folds disagreed), when they were
    #: oriented on the training side (``early_warning(..., folds=...)``); +1 when not oriented.
    chars_sign: int = 1
    prompt_sign: int = 1

    def as_dict(self) -> dict[str, Any]:
        return {
            "step": self.k,
            "runs_still_going": self.runs,
            "failed": self.failed,
            "auroc_score": self.score,
            "auroc_chars_so_far": self.chars,
            "auroc_prompt_tokens_so_far": self.prompt_tokens,
            "chars_direction": self.chars_sign,
            "prompt_tokens_direction": self.prompt_sign,
        }


def early_warning(
    runs: Sequence[RunTrace], steps: Sequence[int] = EARLY_STEPS, *, folds: Sequence[int] | None = None
) -> list[EarlyRow]:
    """One row per ``k`` in ``steps`` with both outcomes among the runs still going at step k. With ``folds`` (a
    fold per run, task-grouped) the baselines are oriented on the training side (``oriented_auroc``): a baseline
    that predicts failure by being small counts as strong as it is."""
    rows = []
    for k in steps:
        index = [i for i, r in enumerate(runs) if len(r.scores) >= k]
        going = [runs[i] for i in index]
        y = [r.failed for r in going]
        if len(set(y)) < 2:
            continue
        chars = [float(r.chars[k - 1]) for r in going]
        prompt = [float(r.prompt_tokens[k - 1]) for r in going]
        chars_sign = prompt_sign = 1
        if folds is None:
            chars_auroc, prompt_auroc = auroc(y, chars), _known_auroc(y, prompt)
        else:
            fold = [folds[i] for i in index]
            oriented = oriented_auroc(y, chars, fold)
            chars_auroc, chars_sign = oriented.auroc, oriented.sign
            prompt_auroc = float("nan")
            if any(prompt):
                oriented = oriented_auroc(y, prompt, fold)
                prompt_auroc, prompt_sign = oriented.auroc, oriented.sign
        rows.append(
            EarlyRow(
                k=k,
                runs=len(going),
                failed=sum(y),
                score=auroc(y, [r.scores[k - 1] for r in going]),
                chars=chars_auroc,
                prompt_tokens=prompt_auroc,
                chars_sign=chars_sign,
                prompt_sign=prompt_sign,
            )
        )
    return rows


def _known_auroc(y: list[bool], values: Sequence[float]) -> float:
    """AUROC of a baseline the harness may not report (all zero: ``nan``, shown as n/a)."""
    return auroc(y, values) if any(values) else float("nan")


def first_sustained(scores: Sequence[float], threshold: float, window: int) -> int | None:
    """The 0-based step at which ``scores`` first stayed above ``threshold`` for ``window`` steps in a row."""
    streak = 0
    for i, value in enumerate(scores):
        streak = streak + 1 if value > threshold else 0
        if streak >= window:
            return i
    return None


def sustained_peak(scores: Sequence[float], window: int) -> float:
    """The highest score held for ``window`` steps in a row (``-inf`` for a shorter run)."""
    if len(scores) < window:
        return -math.inf
    return max(min(scores[i : i + window]) for i in range(len(scores) - window + 1))


@dataclass(frozen=True, slots=True)
class StopFigures:
    """What stopping each run at the first step a rule fires would have done."""

    rule: str
    stopped_successful: float  # share of successful runs stopped: false stops
    stopped_failing: float  # share of failing runs stopped
    steps_saved: float  # share of all steps not spent
    tokens_saved: float  # share of all tokens not spent (nan when no tokens are reported)
    successful: int
    failing: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "stopped_successful": self.stopped_successful,
            "stopped_failing": self.stopped_failing,
            "steps_saved": self.steps_saved,
            "tokens_saved": self.tokens_saved,
            "successful_runs": self.successful,
            "failing_runs": self.failing,
        }


def stopping(runs: Sequence[RunTrace], rule: str, stop_at: Callable[[RunTrace], int | None]) -> StopFigures:
    """The figures for stopping each run at ``stop_at(run)`` (a 0-based step, or ``None``: never)."""
    stops = [stop_at(r) for r in runs]
    good = [s for r, s in zip(runs, stops, strict=True) if not r.failed]
    bad = [s for r, s in zip(runs, stops, strict=True) if r.failed]
    steps = sum(len(r.scores) for r in runs)
    tokens = sum(sum(r.tokens) for r in runs)
    steps_saved = sum(len(r.scores) - s - 1 for r, s in zip(runs, stops, strict=True) if s is not None)
    tokens_saved = sum(sum(r.tokens[s + 1 :]) for r, s in zip(runs, stops, strict=True) if s is not None)
    return StopFigures(
        rule=rule,
        stopped_successful=_share([s is not None for s in good]),
        stopped_failing=_share([s is not None for s in bad]),
        steps_saved=steps_saved / steps if steps else float("nan"),
        tokens_saved=tokens_saved / tokens if tokens else float("nan"),
        successful=len(good),
        failing=len(bad),
    )


def at_first_state(state: str) -> Callable[[RunTrace], int | None]:
    """``stop_at`` for "the run's first step in ``state`` or worse" (SKIP; SLOW includes SKIP)."""
    worse = {"SLOW": ("SLOW", "SKIP"), "SKIP": ("SKIP",)}[state]

    def stop_at(run: RunTrace) -> int | None:
        return next((i for i, s in enumerate(run.states) if s in worse), None)

    return stop_at


def stop_curve(runs: Sequence[RunTrace], window: int, points: int = 40) -> list[StopFigures]:
    """Stopping at the first step the score stays above a threshold for ``window`` steps, as the threshold moves
    from the highest sustained score of any run down to the lowest: savings against false stops (for a plot)."""
    peaks = sorted({p for r in runs if (p := sustained_peak(r.scores, window)) != -math.inf}, reverse=True)
    if not peaks:
        return []
    chosen = [peaks[min(int(i * len(peaks) / points), len(peaks) - 1)] for i in range(points)]
    return [stopping(runs, f"{t:.4f}", _above(t - 1e-12, window)) for t in dict.fromkeys(chosen)]


def _above(threshold: float, window: int) -> Callable[[RunTrace], int | None]:
    def stop_at(run: RunTrace) -> int | None:
        return first_sustained(run.scores, threshold, window)

    return stop_at


def _share(flags: list[bool]) -> float:
    return sum(flags) / len(flags) if flags else float("nan")


def percent(value: float) -> str:
    """A share as a percentage; ``n/a`` where there was nothing to take a share of (no failing runs, say)."""
    return "n/a" if math.isnan(value) else f"{value:.1%}"


def stop_line(s: StopFigures) -> str:
    """One stopping rule's figures in words (``n/a`` for a share of no runs)."""
    tokens = "" if math.isnan(s.tokens_saved) else f", {s.tokens_saved:.1%} of tokens"
    return (
        f"{s.rule}: stops {percent(s.stopped_failing)} of failing runs and {percent(s.stopped_successful)} of "
        f"successful ones (false stops); saves {percent(s.steps_saved)} of steps{tokens}"
    )
