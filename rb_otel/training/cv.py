"""Task-grouped cross-validation: out-of-fold scores, and the choice of a model family by an inner one.

Folds keep every run of a task group (a task, or a user scenario across policy variants) on one side. The
reported figures come from *pooled* out-of-fold scores: every run scored once by a model that never saw its
group, the AUROC computed over all of them together (not a mean of per-fold AUROCs). The family of each outer
fold's model is chosen by an inner grouped cross-validation on that fold's training side only, so the choice
never sees the runs it is tested on.
"""

from __future__ import annotations

import math
import multiprocessing
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from rb_otel.evaluation.metrics import auroc
from rb_otel.training.features import PrefixData
from rb_otel.training.fit import CANDIDATES, TEXT_BITS, Candidate, fit_candidate

__all__ = [
    "OutOfFold",
    "early_step",
    "grouped_folds",
    "nested_out_of_fold",
    "out_of_fold",
    "select",
    "select_for_transfer",
]


def grouped_folds(groups: Sequence[str], k: int, seed: int) -> NDArray[np.int64]:
    """A fold (0..k-1) per run; the runs of a group share one. Groups are shuffled with ``seed`` and dealt out
    largest first, so folds hold similar numbers of runs."""
    names, counts = np.unique(np.asarray(groups), return_counts=True)
    order = np.random.default_rng(seed).permutation(len(names))
    order = order[np.argsort(-counts[order], kind="stable")]
    sizes = np.zeros(k)
    fold_of: dict[str, int] = {}
    for i in order:
        f = int(np.argmin(sizes))
        fold_of[str(names[i])] = f
        sizes[f] += counts[i]
    return np.array([fold_of[str(g)] for g in groups], dtype=np.int64)


def early_step(lengths: Sequence[int]) -> int:
    """The step the early-warning criterion reads: 10, or the median run length when runs are shorter."""
    return int(max(min(10, int(np.median(lengths))), 2))


def out_of_fold(
    data: PrefixData,
    runs: Sequence[int],
    folds: NDArray[np.int64],
    candidate: Candidate,
    *,
    fit: Callable[..., Any] = fit_candidate,
) -> NDArray[np.float64]:
    """Every row's logit from the fold model that did not see its run (NaN for rows outside ``runs``); ``fit``
    is the fitting function (:func:`~rb_otel.training.fit.fit_candidate`; a test records what reaches it)."""
    index = np.asarray(runs, dtype=np.int64)
    out = np.full(len(data.run), np.nan)
    for f in np.unique(folds):
        model = fit(data, index[folds != f].tolist(), candidate)
        held = data.rows_of(index[folds == f].tolist())
        out[held] = model.logits(data)[held]
    return out


def criterion(data: PrefixData, runs: Sequence[int], logits: NDArray[np.float64]) -> float:
    """What the choice maximises: the smaller of the fit's margins over the best same-prefix baseline at each
    run's last step (characters written, steps) and at the early step (characters and prompt tokens so far)."""
    k = early_step([len(data.runs[r].steps) for r in runs])
    last, y, chars, steps = [], [], [], []
    early, y_early, early_chars, early_prompt = [], [], [], []
    for r in runs:
        run = data.runs[r]
        scores = logits[data.run == r]
        written = np.cumsum([len(s.thought or "") + len(s.action_input or "") for s in run.steps])
        last.append(scores[-1])
        y.append(run.failed)
        chars.append(written[-1])
        steps.append(len(scores))
        if len(scores) >= k:
            early.append(scores[k - 1])
            y_early.append(run.failed)
            early_chars.append(written[k - 1])
            early_prompt.append(run.prompt_tokens[k - 1])
    margins = [auroc(y, last) - _best(auroc(y, chars), auroc(y, steps))]
    if len(set(y_early)) == 2:
        prompt = auroc(y_early, early_prompt) if any(early_prompt) else float("nan")
        margins.append(auroc(y_early, early) - _best(auroc(y_early, early_chars), prompt))
    finite = [m for m in margins if not math.isnan(m)]
    return float(min(finite)) if finite else -1.0


def _best(*values: float) -> float:
    finite = [v for v in values if not math.isnan(v)]
    return max(finite) if finite else 0.5


