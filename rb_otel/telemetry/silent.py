"""Providers that record nothing: for replaying runs only to measure them (``rb-otel evaluate``)."""

from __future__ import annotations

from opentelemetry import metrics, trace

__all__ = ["silent_providers"]


def silent_providers() -> tuple[trace.TracerProvider, metrics.MeterProvider]:
    """A no-op tracer and meter provider: spans and metrics are created and dropped, never exported, whatever
    global providers the process has installed."""
    return trace.NoOpTracerProvider(), metrics.NoOpMeterProvider()
