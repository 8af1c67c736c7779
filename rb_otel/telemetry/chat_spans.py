"""One run's ``chat`` spans: live ones (opened before the model call, ended when its invocation stops or fails)
and retroactive ones (built from a ``StepLogEntry`` alone, as ``SteeringSession`` and the importers record steps).
Both carry the same attributes (:func:`chat_attributes`).

Parents are given per call, not held (as in ``child_spans.py``: a reference back to the recorder would make a
reference cycle that only the garbage collector frees).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from rb_otel.telemetry import names as n
from rb_otel.telemetry.attributes import (
    Attributes,
    AttributeValue,
    ChatResponse,
    chat_attributes,
    error_type_name,
    evaluation_events,
    response_attributes,
)
from rb_otel.telemetry.batch import Batch
from rb_otel.telemetry.content import ContentPolicy
from rb_otel.telemetry.events import EventSink
from rb_otel.telemetry.run_metrics import RunMetrics
from rb_otel.telemetry.spans import Abandoned, LiveChat, ns
from rb_otel.telemetry.uploads import CompletionUploads, UploadingMessages
from rb_otel.types import FSMState, StepLogEntry

__all__ = ["ChatSpans", "EndedChat"]

_UNSET = object()


@dataclass(frozen=True, slots=True)
class EndedChat:
    """A ``chat`` span whose end is queued: what the recorder measures the step with."""

    span: Span
    duration: float  # seconds, for the duration histograms
    provider: str
    request_model: str
    response: ChatResponse | None


@dataclass(frozen=True, slots=True)
class _Ending:
    """A span about to end, either kind: what to set at the end (``None``: nothing), when, and for the metrics."""

    span: Span
    changed: Attributes | None
    end_ns: int
    duration: float
    provider: str
    request_model: str


class ChatSpans:
    """Opens, fails and ends the ``chat`` spans of one run; ``scorer`` is the run's ``rb.scorer``."""

    def __init__(
        self,
        tracer: trace.Tracer,
        content: ContentPolicy,
        metrics: RunMetrics,
        batch: Batch,
        scorer: str,
        *,
        events: EventSink,
        uploads: CompletionUploads | None = None,
    ) -> None:
        self._events = events
        self._uploads = uploads
        self._tracer = tracer
        self._content = content
        self._metrics = metrics
        self._batch = batch
        self._scorer = scorer
        self._live: dict[int, LiveChat] = {}
        self._owned: set[int] = set()  # steps whose span an invocation opened: never built again from the entry

    def open(
        self,
        entry: StepLogEntry,
        *,
        parent: otel_context.Context,
        request_model: str,
        provider: str,
        steering_ms: float | None,
        composite: float | None,
        input_messages: Any,
        monitor_scores: Mapping[str, float] | None,
        hints: Sequence[str],
        start_time: float | None = None,
        system_instruction: str | None = None,
    ) -> otel_context.Context:
        """Open the live span of ``entry.step``; returns its context. Each fired monitor is a
        ``gen_ai.evaluation.result`` event, each hint rule a ``rb.general_monitor.hint`` event. ``start_time``
        (seconds, wall clock) backdates the span for an adapter that learns of a call only once it answers."""
        attrs = self._attributes(entry, composite, steering_ms, final=False)
        if hints:
            attrs[n.RB_GENERAL_MONITOR_RULES] = list(hints)
        attrs[n.GEN_AI_OPERATION_NAME] = n.OP_CHAT
        attrs[n.GEN_AI_PROVIDER_NAME] = provider
        attrs[n.GEN_AI_REQUEST_MODEL] = request_model
        if self._content.capture and input_messages is not None:
            attrs[n.GEN_AI_INPUT_MESSAGES] = self._content.text(input_messages)
        content = self._content.split(attrs)  # the mode decides: span attributes, an event, or both
        span = self._tracer.start_span(
            f"{n.OP_CHAT} {request_model}",
            context=parent,
            kind=SpanKind.CLIENT,
            attributes=attrs,
            start_time=None if start_time is None else ns(start_time),
        )
        started = time.perf_counter() - (0.0 if start_time is None else max(time.time() - start_time, 0.0))
        for name, event_attrs in evaluation_events(entry.monitors_fired, monitor_scores or {}):
            self._events.emit(span, name, event_attrs)
        for rule in hints:
            span.add_event(n.EVENT_GENERAL_MONITOR_HINT, {n.RB_GENERAL_MONITOR_RULE: rule})
        live = LiveChat(span, started, provider, request_model, composite, entry, steering_ms, attrs, content=content)
        if self._uploads is not None and (input_messages is not None or system_instruction):
            live.uploading = UploadingMessages(input_messages, system_instruction)
        self._live[entry.step] = live
        self._owned.add(entry.step)
        return trace.set_span_in_context(span)

    def owns(self, step: int) -> bool:
        """Whether an invocation opened a span for ``step`` (live, or already ended by it)."""
        return step in self._owned

    def live(self, step: int) -> LiveChat | None:
        """The open span of ``step``, if any."""
        return self._live.get(step)

    def respond(self, step: int, response: ChatResponse | None, end_time: float | None = None) -> None:
        """Keep what the provider reported for the live span of ``step`` (set when it ends), and when the model
        answered (``end_time``, seconds: the span ends then rather than when the step is recorded)."""
        live = self._live.get(step)
        if live is not None:
            if response is not None:
                live.response = response
            live.answered_at = end_time

    def fail(self, step: int, error: BaseException, *, state: FSMState) -> None:
        """End the live span of ``step`` with the model's exception (which the caller re-raises)."""
        live = self._live.pop(step, None)
        if live is None:
            return
        try:
            error_type = _mark_failed(live.span, error)
            self._metrics.chat_failed(
                provider=live.provider,
                request_model=live.request_model,
                state=state,
                error_type=error_type,
                duration=time.perf_counter() - live.started,
                context=trace.set_span_in_context(live.span),
            )
        finally:
            live.span.end()

    def record_call(
        self,
        *,
        parent: otel_context.Context,
        source: str,
        request_model: str,
        provider: str,
        start_time: float,
        duration: float,
        state: FSMState,
        response: ChatResponse | None,
        error: BaseException | None,
    ) -> None:
        """The ``chat`` span of a model call in the run that is no step (another middleware's, a tool's, a
        subagent's): ``rb.call.source`` and what the provider reported, no ``rb.*`` step attributes; its end and
        its measurements join the batch like a step's."""
        attrs: Attributes = {
            n.GEN_AI_OPERATION_NAME: n.OP_CHAT,
            n.GEN_AI_PROVIDER_NAME: provider,
            n.RB_CALL_SOURCE: source,
        }
        if request_model:
            attrs[n.GEN_AI_REQUEST_MODEL] = request_model
        if response is not None:
            attrs.update(response_attributes(response, self._content))
        span = self._tracer.start_span(
            f"{n.OP_CHAT} {request_model}".rstrip(),
            context=parent,
            kind=SpanKind.CLIENT,
            attributes=attrs,
            start_time=ns(start_time),
        )
        if error is not None:
            _mark_failed(span, error)
        self._metrics.model_call(
            state=state,
            provider=provider,
            request_model=request_model,
            duration=duration,
            response=response,
            context=trace.set_span_in_context(span),
        )
        self._batch.end_span(span, None, time.time_ns())

    def abandon(self, *, state: FSMState) -> None:
        """End every live span still open (the run ended around it)."""
        for step in list(self._live):
            self.fail(step, Abandoned("the run ended while this model call was open"), state=state)

    def end(
        self,
        entry: StepLogEntry,
        *,
        parent: otel_context.Context,
        steering_ms: float | None,
        composite: float | None,
        end_time: float | None,
        response: ChatResponse | None,
        extra: Mapping[str, AttributeValue] | None,
        error_type: str | None,
        events: Sequence[tuple[str, Mapping[str, AttributeValue]]],
        scores: Mapping[str, float] | None,
    ) -> EndedChat:
        """Queue the end of the step's live span, or of a span built from ``entry`` alone, with its final
        attributes; ``end_time`` (seconds), ``extra``, ``error_type``, ``events`` and ``scores`` (of the fired
        monitors) are for steps built from records."""
        live = self._live.pop(entry.step, None)
        if live is not None:
            composite = live.composite if composite is None else composite
            response = live.response if live.response is not None else response
        attrs = self._attributes(entry, composite, steering_ms, final=True)
        if response is not None:
            attrs.update(response_attributes(response, self._content))
            if not response.usage_reported and not entry.tokens:
                del attrs[n.RB_TOKENS]  # no usage reported: unknown, not 0
        if extra:
            attrs.update(extra)
        content = self._content.split(attrs)
        if live is not None:
            if live.content:
                content = {**live.content, **(content or {})}
            ending = self._ending_live(live, attrs)
        else:
            ending = self._retroactive(entry, attrs, extra, end_time, parent)
        span = ending.span
        if error_type:
            span.set_attribute(n.ERROR_TYPE, error_type)
            span.set_status(Status(StatusCode.ERROR, error_type))
        for name, event_attrs in events:
            span.add_event(name, event_attrs)
        if content:
            self._events.emit(span, n.EVENT_INFERENCE_DETAILS, content, ending.end_ns)
        if live is not None and live.uploading is not None and self._uploads is not None:
            outputs, reasons = (response.output_messages, response.finish_reasons) if response else (None, ())
            self._uploads.upload(span, live.uploading, outputs, reasons)  # sets the *_ref attributes
        if live is None and entry.monitors_fired:  # a live span got its evaluation events when it began
            for name, event_attrs in evaluation_events(entry.monitors_fired, scores or {}):
                self._events.emit(span, name, event_attrs, ns(entry.timestamp))
        self._batch.end_span(span, ending.changed, ending.end_ns)
        return EndedChat(span, ending.duration, ending.provider, ending.request_model, response)

    def _attributes(
        self, entry: StepLogEntry, composite: float | None, steering_ms: float | None, *, final: bool
    ) -> Attributes:
        return chat_attributes(
            entry, composite=composite, steering_ms=steering_ms, content=self._content, final=final, scorer=self._scorer
        )

    @staticmethod
    def _ending_live(live: LiveChat, attrs: Attributes) -> _Ending:
        """A live span ends now; only the attributes that changed since it started are set again (setting one
        re-validates its value, and most were already set at ``start_span``)."""
        started = live.start_attributes
        changed = {k: v for k, v in attrs.items() if started.get(k, _UNSET) != v}
        duration = time.perf_counter() - live.started
        if live.answered_at is None:  # the usual case: the call ends now
            return _Ending(live.span, changed, time.time_ns(), duration, live.provider, live.request_model)
        late = max(time.time() - live.answered_at, 0.0)  # an adapter that learnt of the answer later
        ended_ns = time.time_ns() - int(late * 1e9)
        return _Ending(live.span, changed, ended_ns, max(duration - late, 0.0), live.provider, live.request_model)

    def _retroactive(
        self,
        entry: StepLogEntry,
        attrs: Attributes,
        extra: Mapping[str, AttributeValue] | None,
        end_time: float | None,
        parent: otel_context.Context,
    ) -> _Ending:
        """A span built from ``entry`` alone (the session's own steps, imported records), at the entry's times."""
        provider = str((extra or {}).get(n.GEN_AI_PROVIDER_NAME, ""))
        request_model = str((extra or {}).get(n.GEN_AI_REQUEST_MODEL, "")) or entry.model_id
        attrs[n.GEN_AI_OPERATION_NAME] = n.OP_CHAT
        if request_model:
            attrs[n.GEN_AI_REQUEST_MODEL] = request_model
        start = entry.timestamp
        finish = end_time if end_time is not None else start + entry.latency_ms / 1000.0
        span = self._tracer.start_span(
            f"{n.OP_CHAT} {request_model}".rstrip(),
            context=parent,
            kind=SpanKind.CLIENT,
            attributes=attrs,
            start_time=ns(start),
        )
        duration = max(finish - start, 0.0)
        return _Ending(span, None, ns(start + duration), duration, provider, request_model)


def _mark_failed(span: Span, error: BaseException) -> str:
    """Record ``error`` on ``span`` (the exception event, ``error.type``, status ERROR); returns the type."""
    error_type = error_type_name(error)
    span.record_exception(error)
    span.set_attribute(n.ERROR_TYPE, error_type)
    span.set_status(Status(StatusCode.ERROR, error_type))
    return error_type
