"""Exporters writing OTLP-JSON lines: the OpenTelemetry Collector ``file`` exporter's format.

Each line is one ``ExportTraceServiceRequest`` / ``ExportMetricsServiceRequest`` in the OTLP/JSON encoding
(camelCase keys, hex trace and span ids), so the files can be replayed into a Collector's ``otlpjsonfile``
receiver or read by any tool that understands OTLP.
"""

from __future__ import annotations

import base64
import json
import threading
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from google.protobuf.json_format import MessageToDict
from opentelemetry.exporter.otlp.proto.common.metrics_encoder import encode_metrics
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.metrics.export import MetricExporter, MetricExportResult, MetricsData
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from rb_otel import process_exit
from rb_otel.files import OutputError, publish, temporary_beside

__all__ = [
    "CollectedSpans",
    "JsonLinesFile",
    "OtlpJsonMetricExporter",
    "OtlpJsonSpanExporter",
    "json_line",
    "read_spans",
    "span_objects",
]

_ID_KEYS = frozenset({"traceId", "spanId", "parentSpanId"})


def _hex_ids(value: Any) -> Any:
    """OTLP/JSON wants ids as hex; protobuf's JSON mapping writes bytes as base64."""
    if isinstance(value, dict):
        return {
            k: (base64.b64decode(v).hex() if k in _ID_KEYS and isinstance(v, str) else _hex_ids(v))
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_hex_ids(v) for v in value]
    return value


def json_line(message: Any) -> str:
    """One OTLP request message (``encode_spans(...)``, ``encode_metrics(...)``) as one OTLP/JSON line, no newline."""
    # OTLP/JSON encodes enums (span kind, status code) as integers, not their protobuf names
    return json.dumps(_hex_ids(MessageToDict(message, use_integers_for_enums=True)), separators=(",", ":"))


class JsonLinesFile:
    """One OTLP/JSON lines file. Appended to (``whole=False``, the Collector ``file`` exporter's way), or written
    whole (``whole=True``): lines go to a temporary file beside ``path``, renamed over it on :meth:`close` (and on
    SIGTERM, after the exit flush), so ``path`` holds the last complete set, never a truncated one; when nothing
    was written, neither file is made and ``path`` is left as it was."""

    def __init__(self, path: str | Path, *, whole: bool = False) -> None:
        self.path = Path(path)
        self.whole = whole
        #: Why the file could not be written (one line), for the command's closing summary; ``None`` when fine.
        self.error: str | None = None
        self._tmp: Path | None = None
        self._file: IO[str] | None = None
        self._closed = False
        self._lock = threading.Lock()
        if not whole:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = self.path.open("a", encoding="utf-8")
        else:
            ref = weakref.ref(self)

            def on_the_way_out(_deadline: float, _terminating: bool) -> None:
                file = ref()
                if file is not None:
                    file.close()

            process_exit.on_exit(on_the_way_out)

    @property
    def wrote(self) -> bool:
        """Whether a line was written (a whole file with none is never made)."""
        return self._tmp is not None or not self.whole

    @property
    def so_far(self) -> Path | None:
        """The file holding what was written so far: ``path``, or while a whole file is being written its
        temporary file (``None`` before the first line)."""
        return self._tmp if self.whole and not self._closed else self.path

    def _open(self) -> IO[str] | None:
        if self._file is None and not self._closed:
            self._tmp = temporary_beside(self.path)
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._file = self._tmp.open("w", encoding="utf-8")
            except OSError as exc:
                self.error = str(OutputError.of(self.path, exc))
                self._closed = True
        return self._file

    def write(self, message: Any) -> bool:
        line = json_line(message)
        with self._lock:
            handle = self._open()
            if handle is None:
                return False
            try:
                handle.write(line + "\n")
                handle.flush()
            except OSError as exc:
                self.error = str(OutputError.of(self.path, exc))
                return False
        return True

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            handle, self._file = self._file, None
            if handle is None:
                return
            try:
                handle.close()  # flushes what a failed write left in the buffer: it can fail the same way
            except OSError as exc:
                self.error = self.error or str(OutputError.of(self.path, exc))
            if self.whole and self._tmp is not None:
                if self.error is not None:
                    self._tmp.unlink(missing_ok=True)
                    return
                try:
                    publish(self._tmp, self.path)
                except OutputError as exc:
                    self.error = str(exc)


class OtlpJsonSpanExporter(SpanExporter):
    """Appends each exported batch of spans to ``path`` as one OTLP/JSON line; with ``whole=True`` the file is
    replaced whole at shutdown instead (``JsonLinesFile``), and not touched when nothing was exported."""

    def __init__(self, path: str | Path, *, whole: bool = False) -> None:
        self._out = JsonLinesFile(path, whole=whole)

    @property
    def written(self) -> JsonLinesFile:
        """The file: where it is, what holds the lines so far, and why it could not be written."""
        return self._out

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        ok = self._out.write(encode_spans(spans))
        return SpanExportResult.SUCCESS if ok else SpanExportResult.FAILURE

    def shutdown(self) -> None:
        self._out.close()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


class OtlpJsonMetricExporter(MetricExporter):
    """Appends each metrics collection to ``path`` as one OTLP/JSON line (``whole``: as the span exporter's)."""

    def __init__(self, path: str | Path, *, whole: bool = False) -> None:
        super().__init__()
        self._out = JsonLinesFile(path, whole=whole)

    @property
    def written(self) -> JsonLinesFile:
        """The file: where it is, what holds the lines so far, and why it could not be written."""
        return self._out

    def export(self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any) -> MetricExportResult:
        ok = self._out.write(encode_metrics(metrics_data))
        return MetricExportResult.SUCCESS if ok else MetricExportResult.FAILURE

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return True

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        self._out.close()


def span_objects(spans: Sequence[ReadableSpan]) -> list[dict[str, Any]]:
    """SDK spans as the OTLP/JSON span objects :class:`OtlpJsonSpanExporter` writes (the same encoding), flattened:
    what a reader of the files (``rb_otel.report``) gets, without the file."""
    if not spans:
        return []
    document = _hex_ids(MessageToDict(encode_spans(spans), use_integers_for_enums=True))
    return [
        span
        for resource_spans in document.get("resourceSpans", [])
        for scope_spans in resource_spans.get("scopeSpans", [])
        for span in scope_spans.get("spans", [])
    ]


class CollectedSpans:
    """The spans a tracer provider ends from now until :meth:`stop`, kept in memory: a command's own copy of what it
    exports, wherever that goes (the demo draws its page from it)."""

    def __init__(self, provider: TracerProvider) -> None:
        self._exporter = InMemorySpanExporter()
        provider.add_span_processor(SimpleSpanProcessor(self._exporter))

    def objects(self) -> list[dict[str, Any]]:
        """The spans kept so far, as OTLP/JSON span objects (:func:`span_objects`)."""
        return span_objects(self._exporter.get_finished_spans())

    def stop(self) -> None:
        """Keep no more (the processor stays with the provider, exporting nowhere) and drop what was kept."""
        self._exporter.clear()
        self._exporter.shutdown()


def read_spans(path: str | Path) -> list[dict[str, Any]]:
    """Every span in an OTLP/JSON lines file, flattened, each with its ``resource`` attributes."""
    spans: list[dict[str, Any]] = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        for resource_spans in json.loads(line).get("resourceSpans", []):
            for scope_spans in resource_spans.get("scopeSpans", []):
                spans.extend(scope_spans.get("spans", []))
    return spans
