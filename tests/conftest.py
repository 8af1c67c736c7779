"""Shared fixtures: in-memory OpenTelemetry providers and scripted LangChain agents (no network)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from components import otlp_sink, redis_server  # noqa: F401  (fixtures, shared)
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from rb_otel.testing import tool_call

REQUIRE_REAL = os.environ.get("RB_OTEL_REQUIRE_REAL") == "1"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """Under RB_OTEL_REQUIRE_REAL=1 (set by .ci/run) a test that skips for a missing component fails instead."""
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if REQUIRE_REAL and report.skipped and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        report.longrepr = f"skipped, but RB_OTEL_REQUIRE_REAL=1 forbids skips: {report.longrepr}"


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Iterator[None]:
    """The same for a whole module skipped at collection (``pytest.skip(..., allow_module_level=True)``)."""
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if REQUIRE_REAL and report.skipped:
        report.outcome = "failed"
        report.longrepr = f"module skipped, but RB_OTEL_REQUIRE_REAL=1 forbids skips: {report.longrepr}"


@dataclass
class Otel:
    """In-memory tracer, meter and logger providers plus helpers to read what they recorded."""

    tracer_provider: TracerProvider
    meter_provider: MeterProvider
    exporter: InMemorySpanExporter
    reader: InMemoryMetricReader
    logger_provider: Any = None
    log_exporter: Any = None

    def logs(self, event_name: str = "") -> list[Any]:
        """The log records emitted (their ``log_record``), optionally only those of one event."""
        records = [r.log_record for r in self.log_exporter.get_finished_logs()] if self.log_exporter else []
        return [r for r in records if not event_name or r.event_name == event_name]

    def spans(self, prefix: str = "") -> list[ReadableSpan]:
        return [s for s in self.exporter.get_finished_spans() if s.name.startswith(prefix)]

    def metric_points(self, name: str) -> list[tuple[dict[str, Any], Any]]:
        """``(attributes, value or count)`` of every data point of metric ``name``."""
        data = self.reader.get_metrics_data()
        points: list[tuple[dict[str, Any], Any]] = []
        if data is None:
            return points
        for rm in data.resource_metrics:
            for sm in rm.scope_metrics:
                for metric in sm.metrics:
                    if metric.name == name:
                        for p in metric.data.data_points:
                            points.append((dict(p.attributes or {}), p.value if hasattr(p, "value") else p))
        return points

    def metric_sum(self, name: str, **match: Any) -> float:
        total = 0.0
        for attrs, value in self.metric_points(name):
            if all(attrs.get(k.replace("__", ".")) == v for k, v in match.items()):
                total += value if isinstance(value, int | float) else value.count
        return total


@pytest.fixture
def otel() -> Iterator[Otel]:
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    logger_provider, log_exporter = _in_memory_logs()
    yield Otel(tracer_provider, meter_provider, exporter, reader, logger_provider, log_exporter)
    tracer_provider.shutdown()
    meter_provider.shutdown()
    logger_provider.shutdown()


def _in_memory_logs() -> tuple[Any, Any]:
    """An SDK logger provider exporting to memory (the exporter's name changed across SDK releases)."""
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs import export as logs_export

    exporter_class = getattr(logs_export, "InMemoryLogRecordExporter", None) or logs_export.InMemoryLogExporter
    exporter = exporter_class()
    provider = LoggerProvider()
    provider.add_log_record_processor(logs_export.SimpleLogRecordProcessor(exporter))
    return provider, exporter


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def explode(a: int) -> int:
    """A tool that always raises."""
    raise ValueError(f"tool failure for {a}")


def calc_script(n_calls: int = 4, thought: str = "Adding the next pair of numbers.") -> list[AIMessage]:
    """``n_calls`` tool calls then a final answer: ``n_calls + 1`` model calls per run."""
    calls = [tool_call("add", {"a": i, "b": i + 1}, f"call_{i}", content=thought) for i in range(n_calls)]
    return [*calls, AIMessage("The answer is 30.")]
