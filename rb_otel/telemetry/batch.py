"""The finished work of one run (metric records, ends of ``chat`` and ``execute_tool`` spans), done in batches.

Recording a measurement or ending a span through the SDK costs several times more when its code is cold, and
inside an agent it always is by the time the next step comes: LangGraph's work between two model calls evicts it
from the CPU caches. So while a run steps faster than ``window`` seconds, that work waits in a queue and is done
in one go, in order: at the run's first step after the window, when the run ends, on an explicit flush, or by the
process's flusher thread once it has waited a window (a run that goes quiet, waiting on a model or a tool, still
hands over what ended). A run whose model calls take longer than the window (any run against a real model) does
it at once.

The bound: a span that ended reaches the span processors within :data:`HANDOVER_BOUND_MS` (two windows), so a
``SimpleSpanProcessor`` has exported it by then, and a SIGTERM, ``os._exit`` or crash after that loses only the
spans still open (and what a ``BatchSpanProcessor`` itself still holds).

Nothing changes in what is exported: spans end with the timestamp of the moment they finished, measurements keep
their own span context (so exemplars point at the right span), and the ``BatchSpanProcessor`` and periodic
metric reader downstream already hold everything for seconds before export.

Counter adds waiting in the queue are coalesced: a second ``add`` to the same counter with equal attributes adds
its value to the one already waiting (a counter exports only its sum, so the sum is the same; the exemplar is the
first add's). A 5-call run makes 10 counter adds over 4-6 label sets: 4 fewer SDK records (of 46) per run.
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable
from typing import NamedTuple

from opentelemetry import context as otel_context
from opentelemetry.metrics import Counter, Histogram, UpDownCounter
from opentelemetry.trace import Span

from rb_otel.telemetry.attributes import Attributes
from rb_otel.telemetry.sums import SummedCounter

__all__ = ["DEFAULT_BATCH_WINDOW", "HANDOVER_BOUND_MS", "MAX_PENDING", "Batch"]

#: Seconds a quickly stepping run may hold its finished work before doing it.
DEFAULT_BATCH_WINDOW = 0.1
#: The longest an ended span waits in a batch with the default window (milliseconds): the window, and at most
#: one more while the flusher thread comes round.
HANDOVER_BOUND_MS = int(2 * DEFAULT_BATCH_WINDOW * 1000)
#: Items a run holds at most: a long fast run (a replayed trajectory) flushes this often too, so one burst of
#: span ends never overflows a ``BatchSpanProcessor`` queue (2,048 by default) and a run's queue stays small.
MAX_PENDING = 256

_log = logging.getLogger("rb_otel.telemetry")


class _Measurement(NamedTuple):
    """A counter's ``add`` or a histogram's ``record`` of ``value``, with the span context it belongs to (for
    exemplars)."""

    write: Callable[[float, Attributes, otel_context.Context | None], None]
    value: float
    attributes: Attributes
    context: otel_context.Context | None

    def do(self) -> None:
        self.write(self.value, self.attributes, self.context)


#: What makes two counter adds the same: the counter, and the attributes' items.
_SumKey = tuple[int, frozenset[tuple[str, object]]]


class _Sum:
    """A counter's adds with equal attributes waiting in the queue, done as one ``add`` of their sum."""

    __slots__ = ("attributes", "batch", "context", "counter", "key", "value")

    def __init__(
        self,
        batch: Batch,
        key: _SumKey,
        *,
        counter: Counter | UpDownCounter,
        value: float,
        attributes: Attributes,
        context: otel_context.Context | None,
    ) -> None:
        self.batch, self.key, self.counter = batch, key, counter
        self.value, self.attributes, self.context = value, attributes, context

    def do(self) -> None:
        with self.batch._sums_lock:  # once it is being done, no add joins this sum (the next starts another)
            self.batch._sums.pop(self.key, None)
        self.counter.add(self.value, self.attributes, self.context)


class _SpanEnd(NamedTuple):
    """A span's last attributes (if any) and its end, stamped when it finished."""

    span: Span
    attributes: Attributes | None
    end_time_ns: int | None

    def do(self) -> None:
        if self.attributes:
            self.span.set_attributes(self.attributes)
        self.span.end(end_time=self.end_time_ns)


