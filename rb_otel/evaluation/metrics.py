"""Discrimination and calibration of a signal against outcomes (numpy only).

``auroc`` is the Mann-Whitney probability that a failed run scores above a successful one (ties count half);
0.5 is no signal. ``auroc_interval`` is a 95% percentile bootstrap that resamples *clusters* (the runs of one
task together) when clusters are given, so a task tried many times does not narrow the interval falsely.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from rb_otel.ab.stats import wilson_interval

__all__ = [
    "Oriented",
    "auroc",
    "auroc_interval",
    "calibration_bins",
    "oriented_auroc",
    "oriented_values",
    "rank_average",
    "wilson_upper",
]


def rank_average(values: NDArray[np.float64]) -> NDArray[np.float64]:
    """1-based ranks with ties given their average rank."""
    order = np.argsort(values, kind="mergesort")
    ranks = np.empty(len(values), dtype=np.float64)
    ranks[order] = np.arange(1, len(values) + 1, dtype=np.float64)
    _, inverse, counts = np.unique(values, return_inverse=True, return_counts=True)
    sums = np.bincount(inverse, weights=ranks)
    return np.asarray((sums / counts)[inverse], dtype=np.float64)


def auroc(failed: Sequence[bool] | NDArray[np.bool_], scores: Sequence[float] | NDArray[np.float64]) -> float:
    """AUROC of ``scores`` for predicting ``failed``; ``nan`` when either class is empty."""
    y = np.asarray(failed, dtype=bool)
    s = np.asarray(scores, dtype=np.float64)
    if y.shape != s.shape:
        raise ValueError(f"auroc: {len(y)} outcomes but {len(s)} scores")
    positives = int(y.sum())
    negatives = len(y) - positives
    if positives == 0 or negatives == 0:
        return float("nan")
    ranks = rank_average(s)
    return float((ranks[y].sum() - positives * (positives + 1) / 2) / (positives * negatives))


@dataclass(frozen=True, slots=True)
class Oriented:
    """A baseline's AUROC with its direction learned on the training side: ``sign`` +1 (more means failure) or -1
    (less means failure) in every fold, 0 when the folds disagreed."""

    auroc: float
    sign: int

    @property
    def direction(self) -> str:
        return {1: "more means failure", -1: "less means failure"}.get(self.sign, "direction differs by fold")


def oriented_auroc(
    failed: Sequence[bool], values: Sequence[float], folds: Sequence[int] | NDArray[np.int64]
) -> Oriented:
    """The pooled out-of-fold AUROC of a baseline oriented on the training side: each fold's values are flipped
    when, on the other folds' runs, the baseline ranks failures below successes (AUROC < 0.5). A baseline that
    predicts failure by being *small* then counts as strong as it is; the direction is never chosen on the runs it
    is scored on."""
    oriented, sign = oriented_values(failed, values, folds)
    return Oriented(auroc(np.asarray(failed, dtype=bool), oriented), sign)


def oriented_values(
    failed: Sequence[bool], values: Sequence[float] | NDArray[np.float64], folds: Sequence[int] | NDArray[np.int64]
) -> tuple[NDArray[np.float64], int]:
    """``values`` with each fold's flipped when the other folds' runs say the baseline points the other way
    (AUROC < 0.5), and the direction: +1 (more means failure) or -1 (less) in every fold, 0 when they disagreed.
    What :func:`oriented_auroc` scores; the training report's intervals and per-fold figures use it too."""
    y = np.asarray(failed, dtype=bool)
    v = np.asarray(values, dtype=np.float64)
    f = np.asarray(folds)
    oriented = v.copy()
    signs = set()
    for fold in np.unique(f):
        train = f != fold
        a = auroc(y[train], v[train])
        sign = -1 if (not math.isnan(a) and a < 0.5) else 1
        signs.add(sign)
        oriented[~train] = sign * v[~train]
    return oriented, signs.pop() if len(signs) == 1 else 0


def wilson_upper(count: int, n: int, z: float = 1.0) -> float:
    """The Wilson score upper bound of a share ``count / n`` (``z`` = 1: about an 84% one-sided bound; 1.0 for
    ``n`` = 0): the upper end of :func:`rb_otel.ab.stats.wilson_interval`, the one implementation, whose values
    the tests pin against Newcombe's published examples and SciPy's."""
    return wilson_interval(count, max(n, 0), z)[1]


def auroc_interval(
    failed: Sequence[bool],
    scores: Sequence[float],
    clusters: Sequence[str] | None = None,
    *,
    resamples: int = 1000,
    seed: int = 0,
) -> tuple[float, float]:
    """95% bootstrap interval of :func:`auroc`, resampling clusters (or runs when ``clusters`` is None)."""
    y = np.asarray(failed, dtype=bool)
    s = np.asarray(scores, dtype=np.float64)
    keys = np.arange(len(y)) if clusters is None else np.unique(np.asarray(clusters), return_inverse=True)[1]
    if not len(y):
        return float("nan"), float("nan")
    groups = [np.flatnonzero(keys == k) for k in range(int(keys.max()) + 1)]
    rng = np.random.default_rng(seed)
    values = []
    for _ in range(resamples):
        picked = rng.integers(0, len(groups), len(groups))
        index = np.concatenate([groups[i] for i in picked])
        value = auroc(y[index], s[index])
        if not np.isnan(value):
            values.append(value)
    if not values:
        return float("nan"), float("nan")
    lo, hi = np.percentile(values, [2.5, 97.5])
    return float(lo), float(hi)


def calibration_bins(
    failed: Sequence[bool], probabilities: Sequence[float], bins: int = 10
) -> list[tuple[float, float, int]]:
    """``(mean predicted, observed failure rate, runs)`` for each non-empty equal-width bin of [0, 1]."""
    y = np.asarray(failed, dtype=np.float64)
    p = np.clip(np.asarray(probabilities, dtype=np.float64), 0.0, 1.0)
    index = np.minimum((p * bins).astype(int), bins - 1)
    out = []
    for b in range(bins):
        mask = index == b
        if mask.any():
            out.append((float(p[mask].mean()), float(y[mask].mean()), int(mask.sum())))
    return out
