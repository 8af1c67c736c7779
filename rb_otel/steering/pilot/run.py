"""One run through the pilot: :class:`PilotRun` turns each step into the pilot's features and its probability
that the run is failing.

Every agent has its own normal (a customer-service agent that takes 30 turns is ordinary; a coding agent that
takes 30 is not), so the pilot scores how far the current run has drifted from *this agent's* earlier runs, as
the run goes, from the steps so far only (never look-ahead):

* an :class:`~rb_otel.steering.pilot.baselines.AgentBaseline` per agent (bounded, label-free, learned from the
  agent's finished runs and kept in a store a fleet can share, reached through a
  :class:`~rb_otel.steering.pilot.baselines.BaselineSource`) keeps what
  a normal run looks like: its length in steps, characters, tokens, hedges and errors, its error, repetition and
  hedging rates;
* a run's :class:`PilotRun` keeps O(1) prefix aggregates and, at each step, turns them into the features in
  :data:`~rb_otel.steering.pilot.model.FEATURES` relative to that baseline; a fitted model (``rb-otel train``,
  pilot/2) also reads hashed tokens of what the agent did and saw (:mod:`rb_otel.steering.pilot.text`); a
  logistic model maps them to a probability.

A run given its request (``request``: the task id, else its first user turn's :func:`request_key`) is compared with
its agent's normal where each request weighs the same, blended with that request's own earlier runs as they come
(:class:`~rb_otel.steering.pilot.baselines.RequestBaseline`; its summary records the request for the next ones).

Before an agent has finished a run its baseline is the model's prior (a typical agent of its training data),
blended out as the agent's own runs arrive. A long thought costs no more than a bounded view of it: hedging words
are counted in its first and last :data:`THOUGHT_VIEW` characters (its length is still counted whole).
"""

from __future__ import annotations

import math
import re
import time
import uuid
from collections import deque
from itertools import islice

from rb_otel.steering.agent_keys import request_code
from rb_otel.steering.pilot.baselines import (
    MAY_BE_UNKNOWN,
    RELATIVE_AFTER,
    REQUEST,
    TOTALS,
    AgentBaseline,
    BaselineSource,
    RequestBaseline,
    RunSummary,
)
from rb_otel.steering.pilot.model import (
    FEATURES,
    FEATURES_V1,
    PILOT_NAME,
    PILOT_V2,
    PilotModel,
    TextWeights,
    sigmoid,
)
from rb_otel.steering.pilot.progress import ProgressTracker
from rb_otel.steering.pilot.text import TextScore, step_tokens
from rb_otel.steering.scoring.protocol import ScorerStep
from rb_otel.steering.text import bounded_view

__all__ = [
    "FEATURES",
    "FEATURES_V1",
    "PILOT_NAME",
    "PILOT_V2",
    "RELATIVE_AFTER",
    "THOUGHT_VIEW",
    "AgentBaseline",
    "PilotModel",
    "PilotRun",
    "StepView",
    "TextWeights",
    "pilot_fsm_thresholds",
]

#: Characters of a thought (its head and its tail) the hedging count reads; the length is counted whole.
THOUGHT_VIEW = (2000, 2000)
_PRIOR_WEIGHT = 3.0  # a prior counts as this many runs of the agent's own
_RATE_SHRINK = 3.0  # a run's rates start at the agent's normal and move with evidence (steps)
_MEDIAN_AFTER = 5  # runs an agent needs before "beyond normal" is measured from its own median
_REPEAT_WINDOW = 5
_RECENT = 3
_HEDGES = re.compile(
    r"\b(?:maybe|perhaps|possibly|probably|might|not sure|unsure|unclear|seems?|apparently|wait|hmm|"
    r"actually|suspect|confus\w*|doubt|try again|wonder|i think|i guess)\b"
)


class StepView:
    """What the pilot made of one step: every feature of :data:`FEATURES` and the step's text tokens."""

    __slots__ = ("features", "tokens")

    def __init__(self, features: list[float], tokens: list[str]) -> None:
        self.features = features
        self.tokens = tokens


