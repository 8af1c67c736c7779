"""Provider setup from the standard ``OTEL_*`` variables. Explicit only: nothing here runs on import.

Precedence is argument > environment variable > default:

* ``OTEL_TRACES_EXPORTER`` / ``OTEL_METRICS_EXPORTER``: a comma-separated list of ``otlp``, ``console``, ``none``
  (and ``prometheus`` for metrics), each one used. Without them: OTLP when ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set,
  else the OTLP-JSON files given as ``traces_file``/``metrics_file`` (the demo's default), else nothing.
* ``OTEL_LOGS_EXPORTER`` (``otlp``, ``console``, ``none``; default OTLP when an endpoint is set, else none): the
  log-based GenAI events (``gen_ai.evaluation.result``, content as events) on :attr:`Providers.logger_provider`.
* ``OTEL_EXPORTER_OTLP_PROTOCOL``: ``grpc`` (default) or ``http/protobuf``; endpoint, headers and timeouts are
  read by the OTLP exporters themselves.
* ``RB_OTEL_EXPORT_RETRY_S``: how long a refused span batch is retried (:mod:`rb_otel.telemetry.retry`; default
  300 s, 0 for the SDK's own retries only); ``OTEL_BSP_MAX_QUEUE_SIZE`` (default 8,192 here) and
  ``OTEL_BSP_SCHEDULE_DELAY`` (default 1,000 ms here) size what is held meanwhile and what a ``kill -9`` can lose.
* ``RB_OTEL_EXPORT_SPOOL``: a folder where spans the endpoint did not take by the process's end are kept as
  OTLP/JSON and sent by the next start (:mod:`rb_otel.telemetry.spool`; ``RB_OTEL_EXPORT_SPOOL_MAX_BYTES``: its cap).
* ``OTEL_EXPORTER_PROMETHEUS_HOST`` / ``_PORT``: the pull endpoint, bound to 127.0.0.1 unless told otherwise.
* ``OTEL_SERVICE_NAME``, ``OTEL_RESOURCE_ATTRIBUTES``, ``OTEL_TRACES_SAMPLER``: honoured by the SDK.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    ConsoleMetricExporter,
    MetricExporter,
    MetricReader,
    PeriodicExportingMetricReader,
)
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter

from rb_otel import process_exit
from rb_otel.steering.checks import check_bool, check_int, check_path, check_port, check_seconds, check_str
from rb_otel.telemetry.export import CountingMetricExporter, CountingSpanExporter
from rb_otel.telemetry.otlp_json import JsonLinesFile, OtlpJsonMetricExporter, OtlpJsonSpanExporter
from rb_otel.telemetry.retry import (
    DEFAULT_MAX_QUEUE_SIZE,
    DEFAULT_RETRY_BUDGET_S,
    HoldingBatchSpanProcessor,
    RetryAfter,
    RetryingSpanExporter,
)
from rb_otel.telemetry.spool import Spool, SpoolAtExit, SpoolSender, spool_folder

__all__ = ["Providers", "configure"]

_log = logging.getLogger("rb_otel.telemetry")

DEFAULT_SERVICE_NAME = "rb-otel"
DEFAULT_PROMETHEUS_HOST = "127.0.0.1"
DEFAULT_PROMETHEUS_PORT = 9464
#: Seconds one OTLP export may take (retries included) before it gives up: well under a user's patience.
DEFAULT_EXPORT_TIMEOUT_S = 4.0
#: The longest an ended span waits in the batch processor before its export starts (ms; the SDK's default is
#: 5,000): with the 200 ms handover bound, what a ``kill -9`` can lose. An export a second costs a process little.
DEFAULT_SCHEDULE_DELAY_MS = 1000
#: The variable that sets how long a refused span batch is retried (seconds; argument > variable > default).
RETRY_ENV = "RB_OTEL_EXPORT_RETRY_S"


@dataclass
class Providers:
    """The providers :func:`configure` built; call :meth:`shutdown` to flush and stop them."""

    tracer_provider: TracerProvider
    meter_provider: MeterProvider
    descriptions: list[str] = field(default_factory=list)
    prometheus_port: int | None = None
    span_exporter: CountingSpanExporter | None = None  # exported / dropped counts
    traces_target: str = ""  # where spans go ("otlp", a file path, "console"), "" when nowhere
    #: The SDK logger provider for log-based events, when ``OTEL_LOGS_EXPORTER`` names an exporter.
    logger_provider: Any = None
    #: The OTLP/JSON files written (traces first), each saying where its lines are so far and what went wrong.
    files: list[JsonLinesFile] = field(default_factory=list)
    #: The metric exporters whose deliveries are counted (data points exported / dropped), by where they send.
    metric_exporters: dict[str, CountingMetricExporter] = field(default_factory=dict)
    #: The export spool (``configure(spool=...)``): what it kept (``spool.spool``) and sent (``spool.sender``).
    spool: SpoolAtExit | None = None

    def traces_so_far(self) -> Path | None:
        """The file holding the spans exported so far (flush first), when spans go to a file; else ``None``."""
        traces = [f for f in self.files if str(f.path) == self.traces_target]
        return traces[0].so_far if traces else None

    def _all(self) -> list[Any]:
        return [p for p in (self.tracer_provider, self.meter_provider, self.logger_provider) if p is not None]

    def force_flush(self, timeout_millis: int = 5000) -> None:
        """Export what every provider holds (runs in flight first do the finished work they batch)."""
        for provider in self._all():
            try:
                provider.force_flush(timeout_millis)
            except Exception:
                _log.warning("flushing %s failed", type(provider).__name__, exc_info=True)

    def shutdown(self) -> None:
        """Flush and stop the providers. Bounded: each OTLP export gives up after the export timeout, and once one
        has failed the rest are dropped at once (and counted)."""
        if self.spool is not None:
            self.spool.close(DEFAULT_EXPORT_TIMEOUT_S)
        if self.span_exporter is not None:
            self.span_exporter.closing()
        for provider in self._all():
            try:
                provider.shutdown()
            except Exception:
                _log.warning("shutting down %s failed", type(provider).__name__, exc_info=True)

    def delivery(self) -> tuple[list[str], bool]:
        """``(lines, complete)``: what was and was not delivered, for a command's closing summary. A file written
        whole that got nothing was left as it was, and its line says so; a file that could not be written is left
        to :meth:`unwritten` (and the delivery is not complete)."""
        broken = {str(f.path) for f in self.files if f.error is not None}
        untouched = {str(f.path) for f in self.files if f.error is None and not f.wrote}
        lines = []
        dropped = False
        for line in self.descriptions:
            kind, _, where = line.partition(" -> ")
            counted = self.metric_exporters.get(where) if kind == "metrics" else None
            if counted is not None:
                lines.append(f"{line}: {_delivered(counted.exported, counted.dropped, 'data points', 'METRICS')}")
                dropped = dropped or bool(counted.dropped)
            elif kind != "traces" and where not in broken:
                lines.append(f"{line}: nothing to write, the file was left as it was" if where in untouched else line)
        counting = self.span_exporter
        if counting is None or self.traces_target in broken:
            return lines, not broken and not dropped
        if counting.dropped:
            lines.insert(0, f"traces -> {self.traces_target}: "
                            f"{_delivered(counting.exported, counting.dropped, 'spans', 'TRACES')}")  # fmt: skip
        else:
            left = " (the file was left as it was)" if self.traces_target in untouched else ""
            lines.insert(0, f"traces -> {self.traces_target}: {counting.exported} spans delivered{left}")
        if counting.spooled and self.spool is not None:
            lines[0] += f", {counting.spooled} kept in the export spool {self.spool.spool.folder} for the next start"
        return lines, not broken and not counting.dropped and not dropped

    def unwritten(self) -> list[str]:
        """A line for each file that could not be written (:attr:`files`): the file, why, and what was lost."""
        out = []
        for file in self.files:
            if file.error is None:
                continue
            counting = self.span_exporter
            if str(file.path) == self.traces_target and counting is not None:
                out.append(f"{file.error} ({counting.exported + counting.dropped} spans lost)")
            else:
                out.append(f"{file.error} (its metrics are lost)")
        return out


def _delivered(exported: int, dropped: int, what: str, signal: str) -> str:
    """``N what delivered``, or ``N of M what delivered, D dropped (why)`` when an exporter of ``signal``
    (``TRACES``, ``METRICS``) failed."""
    if not dropped:
        return f"{exported} {what} delivered"
    return f"{exported} of {exported + dropped} {what} delivered, {dropped} dropped ({_why_dropped(signal)})"


def _why_dropped(signal: str) -> str:
    """Why an OTLP exporter failed, as far as the settings tell: a protocol that does not match the endpoint's
    well-known port (gRPC at OTLP/HTTP's 4318, HTTP at gRPC's 4317) names ``OTEL_EXPORTER_OTLP_PROTOCOL``."""
    endpoint = (
        os.environ.get(f"OTEL_EXPORTER_OTLP_{signal}_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or ""
    ).strip()
    try:
        port = urlsplit(endpoint if "://" in endpoint else f"//{endpoint}").port
    except ValueError:
        port = None
    http = _otlp_http()
    if port == 4318 and not http:
        return (f"the exporter failed: {endpoint} is OTLP/HTTP's port and OTEL_EXPORTER_OTLP_PROTOCOL is grpc; "
                "set OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf, or use port 4317 for gRPC")  # fmt: skip
    if port == 4317 and http:
        return (f"the exporter failed: {endpoint} is OTLP/gRPC's port and OTEL_EXPORTER_OTLP_PROTOCOL is "
                "http/protobuf; set OTEL_EXPORTER_OTLP_PROTOCOL=grpc, or use port 4318 for HTTP")  # fmt: skip
    return "the exporter failed; is the endpoint up?"


def _choices(env: str, allowed: tuple[str, ...], default: str) -> list[str]:
    """The exporters a comma-separated ``OTEL_*_EXPORTER`` names, in order, each once (``none``: none); an
    unknown name is warned about and left out; unset or nothing left: ``default``."""
    raw = os.environ.get(env, "").strip().lower()
    if not raw:
        return [default]
    names = list(dict.fromkeys(v.strip() for v in raw.split(",") if v.strip()))
    unknown = [v for v in names if v not in allowed]
    if unknown:
        _log.warning("%s: %s not one of %s; left out", env, ", ".join(map(repr, unknown)), ", ".join(allowed))
    chosen = [v for v in names if v in allowed]
    if "none" in chosen:
        return []
    return chosen or [default]


def _otlp_http() -> bool:
    protocol = os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc").strip().lower()
    return protocol.startswith("http")


def _export_timeout(argument: float | None) -> float:
    if argument is not None:
        if not argument > 0:
            raise ValueError(f"export_timeout_s must be positive, got {argument!r}")
        return float(argument)
    raw = os.environ.get("OTEL_EXPORTER_OTLP_TIMEOUT", "").strip()
    if raw:
        try:
            value = float(raw)
        except ValueError:
            _log.warning(
                "OTEL_EXPORTER_OTLP_TIMEOUT=%r is not a number of seconds; using %s", raw, DEFAULT_EXPORT_TIMEOUT_S
            )
        else:
            if value > 0:
                return value
    return DEFAULT_EXPORT_TIMEOUT_S


def _retry_budget(argument: float | None) -> float:
    if argument is not None:
        if not argument >= 0:
            raise ValueError(f"export_retry_s must be 0 or more, got {argument!r}")
        return float(argument)
    raw = os.environ.get(RETRY_ENV, "").strip()
    if raw:
        try:
            value = float(raw)
        except ValueError:
            value = -1.0
        if value >= 0:
            return value
        _log.warning("%s=%r is not a number of seconds; using %s", RETRY_ENV, raw, DEFAULT_RETRY_BUDGET_S)
    return DEFAULT_RETRY_BUDGET_S


def _bsp_setting(env: str, default: int) -> int | None:
    """``default`` unless the SDK's own variable ``env`` is set (then ``None``: the SDK reads it)."""
    return None if os.environ.get(env, "").strip() else default


