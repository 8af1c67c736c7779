"""The finished work of one run (metric records, ends of ``chat`` and ``execute_tool`` spans), done in batches.

Recording a measurement or ending a span through the SDK costs several times more when its code is cold, and
inside an agent it always is by the time the next step comes: LangGraph's work between two model calls evicts it
from the CPU caches. So while a run steps faster than ``window`` seconds, that work waits in a queue and is done
in one go, in order: at the run's first step after the window, when the run ends, or on an explicit flush. A run
whose model calls take longer than the window (any run against a real model) does it at once.

Nothing changes in what is exported: spans end with the timestamp of the moment they finished, measurements keep
their own span context (so exemplars point at the right span), and the ``BatchSpanProcessor`` and periodic
metric reader downstream already hold everything for seconds before export.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from opentelemetry.trace import Span

from rb_otel.telemetry.attributes import Attributes

__all__ = ["DEFAULT_BATCH_WINDOW", "MAX_PENDING", "Batch", "end_span"]

#: Seconds a quickly stepping run may hold its finished work before doing it.
DEFAULT_BATCH_WINDOW = 1.0
#: Items a run holds at most: a long fast run (a replayed trajectory) flushes this often too, so one burst of
#: span ends never overflows a ``BatchSpanProcessor`` queue (2,048 by default) and a run's queue stays small.
MAX_PENDING = 256

_log = logging.getLogger("rb_otel.telemetry")

_Work = tuple[Callable[[Any, Any, Any], object], Any, Any, Any]


class Batch:
    """A run's queue of finished work. ``add(fn, a, b, c)`` queues ``fn(a, b, c)``; thread-safe.

    A deque, because parallel tool calls of one run end on several threads: ``append`` and ``popleft`` are
    atomic, so every item is done exactly once whichever thread flushes.
    """

    __slots__ = ("_last_flush", "_queue", "window")

    def __init__(self, window: float = DEFAULT_BATCH_WINDOW) -> None:
        self.window = window
        self._queue: deque[_Work] = deque()
        self._last_flush = time.monotonic()

    @property
    def pending(self) -> int:
        """Items queued and not yet done."""
        return len(self._queue)

    def add(self, fn: Callable[[Any, Any, Any], object], a: Any, b: Any, c: Any) -> None:
        self._queue.append((fn, a, b, c))

    def settle(self) -> None:
        """After queueing: do the queue now unless this run did it within the window and it is short."""
        if len(self._queue) >= MAX_PENDING or time.monotonic() - self._last_flush >= self.window:
            self.flush()

    def flush(self) -> None:
        """Do every queued item, oldest first; one that raises is logged and dropped, the others are still done
        (a failing meter must not leave a span open)."""
        self._last_flush = time.monotonic()
        queue = self._queue
        while queue:
            try:
                fn, a, b, c = queue.popleft()
            except IndexError:  # another thread took the last one
                return
            try:
                fn(a, b, c)
            except Exception:
                _log.warning("recording finished telemetry failed; continuing", exc_info=True)

    def close(self) -> None:
        """The run ended: do the queue, and anything queued from now on at once."""
        self.window = 0.0
        self.flush()


def end_span(span: Span, attributes: Attributes | None, end_time_ns: int | None) -> None:
    """Set the span's last ``attributes`` (if any) and end it at ``end_time_ns`` (a queued span end)."""
    if attributes:
        span.set_attributes(attributes)
    span.end(end_time=end_time_ns)
