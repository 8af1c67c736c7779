"""The ``MonitorBackend`` protocol and the embedded, network-free default backend (docs/rb-api.md, "Using rb-api";
docs/steering.md, "Monitors")."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from rb_otel.steering.calls import RemoteCallObserver
from rb_otel.steering.memo import BoundedMemo, IdentityMemo
from rb_otel.steering.monitors.features import FeatureCache
from rb_otel.steering.monitors.profiles import V1_MONITORS, resolve_weights
from rb_otel.steering.monitors.v1 import V1_SCORERS, task_words_of
from rb_otel.types import MonitorEvaluation, StepRecord

__all__ = ["DEFAULT_FIRE_THRESHOLD", "LocalMonitorBackend", "MonitorBackend", "MonitorRequest"]

_log = logging.getLogger("rb_otel.steering.monitors")

DEFAULT_FIRE_THRESHOLD = 0.6
#: The local monitors read at most this many trailing steps, so evaluation cost does not grow with the run.
DEFAULT_WINDOW = 24

INTERVENTION_TEXTS: Mapping[str, str] = {
    "claim_contradiction": (
        "Your latest reasoning contradicts a conclusion you reached earlier. Before acting, state which claim "
        "you now believe and the evidence for it."
    ),
    "semantic_loop": (
        "You are repeating an action you already tried with essentially the same input. Use what it returned "
        "or try a genuinely different approach."
    ),
    "verification_skip": (
        "You changed code but have not verified the change. Run the relevant tests or re-open the edited file "
        "before declaring the task done."
    ),
    "cyclic_compression": (
        "You are re-summarising without making progress. Pick the single most promising next action and take it."
    ),
    "late_sprawl": (
        "New tools and files keep appearing late in the run. Converge on the files already identified and "
        "finish the task."
    ),
    "silent_topic_drift": (
        "Your recent steps have drifted away from the task. Re-read the task and say how the next action serves it."
    ),
}


@dataclass(frozen=True, slots=True)
class MonitorRequest:
    """What a backend evaluates: the ``/monitors/evaluate`` request of docs/rb-api.md, "Using rb-api", plus the run's
    task."""

    model: str
    task_profile: str
    steps: Sequence[StepRecord]
    weights: Mapping[str, float] | None = None
    task: str = ""
    step: int = 0
    #: ``time.monotonic()`` by which a remote backend must have answered (the step's steering budget).
    deadline: float | None = None
    observer: RemoteCallObserver | None = None


@runtime_checkable
class MonitorBackend(Protocol):
    """Evaluates the monitors over a run's steps and answers in the shape of docs/rb-api.md, "Using rb-api".

    Called synchronously on the agent's thread once per scored step, so it must be fast or bounded in time. It
    may raise; the caller treats a failure as an empty evaluation and logs it.
    """

    def evaluate(self, request: MonitorRequest) -> MonitorEvaluation: ...


_SCORERS = tuple((name, V1_SCORERS[name]) for name in V1_MONITORS)


class LocalMonitorBackend:
    """The six v1 monitors as local heuristics (see ``monitors.v1``), weighted by the request's profile.

    ``composite`` is the weighted sum of the scores; a monitor fires at ``score >= fire_threshold``;
    ``failure_type`` is the fired monitor with the largest weighted score; ``inject`` is true when anything
    fired, with a fixed corrective text per monitor.
    """

    def __init__(self, *, fire_threshold: float = DEFAULT_FIRE_THRESHOLD, window: int = DEFAULT_WINDOW) -> None:
        if not 0.0 < fire_threshold <= 1.0:
            raise ValueError(f"fire_threshold must be within (0, 1], got {fire_threshold!r}")
        if window < 2:
            raise ValueError(f"window must be at least 2, got {window!r}")
        self.fire_threshold = fire_threshold
        self.window = window
        self._task_words: BoundedMemo[str, frozenset[str]] = BoundedMemo("monitors.task_words", 1024)
        self._features = FeatureCache()
        self._weights: IdentityMemo[Mapping[str, float] | None, dict[str, float]] = IdentityMemo(
            "monitors.weights", 256
        )

    def __repr__(self) -> str:
        return f"LocalMonitorBackend(fire_threshold={self.fire_threshold}, window={self.window})"

    def evaluate(self, request: MonitorRequest) -> MonitorEvaluation:
        weights = self._weights_for(request.task_profile, request.weights)
        if not request.steps:
            return MonitorEvaluation(scores=dict.fromkeys(V1_MONITORS, 0.0))
        window = self._features.features(request.steps)[-self.window :]
        task_words = self._task_words_of(request.task)
        scores: dict[str, float] = {}
        composite = 0.0
        fired: list[str] = []
        threshold = self.fire_threshold
        for name, scorer in _SCORERS:  # one pass: this runs on every step
            score = scores[name] = scorer(window, task_words)
            composite += weights[name] * score
            if score >= threshold:
                fired.append(name)
        failure_type = max(fired, key=lambda n: weights[n] * scores[n]) if fired else None
        return MonitorEvaluation(
            inject=bool(fired),
            intervention_text=INTERVENTION_TEXTS[failure_type] if failure_type else None,
            fired=tuple(fired),
            scores=scores,
            composite=round(composite, 6),
            failure_type=failure_type,
            intervention_source="local" if failure_type else None,
        )

    def _weights_for(self, profile: str, overrides: Mapping[str, float] | None) -> dict[str, float]:
        # Resolution is cheap but runs every step; remembered by the overrides object's identity and the profile.
        weights = self._weights.get(overrides, profile)
        if weights is None:
            weights = self._weights.put(overrides, resolve_weights(profile, overrides), profile)
        return weights

    def _task_words_of(self, task: str) -> frozenset[str]:
        words = self._task_words.get(task)
        if words is None:
            words = self._task_words.put(task, task_words_of(task))  # bounded: tasks are few, but never trust that
        return words
