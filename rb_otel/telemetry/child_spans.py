"""The child spans of a run besides ``chat``: ``execute_tool`` and the remote steering calls."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from rb_otel.steering.calls import OP_MONITORS_EVALUATE, CallNote
from rb_otel.telemetry import names as n
from rb_otel.telemetry.attributes import Attributes, error_type_name
from rb_otel.telemetry.batch import Batch
from rb_otel.telemetry.content import ContentPolicy
from rb_otel.telemetry.run_metrics import RunMetrics
from rb_otel.telemetry.spans import ToolCall, ns

__all__ = ["MAX_TOOL_DESCRIPTION", "ChildSpans"]

#: ``gen_ai.tool.description`` is cut to this many characters (a docstring can be a page long).
MAX_TOOL_DESCRIPTION = 1024


class ChildSpans:
    """Opens and closes one run's tool and remote-call spans under the ``parent`` context each call is given (the
    run span's; passed per call, not held: a reference back to the recorder would make the two a reference cycle,
    which only the garbage collector frees, with the run span and its attributes inside).

    Tool calls may run in parallel threads; the set of open ones is lock-guarded so a run that ends can close
    whatever is still open (``abandon_tools``).
    """

    def __init__(
        self,
        tracer: trace.Tracer,
        content: ContentPolicy,
        metrics: RunMetrics,
        batch: Batch,
        agent_name: str = "",
    ) -> None:
        self._tracer = tracer
        self._agent_name = agent_name
        self._content = content
        self._metrics = metrics
        self._batch = batch
        self._tools: set[ToolCall] = set()
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def remote_call(
        self, operation: str, *, parent: otel_context.Context, step: int, tier: str | None, server: str
    ) -> Iterator[CallNote]:
        """A ``rb.monitors.evaluate`` / ``rb.etraces.retrieve`` span around one rb-api call."""
        name = n.SPAN_MONITORS_EVALUATE if operation == OP_MONITORS_EVALUATE else n.SPAN_ETRACES_RETRIEVE
        # gen_ai.operation.name at creation, like every span rb-otel makes (backends that sample or keep spans by
        # gen_ai.* see them); these operations are ours, so the value is the span name.
        attrs: Attributes = {n.GEN_AI_OPERATION_NAME: name, n.RB_STEP: step, n.SERVER_ADDRESS: server}
        if tier:
            attrs[n.RB_ETRACE_TIER] = tier
        span = self._tracer.start_span(name, context=parent, kind=SpanKind.CLIENT, attributes=attrs)
        note = CallNote()
        try:
            yield note
        finally:
            if note.count is not None:
                span.set_attribute(n.RB_ETRACE_COUNT, note.count)
            if note.error:
                span.set_attribute(n.ERROR_TYPE, note.error)
                span.set_status(Status(StatusCode.ERROR, note.error))
            span.end()

    def start_tool(
        self,
        *,
        parent: otel_context.Context,
        step: int,
        name: str,
        call_id: str,
        arguments: Any = None,
        start_time: float | None = None,
        description: str = "",
    ) -> ToolCall:
        attrs: Attributes = {
            n.GEN_AI_OPERATION_NAME: n.OP_EXECUTE_TOOL,
            n.GEN_AI_TOOL_NAME: name,
            n.GEN_AI_TOOL_TYPE: n.TOOL_TYPE_FUNCTION,
            n.RB_STEP: step,
        }
        if self._agent_name:
            attrs[n.GEN_AI_AGENT_NAME] = self._agent_name
        if call_id:
            attrs[n.GEN_AI_TOOL_CALL_ID] = call_id
        if description:  # the tool's definition, not conversation content: recorded without capture (bounded)
            attrs[n.GEN_AI_TOOL_DESCRIPTION] = description[:MAX_TOOL_DESCRIPTION]
        if self._content.capture and arguments is not None:
            attrs[n.GEN_AI_TOOL_CALL_ARGUMENTS] = self._content.text(arguments)
        content = self._content.split(attrs)
        span = self._tracer.start_span(
            f"{n.OP_EXECUTE_TOOL} {name}",
            context=parent,
            kind=SpanKind.INTERNAL,
            attributes=attrs,
            start_time=None if start_time is None else ns(start_time),
        )
        call = ToolCall(span, name, start_time)
        call.content = content
        with self._lock:
            self._tools.add(call)
        return call

    def end_tool(
        self,
        call: ToolCall,
        *,
        result: Any = None,
        error: BaseException | str | None = None,
        end_time: float | None = None,
    ) -> None:
        """End a tool span; ``error`` is the exception raised or the error text the tool returned."""
        with self._lock:
            if call not in self._tools:
                return
            self._tools.discard(call)
        span = call.span
        try:
            error_type = None
            if error is not None:
                error_type = error_type_name(error) if isinstance(error, BaseException) else "tool_error"
                span.set_attribute(n.ERROR_TYPE, error_type)
                span.set_status(Status(StatusCode.ERROR, error_type))
                if isinstance(error, BaseException):
                    span.record_exception(error)
            if self._content.capture and result is not None:
                ended = {n.GEN_AI_TOOL_CALL_RESULT: self._content.text(result)}
                content = self._content.split(ended)
                if ended:
                    span.set_attributes(ended)
                call.content = {**(call.content or {}), **(content or {})}
            if call.content:
                span.add_event(n.EVENT_TOOL_CALL_DETAILS, call.content)
            if end_time is not None and call.start_time is not None:
                duration = max(end_time - call.start_time, 0.0)
            else:
                duration = time.perf_counter() - call.started
            self._metrics.tool(call.name, error_type, duration, trace.set_span_in_context(span))
        finally:  # the end is queued with the run's other finished work (batch.py), stamped now
            self._batch.end_span(span, None, time.time_ns() if end_time is None else ns(end_time))
        self._batch.settle()

    def abandon_tools(self) -> None:
        """End every tool span still open (the run ended around it)."""
        with self._lock:
            tools, self._tools = list(self._tools), set()
        for call in tools:
            call.span.set_attribute(n.ERROR_TYPE, "abandoned")
            call.span.set_status(Status(StatusCode.ERROR, "the run ended while this tool call was open"))
            call.span.end()
