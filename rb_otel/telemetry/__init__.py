"""The only package that talks to OpenTelemetry: names, spans, metrics, content policy and provider setup.

Library code here imports only the OpenTelemetry API (plus the SDK in :mod:`rb_otel.telemetry.setup`, which
runs only when called explicitly).
"""

from rb_otel.telemetry.content import ContentPolicy, redact, resolve_capture
from rb_otel.telemetry.hub import Telemetry
from rb_otel.telemetry.recorder import ChatResponse, RunInfo, RunRecorder

__all__ = [
    "ChatResponse",
    "ContentPolicy",
    "RunInfo",
    "RunRecorder",
    "Telemetry",
    "redact",
    "resolve_capture",
]
