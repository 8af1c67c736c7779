"""The pilot: a small offline scorer whose score is a calibrated probability that the run is failing.

Every agent has its own normal (a customer-service agent that takes 30 turns is ordinary; a coding agent that
takes 30 is not), so the pilot scores how far the current run has drifted from *this agent's* earlier runs, as
the run goes, from the steps so far only (never look-ahead):

* an :class:`~rb_otel.steering.baselines.AgentBaseline` per agent (bounded, label-free, learned online from the
  agent's finished runs; optionally persisted, :mod:`rb_otel.steering.baselines`) keeps what a normal run looks
  like: its length in steps, characters, tokens, hedges and errors, its error, repetition and hedging rates;
* a run's :class:`PilotRun` keeps O(1) prefix aggregates and, at each step, turns them into the features in
  :data:`FEATURES` relative to that baseline; a logistic model (weights in ``pilot_weights.json``, trained by
  ``make train-pilot`` from ``shared/data/signal``) maps them to a probability.

Before an agent has finished a run its baseline is the prior shipped with the weights (a typical agent of the
training data), blended out as the agent's own runs arrive. Cost per step is a few microseconds of arithmetic
plus one regex pass over the thought (``benchmarks/bench_pilot.py``).
"""

from __future__ import annotations

import json
import math
import re
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from itertools import islice
from pathlib import Path
from typing import Any

from rb_otel.steering.baseline_cache import BaselineStore
from rb_otel.steering.baselines import MAY_BE_UNKNOWN, RELATIVE_AFTER, TOTALS, AgentBaseline, RunSummary, SummaryStore
from rb_otel.steering.scorer_protocol import ScorerStep

__all__ = [
    "FEATURES",
    "PILOT_NAME",
    "RELATIVE_AFTER",
    "AgentBaseline",
    "BaselineStore",
    "PilotModel",
    "PilotRun",
    "PilotScorer",
    "pilot_fsm_thresholds",
]

#: ``rb.scorer`` for this scorer (the version changes when the features or their meaning change).
PILOT_NAME = "pilot/1"

#: The model's inputs, in order. Each is computed from the run's steps so far and the agent's baseline.
FEATURES: tuple[str, ...] = (
    "overrun_steps",  # share of the agent's normal runs that had already ended by this step
    "overrun_chars",  # the same for the characters written so far (thoughts and action inputs)
    "overrun_context",  # share of the agent's normal runs whose largest call (tokens) was smaller (else: chars)
    "overrun_hedges",  # ... that had ended with fewer hedging words than this run has written so far
    "overrun_errors",  # ... that had ended with fewer error results than this run has had so far
    "verbosity",  # log characters per step, minus the agent's normal
    "error_excess",  # share of steps whose result was an error, minus the agent's normal (shrunk early on)
    "repeat_excess",  # share of actions repeating one of the last five, minus the agent's normal
    "hedging_excess",  # hedging words per word of thought, minus the agent's normal
    "recent_errors",  # share of the last three steps that were errors
)

_PRIOR_WEIGHT = 3.0  # a prior counts as this many runs of the agent's own
_RATE_SHRINK = 3.0  # a run's rates start at the agent's normal and move with evidence (steps)
_REPEAT_WINDOW = 5
_RECENT = 3
_HEDGES = re.compile(
    r"\b(?:maybe|perhaps|possibly|probably|might|not sure|unsure|unclear|seems?|apparently|wait|hmm|"
    r"actually|suspect|confus\w*|doubt|try again|wonder|i think|i guess)\b"
)


@dataclass(frozen=True, slots=True)
class PilotModel:
    """Logistic weights over :data:`FEATURES` and the prior baseline of an agent with no finished runs."""

    intercept: float
    weights: tuple[float, ...]
    prior: Mapping[str, float]
    fsm: Mapping[str, float]
    version: str = PILOT_NAME

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], *, source: str = "pilot weights") -> PilotModel:
        try:
            weights = data["weights"]
            missing = [f for f in FEATURES if f not in weights]
            if missing:
                raise ValueError(f"missing weight(s) {', '.join(missing)}")
            return cls(
                intercept=float(data["intercept"]),
                weights=tuple(float(weights[f]) for f in FEATURES),
                prior={k: float(v) for k, v in data["prior"].items()},
                fsm={k: float(v) for k, v in data.get("fsm", {}).items()},
                version=str(data.get("version", PILOT_NAME)),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ValueError(f"{source}: not a pilot model ({exc})") from None

    @classmethod
    def load(cls, path: str | Path | None = None) -> PilotModel:
        """The shipped model, or the one in ``path`` (the JSON ``make train-pilot`` writes)."""
        if path is None:
            text = resources.files("rb_otel.steering").joinpath("pilot_weights.json").read_text(encoding="utf-8")
            return cls.from_mapping(json.loads(text), source="rb_otel/steering/pilot_weights.json")
        try:
            return cls.from_mapping(json.loads(Path(path).read_text(encoding="utf-8")), source=str(path))
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}: line {exc.lineno}: not valid JSON ({exc.msg})") from None

    def probability(self, features: Sequence[float]) -> float:
        z = self.intercept + sum(w * f for w, f in zip(self.weights, features, strict=True))
        if z >= 0:
            return 1.0 / (1.0 + math.exp(-z))
        e = math.exp(z)
        return e / (1.0 + e)


