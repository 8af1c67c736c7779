"""``Telemetry``: the tracer, instruments and content policy shared by every run of one ``ReasonBlocks``."""

from __future__ import annotations

import atexit
import contextlib
import logging
import math
import threading
import weakref
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from opentelemetry import _logs as logs
from opentelemetry import context as otel_context
from opentelemetry import metrics, trace

from rb_otel import process_exit
from rb_otel._version import __version__
from rb_otel.telemetry.batch import DEFAULT_BATCH_WINDOW
from rb_otel.telemetry.content import ContentPolicy, resolve_capture_mode
from rb_otel.telemetry.derived_ids import DerivedIds
from rb_otel.telemetry.events import EventSink
from rb_otel.telemetry.instruments import Instruments
from rb_otel.telemetry.recorder import RunInfo, RunRecorder
from rb_otel.telemetry.unexported import warn_if_unexported
from rb_otel.telemetry.uploads import completion_uploads

__all__ = [
    "INSTRUMENTATION_NAME",
    "REPLAY_SCOPE_ATTRIBUTE",
    "SCHEMA_URL",
    "EnclosingSpan",
    "Telemetry",
    "global_instruments",
]

INSTRUMENTATION_NAME = "rb_otel"
#: The semantic conventions the telemetry follows (``schema_url`` of the tracer, the meter and the logger).
SCHEMA_URL = "https://opentelemetry.io/schemas/1.41.0"
#: The instrumentation-scope attribute of the tracer replays use (a scope of its own: see ``derived_ids``).
REPLAY_SCOPE_ATTRIBUTE = "rb.replay"

_log = logging.getLogger("rb_otel.telemetry")


def global_instruments() -> Instruments:
    """Instruments on the global meter provider, for a command with no providers of its own (``rb-otel label``): the
    provider ``opentelemetry-instrument`` or the caller set up, else a no-op (plain SDK counters: nothing to sum)."""
    meter = metrics.get_meter(INSTRUMENTATION_NAME, __version__, schema_url=SCHEMA_URL)
    return Instruments(meter, summed=False)


@dataclass(frozen=True, slots=True)
class EnclosingSpan:
    """What a caller's enclosing span tells it: the trace its runs are in (32 hex digits)."""

    trace_id: str


#: An observable instrument that reports nothing: its callback flushes runs' batches before each collection.
BATCH_FLUSH_INSTRUMENT = "rb.internal.batch_flush"
_FLUSH_DESCRIPTION = "Never reports a value: flushes rb-otel's batched measurements before each collection"

_BATCHING: weakref.WeakSet[Telemetry] = weakref.WeakSet()
_BATCHING_LOCK = threading.Lock()
_ALL: weakref.WeakSet[Telemetry] = weakref.WeakSet()  # every hub, for the way out (process_exit)

#: The outcome of a run still in flight when the process got SIGTERM (``rb.outcome`` ``failure``,
#: ``error.type`` ``SIGTERM``).
OUTCOME_TERMINATED = "failure: SIGTERM"


def _on_the_way_out(timeout: float, terminating: bool) -> None:
    """``process_exit`` callback: on SIGTERM end the runs in flight as failures; then do every run's batched work
    and force-flush the providers (a worker's ``os._exit`` skips the SDK's own ``atexit`` shutdown)."""
    with _BATCHING_LOCK:
        hubs = list(_ALL)
    for hub in hubs:
        if terminating:
            hub.end_runs_in_flight(OUTCOME_TERMINATED)
        hub.flush_providers(timeout)


def _flush_at_exit() -> None:
    # Must run before the providers' own exit hooks (atexit is last-in, first-out): registered again whenever a
    # Telemetry meets a provider it had not seen (at a run's start), so it stays after every provider made before.
    with _BATCHING_LOCK:
        hubs = list(_BATCHING)
    for hub in hubs:
        hub.flush()


def _register_exit_hook() -> None:
    """(Re-)register the exit flush last, so it runs first (lock held)."""
    atexit.unregister(_flush_at_exit)
    atexit.register(_flush_at_exit)