def _span_exporter(
    kind: str, traces_file: Path | None, timeout_s: float, whole: bool, retry_after: RetryAfter | None = None
) -> SpanExporter | None:
    if kind == "otlp":
        if _otlp_http():
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
                OTLPSpanExporter as HttpSpanExporter,
            )

            if retry_after is not None and not os.environ.get(
                "OTEL_PYTHON_EXPORTER_OTLP_HTTP_TRACES_CREDENTIAL_PROVIDER"
            ):
                # a session that tells the retries what a 429 or 503 asked for (Retry-After)
                return HttpSpanExporter(timeout=timeout_s, session=retry_after.session())
            return HttpSpanExporter(timeout=timeout_s)
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter

        return GrpcSpanExporter(timeout=timeout_s)
    if kind == "console":
        return ConsoleSpanExporter()
    if kind == "file" and traces_file is not None:
        return OtlpJsonSpanExporter(traces_file, whole=whole)
    return None


def _metric_exporter(kind: str, metrics_file: Path | None, timeout_s: float, whole: bool) -> MetricExporter | None:
    if kind == "otlp":
        if _otlp_http():
            from opentelemetry.exporter.otlp.proto.http.metric_exporter import (
                OTLPMetricExporter as HttpMetricExporter,
            )

            return HttpMetricExporter(timeout=timeout_s)
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import (
            OTLPMetricExporter as GrpcMetricExporter,
        )

        return GrpcMetricExporter(timeout=timeout_s)
    if kind == "console":
        return ConsoleMetricExporter()
    if kind == "file" and metrics_file is not None:
        return OtlpJsonMetricExporter(metrics_file, whole=whole)
    return None


