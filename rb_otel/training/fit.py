"""One fit of the pilot: logistic weights over the size features and (optionally) hashed text buckets.

Every prefix of a run is a training row with the run's outcome as its label; each run weighs the same (its rows
share one unit of weight), so a long run is not worth more than a short one. The size features keep
non-negative weights ("more than this agent's normal is never evidence of health": a negative weight would fit
one harness's quirk, and it keeps the score rising with a run that keeps overrunning), except the raw same-prefix
size signals (``SIGNED_FEATURES``: steps, characters, largest call so far), which every family has with a weight of
either sign, so a fit can follow "fewer characters so far means trouble" as well as "more"; text weights have
either sign. Only buckets seen in enough of the training *task groups* are learned (:data:`MIN_GROUP_SHARE`): a token
from one task's runs (a customer's name, a file of one repository) says nothing about the next task.

:data:`AVERAGE` is not one more family but all of them: each family of :data:`CANDIDATES` fitted on the same rows,
their logits averaged. An average of linear models is one linear model (the mean intercept, the mean dense
weights, each family's text weights divided by their number, kept per way of counting), so it is scored live like
any other. It is what a pilot meant for agents it was not fitted to uses (docs/signal.md, "A default pilot per
kind"): with a handful of training agents, choosing one family by cross-validation over them is a choice made on
noise, and averaging needs no choice.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from rb_otel.steering.pilot.model import FEATURES, SIGNED_FEATURES
from rb_otel.steering.pilot.progress import PROGRESS_FEATURES
from rb_otel.training.features import PrefixData
from rb_otel.training.logistic import fit as fit_logistic

__all__ = ["AVERAGE", "CANDIDATES", "MIN_GROUP_SHARE", "TEXT_BITS", "Candidate", "Fitted", "fit_candidate"]

#: Hash width of text buckets (16,384 buckets; a model keeps weights for the learned ones only).
TEXT_BITS = 14
#: A bucket is learned only when it occurs in at least this share of the training task groups (and in 2).
MIN_GROUP_SHARE = 0.10
_SIZE_PENALTY = 1.0  # on standardised size features


@dataclass(frozen=True, slots=True)
class Candidate:
    """A model family the fit chooses among by task-grouped cross-validation."""

    name: str
    text_value: str | None = None  # "log" or "tf"; None: size features only
    text_penalty: float = 0.0
    dense: tuple[str, ...] = FEATURES  # the size features it may use
    members: tuple[Candidate, ...] = ()  # not empty: the average of these families (module docstring)

    @property
    def columns(self) -> NDArray[np.int64]:
        return np.array([FEATURES.index(f) for f in self.dense], dtype=np.int64)


#: What ``rb-otel train`` chooses among (inner cross-validation picks one per fit).
#: How long and big the run is against the agent's normal: what ranks runs at their end.
TOTALS = ("overrun_steps", "overrun_chars", "overrun_context", "overrun_hedges", "overrun_errors",
          "beyond_steps", "beyond_chars", "beyond_context", "size_chars", "size_context", "size_steps")  # fmt: skip
#: The size and rate features without the progress signals (what "size" meant before they were added).
SIZE = tuple(f for f in FEATURES if f not in PROGRESS_FEATURES)
CANDIDATES = (
    Candidate("size totals", dense=TOTALS),
    Candidate("size", dense=SIZE),
    Candidate("size + progress"),
    Candidate("size + text (log counts, L2 10)", "log", 10.0),
    Candidate("size + text (log counts, L2 30)", "log", 30.0),
    Candidate("size + text (frequencies, L2 100)", "tf", 100.0),
)
#: The average of every family of :data:`CANDIDATES` (module docstring).
AVERAGE = Candidate("average of the families", members=CANDIDATES)


@dataclass(frozen=True, slots=True)
class Fitted:
    """A fitted linear model on raw features: ``logit = intercept + dense . x + sum over the ways of counting v of
    sum text[v][b] * value_v(b)`` (one way, the family's ``text_value``, except for :data:`AVERAGE`)."""

    candidate: Candidate
    intercept: float
    dense: NDArray[np.float64]  # one weight per FEATURES entry
    text: dict[str, dict[int, float]]  # per way of counting ("log", "tf"): bucket -> weight

    def logits(self, data: PrefixData) -> NDArray[np.float64]:
        """The logit of every row of ``data`` (the plain definition the runtime scorer is tested against)."""
        z = self.intercept + data.dense @ self.dense
        for value, weights in self.text.items():
            if weights:
                matrix = data.text(TEXT_BITS, value)
                z = z + matrix[:, np.fromiter(weights, dtype=np.int64)] @ np.fromiter(weights.values(), np.float64)
        return np.asarray(z, dtype=np.float64)

    @property
    def text_buckets(self) -> int:
        """How many text weights the model keeps, over every way of counting."""
        return sum(len(weights) for weights in self.text.values())

    @property
    def constant(self) -> bool:
        """Every weight is zero: the model says the same of every run."""
        return not np.any(self.dense) and not any(any(w.values()) for w in self.text.values())


def _row_weights(data: PrefixData, rows: NDArray[np.bool_]) -> NDArray[np.float64]:
    """Each row's weight: its run's weight (1, or ``data.run_weight``) shared among the run's rows."""
    per_run = np.bincount(data.run[rows], minlength=len(data.runs)).astype(np.float64)
    weights = 1.0 / per_run[data.run[rows]]
    if data.run_weight is not None:
        weights = weights * data.run_weight[data.run[rows]]
    return np.asarray(weights, dtype=np.float64)


def _learnable_buckets(data: PrefixData, rows: NDArray[np.bool_], matrix: object) -> NDArray[np.int64]:
    """Buckets present in at least MIN_GROUP_SHARE of the training groups (and in two)."""
    from scipy import sparse

    present = (matrix[rows] > 0).astype(np.int8)  # type: ignore[index]
    groups = np.array([data.runs[i].group for i in data.run[rows]])
    names, index = np.unique(groups, return_inverse=True)
    membership = sparse.csr_matrix(
        (np.ones(len(index)), (index, np.arange(len(index)))), shape=(len(names), len(index))
    )
    groups_with = np.asarray(((membership @ present) > 0).sum(axis=0)).ravel()
    return np.flatnonzero(groups_with >= max(MIN_GROUP_SHARE * len(names), 2)).astype(np.int64)


def fit_candidate(
    data: PrefixData, runs: Sequence[int], candidate: Candidate, *, failed: NDArray[np.float64] | None = None
) -> Fitted:
    """Fit ``candidate`` on the rows of ``runs``; ``failed`` replaces the runs' outcomes (one per run: the
    permutation test's shuffled ones). :data:`AVERAGE` fits each of its members and averages them."""
    if candidate.members:
        return _average(candidate, [fit_candidate(data, runs, m, failed=failed) for m in candidate.members])
    from scipy import sparse

    rows = data.rows_of(runs)
    y = (data.failed if failed is None else failed[data.run])[rows]
    weights = _row_weights(data, rows)
    columns = candidate.columns
    dense = data.dense[rows][:, columns]
    mean, scale = dense.mean(axis=0), dense.std(axis=0)
    scale = np.where(scale > 1e-9, scale, 1.0)
    blocks = [sparse.csr_matrix((dense - mean) / scale)]
    penalty = [np.full(len(columns), _SIZE_PENALTY)]
    nonnegative = [np.array([FEATURES[c] not in SIGNED_FEATURES for c in columns], dtype=bool)]
    buckets = np.zeros(0, dtype=np.int64)
    if candidate.text_value is not None:
        matrix = data.text(TEXT_BITS, candidate.text_value)
        buckets = _learnable_buckets(data, rows, matrix)
        blocks.append(matrix[rows][:, buckets])
        penalty.append(np.full(len(buckets), candidate.text_penalty))
        nonnegative.append(np.zeros(len(buckets), dtype=bool))
    x = sparse.hstack(blocks).tocsr()
    intercept, beta = fit_logistic(x, y, weights, np.concatenate(penalty), np.concatenate(nonnegative))
    size = beta[: len(columns)] / scale
    text = {int(b): float(w) for b, w in zip(buckets, beta[len(columns) :], strict=True) if abs(w) > 1e-9}
    every = np.zeros(len(FEATURES))
    every[columns] = size
    texts = {candidate.text_value: text} if candidate.text_value is not None else {}
    return Fitted(candidate, float(intercept - (size * mean).sum()), every, texts)


def _average(candidate: Candidate, fits: Sequence[Fitted]) -> Fitted:
    """The one linear model whose logit is the mean of ``fits``' logits."""
    n = len(fits)
    text: dict[str, dict[int, float]] = {}
    for fitted in fits:
        for value, weights in fitted.text.items():
            into = text.setdefault(value, {})
            for b, w in weights.items():
                into[b] = into.get(b, 0.0) + w / n
    dense = np.mean([f.dense for f in fits], axis=0)
    return Fitted(candidate, float(np.mean([f.intercept for f in fits])), np.asarray(dense, dtype=np.float64), text)
