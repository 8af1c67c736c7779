"""Injections: the units of the steering pipeline that may queue guidance for a model call (docs/steering.md, "How
steering works"; docs/steering.md, "E-traces").

Each object is per run (they count their calls), so build a fresh list per run with :func:`create_injections`.
The session asks them in list order, which is also the render order: monitor -> E1 -> E2 -> E3.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from rb_otel.steering.calls import RemoteCallObserver
from rb_otel.steering.etraces.store import (
    InMemoryPatternStore,
    PatternStore,
    RetrievalQuery,
    load_default_library,
)
from rb_otel.steering.guardrails import MonitorGuardrails
from rb_otel.steering.monitors.local import LocalMonitorBackend, MonitorBackend, MonitorRequest
from rb_otel.types import ETrace, FSMState, MonitorEvaluation, PendingInjection, StepRecord

__all__ = [
    "BaseInjection",
    "E1Injection",
    "E2Injection",
    "E3Injection",
    "MonitorSteeringInjection",
    "StepContext",
    "create_injections",
    "default_pattern_store",
]

_log = logging.getLogger("rb_otel.steering")


@dataclass(slots=True)
class StepContext:
    """What an injection may read about the current step. ``evaluation`` is this step's monitor result."""

    step: int
    state: FSMState
    first_call: bool
    thoughts: Sequence[str]
    trace_steps: Sequence[StepRecord]
    model: str = ""
    task: str = ""
    task_profile: str = "coding"
    monitor_weights: Mapping[str, float] | None = None
    evaluation: MonitorEvaluation | None = None
    eval_history: list[MonitorEvaluation] = field(default_factory=list)
    e1_gate_open: bool = True
    deadline: float | None = None
    observer: RemoteCallObserver | None = None
    #: What went wrong this step (a failed backend): ends up in the entry's ``skipped_reason``.
    notes: list[str] = field(default_factory=list)


class BaseInjection:
    """Subclass and override :meth:`retrieve` for a custom injection.

    ``on_first_call``: asked on the first (unscored) call; ``bypassed_in_fast``: not asked in FAST.
    ``retrieve`` may raise; the session logs the failure and queues nothing for it.
    """

    on_first_call: ClassVar[bool] = False
    on_scored_steps: ClassVar[bool] = True
    bypassed_in_fast: ClassVar[bool] = True

    @property
    def source(self) -> str:
        return type(self).__name__

    def retrieve(self, ctx: StepContext) -> list[PendingInjection]:
        raise NotImplementedError


class MonitorSteeringInjection(BaseInjection):
    """Evaluates the monitors on every scored step (FAST included) and queues their text under guardrails."""

    bypassed_in_fast = False

    def __init__(self, backend: MonitorBackend, *, max_per_run: int = 5) -> None:
        self.backend = backend
        self.guardrails = MonitorGuardrails(max_per_run)

    def evaluate(self, ctx: StepContext) -> MonitorEvaluation:
        """Run the backend; a failure is logged and read as an empty evaluation (docs/steering.md, "E1 gate
        backward compatibility")."""
        request = MonitorRequest(
            model=ctx.model,
            task_profile=ctx.task_profile,
            steps=ctx.trace_steps,
            weights=ctx.monitor_weights,
            task=ctx.task,
            step=ctx.step,
            deadline=ctx.deadline,
            observer=ctx.observer,
        )
        try:
            evaluation = self.backend.evaluate(request)
        except Exception as exc:  # a backend must never break the agent
            _log.warning("monitor evaluation failed, continuing without it: %s", _describe(exc))
            ctx.notes.append(f"monitors unavailable ({type(exc).__name__})")
            return MonitorEvaluation()
        if evaluation.degraded:
            ctx.notes.append(evaluation.degraded)
        return evaluation

    def retrieve(self, ctx: StepContext) -> list[PendingInjection]:
        evaluation = ctx.evaluation
        if evaluation is None or not evaluation.inject or not evaluation.intervention_text:
            return []
        text = evaluation.intervention_text
        if not self.guardrails.allows(text, ctx.step, ctx.state):
            return []
        self.guardrails.record(text, ctx.step)
        return [
            PendingInjection(
                source=self.source,
                text=text,
                monitors_fired=list(evaluation.fired),
                failure_type=evaluation.failure_type,
            )
        ]