def _logger_provider(kinds: list[str], resource: Resource, timeout_s: float) -> Any:
    """An SDK logger provider exporting to ``kinds`` (``None`` for none)."""
    if not kinds:
        return None
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import BatchLogRecordProcessor, ConsoleLogExporter

    provider = LoggerProvider(resource=resource, shutdown_on_exit=False)
    for kind in kinds:
        exporter: Any
        if kind == "console":
            exporter = ConsoleLogExporter()
        elif _otlp_http():
            from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter as HttpLogExporter

            exporter = HttpLogExporter(timeout=timeout_s)
        else:
            from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter as GrpcLogExporter

            exporter = GrpcLogExporter(timeout=timeout_s)
        provider.add_log_record_processor(
            BatchLogRecordProcessor(exporter, export_timeout_millis=int(timeout_s * 1000))
        )
    return provider


def _prometheus_reader(port: int | None) -> tuple[MetricReader, int]:
    try:
        from opentelemetry.exporter.prometheus import PrometheusMetricReader
        from prometheus_client import start_http_server
    except ImportError as exc:
        raise RuntimeError("Prometheus export needs the extra: pip install 'rb-otel[prometheus]'") from exc
    host = os.environ.get("OTEL_EXPORTER_PROMETHEUS_HOST", DEFAULT_PROMETHEUS_HOST)
    if port is None:
        port = int(os.environ.get("OTEL_EXPORTER_PROMETHEUS_PORT", DEFAULT_PROMETHEUS_PORT))
    server, _thread = start_http_server(port, addr=host)
    return PrometheusMetricReader(), int(server.server_port)


