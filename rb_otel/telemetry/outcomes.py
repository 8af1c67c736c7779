"""A run's outcome, recorded after the run: a ``gen_ai.evaluation.result`` log event in the run's trace.

Outcomes arrive when a deployment knows them: tests that pass, a ticket that closes, an eval suite's score; often
minutes or days after the run ended, from another process. Each is one log record through the Logs API, the
GenAI conventions' evaluation event:

* ``event_name`` ``gen_ai.evaluation.result``; ``gen_ai.evaluation.name`` ``rb.run.outcome``;
  ``gen_ai.evaluation.score.label`` ``success`` or ``failure``; ``gen_ai.evaluation.score.value`` when a score was
  given; ``gen_ai.evaluation.explanation`` (the caller's ``reason``) only when content capture is on (a reason is
  free text: a test's failure message can quote anything);
* ``rb.run_id``, the key every reader joins on, and ``gen_ai.agent.name`` when the run's agent is known;
* the trace context of the run's ``invoke_agent`` span when it is known: a run of this process (live, or among
  the :data:`RECENT_RUNS` it ran), a W3C ``traceparent`` the caller kept, or the run's span read back from its
  traces (``rb-otel label``). Otherwise the record has no trace context (the conventions' fallback: a correlation
  attribute; ours is ``rb.run_id``): a live run's trace id is random, or its caller's, so no other process can
  derive it from the run id.

Emitting never raises into the caller: a failure is logged, and the exporter's own failures are the SDK's to log.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from opentelemetry import _logs as logs
from opentelemetry import trace

from rb_otel.steering.outcome import OUTCOMES, RunOutcome
from rb_otel.telemetry import names as n
from rb_otel.telemetry.attributes import AttributeValue
from rb_otel.telemetry.content import ContentPolicy

__all__ = [
    "OUTCOMES",
    "RECENT_RUNS",
    "RecentRuns",
    "RunContext",
    "RunOutcome",
    "emit_outcome",
    "outcome_attributes",
    "parse_traceparent",
    "remember_span",
]

_log = logging.getLogger("rb_otel.telemetry")

_TRACEPARENT = re.compile(r"^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$")


@dataclass(frozen=True, slots=True)
class RunContext:
    """Where a run's ``invoke_agent`` span is: its trace and span ids (ints), its trace flags, and its agent."""

    trace_id: int
    span_id: int
    trace_flags: int = int(trace.TraceFlags.SAMPLED)
    agent_name: str = ""

    @property
    def traceparent(self) -> str:
        """The W3C ``traceparent`` of the run's span (what another process passes back to be parented to it)."""
        return f"00-{self.trace_id:032x}-{self.span_id:016x}-{self.trace_flags:02x}"

    def span_context(self) -> trace.SpanContext:
        return trace.SpanContext(
            self.trace_id, self.span_id, is_remote=True, trace_flags=trace.TraceFlags(self.trace_flags)
        )


def parse_traceparent(text: object) -> RunContext:
    """A W3C ``traceparent`` (``00-<trace id>-<span id>-<flags>``, lower-case hex) as a :class:`RunContext`; a
    ``ValueError`` naming ``traceparent`` otherwise."""
    match = _TRACEPARENT.match(text.strip()) if isinstance(text, str) else None
    if match is None or match.group(1) == "ff":
        raise ValueError(f"traceparent must be a W3C traceparent (00-<32 hex>-<16 hex>-<2 hex>), got {text!r}")
    trace_id, span_id = int(match.group(2), 16), int(match.group(3), 16)
    if not trace_id or not span_id:
        raise ValueError(f"traceparent {text!r} has an all-zero trace or span id")
    return RunContext(trace_id, span_id, int(match.group(4), 16))


class RecentRuns:
    """The ``invoke_agent`` span of the last ``size`` runs this process started, by run id (a resumed run: its
    latest part), so an outcome recorded later in the process is parented to its run. Thread-safe; bounded."""

    def __init__(self, size: int = 4096) -> None:
        self._size = size
        self._runs: OrderedDict[str, RunContext] = OrderedDict()
        self._lock = threading.Lock()

    def remember(self, run_id: str, context: RunContext) -> None:
        with self._lock:
            self._runs[run_id] = context
            self._runs.move_to_end(run_id)
            while len(self._runs) > self._size:
                self._runs.popitem(last=False)

    def get(self, run_id: str) -> RunContext | None:
        with self._lock:
            return self._runs.get(run_id)


#: The runs of this process (every ``RunRecorder`` remembers its span when it opens it).
RECENT_RUNS = RecentRuns()


def remember_span(run_id: str, span: Any, agent_name: str = "") -> None:
    """Remember ``span`` (an ``invoke_agent`` span just opened) as ``run_id``'s; a non-recording span with no
    valid context (telemetry off) is not remembered. Never raises."""
    try:
        context = span.get_span_context()
        if context.is_valid:
            RECENT_RUNS.remember(
                run_id, RunContext(context.trace_id, context.span_id, int(context.trace_flags), agent_name)
            )
    except Exception:
        _log.warning("remembering the span of run %s failed; its outcome will not be parented", run_id, exc_info=True)


def outcome_attributes(
    outcome: RunOutcome, *, agent_name: str = "", content: ContentPolicy | None = None
) -> dict[str, AttributeValue]:
    """The event's attributes (module docstring); the reason only when ``content`` captures, redacted and bounded
    as captured text is."""
    attributes: dict[str, AttributeValue] = {
        n.GEN_AI_EVALUATION_NAME: n.EVALUATION_RUN_OUTCOME,
        n.GEN_AI_EVALUATION_SCORE_LABEL: outcome.outcome,
        n.RB_RUN_ID: outcome.run_id,
    }
    if outcome.score is not None:
        attributes[n.GEN_AI_EVALUATION_SCORE_VALUE] = outcome.score
    if content is not None and content.capture and outcome.reason:
        attributes[n.GEN_AI_EVALUATION_EXPLANATION] = content.text(outcome.reason)
    if agent_name:
        attributes[n.GEN_AI_AGENT_NAME] = agent_name
    return attributes


def emit_outcome(
    logger: logs.Logger,
    outcome: RunOutcome,
    context: RunContext | None,
    *,
    content: ContentPolicy | None = None,
    timestamp_ns: int | None = None,
) -> bool:
    """Emit ``outcome``'s event through ``logger``, in ``context``'s trace (none, or all-zero ids: no trace context,
    never the caller's current span); whether it was handed over. Never raises (a failure is logged)."""
    try:
        span = trace.NonRecordingSpan(context.span_context()) if context is not None else trace.INVALID_SPAN
        now = time.time_ns()
        logger.emit(
            logs.LogRecord(
                timestamp=timestamp_ns if timestamp_ns is not None else now,
                observed_timestamp=now,
                context=trace.set_span_in_context(span),
                severity_number=logs.SeverityNumber.INFO,
                event_name=n.EVENT_EVALUATION_RESULT,
                attributes=outcome_attributes(
                    outcome,
                    agent_name=context.agent_name if context is not None else "",
                    content=content,
                ),
            )
        )
    except Exception:
        _log.warning("emitting the outcome of run %s failed; continuing", outcome.run_id, exc_info=True)
        return False
    return True
