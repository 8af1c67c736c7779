"""The pilot: a small offline scorer whose score is a calibrated probability that the run is failing.

Every agent has its own normal (a customer-service agent that takes 30 turns is ordinary; a coding agent that
takes 30 is not), so the pilot scores how far the current run has drifted from *this agent's* earlier runs, as
the run goes, from the steps so far only (never look-ahead):

* an :class:`AgentBaseline` per agent (bounded, label-free, learned online from the agent's finished runs;
  optionally persisted) keeps what a normal run looks like: its length in steps and characters, its error,
  repetition and hedging rates;
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
import os
import re
import threading
from bisect import bisect_left, insort
from collections import OrderedDict, deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from rb_otel.steering.scorers import ScorerStep

__all__ = [
    "FEATURES",
    "PILOT_NAME",
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
_MAX_LENGTHS = 400  # run lengths kept per agent (the newest)
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


class AgentBaseline:
    """What a normal run of one agent looks like, from its finished runs (no outcomes needed).

    Lengths (steps, characters) are kept as sorted lists of the newest :data:`_MAX_LENGTHS` runs for their
    empirical distribution; rates as running means. Blended with the prior while the agent has few runs.
    Not thread-safe by itself: :class:`BaselineStore` guards it.
    """

    __slots__ = ("_chars", "_order", "_steps", "error_rate", "hedging", "log_cps", "repeat_rate", "runs")

    def __init__(self) -> None:
        self.runs = 0
        self._steps: list[int] = []
        self._chars: list[int] = []
        self._order: deque[tuple[int, int]] = deque()
        self.log_cps = 0.0
        self.error_rate = 0.0
        self.repeat_rate = 0.0
        self.hedging = 0.0

    def add(self, steps: int, chars: int, errors: int, repeats: int, hedging: float) -> None:
        """Fold one finished run in (a run with no steps says nothing and is ignored)."""
        if steps <= 0:
            return
        self.runs += 1
        insort(self._steps, steps)
        insort(self._chars, chars)
        self._order.append((steps, chars))
        if len(self._order) > _MAX_LENGTHS:
            old_steps, old_chars = self._order.popleft()
            del self._steps[bisect_left(self._steps, old_steps)]
            del self._chars[bisect_left(self._chars, old_chars)]
        rate = 1.0 / min(self.runs, _MAX_LENGTHS)
        self.log_cps += (math.log1p(chars / steps) - self.log_cps) * rate
        self.error_rate += (errors / steps - self.error_rate) * rate
        self.repeat_rate += (repeats / steps - self.repeat_rate) * rate
        self.hedging += (hedging - self.hedging) * rate

    def ended_before(self, steps: int, chars: int) -> tuple[float, float, int]:
        """``(share of runs shorter than steps, share with fewer chars, runs known)``."""
        n = len(self._steps)
        if n == 0:
            return 0.0, 0.0, 0
        return bisect_left(self._steps, steps) / n, bisect_left(self._chars, chars) / n, n

    def as_dict(self) -> dict[str, Any]:
        return {
            "runs": self.runs,
            "recent": [list(x) for x in self._order],
            "log_cps": self.log_cps,
            "error_rate": self.error_rate,
            "repeat_rate": self.repeat_rate,
            "hedging": self.hedging,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AgentBaseline:
        baseline = cls()
        baseline.runs = int(data["runs"])
        for steps, chars in data["recent"][-_MAX_LENGTHS:]:
            baseline._order.append((int(steps), int(chars)))
            insort(baseline._steps, int(steps))
            insort(baseline._chars, int(chars))
        for name in ("log_cps", "error_rate", "repeat_rate", "hedging"):
            setattr(baseline, name, float(data[name]))
        return baseline


class BaselineStore:
    """Baselines by agent key, the least recently used dropped beyond ``max_agents``; optionally persisted.

    ``path``: a JSON file read at construction (when it exists) and rewritten atomically every ``save_every``
    finished runs and by :meth:`save`. The key is ``agent`` (name and model); label-free, so nothing about
    outcomes is ever stored.
    """

    def __init__(self, path: str | Path | None = None, *, max_agents: int = 256, save_every: int = 1) -> None:
        self.path = None if path is None else Path(path)
        self.max_agents = max_agents
        self.save_every = max(int(save_every), 1)
        self._agents: OrderedDict[str, AgentBaseline] = OrderedDict()
        self._lock = threading.Lock()
        self._unsaved = 0
        if self.path is not None and self.path.exists():
            try:
                data = json.loads(self.path.read_text(encoding="utf-8"))
                for key, value in data["agents"].items():
                    self._agents[str(key)] = AgentBaseline.from_dict(value)
            except (OSError, ValueError, KeyError, TypeError) as exc:
                raise ValueError(f"{self.path}: not a pilot baseline file ({exc})") from None

    def __len__(self) -> int:
        return len(self._agents)

    def get(self, agent: str) -> AgentBaseline:
        with self._lock:
            baseline = self._agents.get(agent)
            if baseline is None:
                baseline = self._agents[agent] = AgentBaseline()
                while len(self._agents) > self.max_agents:
                    self._agents.popitem(last=False)
            else:
                self._agents.move_to_end(agent)
            return baseline

    def add(self, baseline: AgentBaseline, *aggregates: Any) -> None:
        with self._lock:
            baseline.add(*aggregates)
            self._unsaved += 1
            due = self.path is not None and self._unsaved >= self.save_every
        if due:
            self.save()

    def save(self) -> None:
        if self.path is None:
            return
        with self._lock:
            data = {"version": PILOT_NAME, "agents": {k: v.as_dict() for k, v in self._agents.items()}}
            self._unsaved = 0
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps(data), encoding="utf-8")
        os.replace(tmp, self.path)


class PilotRun:
    """One run's prefix aggregates; ``score`` is called once per step, in order."""

    __slots__ = (
        "_baseline",
        "_chars",
        "_errors",
        "_finished",
        "_hedges",
        "_last",
        "_model",
        "_recent",
        "_repeats",
        "_seen",
        "_steps",
        "_store",
        "_words",
    )

    def __init__(self, model: PilotModel, store: BaselineStore, agent: str) -> None:
        self._model = model
        self._store = store
        self._baseline = store.get(agent)
        self._steps = self._chars = self._errors = self._repeats = self._hedges = self._words = 0
        self._recent: deque[bool] = deque(maxlen=_RECENT)
        self._seen: deque[tuple[str, str]] = deque(maxlen=_REPEAT_WINDOW)
        self._last: float | None = None
        self._finished = False

    def features(self, step: ScorerStep) -> list[float]:
        """Fold ``step`` into the aggregates and return the features after it (what ``score`` feeds the model)."""
        thought = step.thought or ""
        action_input = step.action_input or ""
        self._steps += 1
        self._chars += len(thought) + len(action_input)
        if step.error:
            self._errors += 1
        self._recent.append(bool(step.error))
        if step.action is not None:
            key = (step.action, action_input[:512])
            if key in self._seen:
                self._repeats += 1
            self._seen.append(key)
        if thought:
            lowered = thought.lower()
            self._hedges += len(_HEDGES.findall(lowered))
            self._words += lowered.count(" ") + 1
        return self._relative()

    def _relative(self) -> list[float]:
        prior, base = self._model.prior, self._baseline
        t = self._steps
        ended_steps, ended_chars, n = base.ended_before(t, self._chars)
        blend = n / (n + _PRIOR_WEIGHT)
        prior_steps = 1.0 - math.exp(-t / prior["mean_steps"])
        prior_chars = 1.0 - math.exp(-self._chars / prior["mean_chars"])

        def normal(name: str, value: float) -> float:
            return blend * value + (1.0 - blend) * prior[name]

        error_rate, repeat_rate = normal("error_rate", base.error_rate), normal("repeat_rate", base.repeat_rate)
        hedging = normal("hedging", base.hedging)
        return [
            blend * ended_steps + (1.0 - blend) * prior_steps,
            blend * ended_chars + (1.0 - blend) * prior_chars,
            math.log1p(self._chars / t) - normal("log_cps", base.log_cps),
            (self._errors + _RATE_SHRINK * error_rate) / (t + _RATE_SHRINK) - error_rate,
            (self._repeats + _RATE_SHRINK * repeat_rate) / (t + _RATE_SHRINK) - repeat_rate,
            (self._hedges + _RATE_SHRINK * hedging) / (self._words + _RATE_SHRINK) - hedging,
            sum(self._recent) / _RECENT,
        ]

    def score(self, step: ScorerStep) -> float:
        self._last = self._model.probability(self.features(step))
        return self._last

    def risk(self) -> float | None:
        return self._last

    def finish(self) -> None:
        if self._finished:
            return
        self._finished = True
        hedging = self._hedges / self._words if self._words else 0.0
        self._store.add(self._baseline, self._steps, self._chars, self._errors, self._repeats, hedging)


class PilotScorer:
    """The pilot as a :class:`~rb_otel.steering.scorers.Scorer`.

    ``model``: a :class:`PilotModel` or a path to its JSON (default: the shipped weights). ``baselines``: a
    :class:`BaselineStore` or a path to persist baselines in (default: in memory, this process only). Runs of
    one agent (``start_run(agent=...)``; the key includes the model when the integration knows it) share a
    baseline; concurrent runs are safe.
    """

    def __init__(
        self, model: PilotModel | str | Path | None = None, baselines: BaselineStore | str | Path | None = None
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