class PilotRun:
    """One run's prefix aggregates; ``score`` (or ``observe``) is called once per step, in order."""

    __slots__ = (
        "_agent",
        "_baseline",
        "_finished",
        "_last",
        "_model",
        "_normal",
        "_peaks",
        "_progress",
        "_recent",
        "_repeats",
        "_request",
        "_seen",
        "_store",
        "_text",
        "_totals",
        "_window",
        "_windows",
        "_words",
        "labels",
        "name",
    )

    def __init__(
        self,
        model: PilotModel,
        store: BaselineSource,
        agent: str,
        request: str = "",
        *,
        name: str = "",
        labels: int = 0,
    ) -> None:
        """``name`` and ``labels``: the ``rb.scorer`` and ``rb.scorer.labels`` of this run (``model``'s version and 0
        unless the model is one learned for ``agent``: then its record's, read with the model, so a run is named by
        the very model that scores it)."""
        #: ``rb.scorer`` of this run: the model that scores it.
        self.name = name or model.version
        #: ``rb.scorer.labels``: the labelled runs of this agent its model was fitted on (0: not fitted on them).
        self.labels = int(labels)
        self._model = model
        self._store = store
        self._agent = agent
        self._baseline = store.get(agent)
        self._request = request_code(request)
        # the features' normal: the agent's, requests weighing alike, blended with this request's own runs
        self._normal: AgentBaseline | RequestBaseline = (
            self._baseline
            if self._request is None
            else RequestBaseline(self._baseline, self._baseline.for_request(self._request))
        )
        self._totals = dict.fromkeys(TOTALS, 0.0)
        self._repeats = self._words = 0
        self._recent: deque[bool] = deque(maxlen=_RECENT)
        self._seen: deque[tuple[str, str]] = deque(maxlen=_REPEAT_WINDOW)
        self._last: float | None = None
        self._finished = False
        self._windows = (int(model.fsm.get("slow_window", 3)), int(model.fsm.get("skip_window", 8)))
        self._window: deque[float] = deque(maxlen=max(self._windows))
        self._peaks = [0.0, 0.0]
        self._progress = ProgressTracker()
        self._text = tuple(TextScore(block.weights, block.bits, block.value) for block in model.text_blocks)

    @property
    def baseline(self) -> AgentBaseline:
        """The agent's baseline this run is scored against (read once, when the run started)."""
        return self._baseline

    def observe(self, step: ScorerStep) -> StepView:
        """Fold ``step`` into the aggregates; every feature after it and its text tokens (what ``score`` reads,
        and what ``rb-otel train`` fits on)."""
        repeated = self._fold(step)
        return StepView(self._relative(), step_tokens(step, repeated=repeated))

    def features(self, step: ScorerStep) -> list[float]:
        """Fold ``step`` in and return the model's features after it, in the order of ``model.features``."""
        self._fold(step)
        every = self._relative()
        return [every[c] for c in self._model.columns]

    def _fold(self, step: ScorerStep) -> bool:
        """Add ``step`` to the run's aggregates; whether its call repeats one of the last five."""
        thought = step.thought or ""
        action_input = step.action_input or ""
        totals = self._totals
        totals["steps"] += 1
        totals["chars"] += len(thought) + len(action_input)
        totals["context"] = max(totals["context"], step.tokens)
        totals["errors"] += bool(step.error)
        self._recent.append(bool(step.error))
        self._progress.add(step)
        repeated = False
        if step.action is not None:
            key = (step.action, action_input[:512])
            if key in self._seen:
                self._repeats += 1
                repeated = True
            self._seen.append(key)
        if thought:
            lowered = bounded_view(thought, *THOUGHT_VIEW).lower()
            totals["hedges"] += len(_HEDGES.findall(lowered))
            self._words += lowered.count(" ") + 1
        return repeated

    def _overrun(self, name: str, blend: float) -> float:
        """The share of the agent's runs that had ended with less of ``name`` than this run has now, blended
        with the prior's exponential (an unreported context is never asked for: the characters stand in)."""
        value = self._totals[name]
        prior = 1.0 - math.exp(-value / self._model.prior[f"mean_{name}"])
        share = self._normal.share_below(name, value)
        return prior if share is None else blend * share + (1.0 - blend) * prior

    def _beyond(self, name: str) -> float:
        """How far beyond the agent's median run this one already is: ``log1p(value) - log1p(median)``, 0 below it
        (the median of its own runs once it has a few, else the prior's)."""
        value = self._totals[name]
        if value <= 0:
            return 0.0
        median = self._normal.quantile(name, 0.5) if self._normal.known >= _MEDIAN_AFTER else None
        if median is None or (name in MAY_BE_UNKNOWN and median <= 0):
            prior = self._model.prior
            median = prior.get(f"median_{name}", prior[f"mean_{name}"])
        return max(math.log1p(value) - math.log1p(median), 0.0)

    def _relative(self) -> list[float]:
        prior, base, totals = self._model.prior, self._normal, self._totals
        t = totals["steps"]
        blend = base.known / (base.known + _PRIOR_WEIGHT)

        def normal(name: str) -> float:
            return blend * base.rate(name) + (1.0 - blend) * prior.get(name, 0.0)

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
            self._beyond("steps"),
            self._beyond("chars"),
            self._beyond("context"),
            math.log1p(totals["context"] / t) - normal("log_tps") if totals["context"] > 0 else 0.0,
            math.log1p(t),
            math.log1p(totals["chars"]),
            math.log1p(totals["context"] if totals["context"] > 0 else totals["chars"]),
            *self._progress.values(),
        ]

    def score(self, step: ScorerStep) -> float:
        if not self._text:
            value = sigmoid(self._model.logit(self._fold_relative(step)))
        else:
            view = self.observe(step)
            for block in self._text:
                block.add(view.tokens)
            value = sigmoid(self._model.logit(view.features, sum(block.value for block in self._text)))
        self._last = value
        window = self._window
        window.append(value)
        for i, size in enumerate(self._windows):
            if len(window) >= size:
                sustained = min(islice(window, len(window) - size, None))  # the last `size` scores
                self._peaks[i] = max(self._peaks[i], sustained)
        return value

    def _fold_relative(self, step: ScorerStep) -> list[float]:
        self._fold(step)
        return self._relative()

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
        if totals["context"] > 0:
            values["log_tps"] = math.log1p(totals["context"] / t)
        if self._request is not None:
            values[REQUEST] = self._request
        self._store.record(self._agent, RunSummary(time.time(), values, uuid.uuid4().hex))

    def fsm_thresholds(self) -> dict[str, float | int]:
        """This run's FSM preset: the model's, with SLOW and SKIP made relative to the agent once it has
        :data:`RELATIVE_AFTER` runs when the model says how (the shipped pilot/1: the ``slow_quantile`` /
        ``skip_quantile`` of the peaks its earlier runs sustained over each window, so SLOW means "a higher
        sustained risk than that share of this agent's runs reached", never below FAST's exit). A fitted model's
        thresholds are its own, chosen from its out-of-fold scores."""
        preset = pilot_fsm_thresholds(self._model)
        fsm = self._model.fsm
        if self._baseline.known < RELATIVE_AFTER:
            return preset
        if "slow_quantile" not in fsm:
            return self._relative_skip(preset) if "skip_quantile" in fsm else preset
        slow = self._baseline.quantile("peak_slow", fsm["slow_quantile"])
        # no skip_quantile: SKIP stays where the preset has it (the agent-relative size: off)
        skip = self._baseline.quantile("peak_skip", fsm["skip_quantile"]) if "skip_quantile" in fsm else 1.0
        if slow is None or skip is None:
            return preset
        fast = float(preset.get("fast_threshold", 0.2))
        margin = float(preset.get("hysteresis_margin", 0.05))
        slow = min(max(slow, fast + 2 * margin), 0.99)
        preset["slow_threshold"] = slow
        preset["skip_threshold"] = min(max(skip, slow), 1.0)
        return preset

    def _relative_skip(self, preset: dict[str, float | int]) -> dict[str, float | int]:
        """A fitted model's SKIP relative to the agent (``skip_quantile`` without ``slow_quantile``: what
        ``rb-otel train`` writes when SKIP held its budget on agents it was not fitted to): the quantile of the
        risk this agent's earlier runs sustained over ``skip_window`` steps, SLOW and FAST kept below it; the
        plain definition is ``rb_otel.training.held_out.relative_stops``."""
        skip = self._baseline.quantile("peak_skip", self._model.fsm["skip_quantile"])
        if skip is None:
            return preset
        skip = min(skip, 1.0)
        slow = min(float(preset.get("slow_threshold", skip)), skip)
        preset["skip_threshold"] = skip
        preset["slow_threshold"] = slow
        preset["fast_threshold"] = min(float(preset.get("fast_threshold", 0.2)), slow - 1e-6)
        return preset


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
