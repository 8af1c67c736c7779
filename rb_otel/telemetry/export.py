"""``CountingSpanExporter`` and ``CountingMetricExporter``: make export losses visible (counted and logged) instead
of silent, and give a command's closing summary its counts."""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from opentelemetry.sdk.metrics.export import MetricExporter, MetricExportResult, MetricsData
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

__all__ = ["CountingMetricExporter", "CountingSpanExporter", "SpanKeeper"]

_log = logging.getLogger("rb_otel.telemetry")


class SpanKeeper(Protocol):
    """Where spans not delivered at a process's end are kept (:class:`rb_otel.telemetry.spool.Spool`)."""

    def keep(self, spans: Sequence[ReadableSpan]) -> int:
        """Keep what it can of ``spans`` (oldest first); how many it kept. Never raises."""
        ...


class CountingSpanExporter(SpanExporter):
    """Wraps an exporter; counts spans exported and dropped (failed exports), logging the first drop of each
    outage and then every 1,000th span dropped. Never raises into the span processor."""

    def __init__(self, inner: SpanExporter) -> None:
        self.inner = inner
        self.exported = 0
        self.dropped = 0
        #: Spans not delivered at the process's end but kept in the export spool (not in :attr:`dropped`).
        self.spooled = 0
        #: Spans kept in the spool at a hand-over (:meth:`hand_over`) whose try then succeeded all the same: they
        #: are in both :attr:`spooled` and :attr:`exported`, and the next start sends them again (at least once).
        self.duplicated = 0
        self._failing = False
        self._closing = False
        self._handed_over = False
        self._spool: SpanKeeper | None = None
        self._lock = threading.Lock()
        #: The batches being tried now, by a number of their own: taken out by :meth:`hand_over`.
        self._in_flight: dict[int, Sequence[ReadableSpan]] = {}
        self._tries = itertools.count()

    def closing(self, spool: SpanKeeper | None = None, *, failing: bool = False) -> None:
        """The process is shutting down: once an export has failed, later batches are dropped (and counted) at
        once instead of each waiting out the exporter's timeout against an endpoint that is not there. With
        ``spool`` (:mod:`rb_otel.telemetry.spool`), what is not delivered from now on is kept there instead, as far
        as it takes it; ``failing``: the endpoint is known to be away already (the retries are failing)."""
        self._spool = spool if spool is not None else self._spool
        self._failing = self._failing or failing
        self._closing = True

    def hand_over(self, queued: Callable[[], Sequence[ReadableSpan]]) -> int:
        """The process is ending and a try is still under way (an endpoint that does not answer holds it for the
        whole export timeout, longer than the exit's 2 s): keep in the spool, now, the batches being tried and then
        what ``queued()`` returns (the processor's queue, oldest first), without waiting for the tries. From now on
        every batch handed to :meth:`export` is kept untried. A try that ends afterwards counts nothing more; one
        that succeeded is counted in :attr:`duplicated` too (delivered and kept: sent again by the next start).
        How many spans were kept; needs :meth:`closing` with a spool first (else they count as dropped)."""
        with self._lock:
            self._closing = self._handed_over = True
            in_flight = [span for batch in self._in_flight.values() for span in batch]
            self._in_flight.clear()
        spans = in_flight + list(queued())
        before = self.spooled
        if spans:
            self._undelivered(spans)
        return self.spooled - before

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with self._lock:
            untried = self._handed_over or (self._closing and self._failing)
            if not untried:
                number = next(self._tries)
                self._in_flight[number] = spans  # set before the try, so a hand-over can keep it meanwhile
        if untried:
            self._undelivered(spans)
            return SpanExportResult.FAILURE
        try:
            result = self.inner.export(spans)
        except Exception:
            _log.warning("span exporter %s raised", type(self.inner).__name__, exc_info=True)
            result = SpanExportResult.FAILURE
        with self._lock:
            kept_meanwhile = self._in_flight.pop(number, None) is None
            if kept_meanwhile and result is SpanExportResult.SUCCESS:
                self.exported += len(spans)
                self.duplicated += len(spans)
        if kept_meanwhile:  # the spool has the batch already: counted there
            if result is SpanExportResult.SUCCESS:
                _log.warning("%d spans kept in the export spool were delivered too; the next start sends them again "
                             "(duplicates)", len(spans))  # fmt: skip
            return result
        if result is not SpanExportResult.SUCCESS:
            self._undelivered(spans)
            return result
        with self._lock:
            self.exported += len(spans)
            if self._failing:
                _log.warning("span export recovered; %d spans were dropped in total", self.dropped)
            self._failing = False
        return result

    def _undelivered(self, spans: Sequence[ReadableSpan]) -> None:
        """Count a batch that was not delivered: kept in the spool (only while closing), else dropped."""
        kept = self._spool.keep(spans) if self._spool is not None and self._closing else 0
        with self._lock:
            before = self.dropped
            self.spooled += kept
            self.dropped += len(spans) - kept
            if self.dropped != before and (not self._failing or before // 1000 != self.dropped // 1000):
                _log.warning("span export failed; %d spans dropped so far", self.dropped)
            self._failing = True

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


def _points(data: MetricsData) -> int:
    return sum(
        len(metric.data.data_points)
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
    )


class CountingMetricExporter(MetricExporter):
    """Wraps a metric exporter; counts the data points exported and dropped (failed exports), logging the first
    failure of an outage. Never raises into the metric reader; keeps the inner exporter's temporality and
    aggregation."""

    def __init__(self, inner: MetricExporter) -> None:
        super().__init__(
            preferred_temporality=inner._preferred_temporality, preferred_aggregation=inner._preferred_aggregation
        )
        self.inner = inner
        self.exported = 0
        self.dropped = 0
        self._failing = False
        self._lock = threading.Lock()

    def export(self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any) -> MetricExportResult:
        points = _points(metrics_data)
        try:
            result = self.inner.export(metrics_data, timeout_millis=timeout_millis, **kwargs)
        except Exception:
            _log.warning("metric exporter %s raised", type(self.inner).__name__, exc_info=True)
            result = MetricExportResult.FAILURE
        with self._lock:
            if result is MetricExportResult.SUCCESS:
                self.exported += points
                self._failing = False
            else:
                self.dropped += points
                if not self._failing:
                    _log.warning("metric export failed; %d data points dropped so far", self.dropped)
                self._failing = True
        return result

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return self.inner.force_flush(timeout_millis=timeout_millis)

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        self.inner.shutdown(timeout_millis=timeout_millis, **kwargs)
