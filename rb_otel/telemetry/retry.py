"""Holding spans through an outage: the exporter keeps retrying a batch the endpoint refused, for a budget of time,
while the batch processor's queue holds what ends meanwhile (the process-side half of a Collector's
``retry_on_failure`` and ``sending_queue``).

The SDK's OTLP exporters retry within one export's timeout (4 s with :func:`~rb_otel.telemetry.setup.configure`)
and then drop the batch; a Collector restarted for 30 s, or a backend answering 429 with ``Retry-After: 10``, loses
every batch sent meanwhile. :class:`RetryingSpanExporter` sits between the counting wrapper and the OTLP exporter
and tries the same batch again (backoff from :data:`FIRST_BACKOFF_S` doubling to :data:`MAX_BACKOFF_S`, or as long
as the endpoint's ``Retry-After`` asks when it is longer) until it is accepted or :data:`DEFAULT_RETRY_BUDGET_S`
has passed since its first try. Meanwhile the :class:`HoldingBatchSpanProcessor`'s queue
(:data:`DEFAULT_MAX_QUEUE_SIZE` spans) fills with what ends; past that it drops the oldest, as the SDK does.

The ways out stay bounded: a flush while the endpoint is failing returns ``False`` at once (waiting would only drop
the queue; the retries go on), a flush while it answers gives up retrying at its own timeout, and a shutdown stops
the retries at once (what is left is then tried once and dropped, and counted, by
:class:`~rb_otel.telemetry.export.CountingSpanExporter`).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

__all__ = [
    "DEFAULT_MAX_QUEUE_SIZE",
    "DEFAULT_RETRY_BUDGET_S",
    "FIRST_BACKOFF_S",
    "MAX_BACKOFF_S",
    "HoldingBatchSpanProcessor",
    "RetryAfter",
    "RetryingSpanExporter",
]

_log = logging.getLogger("rb_otel.telemetry")

#: Seconds a batch is retried from its first try: the OpenTelemetry Collector's default ``max_elapsed_time``.
DEFAULT_RETRY_BUDGET_S = 300.0
#: Spans the batch processor holds while the endpoint is away (about 3 KB each: 26 MB at most). 27 spans a second
#: for the whole budget, or 68 a second through a two-minute outage; ``OTEL_BSP_MAX_QUEUE_SIZE`` changes it.
DEFAULT_MAX_QUEUE_SIZE = 8192
#: The first wait after a refused batch, doubled after each refusal up to :data:`MAX_BACKOFF_S` (seconds): an
#: endpoint that comes back is used again within 5 s.
FIRST_BACKOFF_S = 0.5
MAX_BACKOFF_S = 5.0


class RetryAfter:
    """What the endpoint last asked for: ``Retry-After`` of a retryable HTTP refusal (429, 502, 503, 504), read
    by a ``requests`` response hook on the OTLP/HTTP exporter's session; whether the refusal was permanent
    (another 4xx: retrying cannot help)."""

    RETRYABLE = frozenset({429, 502, 503, 504})

    def __init__(self) -> None:
        self.seconds: float | None = None
        self.permanent = False

    def hook(self, response: Any, *args: Any, **kwargs: Any) -> Any:
        """``session.hooks["response"]`` entry: note the answer; never raises, returns the response unchanged."""
        try:
            status = int(response.status_code)
            self.permanent = 400 <= status < 500 and status not in self.RETRYABLE
            self.seconds = None
            if status in self.RETRYABLE:
                value = response.headers.get("Retry-After")
                if value is not None:
                    self.seconds = _seconds(value)
        except Exception:  # a hook must never break the export
            self.seconds, self.permanent = None, False
        return response

    def session(self) -> Any:
        """A ``requests.Session`` that reports to this object (for ``OTLPSpanExporter(session=...)``)."""
        import requests

        session = requests.Session()
        session.hooks["response"].append(self.hook)
        return session


def _seconds(value: str) -> float | None:
    """``Retry-After`` as seconds from now: delay-seconds or an HTTP-date (RFC 9110); ``None`` when unreadable."""
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        from email.utils import parsedate_to_datetime

        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        return max(when.timestamp() - time.time(), 0.0)
    return max(seconds, 0.0) if math.isfinite(seconds) else None


class RetryingSpanExporter(SpanExporter):
    """Wraps an exporter: a refused batch is tried again until accepted or ``budget_s`` has passed since its first
    try (see the module docstring). ``retry_after`` tells what the endpoint asked for, when it can be read (the
    OTLP/HTTP exporter); without it, or for gRPC, the backoff alone paces the retries. Blocks the calling thread
    (the batch processor's worker) while it waits: the spans ending meanwhile wait in the processor's queue."""

    def __init__(
        self, inner: SpanExporter, *, budget_s: float = DEFAULT_RETRY_BUDGET_S, retry_after: RetryAfter | None = None
    ) -> None:
        if not budget_s >= 0:
            raise ValueError(f"budget_s must be 0 or more, got {budget_s!r}")
        self.inner = inner
        self.budget_s = float(budget_s)
        self.retry_after = retry_after
        self.retries = 0  # tries after a refusal, this process
        self.failing = False  # the last try was refused: an outage is going on
        self._outage_started = 0.0
        self._wake = threading.Condition()
        self._stopped = False
        self._deadline = math.inf  # monotonic: a flush in progress wants an answer by then

    def stop(self) -> None:
        """Stop retrying now and for good (the process is shutting down): a wait in progress ends at once."""
        with self._wake:
            self._stopped = True
            self._wake.notify_all()

    @contextmanager
    def deadline(self, seconds: float) -> Iterator[None]:
        """Within the block, give up retrying a batch ``seconds`` from now (a bounded flush)."""
        with self._wake:
            self._deadline = time.monotonic() + seconds
            self._wake.notify_all()
        try:
            yield
        finally:
            with self._wake:
                self._deadline = math.inf

    def _hurried(self, retry_at: float) -> Callable[[], bool]:
        """Whether a wait for a retry at ``retry_at`` should end now: stopped, or a flush wants an answer sooner."""
        return lambda: self._stopped or self._deadline < retry_at

    def _try(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        try:
            return self.inner.export(spans)
        except Exception:
            _log.warning("span exporter %s raised", type(self.inner).__name__, exc_info=True)
            return SpanExportResult.FAILURE

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        first_try = time.monotonic()
        backoff = FIRST_BACKOFF_S
        while True:
            if self.retry_after is not None:  # what this try's answer asks for, not an earlier one's
                self.retry_after.seconds, self.retry_after.permanent = None, False
            if self._try(spans) is SpanExportResult.SUCCESS:
                if self.failing:
                    self.failing = False
                    _log.warning(
                        "span export recovered after %.1f s (%d retries so far)",
                        time.monotonic() - self._outage_started,
                        self.retries,
                    )
                return SpanExportResult.SUCCESS
            if self.retry_after is not None and self.retry_after.permanent:
                return SpanExportResult.FAILURE  # a 4xx other than 429: the same batch would be refused again
            now = time.monotonic()
            if not self.failing:
                self.failing = True
                self._outage_started = now
                _log.warning("span export refused; holding the batch and retrying for up to %.0f s", self.budget_s)
            asked = self.retry_after.seconds if self.retry_after is not None else None
            wait = max(backoff, asked or 0.0)
            with self._wake:
                give_up_at = min(first_try + self.budget_s, self._deadline)
                if self._stopped or now + wait > give_up_at:
                    return SpanExportResult.FAILURE
                self._wake.wait_for(self._hurried(now + wait), timeout=wait)
                if self._stopped or time.monotonic() > self._deadline:
                    return SpanExportResult.FAILURE
            self.retries += 1
            backoff = min(backoff * 2, MAX_BACKOFF_S)

    def shutdown(self) -> None:
        self.stop()
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


class HoldingBatchSpanProcessor(BatchSpanProcessor):
    """A ``BatchSpanProcessor`` in front of a :class:`RetryingSpanExporter` (the exporter it is given, or the one
    a wrapper holds as ``retrying``): its queue holds what ends while the exporter retries, and its flush and
    shutdown stay bounded (see the module docstring)."""

    def __init__(self, span_exporter: SpanExporter, retrying: RetryingSpanExporter, **kwargs: Any) -> None:
        super().__init__(span_exporter, **kwargs)
        self.retrying = retrying

    def force_flush(self, timeout_millis: int | None = None) -> bool:
        if self.retrying.failing:  # the worker thread holds the queue and keeps retrying; a flush would drop it
            return False
        with self.retrying.deadline((timeout_millis if timeout_millis is not None else 30_000) / 1000):
            return super().force_flush(timeout_millis)

    def shutdown(self) -> None:
        self.retrying.stop()
        super().shutdown()  # type: ignore[no-untyped-call]