class PilotRun:
    """One run's prefix aggregates; ``score`` is called once per step, in order."""

    __slots__ = (
        "_agent",
        "_baseline",
        "_finished",
        "_last",
        "_model",
        "_peaks",
        "_recent",
        "_repeats",
        "_seen",
        "_store",
        "_totals",
        "_window",
        "_windows",
        "_words",
    )

    def __init__(self, model: PilotModel, store: BaselineStore, agent: str) -> None:
        self._model = model
        self._store = store
        self._agent = agent
        self._baseline = store.get(agent)
        self._totals = dict.fromkeys(TOTALS, 0.0)
        self._repeats = self._words = 0
        self._recent: deque[bool] = deque(maxlen=_RECENT)
        self._seen: deque[tuple[str, str]] = deque(maxlen=_REPEAT_WINDOW)
        self._last: float | None = None
        self._finished = False
        self._windows = (int(model.fsm.get("slow_window", 3)), int(model.fsm.get("skip_window", 8)))
        self._window: deque[float] = deque(maxlen=max(self._windows))
        self._peaks = [0.0, 0.0]

    @property
    def baseline(self) -> AgentBaseline:
        """The agent's baseline this run is scored against (read once, when the run started)."""
        return self._baseline

    def features(self, step: ScorerStep) -> list[float]:
        """Fold ``step`` into the aggregates and return the features after it (what ``score`` feeds the model)."""
        thought = step.thought or ""
        action_input = step.action_input or ""
        totals = self._totals
        totals["steps"] += 1
        totals["chars"] += len(thought) + len(action_input)
        totals["context"] = max(totals["context"], step.tokens)
        totals["errors"] += bool(step.error)
        self._recent.append(bool(step.error))
        if step.action is not None:
            key = (step.action, action_input[:512])
            if key in self._seen:
                self._repeats += 1
            self._seen.append(key)
        if thought:
            lowered = thought.lower()
            totals["hedges"] += len(_HEDGES.findall(lowered))
            self._words += lowered.count(" ") + 1
        return self._relative()

    def _overrun(self, name: str, blend: float) -> float:
        """The share of the agent's runs that had ended with less of ``name`` than this run has now, blended
        with the prior's exponential; 0.5 ("as normal") when neither this run nor the agent reports it."""
        value = self._totals[name]
        if name in MAY_BE_UNKNOWN and value <= 0:
            return 0.5
        prior = 1.0 - math.exp(-value / self._model.prior[f"mean_{name}"])
        share = self._baseline.share_below(name, value)
        return prior if share is None else blend * share + (1.0 - blend) * prior

    def _relative(self) -> list[float]:
        prior, base, totals = self._model.prior, self._baseline, self._totals
        t = totals["steps"]
        blend = base.known / (base.known + _PRIOR_WEIGHT)

        def normal(name: str) -> float:
            return blend * float(getattr(base, name)) + (1.0 - blend) * prior[name]

        error_rate, repeat_rate, hedging = normal("error_rate"), normal("repeat_rate"), normal("hedging")
        return [
            self._overrun("steps", blend),
            self._overrun("chars", blend),
            # A harness that reports no token counts: the characters written stand in for the context's size.
            self._overrun("context", blend) if totals["context"] > 0 else self._overrun("chars", blend),
            self._overrun("hedges", blend),
            self._overrun("errors", blend),
            math.log1p(totals["chars"] / t) - normal("log_cps"),
            (totals["errors"] + _RATE_SHRINK * error_rate) / (t + _RATE_SHRINK) - error_rate,
            (self._repeats + _RATE_SHRINK * repeat_rate) / (t + _RATE_SHRINK) - repeat_rate,
            (totals["hedges"] + _RATE_SHRINK * hedging) / (self._words + _RATE_SHRINK) - hedging,
            sum(self._recent) / _RECENT,
        ]

    def score(self, step: ScorerStep) -> float:
        self._last = value = self._model.probability(self.features(step))
        window = self._window
        window.append(value)
        for i, size in enumerate(self._windows):
            if len(window) >= size:
                sustained = min(islice(window, len(window) - size, None))  # the last `size` scores
                self._peaks[i] = max(self._peaks[i], sustained)
        return value

    def risk(self) -> float | None:
        return self._last

    def finish(self) -> None:
        if self._finished:
            return
        self._finished = True
        totals, t = self._totals, self._totals["steps"]
        if t <= 0:
            return
        values = {
            **totals,
            "peak_slow": self._peaks[0],
            "peak_skip": self._peaks[1],
            "log_cps": math.log1p(totals["chars"] / t),
            "error_rate": totals["errors"] / t,
            "repeat_rate": self._repeats / t,
            "hedging": totals["hedges"] / self._words if self._words else 0.0,
        }
        self._store.record(self._agent, RunSummary(time.time(), values))

    def fsm_thresholds(self) -> dict[str, float | int]:
        """This run's FSM preset: the model's, with SLOW and SKIP made relative to the agent once it has
        :data:`RELATIVE_AFTER` runs: the ``slow_quantile``/``skip_quantile`` of the peaks its earlier runs sustained
        over each window, so SLOW means "a higher sustained risk than that share of this agent's runs reached",
        the same on every agent (never below FAST's exit)."""
        preset = pilot_fsm_thresholds(self._model)
        fsm = self._model.fsm
        if self._baseline.known < RELATIVE_AFTER or "slow_quantile" not in fsm:
            return preset
        slow = self._baseline.quantile("peak_slow", fsm["slow_quantile"])
        skip = self._baseline.quantile("peak_skip", fsm["skip_quantile"])
        if slow is None or skip is None:
            return preset
        fast = float(preset.get("fast_threshold", 0.2))
        margin = float(preset.get("hysteresis_margin", 0.05))
        slow = min(max(slow, fast + 2 * margin), 0.99)
        preset["slow_threshold"] = slow
        preset["skip_threshold"] = min(max(skip, slow), 1.0)
        return preset


