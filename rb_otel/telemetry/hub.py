"""``Telemetry``: the tracer, instruments and content policy shared by every run of one ``ReasonBlocks``."""

from __future__ import annotations

import atexit
import contextlib
import functools
import logging
import math
import threading
import weakref
from collections.abc import Iterator
from dataclasses import dataclass

from opentelemetry import context as otel_context
from opentelemetry import metrics, trace

from rb_otel._version import __version__
from rb_otel.telemetry.batch import DEFAULT_BATCH_WINDOW
from rb_otel.telemetry.content import ContentPolicy, resolve_capture_mode
from rb_otel.telemetry.derived_ids import DerivedIds
from rb_otel.telemetry.instruments import Instruments
from rb_otel.telemetry.recorder import RunInfo, RunRecorder

__all__ = ["INSTRUMENTATION_NAME", "EnclosingSpan", "Telemetry"]

INSTRUMENTATION_NAME = "rb_otel"

_log = logging.getLogger("rb_otel.telemetry")


@dataclass(frozen=True, slots=True)
class EnclosingSpan:
    """What a caller's enclosing span tells it: the trace its runs are in (32 hex digits)."""

    trace_id: str


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
        self._settings = (tracer_provider, meter_provider, capture_content)  # for always_on()
        self._always_on: Telemetry | None = self if enabled else None
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

    def always_on(self) -> Telemetry:
        """This telemetry, or (when it was made with ``enabled=False``) one recording to the providers it was
        given, made once: what must be recorded whatever the export switch says (experiment runs)."""
        if self._always_on is None:
            tracer_provider, meter_provider, capture_content = self._settings
            self._always_on = Telemetry(
                tracer_provider=tracer_provider,
                meter_provider=meter_provider,
                capture_content=capture_content,
                batch_window=self.batch_window,
            )
        return self._always_on

    def run(self, info: RunInfo, *, parent: RunRecorder | None = None, new_trace: bool = False) -> RunRecorder:
        """A recorder for one run. Its span opens on ``run_start`` as a child of ``parent``'s run span (a sub-run),
        else of the caller's current span; ``new_trace=True`` makes it the root of a trace of its own."""
        context = parent.context if parent is not None else (otel_context.Context() if new_trace else None)
        recorder = RunRecorder(
            info,
            tracer=self.tracer,
            instruments=self.instruments,
            content=self.content,
            parent=context,
            batch_window=self.batch_window,
        )
        if self.batch_window:
            with self._lock:
                self._recorders.add(recorder)
        return recorder

    @contextlib.contextmanager
    def enclosing_span(self, name: str) -> Iterator[EnclosingSpan]:
        """A span of the caller's (a demo scenario, a batch job) made current around runs that nest under it."""
        with self.tracer.start_as_current_span(name) as span:
            yield EnclosingSpan(format(span.get_span_context().trace_id, "032x"))

    def derived_ids(self) -> DerivedIds:
        """Make this object's tracer take span and trace ids from :meth:`DerivedIds.seeded` blocks (replays that
        must give the same ids every time); outside such a block ids stay random. A no-op tracer is left alone."""
        fallback = getattr(self.tracer, "id_generator", None)
        ids = DerivedIds(fallback)
        if fallback is not None:  # the SDK tracer: our own instance, nobody else's
            self.tracer.id_generator = ids  # type: ignore[attr-defined]
        return ids

    def flush_providers(self, timeout: float = 5.0) -> None:
        """Do the finished work runs in flight are batching, then force-flush the tracer and meter providers
        (given here, else the global ones) when they can; a provider that fails is logged, never raised. The
        :meth:`always_on` telemetry of a disabled one is flushed with it."""
        self.flush()
        if self._always_on is not None and self._always_on is not self:
            self._always_on.flush_providers(timeout)
        providers = (
            self.tracer_provider or trace.get_tracer_provider(),
            self.meter_provider or metrics.get_meter_provider(),
        )
        for provider in providers:
            force_flush = getattr(provider, "force_flush", None)
            if force_flush is None:
                continue
            try:
                force_flush(int(timeout * 1000))
            except Exception:
                _log.warning("flushing %s failed", type(provider).__name__, exc_info=True)

    def _watch_exit(self) -> None:
        with _BATCHING_LOCK:  # functools.cache alone may run it twice under a race
            _register_exit_hook()
            _BATCHING.add(self)

    def flush(self) -> None:
        """Do the finished work every run in flight is batching (a run does its own when it ends)."""
        if self._always_on is not None and self._always_on is not self:
            self._always_on.flush()
        with self._lock:
            recorders = list(self._recorders)
        for recorder in recorders:
            recorder.flush()