def _tracer_provider(  # noqa: PLR0917 (private, one caller)
    resource: Resource,
    kinds: list[str],
    traces_file: str | Path | None,
    timeout_s: float,
    retry_s: float,
    descriptions: list[str],
    files: list[JsonLinesFile],
    whole: bool,
    spool: Path | None = None,
) -> tuple[TracerProvider, CountingSpanExporter | None, str, SpoolAtExit | None]:
    """The tracer provider, the exporter whose deliveries are counted (the first one), where it sends, and the export
    spool when ``spool`` names one and that exporter is OTLP. An OTLP exporter retries refused batches for
    ``retry_s`` seconds while its processor's queue holds what ends meanwhile (:mod:`rb_otel.telemetry.retry`)."""
    # No atexit shutdown: the caller shuts down (Providers.shutdown), and a Ctrl-C during that wait must end the
    # process rather than start the same bounded wait again from an exit handler.
    provider = TracerProvider(resource=resource, shutdown_on_exit=False)
    counting = spooled = None
    target = ""
    sizes: dict[str, Any] = {
        "max_queue_size": _bsp_setting("OTEL_BSP_MAX_QUEUE_SIZE", DEFAULT_MAX_QUEUE_SIZE),
        "schedule_delay_millis": _bsp_setting("OTEL_BSP_SCHEDULE_DELAY", DEFAULT_SCHEDULE_DELAY_MS),
        "export_timeout_millis": int(timeout_s * 1000),
    }
    for kind in kinds:  # each named exporter gets its own processor; the first is the one counted
        retry_after = RetryAfter() if kind == "otlp" and retry_s > 0 else None
        span_exporter = _span_exporter(kind, Path(traces_file) if traces_file else None, timeout_s, whole, retry_after)
        if span_exporter is None:
            continue
        if isinstance(span_exporter, OtlpJsonSpanExporter):
            files.append(span_exporter.written)
        where = str(kind if kind != "file" else traces_file)
        retrying = None
        if retry_after is not None:
            span_exporter = retrying = RetryingSpanExporter(span_exporter, budget_s=retry_s, retry_after=retry_after)
        if counting is None:
            span_exporter = counting = CountingSpanExporter(span_exporter)
            target = where
        processor = (
            HoldingBatchSpanProcessor(span_exporter, retrying, **sizes)
            if retrying is not None
            else BatchSpanProcessor(span_exporter, **sizes)
        )
        if spool is not None and kind == "otlp" and span_exporter is counting:
            spooled = _spool_at_exit(spool, processor, counting, retrying, timeout_s, retry_s)
            provider.add_span_processor(spooled)  # before the processor it empties
        provider.add_span_processor(processor)
        descriptions.append(f"traces -> {where}")
    if spool is not None and spooled is None:
        _log.warning("export spool %s not used: spans do not go to an OTLP endpoint first (%s)", spool, kinds)
    return provider, counting, target, spooled


