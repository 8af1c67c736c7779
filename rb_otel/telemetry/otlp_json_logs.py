"""Where ``rb-otel label`` sends outcome events: OTLP/JSON logs lines (the Collector ``file`` exporter's format, as
the traces and metrics files are), or the OTLP endpoint the ``OTEL_*`` variables name; each delivery counted.

A file is written whole (:class:`~rb_otel.telemetry.otlp_json.JsonLinesFile`): replaced when the command is done,
left as it was when nothing was exported.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from opentelemetry import _logs as logs
from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
from opentelemetry.sdk._logs import LoggerProvider, ReadableLogRecord
from opentelemetry.sdk._logs.export import (
    BatchLogRecordProcessor,
    LogRecordExporter,
    LogRecordExportResult,
)
from opentelemetry.sdk.resources import SERVICE_NAME, Resource

from rb_otel._version import __version__
from rb_otel.telemetry.hub import INSTRUMENTATION_NAME, SCHEMA_URL
from rb_otel.telemetry.otlp_json import JsonLinesFile
from rb_otel.telemetry.setup import DEFAULT_EXPORT_TIMEOUT_S
from rb_otel.urls import display_url

__all__ = ["CountingLogExporter", "EventExport", "OtlpJsonLogExporter", "event_export"]


class OtlpJsonLogExporter(LogRecordExporter):
    """Appends each exported batch of log records to ``path`` as one OTLP/JSON line (``whole=True``: the file is
    replaced whole at shutdown, and not touched when nothing was exported)."""

    def __init__(self, path: str | Path, *, whole: bool = False) -> None:
        self._out = JsonLinesFile(path, whole=whole)

    @property
    def written(self) -> JsonLinesFile:
        """The file: where it is, and why it could not be written."""
        return self._out

    def export(self, batch: Sequence[ReadableLogRecord]) -> LogRecordExportResult:
        ok = self._out.write(encode_logs(batch))
        return LogRecordExportResult.SUCCESS if ok else LogRecordExportResult.FAILURE

    def shutdown(self) -> None:
        self._out.close()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


class CountingLogExporter(LogRecordExporter):
    """Counts the records ``exporter`` delivered and those it failed to (a failing exporter is logged by the SDK;
    the command's closing line says how many were lost)."""

    def __init__(self, exporter: LogRecordExporter) -> None:
        self.exporter = exporter
        self.exported = 0
        self.dropped = 0

    def export(self, batch: Sequence[ReadableLogRecord]) -> LogRecordExportResult:
        try:
            result = self.exporter.export(batch)
        except Exception:
            result = LogRecordExportResult.FAILURE
        if result == LogRecordExportResult.SUCCESS:
            self.exported += len(batch)
        else:
            self.dropped += len(batch)
        return result

    def shutdown(self) -> None:
        self.exporter.shutdown()  # type: ignore[no-untyped-call]  # the SDK's base method has no annotations

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.exporter.force_flush(timeout_millis)


class EventExport:
    """A logger provider exporting to one place, its logger, and the counts of what was delivered."""

    def __init__(self, exporter: LogRecordExporter, target: str, service_name: str) -> None:
        self.counting = CountingLogExporter(exporter)
        self.target = target
        self.file = exporter.written if isinstance(exporter, OtlpJsonLogExporter) else None
        self.provider = LoggerProvider(resource=Resource.create({SERVICE_NAME: service_name}), shutdown_on_exit=False)
        self.provider.add_log_record_processor(BatchLogRecordProcessor(self.counting))
        self.logger = logs.get_logger(
            INSTRUMENTATION_NAME, __version__, logger_provider=self.provider, schema_url=SCHEMA_URL
        )

    def shutdown(self) -> None:
        """Export what is held and stop (bounded by the exporter's timeout); the file is written then."""
        self.provider.shutdown()


def event_export(out: Path | None, *, service_name: str = "rb-otel-label") -> EventExport | None:
    """Events to ``out`` (OTLP/JSON lines, written whole), else to the OTLP endpoint ``OTEL_EXPORTER_OTLP_ENDPOINT``
    (or ``..._LOGS_ENDPOINT``) names, over ``OTEL_EXPORTER_OTLP_PROTOCOL``; ``None`` when neither is given."""
    if out is not None:
        return EventExport(OtlpJsonLogExporter(out, whole=True), str(out), service_name)
    endpoint = os.environ.get("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    if not endpoint:
        return None
    exporter: LogRecordExporter
    if os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc").strip().lower().startswith("http"):
        from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter as HttpLogExporter

        exporter = HttpLogExporter(timeout=DEFAULT_EXPORT_TIMEOUT_S)
    else:
        from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter as GrpcLogExporter

        exporter = GrpcLogExporter(timeout=DEFAULT_EXPORT_TIMEOUT_S)
    return EventExport(exporter, f"OTLP {display_url(endpoint)}", service_name)
