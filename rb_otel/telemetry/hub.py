"""``Telemetry``: the tracer, instruments and content policy shared by every run of one ``ReasonBlocks``."""

from __future__ import annotations

import atexit
import functools
import math
import threading
import weakref

from opentelemetry import context as otel_context
from opentelemetry import metrics, trace

from rb_otel import __version__
from rb_otel.telemetry.batch import DEFAULT_BATCH_WINDOW
from rb_otel.telemetry.content import ContentPolicy, resolve_capture_mode
from rb_otel.telemetry.instruments import Instruments
from rb_otel.telemetry.recorder import RunInfo, RunRecorder

__all__ = ["INSTRUMENTATION_NAME", "Telemetry"]

INSTRUMENTATION_NAME = "rb_otel"

_BATCHING: weakref.WeakSet[Telemetry] = weakref.WeakSet()
_BATCHING_LOCK = threading.Lock()


def _flush_at_exit() -> None:
    # Registered when the first batching Telemetry is made, i.e. after the providers it was given, so it runs
    # before their own exit hooks (atexit is last-in, first-out) and what runs in flight hold still goes out.
    with _BATCHING_LOCK:
        hubs = list(_BATCHING)
    for hub in hubs:
        hub.flush()


@functools.cache
def _register_exit_hook() -> None:
    atexit.register(_flush_at_exit)


class Telemetry:
    """Builds a :class:`RunRecorder` per run from providers given here, or the global ones.

    ``enabled=False`` swaps in no-op providers: nothing is exported, local behaviour is unchanged.
    ``batch_window`` (seconds, ``0`` to turn it off): how long a quickly stepping run may hold the finished work
    of its steps and tools (metric records, span ends) before doing it (``batch.py``).
    """

    def __init__(
        self,
        *,
        tracer_provider: trace.TracerProvider | None = None,
        meter_provider: metrics.MeterProvider | None = None,
        capture_content: bool | str | None = None,
        enabled: bool = True,
        batch_window: float = DEFAULT_BATCH_WINDOW,
    ) -> None:
        if (
            isinstance(batch_window, bool)
            or not isinstance(batch_window, int | float)
            or not math.isfinite(batch_window)
            or batch_window < 0
        ):
            # named as ReasonBlocks(telemetry_batch_window=...) calls it, where users set it
            raise ValueError(f"batch_window (telemetry_batch_window) must be finite seconds >= 0, got {batch_window!r}")
        if not enabled:
            tracer_provider = trace.NoOpTracerProvider()
            meter_provider = metrics.NoOpMeterProvider()
        self.enabled = enabled
        self.tracer_provider = tracer_provider
        self.meter_provider = meter_provider
        self.tracer = trace.get_tracer(INSTRUMENTATION_NAME, __version__, tracer_provider=tracer_provider)
        self.meter = metrics.get_meter(INSTRUMENTATION_NAME, __version__, meter_provider=meter_provider)
        self.instruments = Instruments(self.meter)
        self.content = ContentPolicy(resolve_capture_mode(capture_content))
        self.batch_window = float(batch_window)
        self._recorders: weakref.WeakSet[RunRecorder] = weakref.WeakSet()  # for flush(); never keeps one alive
        self._lock = threading.Lock()
        if self.batch_window:
            self._watch_exit()

    def run(self, info: RunInfo, *, parent: otel_context.Context | None = None) -> RunRecorder:
        """A recorder for one run; its span opens on ``run_start`` as a child of ``parent`` (or the current span)."""
        recorder = RunRecorder(
            info,
            tracer=self.tracer,
            instruments=self.instruments,
            content=self.content,
            parent=parent,
            batch_window=self.batch_window,
        )
        if self.batch_window:
            with self._lock:
                self._recorders.add(recorder)
        return recorder

    def _watch_exit(self) -> None:
        with _BATCHING_LOCK:  # functools.cache alone may run it twice under a race
            _register_exit_hook()
            _BATCHING.add(self)

    def flush(self) -> None:
        """Do the finished work every run in flight is batching (a run does its own when it ends)."""
        with self._lock:
            recorders = list(self._recorders)
        for recorder in recorders:
            recorder.flush()