def _spool_at_exit(  # noqa: PLR0917 (private, one caller)
    folder: Path,
    processor: BatchSpanProcessor,
    counting: CountingSpanExporter,
    retrying: RetryingSpanExporter | None,
    timeout_s: float,
    retry_s: float,
) -> SpoolAtExit:
    """The export spool in ``folder``, with its sender of what an earlier process kept already started."""
    spool = Spool(folder)
    sender = SpoolSender(spool, partial(_span_exporter, "otlp", None, timeout_s, False), budget_s=retry_s)
    return SpoolAtExit(spool, processor, counting, retrying, sender.start())


def _meter_provider(  # noqa: PLR0917 (private, one caller)
    resource: Resource,
    kinds: list[str],
    metrics_file: str | Path | None,
    prometheus_port: int | None,
    interval_ms: int,
    timeout_s: float,
    whole: bool,
    descriptions: list[str],
    files: list[JsonLinesFile],
) -> tuple[MeterProvider, int | None, dict[str, CountingMetricExporter]]:
    """The meter provider, the Prometheus endpoint's port (``None``: none), and the metric exporters counted."""
    readers: list[MetricReader] = []
    counted: dict[str, CountingMetricExporter] = {}
    served_port = None
    if "prometheus" in kinds or prometheus_port is not None:
        reader, served_port = _prometheus_reader(prometheus_port)
        readers.append(reader)
        descriptions.append(f"metrics -> Prometheus pull endpoint on port {served_port}")
    for kind in kinds:
        metric_exporter = _metric_exporter(kind, Path(metrics_file) if metrics_file else None, timeout_s, whole)
        if isinstance(metric_exporter, OtlpJsonMetricExporter):
            files.append(metric_exporter.written)
        elif kind == "otlp" and metric_exporter is not None:
            metric_exporter = counted[kind] = CountingMetricExporter(metric_exporter)
        if metric_exporter is not None:
            readers.append(
                PeriodicExportingMetricReader(
                    metric_exporter, export_interval_millis=interval_ms, export_timeout_millis=int(timeout_s * 1000)
                )
            )
            descriptions.append(f"metrics -> {kind if kind != 'file' else metrics_file}")
    return MeterProvider(resource=resource, metric_readers=readers, shutdown_on_exit=False), served_port, counted


#: Each keyword of :func:`configure` and its check (``TypeError``/``ValueError`` naming it and what it accepts).
_CHECKS: dict[str, Callable[[str, object], object]] = {
    "service_name": partial(check_str, optional=True),
    "traces_file": partial(check_path, optional=True),
    "metrics_file": partial(check_path, optional=True),
    "prometheus_port": partial(check_port, optional=True),
    "metric_interval_ms": partial(check_int, low=1),
    "fresh_files": check_bool,
    "export_timeout_s": partial(check_seconds, zero=False, optional=True),
    "handle_sigterm": check_bool,
    "export_retry_s": partial(check_seconds, zero=True, optional=True),
    "spool": partial(check_path, optional=True),
}


def _check_arguments(arguments: dict[str, object]) -> None:
    for name, value in arguments.items():
        _CHECKS[name](name, value)