class _RunFlushProcessor:
    """A span processor (duck-typed: the SDK calls these methods) registered with an SDK tracer provider a
    :class:`Telemetry` records to, so ``provider.force_flush()`` also does what runs in flight are batching: it
    ends their finished spans, then flushes the provider again so those spans are exported too."""

    def __init__(self, hub: Telemetry, provider: Any) -> None:
        self._hub = weakref.ref(hub)
        self._provider = weakref.ref(provider)
        self._inside = threading.local()

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        return None

    def _on_ending(self, span: Any) -> None:
        return None

    def on_end(self, span: Any) -> None:
        return None

    def shutdown(self) -> None:
        hub = self._hub()
        if hub is not None:
            hub.flush()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        hub, provider = self._hub(), self._provider()
        if hub is None or provider is None or getattr(self._inside, "active", False) or not hub.pending:
            return True
        hub.flush()
        self._inside.active = True
        try:  # the spans just ended reached the processors that flushed before this one: flush them again
            result = provider.force_flush(timeout_millis)
        finally:
            self._inside.active = False
        return bool(result)


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
        logger_provider: Any = None,
        evaluation_events: str = "both",
        completion_hook: Any = None,
    ) -> None:
        if (
            isinstance(batch_window, bool)
            or not isinstance(batch_window, int | float)
            or not math.isfinite(batch_window)
            or batch_window < 0
        ):
            # named as ReasonBlocks(telemetry_batch_window=...) calls it, where users set it
            raise ValueError(f"batch_window (telemetry_batch_window) must be finite seconds >= 0, got {batch_window!r}")
        self._settings = (tracer_provider, meter_provider, capture_content, logger_provider, evaluation_events)
        self._completion_hook = completion_hook
        self._always_on: Telemetry | None = self if enabled else None
        if not enabled:
            tracer_provider = trace.NoOpTracerProvider()
            meter_provider = metrics.NoOpMeterProvider()
            logger_provider = logs.NoOpLoggerProvider()
        self.enabled = enabled
        self.tracer_provider = tracer_provider
        self.meter_provider = meter_provider
        self.tracer = trace.get_tracer(
            INSTRUMENTATION_NAME, __version__, tracer_provider=tracer_provider, schema_url=SCHEMA_URL
        )
        self.meter = metrics.get_meter(
            INSTRUMENTATION_NAME, __version__, meter_provider=meter_provider, schema_url=SCHEMA_URL
        )
        self.logger_provider = logger_provider
        logger = logs.get_logger(
            INSTRUMENTATION_NAME, __version__, logger_provider=logger_provider, schema_url=SCHEMA_URL
        )
        self.events = EventSink(logger, evaluation_events)
        self.instruments = Instruments(self.meter)
        self.content = ContentPolicy(resolve_capture_mode(capture_content))
        #: The completion hook each live ``chat`` span's messages go to (``uploads.py``), if one is configured.
        self.uploads = completion_uploads(completion_hook) if enabled else None
        self.batch_window = float(batch_window)
        self._recorders: weakref.WeakSet[RunRecorder] = weakref.WeakSet()  # for flush(); never keeps one alive
        self._lock = threading.Lock()
        self._providers_seen: set[int] = set()
        self._export_checked = False  # whether a run checked that the environment's export is configured
        with _BATCHING_LOCK:
            _ALL.add(self)
        if self.batch_window:
            self._watch_exit()
            # A collection (a periodic export, a Prometheus scrape, force_flush) first runs the callbacks of
            # observable instruments: this one does the batched work, so the collection sees its measurements.
            self.meter.create_observable_up_down_counter(
                BATCH_FLUSH_INSTRUMENT, callbacks=[self._flush_for_collection], description=_FLUSH_DESCRIPTION
            )

    def always_on(self) -> Telemetry:
        """This telemetry, or (when it was made with ``enabled=False``) one recording to the providers it was
        given, made once: what must be recorded whatever the export switch says (experiment runs)."""
        if self._always_on is None:
            tracer_provider, meter_provider, capture_content, logger_provider, events = self._settings
            self._always_on = Telemetry(
                tracer_provider=tracer_provider,
                meter_provider=meter_provider,
                capture_content=capture_content,
                batch_window=self.batch_window,
                logger_provider=logger_provider,
                evaluation_events=events,
                completion_hook=self._completion_hook,
            )
        return self._always_on

    def run(
        self,
        info: RunInfo,
        *,
        parent: RunRecorder | None = None,
        new_trace: bool = False,
        links: Sequence[str] = (),
    ) -> RunRecorder:
        """A recorder for one run. Its span opens on ``run_start`` as a child of ``parent``'s run span (a sub-run),
        else of the caller's current span; ``new_trace=True`` makes it the root of a trace of its own. ``links``:
        the earlier parts of the run (``RunRecorder.part_id``), linked from its span (a resumed run)."""
        context = parent.context if parent is not None else (otel_context.Context() if new_trace else None)
        if not self._export_checked:  # the first run is when the global providers must be there
            self._export_checked = True
            warn_if_unexported(tracer_provider=self.tracer_provider, meter_provider=self.meter_provider)
        recorder = RunRecorder(
            info,
            tracer=self.tracer,
            instruments=self.instruments,
            content=self.content,
            parent=context,
            batch_window=self.batch_window,
            events=self.events,
            uploads=self.uploads,
            links=links,
        )
        with self._lock:
            self._recorders.add(recorder)
        if self.batch_window:
            self._watch_provider()
        process_exit.watch_process()
        return recorder

    @property
    def runs_in_flight(self) -> int:
        """Runs whose ``invoke_agent`` span is open (started, not ended) in this telemetry."""
        with self._lock:
            return sum(1 for r in self._recorders if r.started and not r.finished)

    def end_runs_in_flight(self, outcome: str) -> int:
        """End every run of this telemetry that has not finished, with ``outcome`` (its child spans still open
        end with it); how many there were. The process is going away (SIGTERM)."""
        with self._lock:
            recorders = [r for r in self._recorders if r.started and not r.finished]
        for recorder in recorders:
            recorder.run_finish(recorder.info.run_id, outcome)
        if self._always_on is not None and self._always_on is not self:
            return len(recorders) + self._always_on.end_runs_in_flight(outcome)
        return len(recorders)

    def _watch_provider(self) -> None:
        """Meet the tracer provider runs record to (the given one, else the global one now): register the span
        processor that flushes runs' batches with it, and move the exit flush after its exit hook."""
        provider = self.tracer_provider or trace.get_tracer_provider()
        key = id(provider)
        if key in self._providers_seen:
            return
        with self._lock:
            if key in self._providers_seen:
                return
            self._providers_seen.add(key)
        add = getattr(provider, "add_span_processor", None)
        if add is not None:
            try:
                add(_RunFlushProcessor(self, provider))
            except Exception:
                _log.warning("registering the batch flush with %s failed", type(provider).__name__, exc_info=True)
        with _BATCHING_LOCK:
            _register_exit_hook()

    @property
    def wants_content(self) -> bool:
        """Whether adapters should hand over messages: content capture is on, or a completion hook takes them."""
        return self.content.capture or self.uploads is not None

    def shutdown_uploads(self, timeout: float = 5.0) -> None:
        """Wait (bounded) for the completion hook's uploads in flight, if there is one."""
        if self.uploads is not None:
            self.uploads.shutdown(timeout)
        if self._always_on is not None and self._always_on is not self:
            self._always_on.shutdown_uploads(timeout)

    @property
    def pending(self) -> int:
        """Finished work runs in flight are holding (spans to end, measurements to record)."""
        with self._lock:
            recorders = list(self._recorders)
        return sum(r.pending for r in recorders)

    def _flush_for_collection(self, options: Any) -> list[Any]:
        self.flush()
        return []

    @contextlib.contextmanager
    def enclosing_span(self, name: str) -> Iterator[EnclosingSpan]:
        """A span of the caller's (a demo scenario, a batch job) made current around runs that nest under it."""
        with self.tracer.start_as_current_span(name) as span:
            yield EnclosingSpan(format(span.get_span_context().trace_id, "032x"))

    def derived_ids(self) -> DerivedIds:
        """Switch this object to a tracer of its own whose span and trace ids come from :meth:`DerivedIds.seeded`
        blocks (replays that must give the same ids every time; outside such a block ids stay random).

        The SDK caches one tracer per instrumentation scope and every live run of the provider uses it, so the
        replay tracer gets a scope of its own (the scope attribute ``rb.replay``): live runs' tracer, and their
        random ids, are never touched. A no-op tracer is left alone."""
        tracer = trace.get_tracer(
            INSTRUMENTATION_NAME,
            __version__,
            tracer_provider=self.tracer_provider,
            schema_url=SCHEMA_URL,
            attributes={REPLAY_SCOPE_ATTRIBUTE: True},
        )
        current = getattr(tracer, "id_generator", None)
        if isinstance(current, DerivedIds):  # a replay of this provider installed it: one serves every replay
            ids = current
        else:
            ids = DerivedIds(current)
            if current is not None:  # the SDK's replay-scope tracer, used by replays only
                tracer.id_generator = ids  # type: ignore[attr-defined]
        self.tracer = tracer
        return ids

    def flush_providers(self, timeout: float = 5.0) -> None:
        """Do the finished work runs in flight are batching, then force-flush the tracer, meter and logger
        providers (given here, else the global ones) when they can; a provider that fails is logged, never
        raised. The :meth:`always_on` telemetry of a disabled one is flushed with it."""
        self.flush()
        if self._always_on is not None and self._always_on is not self:
            self._always_on.flush_providers(timeout)
        providers = (
            self.tracer_provider or trace.get_tracer_provider(),
            self.meter_provider or metrics.get_meter_provider(),
            self.logger_provider or logs.get_logger_provider(),
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
        with _BATCHING_LOCK:
            if not _BATCHING:
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


process_exit.on_exit(_on_the_way_out)
