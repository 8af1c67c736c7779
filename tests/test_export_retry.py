"""The exporter ``rb_otel.configure()`` builds holds spans through an outage: a refused batch is retried (as long as
a 429's ``Retry-After`` asks, never sooner), within a budget, and every way out stays bounded.

The endpoint is a real OTLP/HTTP receiver in its own process (``benchmarks/otlp_receiver.py``), told to refuse.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from components import free_port, wait_until

from rb_otel import ReasonBlocks
from rb_otel.telemetry.retry import RetryingSpanExporter
from rb_otel.telemetry.setup import Providers, configure

RECEIVER = Path(__file__).resolve().parents[1] / "benchmarks" / "otlp_receiver.py"
THOUGHTS = ["Reading the file.", "Maybe it is the parser, not sure.", "Writing the fix now."]
SPANS = len(THOUGHTS) + 1  # a chat span per step and the run's own


class Receiver:
    def __init__(self, out: Path) -> None:
        self.proc = subprocess.Popen([sys.executable, str(RECEIVER), str(out)], stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        self.url = f"http://127.0.0.1:{json.loads(self.proc.stdout.readline())['port']}"

    def control(self, mode: str, retry_after: float | None = None) -> None:
        import urllib.request

        query = f"mode={mode}" + (f"&retry_after={retry_after:g}" if retry_after is not None else "")
        urllib.request.urlopen(urllib.request.Request(f"{self.url}/control?{query}", data=b""), timeout=5).read()

    def stats(self) -> dict[str, Any]:
        from components import http_json

        return dict(http_json(f"{self.url}/stats"))


@pytest.fixture
def receiver(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Receiver]:
    served = Receiver(tmp_path / "out")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", served.url)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
    monkeypatch.setenv("OTEL_METRICS_EXPORTER", "none")
    monkeypatch.setenv("OTEL_LOGS_EXPORTER", "none")
    for name in (
        "OTEL_TRACES_EXPORTER",
        "OTEL_BSP_SCHEDULE_DELAY",
        "OTEL_BSP_MAX_QUEUE_SIZE",
        "RB_OTEL_EXPORT_RETRY_S",
    ):
        monkeypatch.delenv(name, raising=False)
    yield served
    served.proc.terminate()
    served.proc.wait(timeout=10)


def _run(providers: Providers) -> None:
    rb = ReasonBlocks(tracer_provider=providers.tracer_provider, meter_provider=providers.meter_provider)
    session = rb.session(agent_name="retry")
    for thought in THOUGHTS:
        session.end_step(session.begin_step(thought=thought), tokens=5)
    session.finish()


def _retrying(providers: Providers) -> RetryingSpanExporter:
    assert providers.span_exporter is not None
    inner = providers.span_exporter.inner
    assert isinstance(inner, RetryingSpanExporter)
    return inner


def _bounded(action: Any, timeout: float = 20) -> None:
    """Run ``action`` on a thread; it must have returned within ``timeout`` seconds (no hang)."""
    thread = threading.Thread(target=action, daemon=True)
    thread.start()
    thread.join(timeout)
    assert not thread.is_alive(), f"{action} still waiting after {timeout:.0f} s"


def test_a_429_that_says_when_to_come_back_loses_no_span(receiver: Receiver) -> None:
    receiver.control("429", retry_after=6)  # longer than the export timeout: the SDK alone drops the batch
    providers = configure(export_timeout_s=2, handle_sigterm=False)
    _run(providers)
    wait_until(lambda: len(receiver.stats()["refused_at"]) >= 2, timeout=40, what="a refusal and a retry")
    assert not providers.tracer_provider.force_flush(5_000)  # failing: the flush says so at once, drops nothing
    receiver.control("ok")
    wait_until(lambda: receiver.stats()["spans"] >= SPANS, timeout=40, what="the spans, once served")
    refused = receiver.stats()["refused_at"]
    assert min(b - a for a, b in itertools.pairwise(refused)) >= 6 - 0.05  # never sooner than asked
    _bounded(providers.shutdown)
    assert providers.span_exporter is not None
    assert (providers.span_exporter.exported, providers.span_exporter.dropped) == (SPANS, 0)
    assert _retrying(providers).retries >= 1 and not _retrying(providers).failing


def test_without_the_retries_the_same_429_drops_the_batch(receiver: Receiver) -> None:
    receiver.control("429", retry_after=6)
    providers = configure(export_timeout_s=2, export_retry_s=0, handle_sigterm=False)
    _run(providers)
    _bounded(lambda: providers.tracer_provider.force_flush(10_000))
    _bounded(providers.shutdown)
    assert providers.span_exporter is not None
    assert (providers.span_exporter.exported, providers.span_exporter.dropped) == (0, SPANS)  # the SDK's answer
    assert receiver.stats()["spans"] == 0


def test_a_503_is_retried_until_the_endpoint_serves_again(receiver: Receiver) -> None:
    receiver.control("503")  # no Retry-After: the backoff paces the retries
    providers = configure(export_timeout_s=1, handle_sigterm=False)
    _run(providers)
    wait_until(lambda: _retrying(providers).retries >= 2, timeout=40, what="two retries")
    receiver.control("ok")
    wait_until(lambda: receiver.stats()["spans"] >= SPANS, timeout=40, what="the spans, once served")
    _bounded(providers.shutdown)
    assert providers.span_exporter is not None and providers.span_exporter.dropped == 0


def test_a_permanent_refusal_is_not_retried(receiver: Receiver) -> None:
    receiver.control("400")  # a 4xx other than 429: the same batch would be refused again
    providers = configure(export_timeout_s=2, handle_sigterm=False)
    _run(providers)
    _bounded(lambda: providers.tracer_provider.force_flush(10_000))
    assert _retrying(providers).retries == 0
    _bounded(providers.shutdown)
    assert providers.span_exporter is not None and providers.span_exporter.dropped == SPANS


def test_an_outage_past_the_budget_drops_the_batch_and_counts_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{free_port()}")  # nobody listens
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
    monkeypatch.setenv("OTEL_METRICS_EXPORTER", "none")
    monkeypatch.setenv("RB_OTEL_EXPORT_RETRY_S", "1.5")  # the variable, read when no argument is given
    providers = configure(export_timeout_s=0.5, handle_sigterm=False)
    assert _retrying(providers).budget_s == 1.5
    _run(providers)
    assert providers.span_exporter is not None
    wait_until(lambda: providers.span_exporter.dropped == SPANS, timeout=30, what="the batch given up on")  # type: ignore[union-attr]
    assert providers.span_exporter.exported == 0
    _bounded(providers.shutdown)


def test_shutdown_during_an_outage_stops_the_retries_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{free_port()}")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
    monkeypatch.setenv("OTEL_METRICS_EXPORTER", "none")
    providers = configure(export_timeout_s=0.5, handle_sigterm=False)  # a 300 s budget
    _run(providers)
    wait_until(lambda: _retrying(providers).retries >= 1, timeout=30, what="a retry")
    _bounded(lambda: providers.tracer_provider.force_flush(30_000), timeout=5)  # says False, does not wait
    _bounded(providers.shutdown, timeout=10)  # not the 300 s budget
    assert providers.span_exporter is not None and providers.span_exporter.dropped == SPANS


def test_bad_budgets_are_refused_at_the_boundary(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    with pytest.raises(ValueError, match=r"export_retry_s: expected seconds .*got -1"):
        configure(export_retry_s=-1, handle_sigterm=False)
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "otlp")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{free_port()}")
    monkeypatch.setenv("OTEL_METRICS_EXPORTER", "none")
    monkeypatch.setenv("RB_OTEL_EXPORT_RETRY_S", "soon")
    providers = configure(handle_sigterm=False)
    assert _retrying(providers).budget_s == 300
    assert any("RB_OTEL_EXPORT_RETRY_S='soon' is not a number of seconds" in r.getMessage() for r in caplog.records)
    _bounded(providers.shutdown)