def configure(
    *,
    service_name: str | None = None,
    traces_file: str | Path | None = None,
    metrics_file: str | Path | None = None,
    prometheus_port: int | None = None,
    metric_interval_ms: int = 5000,
    fresh_files: bool = False,
    export_timeout_s: float | None = None,
    handle_sigterm: bool = True,
    export_retry_s: float | None = None,
    spool: str | Path | None = None,
) -> Providers:
    """Build SDK providers from the environment; they are returned, not installed globally, and not shut down at
    exit: call :meth:`Providers.shutdown` when done (it flushes).

    ``prometheus_port`` (0 picks a free port) adds a pull endpoint whatever ``OTEL_METRICS_EXPORTER`` says.
    ``fresh_files`` writes each trace and metric file whole (the CLI's commands each write a new set): lines go
    to a temporary file beside it, renamed over it by :meth:`Providers.shutdown` (or on SIGTERM), so a file is
    replaced only once its new set is complete, and left as it was when the file exporter is not the one chosen
    (an OTLP endpoint set) or nothing was exported; without it the exporters append, as the Collector's ``file``
    exporter does. :attr:`Providers.files` says where each file's lines are and whether it could be written. A
    command checks the files can be written first (:func:`rb_otel.files.check_writable`). ``export_timeout_s``
    bounds each OTLP export: the argument, else ``OTEL_EXPORTER_OTLP_TIMEOUT`` (seconds), else
    :data:`DEFAULT_EXPORT_TIMEOUT_S`.

    ``export_retry_s``: how long a span batch the OTLP endpoint refused (down, 503, 429) is retried while the
    batch processor's queue holds what ends meanwhile: the argument, else ``RB_OTEL_EXPORT_RETRY_S``, else
    :data:`~rb_otel.telemetry.retry.DEFAULT_RETRY_BUDGET_S` (300 s); 0 leaves only the SDK's retries within one
    export timeout. ``docs/failure-handling.md`` has what each outage costs. ``spool``: a folder where spans the
    endpoint did not take by the process's end are kept, and sent by the next start with it (the argument, else
    ``RB_OTEL_EXPORT_SPOOL``, else none; :mod:`rb_otel.telemetry.spool`).

    ``handle_sigterm`` (default on, from the main thread): a SIGTERM ends the runs in flight with an error status,
    exports what ended and writes queued baselines (bounded, ``rb_otel.process_exit``), then runs the handler
    that was installed before (the default ends the process). Off for an application that manages signals
    itself: it can call ``rb_otel.handle_sigterm()`` where it suits it, or flush in its own handler.
    """
    _check_arguments(locals())
    timeout_s = _export_timeout(export_timeout_s)
    retry_s = _retry_budget(export_retry_s)
    attributes = {SERVICE_NAME: service_name} if service_name and not os.environ.get("OTEL_SERVICE_NAME") else {}
    resource = Resource.create(attributes)
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: DEFAULT_SERVICE_NAME}))
    has_endpoint = bool(os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"))
    default = "otlp" if has_endpoint else "file"
    traces_kinds = _choices("OTEL_TRACES_EXPORTER", ("otlp", "console", "none"), default)
    metrics_kinds = _choices("OTEL_METRICS_EXPORTER", ("otlp", "console", "prometheus", "none"), default)
    descriptions: list[str] = []
    files: list[JsonLinesFile] = []
    tracer_provider, counting, target, spooled = _tracer_provider(
        resource, traces_kinds, traces_file, timeout_s, retry_s, descriptions, files, fresh_files, spool_folder(spool)
    )
    meter_provider, served_port, counted = _meter_provider(
        resource, metrics_kinds, metrics_file, prometheus_port, metric_interval_ms, timeout_s, fresh_files,
        descriptions, files,
    )  # fmt: skip
    logs_kinds = _choices("OTEL_LOGS_EXPORTER", ("otlp", "console", "none"), "otlp" if has_endpoint else "none")
    logs_kinds = [kind for kind in logs_kinds if kind != "none"]  # the default without an endpoint is none
    logger_provider = _logger_provider(logs_kinds, resource, timeout_s)
    descriptions.extend(f"logs -> {kind}" for kind in logs_kinds)
    if handle_sigterm:
        process_exit.handle_sigterm()
    return Providers(tracer_provider, meter_provider, descriptions, served_port, counting, target,
                     logger_provider=logger_provider, files=files, metric_exporters=counted,
                     spool=spooled)  # fmt: skip
