"""Spans and metrics for one run: the OpenTelemetry side of the ``StepEmitter`` interface.

One :class:`RunRecorder` per run owns the ``invoke_agent`` span, parents every ``chat`` and ``execute_tool``
span to it explicitly (LangGraph runs each node in its own context), keeps the run summary, and records the
metrics of ``telemetry.md``. The ``chat`` spans are ``chat_spans.ChatSpans``' (live or retroactive), the tool
and rb-api call spans ``child_spans.ChildSpans``'; the recorder orders the work and keeps the run's books.

Every method is called on the agent's thread and must not raise: failures are logged and dropped.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import weakref
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry import _logs as logs
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode
from opentelemetry.util.types import AttributeValue

from rb_otel.steering.calls import CallNote
from rb_otel.steering.emitters import StepEmitter
from rb_otel.telemetry import names as n
from rb_otel.telemetry.attributes import (
    ChatResponse,
    RunInfo,
    chat_attributes,
    error_type_name,
    error_type_of,
    outcome_label,
)
from rb_otel.telemetry.batch import DEFAULT_BATCH_WINDOW, Batch
from rb_otel.telemetry.chat_spans import ChatSpans
from rb_otel.telemetry.child_spans import ChildSpans
from rb_otel.telemetry.content import ContentPolicy
from rb_otel.telemetry.events import EventSink
from rb_otel.telemetry.instruments import Instruments
from rb_otel.telemetry.invocations import ChatInvocation, ToolInvocation
from rb_otel.telemetry.outcomes import RunContext, RunOutcome, emit_outcome, remember_span
from rb_otel.telemetry.run_metrics import RunMetrics
from rb_otel.telemetry.run_tally import RunTally
from rb_otel.telemetry.spans import ToolCall, link_to_part, ns
from rb_otel.telemetry.uploads import CompletionUploads
from rb_otel.types import FSMState, StepLogEntry

__all__ = [
    "ChatInvocation",
    "ChatResponse",
    "RunInfo",
    "RunRecorder",
    "ToolInvocation",
    "chat_attributes",
    "outcome_label",
]

_log = logging.getLogger("rb_otel.telemetry")


class RunRecorder(StepEmitter):
    """The telemetry of one run: the session's ``StepEmitter``, and the invocations integrations open for live
    model and tool calls (:meth:`start_chat`, :meth:`start_tool`). A span is ended by what started it: an
    invocation's ``stop``/``fail``/``interrupt``, or, for a step with no live call, the ``step`` that builds it."""

    def __init__(
        self,
        info: RunInfo,
        *,
        tracer: trace.Tracer,
        instruments: Instruments,
        content: ContentPolicy,
        parent: otel_context.Context | None = None,
        batch_window: float = DEFAULT_BATCH_WINDOW,
        events: EventSink | None = None,
        uploads: CompletionUploads | None = None,
        links: Sequence[str] = (),
    ) -> None:
        self.info = info
        self._links = tuple(links)  # earlier parts of this run (part_id strings), linked from the run span
        self._tracer = tracer
        self._content = content
        self._parent = parent
        self._batch = Batch(batch_window)  # finished work done in batches while the run steps fast (batch.py)
        # a run dropped without an end still ends the spans its batch holds (what had finished is not lost)
        weakref.finalize(self, self._batch.close)
        self._metrics = RunMetrics(instruments, info.agent_name, self._batch, experiment=info.experiment)
        self._lock = threading.Lock()
        self._span: Span | None = None
        self._part_id: str | None = None  # once the run span is open (its context never changes)
        self._ctx: otel_context.Context | None = None
        self._started_perf = 0.0
        self._started_wall = 0.0
        self._finished = False
        self._children = ChildSpans(tracer, content, self._metrics, self._batch, info.agent_name)
        events = events if events is not None else EventSink(logs.get_logger(__name__), "logs")
        self._events = events
        self._chats = ChatSpans(
            tracer, content, self._metrics, self._batch, info.scorer, events=events, uploads=uploads
        )
        self.summary = RunTally()

    @property
    def finished(self) -> bool:
        return self._finished

    @property
    def started(self) -> bool:
        """The run span is open or was (``run_start`` happened)."""
        return self._span is not None

    @property
    def context(self) -> otel_context.Context:
        """The context child spans are parented to (the run span's; opened on first use)."""
        if self._ctx is None:
            self.run_start(self.info.run_id, {})
        assert self._ctx is not None
        return self._ctx

    def _run_span(self) -> Span:
        """The run span, opened on first use."""
        if self._span is None:
            self.run_start(self.info.run_id, {})
        assert self._span is not None
        return self._span

    # -- StepEmitter ---------------------------------------------------------------------------------------

    def run_start(self, run_id: str, metadata: Mapping[str, Any], *, start_time: float | None = None) -> None:
        """Open the ``invoke_agent`` span (once) as a child of ``parent`` or the caller's current span."""
        if self._span is not None:
            return
        name = f"{n.OP_INVOKE_AGENT} {self.info.agent_name}" if self.info.agent_name else n.OP_INVOKE_AGENT
        self._span = self._tracer.start_span(
            name,
            context=self._parent,
            kind=SpanKind.INTERNAL,
            attributes=self.info.start_attributes(),
            start_time=None if start_time is None else ns(start_time),
            links=[link for link in map(link_to_part, self._links) if link is not None],
        )
        self._ctx = trace.set_span_in_context(self._span)
        remember_span(self.info.run_id, self._span, self.info.agent_name)  # for an outcome recorded later
        self._started_perf = time.perf_counter()
        self._started_wall = time.time() if start_time is None else start_time
        self._metrics.started(self.summary.state)

    def step(
        self,
        run_id: str,
        entry: StepLogEntry,
        *,
        steering_ms: float | None = None,
        composite: float | None = None,
        monitor_scores: Mapping[str, float] | None = None,
        end_time: float | None = None,
        response: ChatResponse | None = None,
        extra: Mapping[str, AttributeValue] | None = None,
        error_type: str | None = None,
        events: Sequence[tuple[str, Mapping[str, AttributeValue]]] = (),
    ) -> None:
        """A step ended: build its ``chat`` span from ``entry`` (started and ended here) and record its metrics;
        each fired monitor becomes a ``gen_ai.evaluation.result`` event with its score from ``monitor_scores``.

        A step whose model call has a live invocation (:meth:`start_chat`) is left to it: its span ends, and the
        step is measured, when the invocation stops. ``end_time`` (seconds), ``response``, ``extra`` attributes,
        ``error_type`` and span ``events`` are for steps built from records (importers). Never raises.
        """
        if self._chats.owns(entry.step):
            return
        self._record_step(
            entry,
            steering_ms=steering_ms,
            composite=composite,
            scores=monitor_scores,
            end_time=end_time,
            response=response,
            extra=extra,
            error_type=error_type,
            events=events,
        )

    def _record_step(
        self,
        entry: StepLogEntry,
        *,
        steering_ms: float | None,
        composite: float | None,
        scores: Mapping[str, float] | None = None,
        end_time: float | None = None,
        response: ChatResponse | None = None,
        extra: Mapping[str, AttributeValue] | None = None,
        error_type: str | None = None,
        events: Sequence[tuple[str, Mapping[str, AttributeValue]]] = (),
    ) -> None:
        """End the step's span (its live one, or one built from ``entry``) and record the step's measurements.

        The span's end and the step's measurements join the run's batch (``batch.py``): done at once unless the
        run steps faster than its batch window.
        """
        try:
            previous = self.summary.state
            state = FSMState(entry.fsm_state) if entry.fsm_state else previous
            ended = self._chats.end(  # queued first: the span ends whatever follows
                entry,
                parent=self.context,
                steering_ms=steering_ms,
                composite=composite,
                end_time=end_time,
                response=response,
                extra=extra,
                error_type=error_type,
                events=events,
                scores=scores,
            )
            self.summary.count(entry, ended.response)
            self._metrics.step(
                entry,
                provider=ended.provider,
                request_model=ended.request_model,
                duration=ended.duration,
                steering_ms=steering_ms,
                response=ended.response,
                context=trace.set_span_in_context(ended.span),
            )
            if state is not previous:
                self._transition(previous, state, entry)
            self._batch.settle()
        except Exception:
            _log.warning("recording step %s failed; continuing", entry.step, exc_info=True)

    def stopped(self, run_id: str, entry: StepLogEntry) -> None:
        """The steering layer stopped the run at ``entry`` instead of making its model call (``on_skip="stop"``):
        no ``chat`` span and no model-call metrics; the state it reached is recorded (transition event, SKIP
        metrics) and a ``rb.run.stopped`` event goes on the run span. Never raises."""
        try:
            previous = self.summary.state
            state = FSMState(entry.fsm_state) if entry.fsm_state else previous
            if state is not previous:
                self._transition(previous, state, entry)
            self._run_span().add_event(
                n.EVENT_RUN_STOPPED, {n.RB_STEP: entry.step, n.RB_FSM_STATE: state.value}, timestamp=ns(entry.timestamp)
            )
        except Exception:
            _log.warning("recording the stop of run %s failed; continuing", self.info.run_id, exc_info=True)

    def token_saving(self, *, chars_saved: int, compressions: int, early_exits: int) -> None:
        """What ``TokenSavingMiddleware`` removed from this run's history so far (deltas): the counter now, the
        run span's totals (``rb.token_saving.*``) when it ends."""
        self.summary.token_saving(chars_saved, compressions, early_exits)
        self._metrics.token_saving(chars_saved)

    def run_finish(
        self,
        run_id: str,
        outcome: str,
        *,
        risk: float | None = None,
        error: BaseException | None = None,
        end_time: float | None = None,
    ) -> None:
        """End the run span with its summary (idempotent: the first end wins); ends any child span still open.
        ``risk`` is the run-level risk (``rb.risk``), ``error`` what ended a failed run, ``end_time`` (seconds) when
        a recorded run ended."""
        with self._lock:
            if self._finished:
                return
            self._finished = True
        try:
            if risk is not None:
                self.summary.risk = float(risk)
            self._finish(outcome, error=error, end_time=end_time)
        except Exception:
            _log.warning("finishing run %s failed", self.info.run_id, exc_info=True)

    def close(self, timeout: float = 5.0) -> None:
        """Do the finished work this run is batching (``batch.py``); the providers own export."""
        self.flush()

    def outcome(self, run_id: str, outcome: str, *, score: float | None = None, reason: str | None = None) -> None:
        """The run's outcome, as a ``gen_ai.evaluation.result`` log event parented to the run span (``outcomes.py``;
        the reason only when content is captured). Never raises."""
        context = self._span.get_span_context() if self._span is not None else trace.INVALID_SPAN_CONTEXT
        where = RunContext(context.trace_id, context.span_id, int(context.trace_flags), self.info.agent_name)
        if emit_outcome(self._events.logger, RunOutcome(run_id, outcome, score, reason),
                        where if context.is_valid else None, content=self._content):  # fmt: skip
            self._metrics.outcome_recorded(outcome)

    @property
    def pending(self) -> int:
        """Finished work this run is holding in its batch."""
        return self._batch.pending

    def flush(self) -> None:
        """Record the measurements and end the spans this run is batching, now; never raises."""
        self._batch.flush()

    # -- live model calls ------------------------------------------------------------------------------------

    def start_chat(
        self,
        entry: StepLogEntry,
        *,
        request_model: str,
        provider: str,
        steering_ms: float | None = None,
        composite: float | None = None,
        input_messages: Any = None,
        monitor_scores: Mapping[str, float] | None = None,
        hints: Sequence[str] = (),
        current: bool = True,
        start_time: float | None = None,
        system_instruction: str | None = None,
    ) -> ChatInvocation:
        """Open the live ``chat`` span of ``entry.step``, current until the returned invocation stops or fails (so
        provider SDK spans nest under it; ``current=False`` for an adapter whose start and end run in different
        contexts, e.g. callbacks on separate tasks; ``start_time``, seconds, backdates a call the adapter learns of
        only once it has answered). Each monitor in ``entry.monitors_fired`` becomes a
        ``gen_ai.evaluation.result`` event with its score from ``monitor_scores``; each rule in ``hints`` (hints a
        companion middleware added to this call's messages) a ``rb.general_monitor.hint`` event. With a completion
        hook (``uploads.py``), ``input_messages`` and ``system_instruction`` go to it when the call ends."""
        context = self._chats.open(
            entry,
            parent=self.context,
            request_model=request_model,
            provider=provider,
            steering_ms=steering_ms,
            composite=composite,
            input_messages=input_messages,
            monitor_scores=monitor_scores,
            hints=hints,
            start_time=start_time,
            system_instruction=system_instruction,
        )
        return ChatInvocation(self, entry.step, context if current else None)

    def _chat_stopped(
        self, step: int, response: ChatResponse | None, entry: StepLogEntry | None, end_time: float | None
    ) -> None:
        """End the live ``chat`` span of ``step`` with what the provider reported, and measure the step."""
        live = self._chats.live(step)
        if live is None:
            return
        self._chats.respond(step, response, end_time)
        self._record_step(entry or live.entry, steering_ms=live.steering_ms, composite=live.composite)

    def _chat_interrupted(self, entry: StepLogEntry, steering_ms: float | None) -> None:
        self._record_step(entry, steering_ms=steering_ms, composite=None)

    def _chat_failed(self, step: int, error: BaseException) -> None:
        """End the live ``chat`` span of ``step`` with the model's exception (which the caller re-raises)."""
        self._chats.fail(step, error, state=self.summary.state)
        self._batch.settle()

    # -- model calls that are not steps ------------------------------------------------------------------

    def model_call(
        self,
        *,
        source: str,
        request_model: str,
        provider: str,
        start_time: float,
        duration: float,
        tokens: int = 0,
        response: ChatResponse | None = None,
        error: BaseException | None = None,
    ) -> None:
        """A model call inside the run that is no steering step (a middleware's summarizer, a tool's or a
        subagent's model): a ``chat`` span under the run with ``rb.call.source`` and its usage, its tokens in the
        run's totals; no step, no FSM state, no guidance. Never raises."""
        try:
            self._chats.record_call(
                parent=self.context,
                source=source,
                request_model=request_model,
                provider=provider,
                start_time=start_time,
                duration=duration,
                state=self.summary.state,
                response=response,
                error=error,
            )
            if error is None:
                self.summary.add_usage(tokens, response)
            self._batch.settle()
        except Exception:
            _log.warning("recording a model call of run %s failed; continuing", self.info.run_id, exc_info=True)

    # -- remote steering calls ---------------------------------------------------------------------------

    def remote_call(
        self, operation: str, *, step: int, tier: str | None, server: str
    ) -> contextlib.AbstractContextManager[CallNote]:
        """A ``rb.monitors.evaluate`` / ``rb.etraces.retrieve`` span around one rb-api call."""
        return self._children.remote_call(operation, parent=self.context, step=step, tier=tier, server=server)

    # -- tools -------------------------------------------------------------------------------------------

    def start_tool(
        self,
        *,
        step: int,
        name: str,
        call_id: str,
        arguments: Any = None,
        start_time: float | None = None,
        current: bool = True,
        description: str = "",
    ) -> ToolInvocation:
        """Open an ``execute_tool`` span under the run; with ``current`` it is the current span until the returned
        invocation ends (spans the tool makes nest under it). ``start_time`` (seconds) is for recorded calls;
        ``description`` is the tool's own (``gen_ai.tool.description``, recorded without content capture)."""
        call = self._children.start_tool(
            parent=self.context,
            step=step,
            name=name,
            call_id=call_id,
            arguments=arguments,
            start_time=start_time,
            description=description,
        )
        return ToolInvocation(self, call, trace.set_span_in_context(call.span) if current else None)

    def _end_tool(
        self,
        call: ToolCall,
        *,
        result: Any = None,
        error: BaseException | str | None = None,
        end_time: float | None = None,
    ) -> None:
        self._children.end_tool(call, result=result, error=error, end_time=end_time)

    # -- the run span ------------------------------------------------------------------------------------

    @property
    def trace_id(self) -> str:
        """The run's trace id as 32 hex digits (``""`` before the run span opened)."""
        return format(self._span.get_span_context().trace_id, "032x") if self._span is not None else ""

    @property
    def part_id(self) -> str:
        """This part of the run (its ``invoke_agent`` span) as ``<trace id>-<span id>`` in hex: what the part that
        resumes the run links to (each step log entry carries it, kept in the agent's graph state, so another
        process can). ``""`` before the run span opened or for a span that is not recorded."""
        if self._part_id is None:
            if self._span is None:
                return ""
            context = self._span.get_span_context()
            self._part_id = f"{context.trace_id:032x}-{context.span_id:016x}" if context.is_valid else ""
        return self._part_id

    def set_run_attributes(self, attributes: Mapping[str, AttributeValue]) -> None:
        """Add attributes to the run span (records' own run attributes, the experiment arm, ...)."""
        if attributes:
            self._run_span().set_attributes(attributes)

    def add_run_event(self, name: str, attributes: Mapping[str, AttributeValue]) -> None:
        """Add an event to the run span."""
        self._run_span().add_event(name, attributes)

    # -- internals ---------------------------------------------------------------------------------------

    def _transition(self, previous: FSMState, state: FSMState, entry: StepLogEntry) -> None:
        first_skip = self.summary.enter(state)
        if self._span is not None:
            self._span.add_event(
                n.EVENT_FSM_TRANSITION,
                {n.RB_STEP: entry.step, n.RB_FSM_FROM: previous.value, n.RB_FSM_TO: state.value},
                timestamp=ns(entry.timestamp),
            )
        self._metrics.transition(previous, state, active=not self._finished)
        if first_skip:
            self._metrics.entered_skip()

    def _finish(self, outcome: str, *, error: BaseException | None, end_time: float | None) -> None:
        span = self._run_span()
        self._chats.abandon(state=self.summary.state)
        self._children.abandon_tools()
        label = outcome_label(outcome)
        span.set_attributes(self.summary.attributes(outcome))
        if label == n.OUTCOME_FAILURE:
            error_type = error_type_name(error) if error is not None else error_type_of(outcome)
            span.set_attribute(n.ERROR_TYPE, error_type)
            span.set_status(Status(StatusCode.ERROR, error_type))
            if error is not None:
                span.record_exception(error)
        if end_time is None:
            duration = time.perf_counter() - self._started_perf
        else:
            duration = max(end_time - self._started_wall, 0.0)
        self._batch.close()  # the child spans end and the steps are recorded before the run's own (never raises)
        try:
            self._metrics.finished(
                state=self.summary.state,
                outcome_label=label,
                max_state=self.summary.max_state,
                duration=duration,
                tokens=self.summary.tokens if self.summary.usage_known else None,
                context=self._ctx,
            )
        finally:  # the run span ends whatever the meter does
            span.end(end_time=None if end_time is None else ns(end_time))
