"""The only package that talks to OpenTelemetry: names, spans, metrics, content policy and provider setup.

Other packages reach OpenTelemetry only through what this package exports: :class:`Telemetry` (one per
configuration) gives a :class:`RunRecorder` per run, which gives a :class:`ChatInvocation` per model call and a
:class:`ToolInvocation` per tool call, each owning its span and context. Library code here imports only the
OpenTelemetry API (plus the SDK in :mod:`rb_otel.telemetry.setup`, which runs only when called explicitly).
"""

from opentelemetry.metrics import MeterProvider
from opentelemetry.trace import TracerProvider

from rb_otel.telemetry.attributes import AttributeValue
from rb_otel.telemetry.content import ContentPolicy, redact, resolve_capture
from rb_otel.telemetry.hub import EnclosingSpan, Telemetry
from rb_otel.telemetry.invocations import ChatInvocation, ToolInvocation
from rb_otel.telemetry.recorder import ChatResponse, RunInfo, RunRecorder

__all__ = [
    "AttributeValue",
    "ChatInvocation",
    "ChatResponse",
    "ContentPolicy",
    "EnclosingSpan",
    "MeterProvider",
    "RunInfo",
    "RunRecorder",
    "Telemetry",
    "ToolInvocation",
    "TracerProvider",
    "redact",
    "resolve_capture",
]
