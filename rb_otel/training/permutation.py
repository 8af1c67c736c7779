"""The trust gate's test against chance: the whole fit repeated on shuffled outcomes.

A fit on a few hundred runs can score well out of fold by luck (sixteen shuffles of one development set: mean
AUROC 0.500, sd 0.055, 3 of 16 at 0.55 or more), so a fit is trusted only when it beats what the same procedure
does with the outcomes shuffled. Each permutation shuffles the outcomes across the runs of each agent (every agent
keeps its failure rate; shuffling inside task groups would change nothing where each task has one run, as on
SWE-bench), keeps the task-grouped folds, and refits every fold's chosen family and regularisation on the
shuffled outcomes, reusing the feature matrix: the statistic is the pooled out-of-fold AUROC at the last step,
the figure the report leads with. The family *choice* is not repeated per permutation (it is 16 times the cost:
an inner cross-validation of five families per fold); it was made on the training side, and refitting the chosen
family on noise is what the gate must beat. ``p = (1 + #{permutations at least as good}) / (1 + permutations)``,
so :data:`PERMUTATIONS` = 39 can reach p = 0.025. Permutations run in parallel processes (fork, where there is),
each with one BLAS thread: the processes already share out the cores.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from rb_otel.evaluation.metrics import auroc
from rb_otel.training.features import PrefixData
from rb_otel.training.fit import CANDIDATES, TEXT_BITS, fit_candidate

__all__ = ["PERMUTATIONS", "PermutationTest", "permutation_test", "shuffled_outcomes"]

#: Shuffles of the outcomes: enough for p < 0.05 (the smallest p is 1 / (1 + PERMUTATIONS)).
PERMUTATIONS = 39


@dataclass(frozen=True, slots=True)
class PermutationTest:
    """The real fit's statistic, the permutations', and the p-value of the real one against them."""

    real: float
    null: tuple[float, ...]

    @property
    def p_value(self) -> float:
        better = sum(v >= self.real for v in self.null)
        return (1 + better) / (1 + len(self.null))

    @property
    def null_mean(self) -> float:
        return float(np.mean(self.null)) if self.null else float("nan")

    @property
    def null_sd(self) -> float:
        return float(np.std(self.null, ddof=1)) if len(self.null) > 1 else float("nan")

    def as_dict(self) -> dict[str, object]:
        return {
            "auroc_last_step": self.real,
            "permutations": len(self.null),
            "null_mean": self.null_mean,
            "null_sd": self.null_sd,
            "null_max": max(self.null, default=float("nan")),
            "p_value": self.p_value,
        }


def shuffled_outcomes(agents: Sequence[str], failed: Sequence[bool], seed: int) -> NDArray[np.float64]:
    """The outcomes permuted across the runs of each agent (one per run, as 0/1)."""
    rng = np.random.default_rng(seed)
    out = np.asarray(failed, dtype=np.float64).copy()
    names = np.asarray(agents)
    for agent in np.unique(names):
        index = np.flatnonzero(names == agent)
        out[index] = out[rng.permutation(index)]
    return out


def last_step_auroc(
    data: PrefixData, folds: NDArray[np.int64], chosen: Sequence[str], failed: NDArray[np.float64]
) -> float:
    """The pooled out-of-fold AUROC at the last step of the fit refitted on ``failed`` (each fold's family)."""
    by_name = {c.name: c for c in CANDIDATES}
    runs = np.arange(len(data.runs))
    last = np.full(len(data.runs), np.nan)
    ends = np.r_[np.flatnonzero(np.diff(data.run)), len(data.run) - 1]  # the last row of each run (rows in order)
    for f, name in enumerate(chosen):
        model = fit_candidate(data, runs[folds != f].tolist(), by_name[name], failed=failed)
        held = runs[folds == f]
        last[held] = model.logits(data)[ends[held]]
    return auroc(failed.astype(bool).tolist(), last.tolist())


_SHARED: dict[str, object] = {}  # what forked workers read (inherited, not pickled)


def one_blas_thread() -> None:
    """A worker process's initializer: one BLAS thread. The workers already take a core each; BLAS threads of
    their own oversubscribe the cores (idle OpenBLAS threads spin), which made two workers on two cores 3.5 times
    slower than one process doing the permutations in turn (19 permutations: 11.7 s against 6.3 s; 3.3 s now)."""
    from threadpoolctl import threadpool_limits

    threadpool_limits(1)


def _one(seed: int) -> float:
    data = _SHARED["data"]
    assert isinstance(data, PrefixData)
    failed = shuffled_outcomes([r.agent for r in data.runs], [r.failed for r in data.runs], seed)
    return last_step_auroc(data, _SHARED["folds"], _SHARED["chosen"], failed)  # type: ignore[arg-type]


def _ticked(value: float, tick: Callable[[], None]) -> float:
    tick()
    return value


def permutation_test(
    data: PrefixData,
    folds: NDArray[np.int64],
    chosen: Sequence[str],
    real: float,
    *,
    permutations: int = PERMUTATIONS,
    seed: int = 0,
    workers: int | None = None,
    done: Callable[[], None] | None = None,
) -> PermutationTest:
    """``real`` (the real fit's pooled last-step AUROC) against ``permutations`` shuffles (module docstring);
    ``done()`` is called as each shuffle's fit comes back."""
    tick = done or (lambda: None)
    seeds = [seed * 1_000_003 + 7919 * (i + 1) for i in range(permutations)]
    workers = workers if workers is not None else min(os.cpu_count() or 1, 4)
    _SHARED.update(data=data, folds=folds, chosen=list(chosen))
    try:
        if workers > 1 and permutations > 1 and "fork" in multiprocessing.get_all_start_methods():
            data.text(TEXT_BITS, "log"), data.text(TEXT_BITS, "tf")  # built once here, inherited by every worker
            fork = multiprocessing.get_context("fork")
            with ProcessPoolExecutor(workers, mp_context=fork, initializer=one_blas_thread) as pool:
                null = [_ticked(value, tick) for value in pool.map(_one, seeds)]
        else:
            null = [_ticked(_one(s), tick) for s in seeds]
    finally:
        _SHARED.clear()
    return PermutationTest(real, tuple(null))