class Batch:
    """A run's queue of finished work: :meth:`add`, :meth:`record` and :meth:`end_span` queue it, in order; thread-safe.

    The plain definition is ``window=0``: every item is done at once, as it is queued. A deque, because
    parallel tool calls of one run end on several threads: ``append`` and ``popleft`` are atomic, so every item
    is done exactly once whichever thread flushes.
    """

    __slots__ = ("__weakref__", "_last_flush", "_queue", "_sums", "_sums_lock", "_watched", "window")

    def __init__(self, window: float = DEFAULT_BATCH_WINDOW) -> None:
        self.window = window
        self._queue: deque[_Measurement | _Sum | _SpanEnd] = deque()
        self._last_flush = time.monotonic()
        #: The flusher thread watches this batch: set by :meth:`_Flusher.watch`, cleared by the flusher before it
        #: does the queue (see there), so :meth:`settle` takes the flusher's lock once per quiet spell, not per step.
        self._watched = False
        self._sums: dict[_SumKey, _Sum] = {}
        self._sums_lock = threading.Lock()

    @property
    def pending(self) -> int:
        """Items queued and not yet done."""
        return len(self._queue)

    def add(
        self,
        counter: Counter | UpDownCounter | SummedCounter,
        value: float,
        attributes: Attributes,
        context: otel_context.Context | None,
    ) -> None:
        """Queue ``counter.add(value, attributes, context)``, or add ``value`` to an equal add already waiting; a
        :class:`~rb_otel.telemetry.sums.SummedCounter` is added to at once (an add is a dict update)."""
        if isinstance(counter, SummedCounter):
            counter.add(value, attributes)
            return
        try:
            key = (id(counter), frozenset(attributes.items()))
        except TypeError:  # an unhashable (sequence) attribute value: queued on its own
            self._queue.append(_Measurement(counter.add, value, attributes, context))
            return
        with self._sums_lock:
            waiting = self._sums.get(key)
            if waiting is not None:
                waiting.value += value
                return
            waiting = self._sums[key] = _Sum(
                self, key, counter=counter, value=value, attributes=attributes, context=context
            )
        self._queue.append(waiting)

    def record(
        self, histogram: Histogram, value: float, attributes: Attributes, context: otel_context.Context | None
    ) -> None:
        """Queue ``histogram.record(value, attributes, context)``."""
        self._queue.append(_Measurement(histogram.record, value, attributes, context))

    def end_span(self, span: Span, attributes: Attributes | None, end_time_ns: int | None) -> None:
        """Queue setting ``attributes`` on ``span`` and ending it at ``end_time_ns``."""
        self._queue.append(_SpanEnd(span, attributes, end_time_ns))

    def settle(self) -> None:
        """After queueing: do the queue now unless this run did it within the window and it is short; what waits
        is done by the flusher thread if the run goes quiet for a window."""
        if len(self._queue) >= MAX_PENDING or time.monotonic() - self._last_flush >= self.window:
            self.flush()
        elif self._queue and not self._watched:
            _FLUSHER.watch(self)

    def flush(self) -> None:
        """Do every queued item, oldest first; one that raises is logged and dropped, the others are still done
        (a failing meter must not leave a span open)."""
        self._last_flush = time.monotonic()
        queue = self._queue
        while queue:
            try:
                item = queue.popleft()
            except IndexError:  # another thread took the last one
                return
            try:
                item.do()
            except Exception:
                _log.warning("recording finished telemetry failed; continuing", exc_info=True)

    def close(self) -> None:
        """The run ended: do the queue, and anything queued from now on at once."""
        self.window = 0.0
        self.flush()


class _Flusher:
    """One daemon thread per process that does the queue of every batch left waiting a full window (a run that
    went quiet between two steps), each by its own window. It sleeps while no batch waits, and otherwise until
    the first waiting batch is due; a forked child starts its own."""

    def __init__(self) -> None:
        self._waiting: weakref.WeakSet[Batch] = weakref.WeakSet()
        self._wake = threading.Condition()
        self._thread: threading.Thread | None = None
        self._pid = 0
        #: When the thread wakes next (``time.monotonic()``; ``-inf`` while it is awake and looks again anyway).
        self._next_due = math.inf

    def watch(self, batch: Batch) -> None:
        """Do ``batch``'s queue once it has waited its window. :meth:`Batch.settle` calls this only while the batch
        is not watched: a step that queues work into a watched batch needs nothing more, because the flusher
        clears ``_watched`` before it does the queue, and the step queued its work before reading the flag. So
        what the step queued is either in the queue the flusher is about to do, or the step sees the flag
        cleared and comes here. Taking this lock at every step instead made the agent's thread wait for the
        flusher thread (a lock held across a GIL switch costs milliseconds), most under many concurrent runs."""
        with self._wake:
            batch._watched = True
            self._waiting.add(batch)
            if self._thread is None or self._pid != os.getpid() or not self._thread.is_alive():
                self._pid = os.getpid()
                self._thread = threading.Thread(target=self._run, name="rb-otel-batch-flush", daemon=True)
                self._thread.start()
            if batch._last_flush + batch.window < self._next_due:  # due before the thread wakes: wake it now
                self._wake.notify()

    def _due(self) -> tuple[list[Batch], float]:
        """Wait (holding the lock) until a watched batch is due; the batches then watched, and the time."""
        while True:
            batches = list(self._waiting)  # a list at once: a batch may be collected meanwhile (a weak set)
            if not batches:
                self._next_due = math.inf
                self._wake.wait()
                continue
            now = time.monotonic()
            self._next_due = min(b._last_flush + b.window for b in batches)
            if self._next_due <= now:
                self._next_due = -math.inf
                return batches, now
            self._wake.wait(self._next_due - now)

    def _run(self) -> None:
        while True:
            with self._wake:
                batches, now = self._due()
            for batch in batches:
                if now - batch._last_flush >= batch.window or not batch.pending:
                    with self._wake:
                        self._waiting.discard(batch)
                        batch._watched = False  # before doing the queue: see watch()
                    if batch.pending:
                        batch.flush()

    def _forget_in_child(self) -> None:
        for batch in list(self._waiting):  # the child's flusher watches them afresh
            batch._watched = False
        self._wake = threading.Condition()
        self._waiting = weakref.WeakSet()
        self._thread = None
        self._next_due = math.inf


_FLUSHER = _Flusher()
os.register_at_fork(after_in_child=_FLUSHER._forget_in_child)
