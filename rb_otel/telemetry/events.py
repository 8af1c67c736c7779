"""GenAI events as the conventions emit them: log records through the Logs API, parented to their span.

``gen_ai.evaluation.result`` (a monitor that fired) and ``gen_ai.client.inference.operation.details`` (content
captured as events) are log-based events in the GenAI conventions: a ``LogRecord`` with ``event_name``, the
attributes, and the span's context (so a backend links it to the ``chat`` span). :class:`EventSink` emits them
so, through the logger provider given to ``ReasonBlocks(logger_provider=...)`` or the global one. For this release
they also go on the span as span events (``evaluation_events="both"``, the default; ``"logs"`` or ``"span"`` for
one form only), so trace UIs, reports and queries that read span events keep working.
"""

from __future__ import annotations

from collections.abc import Mapping

from opentelemetry import _logs as logs
from opentelemetry import trace
from opentelemetry.trace import Span

from rb_otel.telemetry.attributes import AttributeValue

__all__ = ["EVENT_MODES", "EventSink"]

#: Where events go: log records (the conventions'), span events (the previous release's), or both.
EVENT_MODES = ("logs", "span", "both")


class EventSink:
    """Emits a span's GenAI events as ``mode`` says; never raises into the caller."""

    __slots__ = ("_logger", "_logs", "_spans")

    def __init__(self, logger: logs.Logger, mode: str) -> None:
        if mode not in EVENT_MODES:
            raise ValueError(f"evaluation_events must be one of {', '.join(map(repr, EVENT_MODES))}, got {mode!r}")
        self._logger = logger
        self._logs = mode in ("logs", "both")
        self._spans = mode in ("span", "both")

    @property
    def logger(self) -> logs.Logger:
        """The logger the log-based events go through (a run's outcome is always a log record: ``outcomes.py``)."""
        return self._logger

    def emit(
        self, span: Span, name: str, attributes: Mapping[str, AttributeValue], timestamp_ns: int | None = None
    ) -> None:
        """The event ``name`` of ``span``: a log record parented to it and/or a span event."""
        if self._spans:
            span.add_event(name, attributes, timestamp=timestamp_ns)
        if self._logs:
            self._logger.emit(
                logs.LogRecord(
                    timestamp=timestamp_ns,
                    context=trace.set_span_in_context(span),
                    event_name=name,
                    attributes=dict(attributes),
                )
            )
