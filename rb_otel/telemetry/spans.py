"""Small span bookkeeping used by ``RunRecorder``: open model and tool calls, time conversion, links to parts."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Span

from rb_otel.telemetry import names as n
from rb_otel.telemetry.attributes import Attributes, ChatResponse
from rb_otel.types import StepLogEntry

__all__ = ["Abandoned", "LiveChat", "ToolCall", "link_to_part", "ns"]


@dataclass(slots=True)
class LiveChat:
    """A ``chat`` span open for a step's model call, and what its end needs."""

    span: Span
    started: float
    provider: str
    request_model: str
    composite: float | None
    #: The step the call is for (completed by ``end_step`` in place) and the time its steering took.
    entry: StepLogEntry
    steering_ms: float | None
    #: The attributes the span was started with: at the end only what changed is set again.
    start_attributes: Attributes
    response: ChatResponse | None = None
    #: When the model answered (seconds, wall clock), if the adapter learnt of it later; else the span ends
    #: when its invocation stops.
    answered_at: float | None = None
    #: Content held for the span's content event (EVENT modes), added with the rest when the call ends.
    content: dict[str, Any] | None = None
    #: The messages held for a completion hook (``uploads.py``), when one is configured.
    uploading: Any = None


class ToolCall:
    """An open ``execute_tool`` span; finish it with :meth:`RunRecorder.end_tool`."""

    __slots__ = ("content", "name", "span", "start_time", "started")

    def __init__(self, span: Span, name: str, start_time: float | None = None) -> None:
        self.content: dict[str, Any] | None = None  # for the span's content event (EVENT modes)
        self.span = span
        self.name = name
        self.started = time.perf_counter()
        self.start_time = start_time


def ns(seconds: float) -> int:
    return int(seconds * 1e9)


class Abandoned(Exception):
    """Marks a span that was still open when its run ended (cancellation, abandoned stream)."""


def link_to_part(part_id: str) -> trace.Link | None:
    """A link to the ``invoke_agent`` span a ``RunRecorder.part_id`` names (``<trace id>-<span id>`` in hex), as
    a resumed part's span carries it; ``None`` for a malformed one."""
    trace_hex, _, span_hex = str(part_id).partition("-")
    try:
        sampled = trace.TraceFlags(trace.TraceFlags.SAMPLED)
        context = trace.SpanContext(int(trace_hex, 16), int(span_hex, 16), is_remote=True, trace_flags=sampled)
    except ValueError:
        return None
    return trace.Link(context, {n.RB_LINK_TYPE: n.LINK_PREVIOUS_PART}) if context.is_valid else None
