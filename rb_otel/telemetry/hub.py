"""``Telemetry``: the tracer, instruments and content policy shared by every run of one ``ReasonBlocks``."""

from __future__ import annotations

from opentelemetry import context as otel_context
from opentelemetry import metrics, trace

from rb_otel import __version__
from rb_otel.telemetry.content import ContentPolicy, resolve_capture
from rb_otel.telemetry.instruments import Instruments
from rb_otel.telemetry.recorder import RunInfo, RunRecorder

__all__ = ["INSTRUMENTATION_NAME", "Telemetry"]

INSTRUMENTATION_NAME = "rb_otel"


class Telemetry:
    """Builds a :class:`RunRecorder` per run from providers given here, or the global ones.

    ``enabled=False`` swaps in no-op providers: nothing is exported, local behaviour is unchanged.
    """

    def __init__(
        self,
        *,
        tracer_provider: trace.TracerProvider | None = None,
        meter_provider: metrics.MeterProvider | None = None,
        capture_content: bool | None = None,
        enabled: bool = True,
    ) -> None:
        if not enabled:
            tracer_provider = trace.NoOpTracerProvider()
            meter_provider = metrics.NoOpMeterProvider()
        self.enabled = enabled
        self.tracer_provider = tracer_provider
        self.meter_provider = meter_provider
        self.tracer = trace.get_tracer(INSTRUMENTATION_NAME, __version__, tracer_provider=tracer_provider)
        self.meter = metrics.get_meter(INSTRUMENTATION_NAME, __version__, meter_provider=meter_provider)
        self.instruments = Instruments(self.meter)
        self.content = ContentPolicy(resolve_capture(capture_content))

    def run(self, info: RunInfo, *, parent: otel_context.Context | None = None) -> RunRecorder:
        """A recorder for one run; its span opens on ``run_start`` as a child of ``parent`` (or the current span)."""
        return RunRecorder(info, tracer=self.tracer, instruments=self.instruments, content=self.content, parent=parent)
