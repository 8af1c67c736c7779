"""One run's guidance pipeline: which injections run on a step, the monitor history behind the E1 gate, and
rendering what they queued for the model that will read it (docs/steering.md, "How steering works"; docs/steering.md,
"Guardrails"; docs/steering.md, "E-traces")."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from rb_otel.steering.guardrails import DEFAULT_E1_GATE_COMPOSITE, e1_gate_open
from rb_otel.steering.injections import BaseInjection, MonitorSteeringInjection, StepContext
from rb_otel.steering.rendering import render_injection
from rb_otel.types import INJECTION_PREVIEW_CHARS, FSMState, MonitorEvaluation, PendingInjection, StepLogEntry

__all__ = ["FAST_SKIPPED_REASON", "GuidancePipeline", "render_guidance"]

_log = logging.getLogger("rb_otel.steering")

FAST_SKIPPED_REASON = "FSM=FAST, e-traces skipped"
#: Monitor evaluations the E1 gate looks back over (trimmed to this once twice as many are kept).
_EVAL_HISTORY_KEEP = 64


class GuidancePipeline:
    """The injections of one run, in order. The first :class:`MonitorSteeringInjection` evaluates the monitors on
    every scored step; its evaluations open or close the E1 gate; in FAST the E-trace tiers are bypassed."""

    def __init__(self, injections: Sequence[BaseInjection]) -> None:
        self.injections = list(injections)
        self.e1_gate_composite_threshold = DEFAULT_E1_GATE_COMPOSITE
        self.eval_history: list[MonitorEvaluation] = []
        self._monitors = [i for i in self.injections if isinstance(i, MonitorSteeringInjection)]
        self._has_etraces = any(
            i.bypassed_in_fast and not isinstance(i, MonitorSteeringInjection) for i in self.injections
        )

    def collect(self, ctx: StepContext, entry: StepLogEntry) -> tuple[list[PendingInjection], MonitorEvaluation | None]:
        """Evaluate the monitors (scored steps) and collect what each injection queues for this step; notes the
        monitors that fired, skips and degradations on ``entry``. A failing injection is logged and skipped."""
        first_call, state = ctx.first_call, ctx.state
        if not first_call and self._monitors:
            evaluation = self._monitors[0].evaluate(ctx)
            ctx.evaluation = evaluation
            self._remember(evaluation)
            entry.monitors_fired = list(evaluation.fired)
            entry.failure_type = evaluation.failure_type
        ctx.eval_history = self.eval_history
        ctx.e1_gate_open = e1_gate_open(
            self.eval_history,
            monitors_configured=bool(self._monitors),
            composite_threshold=self.e1_gate_composite_threshold,
        )
        if state is FSMState.FAST and not first_call and self._has_etraces:
            entry.skipped_reason = FAST_SKIPPED_REASON
        pending: list[PendingInjection] = []
        for injection in self.injections:
            if first_call and not injection.on_first_call:
                continue
            if not first_call and (
                not injection.on_scored_steps or (state is FSMState.FAST and injection.bypassed_in_fast)
            ):
                continue
            try:
                pending.extend(injection.retrieve(ctx))
            except Exception as exc:  # a custom injection must not break the step
                _log.warning("%s failed, continuing without it: %s", injection.source, type(exc).__name__)
        if ctx.notes:  # a degraded step is visible in the step log and on its span
            entry.skipped_reason = "; ".join([entry.skipped_reason, *ctx.notes] if entry.skipped_reason else ctx.notes)
        return pending, ctx.evaluation

    def _remember(self, evaluation: MonitorEvaluation) -> None:
        history = self.eval_history
        history.append(evaluation)
        if len(history) > 2 * _EVAL_HISTORY_KEEP:
            del history[:-_EVAL_HISTORY_KEEP]


def render_guidance(pending: Sequence[PendingInjection], entry: StepLogEntry, *, render_model: str) -> list[str]:
    """Render the step's injections for the model that will get them, and note them on ``entry``."""
    rendered = [render_injection(p, render_model) for p in pending]
    entry.injections = [t[:INJECTION_PREVIEW_CHARS] for t in rendered]
    entry.injection_sources = [p.source for p in pending]
    entry.intervention_texts = rendered
    return rendered
