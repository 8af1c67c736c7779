"""Prefix features for fitting: one row per scored step of every run, from the pilot's own runtime code.

Every row is what :meth:`~rb_otel.steering.pilot.PilotRun.observe` returns live after that step: the features of
:data:`~rb_otel.steering.pilot.model.FEATURES` (each agent's baseline learned from its earlier runs, in file
order, label-free, as a live deployment learns it) and the step's text tokens. The text matrix holds, per row,
each bucket's value over the prefix so far (``text_value``), the plain definition of what
:class:`~rb_otel.steering.pilot.text.TextScore` keeps incrementally live.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from rb_otel.backends.baselines.cache import BaselineCache
from rb_otel.steering.pilot import FEATURES, PilotModel, PilotRun
from rb_otel.steering.pilot.baselines import MAX_RUNS, RATES
from rb_otel.steering.pilot.text import bucket, text_value
from rb_otel.training.dataset import LabelledRun

__all__ = ["PrefixData", "agent_balanced", "extract", "prior_of"]


@dataclass(slots=True)
class PrefixData:
    """The prefix rows of ``runs``: ``dense`` (rows x FEATURES), ``tokens`` (each row's step tokens), ``run`` (the
    row's run index) and ``step`` (1-based step)."""

    runs: list[LabelledRun]
    dense: NDArray[np.float64]
    tokens: list[list[str]]
    run: NDArray[np.int64]
    step: NDArray[np.int64]
    _text: dict[tuple[int, str], Any] = field(default_factory=dict)
    #: Each run's weight in a fit (``None``: every run weighs the same); :func:`agent_balanced` makes every agent
    #: weigh the same, so that one agent with many runs does not make the fit its own.
    run_weight: NDArray[np.float64] | None = None

    @property
    def failed(self) -> NDArray[np.float64]:
        """Each row's label (its run failed)."""
        return np.array([float(self.runs[i].failed) for i in self.run])

    def rows_of(self, runs: Sequence[int]) -> NDArray[np.bool_]:
        """A mask of the rows of the runs ``runs``."""
        return np.isin(self.run, np.asarray(runs, dtype=np.int64))

    def probabilities(self, logits: NDArray[np.float64]) -> list[list[float]]:
        """Each run's probabilities, step by step, from one logit per row (a fit's, or out-of-fold ones)."""
        p = 1.0 / (1.0 + np.exp(-logits))
        return [p[self.run == i].tolist() for i in range(len(self.runs))]

    def text(self, bits: int, value: str) -> Any:
        """The text matrix (scipy CSR, rows x 2**bits) for this hashing and value, built once."""
        key = (bits, value)
        if key not in self._text:
            self._text[key] = _text_matrix(self, bits, value)
        return self._text[key]


def _text_matrix(data: PrefixData, bits: int, value: str) -> Any:
    from scipy import sparse

    rows: list[int] = []
    cols: list[int] = []
    vals: list[float] = []
    counts: Counter[int] = Counter()
    for r, (step, tokens) in enumerate(zip(data.step, data.tokens, strict=True)):
        if step == 1:
            counts = Counter()
        counts.update(bucket(t, bits) for t in tokens)
        for b, c in counts.items():
            rows.append(r)
            cols.append(b)
            vals.append(text_value(value, c, int(step)))
    return sparse.csr_matrix((vals, (rows, cols)), shape=(len(data.run), 1 << bits))


def prior_of(runs: Sequence[LabelledRun]) -> dict[str, float]:
    """A typical agent's normal from ``runs``, label-free: the means and medians of what runs add up to and the
    mean per-step rates (what a brand-new agent's baseline starts from)."""
    zero = PilotModel(0.0, (0.0,) * len(FEATURES), _neutral_prior(), {}, features=FEATURES)
    store = BaselineCache()
    keys = [f"run-{i // MAX_RUNS}" for i in range(len(runs))]  # every run kept (an agent keeps MAX_RUNS)
    for run, key in zip(runs, keys, strict=True):
        scorer = PilotRun(zero, store, key)
        for step in run.steps:
            scorer.observe(step)
        scorer.finish()
    summaries = [s for key in dict.fromkeys(keys) for s in store.get(key).recent]
    out: dict[str, float] = {}
    for name in ("steps", "chars", "context", "hedges", "errors"):
        known = [v for s in summaries if (v := s.values.get(name, 0.0)) > 0] or [1.0]
        out[f"mean_{name}"] = max(float(np.mean(known)), 1.0)
        out[f"median_{name}"] = max(float(np.median(known)), 1.0)
    for name in RATES:
        known = [s.values[name] for s in summaries if name in s.values]
        out[name] = float(np.mean(known)) if known else 0.0
    return out


def _neutral_prior() -> dict[str, float]:
    return {"mean_steps": 20.0, "mean_chars": 20000.0, "mean_context": 20000.0, "mean_hedges": 5.0,
            "mean_errors": 2.0, "log_cps": 6.0, "error_rate": 0.1, "repeat_rate": 0.05, "hedging": 0.01}  # fmt: skip


def extract(runs: list[LabelledRun], prior: dict[str, float], *, requests: bool = False) -> PrefixData:
    """The prefix rows of ``runs``, in file order, each agent's baseline learned from its earlier runs.
    ``requests``: each run is given its task group as its request (``PilotRun(request=...)``, as a live run given
    ``metadata={"task_id": ...}``): its agent's normal weighs task groups alike and leans on the group's own earlier
    runs (:class:`~rb_otel.steering.pilot.baselines.RequestBaseline`)."""
    model = PilotModel(0.0, (0.0,) * len(FEATURES), prior, {}, features=FEATURES)
    store = BaselineCache()
    dense: list[list[float]] = []
    tokens: list[list[str]] = []
    run_index: list[int] = []
    steps: list[int] = []
    for i, run in enumerate(runs):
        scorer = PilotRun(model, store, run.agent, run.group if requests else "")
        for k, step in enumerate(run.steps, start=1):
            view = scorer.observe(step)
            dense.append(view.features)
            tokens.append(view.tokens)
            run_index.append(i)
            steps.append(k)
        scorer.finish()
    matrix = np.array(dense, dtype=np.float64).reshape(len(dense), len(FEATURES))
    if not np.isfinite(matrix).all():
        matrix = np.nan_to_num(matrix, nan=0.0, posinf=0.0, neginf=0.0)
    return PrefixData(runs, matrix, tokens, np.array(run_index, dtype=np.int64), np.array(steps, dtype=np.int64))


def agent_balanced(runs: Sequence[LabelledRun], unit: Any) -> NDArray[np.float64]:
    """Run weights under which every agent (``unit(run)``) weighs the same in total, and the weights add up to
    the number of runs."""
    units = [unit(r) for r in runs]
    counts = Counter(units)
    share = len(runs) / len(counts)
    return np.array([share / counts[u] for u in units], dtype=np.float64)