class _RetrievalInjection(BaseInjection):
    tier: ClassVar[str]
    default_top_k: ClassVar[int]
    max_calls: ClassVar[int] = 1

    def __init__(self, store: PatternStore, *, top_k: int | None = None) -> None:
        self.store = store
        self.top_k = top_k or self.default_top_k
        self.calls = 0

    def query(self, ctx: StepContext) -> RetrievalQuery | None:
        raise NotImplementedError

    def retrieve(self, ctx: StepContext) -> list[PendingInjection]:
        if self.calls >= self.max_calls:
            return []
        query = self.query(ctx)
        if query is None:
            return []
        # the cap counts calls, even ones that return nothing or fail (docs/steering.md, "E-trace query")
        self.calls += 1
        try:
            traces = self.store.retrieve(query)
        except Exception as exc:
            _log.warning("%s retrieval failed, no guidance this step: %s", self.tier.upper(), _describe(exc))
            ctx.notes.append(f"{self.tier.upper()} retrieval failed ({getattr(exc, 'kind', type(exc).__name__)})")
            return []
        return [self._pending(t) for t in traces]

    def _pending(self, trace: ETrace) -> PendingInjection:
        return PendingInjection(
            source=self.source,
            tier=trace.tier,
            fields=dict(trace.fields),
            failure_type=trace.failure_type,
            pattern_id=trace.pattern_id,
            similarity=trace.similarity,
        )


class E1Injection(_RetrievalInjection):
    """Instance-level lessons: the last 3 thoughts, ``top_k=1``, once per run, behind the E1 gate."""

    tier = "e1"
    default_top_k = 1

    def query(self, ctx: StepContext) -> RetrievalQuery | None:
        if not ctx.e1_gate_open:
            return None
        return RetrievalQuery(
            tier="e1", context="\n".join(ctx.thoughts[-3:]), top_k=self.top_k, model=ctx.model, **_call_fields(ctx)
        )


class E2Injection(_RetrievalInjection):
    """Failure-mode patterns: the last 5 thoughts, ``top_k=2``, filtered by the current ``failure_type``."""

    tier = "e2"
    default_top_k = 2

    def query(self, ctx: StepContext) -> RetrievalQuery | None:
        failure_type = ctx.evaluation.failure_type if ctx.evaluation else None
        return RetrievalQuery(
            tier="e2",
            context="\n".join(ctx.thoughts[-5:]),
            top_k=self.top_k,
            model=ctx.model,
            failure_type=failure_type or None,
            **_call_fields(ctx),
        )


class E3Injection(_RetrievalInjection):
    """Universal standing rules: a scroll of up to 32, on the first call only (single-shot)."""

    tier = "e3"
    default_top_k = 32
    on_first_call = True
    on_scored_steps = False
    bypassed_in_fast = False

    def query(self, ctx: StepContext) -> RetrievalQuery | None:
        return RetrievalQuery(tier="e3", context="", top_k=self.top_k, model=ctx.model, **_call_fields(ctx))


def _call_fields(ctx: StepContext) -> dict[str, Any]:
    return {"step": ctx.step, "deadline": ctx.deadline, "observer": ctx.observer}


def _describe(exc: BaseException) -> str:
    # Only the type and a bounded message: exception texts from HTTP clients can carry request details.
    message = str(exc)
    return f"{type(exc).__name__}: {message[:200]}" if message else type(exc).__name__


@functools.cache
def default_pattern_store() -> InMemoryPatternStore:
    """The process-wide embedded store holding the shipped library (built on first use)."""
    return InMemoryPatternStore(load_default_library())


_DEFAULT_BACKEND = LocalMonitorBackend()


def create_injections(
    monitor_backend: MonitorBackend | None = None,
    pattern_store: PatternStore | None = None,
    e_traces_enabled: bool = True,
    *,
    monitors_enabled: bool = True,
    e1_top_k: int = 1,
    e2_top_k: int = 2,
    e3_max_patterns: int = 32,
) -> list[BaseInjection]:
    """The default pipeline for one run: monitor steering, then E1/E2/E3 when ``e_traces_enabled``.

    With no arguments everything is embedded: :class:`LocalMonitorBackend` and the shipped pattern library.
    """
    injections: list[BaseInjection] = []
    if monitors_enabled:
        injections.append(MonitorSteeringInjection(monitor_backend or _DEFAULT_BACKEND))
    if e_traces_enabled:
        store = pattern_store or default_pattern_store()
        injections += [
            E1Injection(store, top_k=e1_top_k),
            E2Injection(store, top_k=e2_top_k),
            E3Injection(store, top_k=e3_max_patterns),
        ]
    return injections
