"""``CountingSpanExporter``: makes export losses visible (counted and logged) instead of silent."""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

__all__ = ["CountingSpanExporter"]

_log = logging.getLogger("rb_otel.telemetry")


class CountingSpanExporter(SpanExporter):
    """Wraps an exporter; counts spans exported and dropped (failed exports), logging the first drop of each
    outage and then every 1,000th span dropped. Never raises into the span processor."""

    def __init__(self, inner: SpanExporter) -> None:
        self.inner = inner
        self.exported = 0
        self.dropped = 0
        self._failing = False
        self._closing = False
        self._lock = threading.Lock()

    def closing(self) -> None:
        """The process is shutting down: once an export has failed, later batches are dropped (and counted) at
        once instead of each waiting out the exporter's timeout against an endpoint that is not there."""
        self._closing = True

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self._closing and self._failing:
            with self._lock:
                self.dropped += len(spans)
            return SpanExportResult.FAILURE
        try:
            result = self.inner.export(spans)
        except Exception:
            _log.warning("span exporter %s raised", type(self.inner).__name__, exc_info=True)
            result = SpanExportResult.FAILURE
        with self._lock:
            if result is SpanExportResult.SUCCESS:
                self.exported += len(spans)
                if self._failing:
                    _log.warning("span export recovered; %d spans were dropped in total", self.dropped)
                self._failing = False
            else:
                before = self.dropped
                self.dropped += len(spans)
                if not self._failing or before // 1000 != self.dropped // 1000:
                    _log.warning("span export failed; %d spans dropped so far", self.dropped)
                self._failing = True
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)
