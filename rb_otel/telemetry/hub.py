"""``Telemetry``: the tracer, instruments and content policy shared by every run of one ``ReasonBlocks``."""

from __future__ import annotations

import math
import threading
import weakref

from opentelemetry import context as otel_context
from opentelemetry import metrics, trace

from rb_otel import __version__
from rb_otel.telemetry.content import ContentPolicy, resolve_capture
from rb_otel.telemetry.instruments import Instruments
from rb_otel.telemetry.recorder import RunInfo, RunRecorder
from rb_otel.telemetry.run_metrics import DEFAULT_BATCH_WINDOW

__all__ = ["INSTRUMENTATION_NAME", "Telemetry"]

INSTRUMENTATION_NAME = "rb_otel"


class Telemetry:
    """Builds a :class:`RunRecorder` per run from providers given here, or the global ones.

    ``enabled=False`` swaps in no-op providers: nothing is exported, local behaviour is unchanged.
    ``metrics_batch_window`` (seconds, ``0`` to turn it off): how long a quickly stepping run may batch the
    measurements of its finished steps and tools before recording them (``run_metrics``).
    """

    def __init__(
        self,
        *,
        tracer_provider: trace.TracerProvider | None = None,
        meter_provider: metrics.MeterProvider | None = None,
        capture_content: bool | None = None,
        enabled: bool = True,
        metrics_batch_window: float = DEFAULT_BATCH_WINDOW,
    ) -> None:
        if (
            isinstance(metrics_batch_window, bool)
            or not isinstance(metrics_batch_window, int | float)
            or not math.isfinite(metrics_batch_window)
            or metrics_batch_window < 0
        ):
            raise ValueError(f"metrics_batch_window must be finite seconds >= 0, got {metrics_batch_window!r}")
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
        self.metrics_batch_window = float(metrics_batch_window)
        self._recorders: weakref.WeakSet[RunRecorder] = weakref.WeakSet()  # for flush_metrics(); never keeps one alive
        self._lock = threading.Lock()

    def run(self, info: RunInfo, *, parent: otel_context.Context | None = None) -> RunRecorder:
        """A recorder for one run; its span opens on ``run_start`` as a child of ``parent`` (or the current span)."""
        recorder = RunRecorder(
            info,
            tracer=self.tracer,
            instruments=self.instruments,
            content=self.content,
            parent=parent,
            metrics_batch_window=self.metrics_batch_window,
        )
        if self.metrics_batch_window:
            with self._lock:
                self._recorders.add(recorder)
        return recorder

    def flush_metrics(self) -> None:
        """Record the measurements every run in flight is batching (a run records its own when it ends)."""
        with self._lock:
            recorders = list(self._recorders)
        for recorder in recorders:
            recorder.flush_metrics()