def select(
    data: PrefixData,
    runs: Sequence[int],
    *,
    k: int = 3,
    seed: int = 0,
    folds: NDArray[np.int64] | None = None,
    fit: Callable[..., Any] = fit_candidate,
) -> tuple[Candidate, dict[str, float]]:
    """The candidate with the best inner cross-validated criterion on ``runs`` (ties: the simpler one): ``k``
    task-grouped folds, or the given ``folds`` (one per run of ``runs``: leave-one-agent-out passes one per agent)."""
    runs = list(runs)
    if folds is None:
        folds = grouped_folds([data.runs[r].group for r in runs], k, seed)
    scores = {c.name: criterion(data, runs, out_of_fold(data, runs, folds, c, fit=fit)) for c in CANDIDATES}
    best = max(CANDIDATES, key=lambda c: (round(scores[c.name], 3), -CANDIDATES.index(c)))
    return best, scores


def select_for_transfer(
    data: PrefixData,
    runs: Sequence[int],
    agents: Sequence[str],
    folds: NDArray[np.int64],
    *,
    fit: Callable[..., Any] = fit_candidate,
) -> tuple[Candidate, dict[str, float]]:
    """The candidate that transfers best to an agent it did not see: ``folds`` keep each agent (``agents``, one per
    run of ``runs``) on one side, and the criterion (:func:`criterion`) is computed *per agent* on its out-of-fold
    scores, then the median over the agents is what is maximised (ties: the simpler one). A pooled criterion would
    reward ranking agents against each other, which says nothing of ranking one agent's runs."""
    runs = list(runs)
    by_agent: dict[str, list[int]] = {}
    for r, agent in zip(runs, agents, strict=True):
        by_agent.setdefault(agent, []).append(r)
    judged = [rs for rs in by_agent.values() if len({data.runs[r].failed for r in rs}) == 2]
    scores = {}
    for candidate in CANDIDATES:
        logits = out_of_fold(data, runs, folds, candidate, fit=fit)
        per_agent = [criterion(data, rs, logits) for rs in judged]
        scores[candidate.name] = float(np.median(per_agent)) if per_agent else -1.0
    best = max(CANDIDATES, key=lambda c: (round(scores[c.name], 3), -CANDIDATES.index(c)))
    return best, scores


@dataclass(frozen=True, slots=True)
class OutOfFold:
    """Pooled out-of-fold logits (one per row) and what each outer fold chose."""

    logits: NDArray[np.float64]
    folds: NDArray[np.int64]
    chosen: list[str]


def nested_out_of_fold(
    data: PrefixData,
    *,
    k: int = 5,
    inner: int = 3,
    seed: int = 0,
    done: Callable[[], None] | None = None,
    workers: int = 1,
) -> OutOfFold:
    """Outer task-grouped k-fold; each fold's family chosen by an inner grouped CV on its training side. ``done()``
    is called after each outer fold. ``workers`` > 1: the outer folds in that many forked processes (one BLAS
    thread each, as the permutation gate's), the same figures."""
    folds = grouped_folds([r.group for r in data.runs], k, seed)
    out = np.full(len(data.run), np.nan)
    chosen = []
    _FOLDS.update(data=data, folds=folds, inner=inner, seed=seed)
    try:
        if workers > 1 and k > 1 and "fork" in multiprocessing.get_all_start_methods():
            from rb_otel.training.permutation import one_blas_thread

            data.text(TEXT_BITS, "log"), data.text(TEXT_BITS, "tf")  # built once here, inherited by every worker
            fork = multiprocessing.get_context("fork")
            with ProcessPoolExecutor(min(workers, k), mp_context=fork, initializer=one_blas_thread) as pool:
                results = list(_ticked(pool.map(_outer_fold, range(k)), done))
        else:
            results = list(_ticked(map(_outer_fold, range(k)), done))
    finally:
        _FOLDS.clear()
    for f, (name, logits) in enumerate(results):
        out[data.rows_of(np.flatnonzero(folds == f).tolist())] = logits
        chosen.append(name)
    return OutOfFold(out, folds, chosen)


_FOLDS: dict[str, Any] = {}  # what forked workers read (inherited, not pickled)


def _outer_fold(f: int) -> tuple[str, NDArray[np.float64]]:
    """Outer fold ``f``: the family its training side chooses, and its held-out rows' logits."""
    data, folds = _FOLDS["data"], _FOLDS["folds"]
    runs = np.arange(len(data.runs))
    train = runs[folds != f]
    candidate, _ = select(data, train, k=_FOLDS["inner"], seed=_FOLDS["seed"] + 1 + f)
    model = fit_candidate(data, train, candidate)
    return candidate.name, model.logits(data)[data.rows_of(runs[folds == f])]


def _ticked(results: Iterator[Any], done: Callable[[], None] | None) -> Iterator[Any]:
    for result in results:
        if done is not None:
            done()
        yield result