class PilotScorer:
    """The pilot as a :class:`~rb_otel.steering.scorers.Scorer`.

    ``model``: a :class:`PilotModel` or a path to its JSON (default: the shipped weights). ``baselines``: where
    the agents' baselines are kept: a :class:`~rb_otel.steering.baseline_cache.BaselineStore`, a store URL
    (``sqlite:///path.db`` or a plain path for processes on one machine, ``redis://host:port/db`` for several
    machines, ``memory://``) or ``None`` (``RB_OTEL_PILOT_BASELINES``, else in memory, this process only). Runs
    of one agent (``start_run(agent=...)``, a key from :func:`~rb_otel.steering.baselines.agent_key`) share a
    baseline; concurrent runs are safe; the store is read when a run starts and written after it ends, never on
    a step.
    """

    def __init__(
        self,
        model: PilotModel | str | Path | None = None,
        baselines: BaselineStore | SummaryStore | str | Path | None = None,
    ) -> None:
        self.model = model if isinstance(model, PilotModel) else PilotModel.load(model)
        self.baselines = baselines if isinstance(baselines, BaselineStore) else BaselineStore(baselines)
        self.name = self.model.version

    def start_run(self, agent: str = "", task_id: str = "") -> PilotRun:
        return PilotRun(self.model, self.baselines, agent)


def pilot_fsm_thresholds(model: PilotModel | None = None) -> dict[str, float | int]:
    """The FSM preset used with ``scorer="pilot"`` (README "Steering signal"): SLOW once the probability of
    failing stays above the model's ``slow_threshold`` for ``slow_window`` steps, SKIP once it stays above
    ``skip_threshold`` for ``skip_window``; FAST below ``fast_threshold``."""
    fsm = dict((model or PilotModel.load()).fsm)
    out: dict[str, float | int] = {}
    for key in ("fast_threshold", "slow_threshold", "skip_threshold", "hysteresis_margin"):
        if key in fsm:
            out[key] = fsm[key]
    for key in ("fast_window", "slow_window", "skip_window"):
        if key in fsm:
            out[key] = int(fsm[key])
    return out
