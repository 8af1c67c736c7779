"""Surviving the collector: absent, killed mid-run, restarted; and 200 concurrent runs through it.

The collector is rotel on 127.0.0.1 forwarding to a real OTLP/HTTP receiver (the ``otlp_sink`` fixture).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import threading
import tracemalloc
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from components import free_port, process, rotel_agent, wait_until
from conftest import add, calc_script
from langchain.agents import create_agent
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from rb_otel import ReasonBlocks
from rb_otel.telemetry.export import CountingSpanExporter
from rb_otel.testing import ScriptedChatModel


class Collector:
    """rotel on 127.0.0.1:<grpc_port>, forwarding to the sink; can be stopped and started again."""

    def __init__(self, tmp: Path, sink_port: int) -> None:
        self.agent = rotel_agent()
        self.grpc_port = free_port()
        self.http_port = free_port()
        self.sink_port = sink_port
        self.tmp = tmp
        self._cm: Any = None
        self.starts = 0

    def start(self) -> None:
        self.starts += 1
        args = [
            self.agent,
            "start",
            "--otlp-grpc-endpoint",
            f"127.0.0.1:{self.grpc_port}",
            "--otlp-http-endpoint",
            f"127.0.0.1:{self.http_port}",
            "--exporter",
            "otlp",
            "--otlp-exporter-endpoint",
            f"http://127.0.0.1:{self.sink_port}",
            "--otlp-exporter-protocol",
            "http",
            "--batch-timeout",
            "100ms",
        ]
        self._cm = process(args, self.tmp / f"rotel-{self.starts}.log")
        self._cm.__enter__()
        wait_until(lambda: _listening(self.grpc_port), timeout=120, what="rotel")

    def stop(self) -> None:
        if self._cm is not None:
            self._cm.__exit__(None, None, None)
            self._cm = None


def _listening(port: int) -> bool:
    import socket

    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture
def collector(tmp_path: Path, otlp_sink: tuple[int, list[Any]]) -> Iterator[Collector]:
    c = Collector(tmp_path, otlp_sink[0])
    yield c
    c.stop()


#: A calc_script run: its invoke_agent span, five chat spans and four execute_tool spans.
SPANS_PER_RUN = 10


def received_run_ids(received: list[Any]) -> set[str]:
    ids = set()
    for request in received:
        for rs in request.resource_spans:
            for ss in rs.scope_spans:
                for span in ss.spans:
                    for attr in span.attributes:
                        if attr.key == "rb.run_id":
                            ids.add(attr.value.string_value)
    return ids


def spans_of(received: list[Any]) -> list[Any]:
    return [s for r in received for rs in r.resource_spans for ss in rs.scope_spans for s in ss.spans]


def provider_for(port: int) -> tuple[TracerProvider, CountingSpanExporter]:
    exporter = CountingSpanExporter(OTLPSpanExporter(endpoint=f"127.0.0.1:{port}", insecure=True, timeout=1))
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=100))
    return provider, exporter


def test_agent_survives_collector_absent_killed_and_restarted(
    collector: Collector, otlp_sink: tuple[int, list[Any]], caplog: pytest.LogCaptureFixture
) -> None:
    _, received = otlp_sink
    caplog.set_level(logging.WARNING, logger="rb_otel")
    provider, exporter = provider_for(collector.grpc_port)
    rb = ReasonBlocks(tracer_provider=provider, meter_provider=MeterProvider())
    agent = create_agent(
        ScriptedChatModel(script=calc_script(), sleep_s=0.02), [add], middleware=[rb.middleware(agent_name="faults")]
    )

    def invoke(outputs: list[dict[str, Any]], run_id: uuid.UUID) -> None:
        outputs.append(agent.invoke({"messages": [("user", "x")]}, {"run_id": run_id}))

    def runs(n: int) -> list[str]:
        ids = []
        for _ in range(n):
            run_id = uuid.uuid4()
            outputs: list[dict[str, Any]] = []
            worker = threading.Thread(target=invoke, args=(outputs, run_id), daemon=True)
            worker.start()
            worker.join(timeout=120)  # a hang guard on the run finishing: export problems never hold it up
            assert not worker.is_alive(), "an export problem held the agent run up for 2 minutes"
            assert outputs[0]["messages"][-1].content == "The answer is 30."  # same result in every phase
            ids.append(str(run_id))
        return ids

    def until_export_recovers(event: str) -> None:
        # What the exporter sends while gRPC is still reconnecting (its backoff after failed exports) is dropped:
        # the SDK's behaviour, and which spans it hits is timing. Run until a run's spans get through again.
        probes: list[str] = []

        def recovered() -> bool:
            probes.extend(runs(1))
            provider.force_flush(10_000)
            return bool(set(probes) & received_run_ids(received))

        wait_until(recovered, timeout=120, what=f"export to recover after {event}")

    absent = runs(3)  # no collector listening yet
    provider.force_flush(10_000)
    assert exporter.dropped > 0
    assert any("span export failed" in r.getMessage() for r in caplog.records)

    collector.start()
    until_export_recovers("the start")
    up = runs(3)
    provider.force_flush(10_000)
    wait_until(lambda: set(up) <= received_run_ids(received), timeout=120, what="spans after start")

    accounted = exporter.exported + exporter.dropped
    killer = threading.Timer(0.1, collector.stop)  # killed while runs are in flight
    killer.start()
    during = runs(4)
    killer.join()
    provider.force_flush(10_000)
    # Every span of those runs was either acknowledged or dropped and counted: none vanished uncounted.
    assert exporter.exported + exporter.dropped - accounted == 4 * SPANS_PER_RUN

    collector.start()
    until_export_recovers("the restart")
    after = runs(3)
    provider.force_flush(10_000)
    wait_until(lambda: set(after) <= received_run_ids(received), timeout=120, what="spans after the restart")
    assert not set(absent) & received_run_ids(received)  # dropped, and counted above, not resent later
    assert len(during) == 4
    assert any("recovered" in r.getMessage() for r in caplog.records)
    provider.shutdown()


def _rss_mb() -> float:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * 4096 / 1e6


@pytest.mark.serial  # a time bound: measured alone, not beside other workers on two cores
def test_200_concurrent_runs_every_span_arrives_no_leak_memory_returns(
    collector: Collector, otlp_sink: tuple[int, list[Any]]
) -> None:
    _, received = otlp_sink
    collector.start()
    provider, exporter = provider_for(collector.grpc_port)
    rb = ReasonBlocks(tracer_provider=provider, meter_provider=MeterProvider())
    mw = rb.middleware(agent_name="load", step_log_in_state=True)
    agent = create_agent(ScriptedChatModel(script=calc_script()), [add], middleware=[mw])
    for _ in range(10):  # warm-up: caches, imports, thread pools
        agent.invoke({"messages": [("user", "x")]})
    provider.force_flush(10_000)
    # let the collector deliver the warm-up batches before they are forgotten (a bounded poll, not a sleep)
    wait_until(lambda: len(spans_of(received)) >= 10 * SPANS_PER_RUN, timeout=120, what="the warm-up spans")
    received.clear()
    gc.collect()
    tracemalloc.start()
    baseline = tracemalloc.get_traced_memory()[0]

    outputs: list[dict[str, Any]] = []
    lock = threading.Lock()

    def thread_run() -> None:
        out = agent.invoke({"messages": [("user", "x")]})
        with lock:
            outputs.append(out)

    threads = [threading.Thread(target=thread_run) for _ in range(100)]
    for t in threads:
        t.start()

    async def tasks() -> list[dict[str, Any]]:
        return await asyncio.gather(*(agent.ainvoke({"messages": [("user", "y")]}) for _ in range(100)))

    outputs += asyncio.run(tasks())
    for t in threads:
        t.join()
    assert len(outputs) == 200 and mw.active_runs == 0
    run_ids = {o["rb_run_id"] for o in outputs}
    provider.force_flush(30_000)
    expected_spans = 200 * (1 + 5 + 4)

    def ours() -> list[Any]:
        everything = spans_of(received)
        traces = {
            s.trace_id
            for s in everything
            if any(a.key == "rb.run_id" and a.value.string_value in run_ids for a in s.attributes)
        }
        return [s for s in everything if s.trace_id in traces]

    wait_until(lambda: len(ours()) >= expected_spans, timeout=300, what="all 2,000 spans")
    spans = ours()
    assert len(spans) == expected_spans and exporter.dropped == 0
    # no cross-run leak: each run's children sit in its own trace under its own root, steps 0..4 exactly
    roots = {s.span_id: s for s in spans if s.name.startswith("invoke_agent")}
    by_root: dict[bytes, list[Any]] = {}
    for s in spans:
        if s.parent_span_id in roots:
            by_root.setdefault(s.parent_span_id, []).append(s)
    assert len(roots) == 200 and len(by_root) == 200
    for root_id, children in by_root.items():
        assert all(c.trace_id == roots[root_id].trace_id for c in children)
        steps = sorted(
            a.value.int_value
            for c in children
            if c.name.startswith("chat ")
            for a in c.attributes
            if a.key == "rb.step"
        )
        assert steps == [0, 1, 2, 3, 4]
    assert run_ids <= received_run_ids(received) and len(run_ids) == 200
    outputs.clear()
    del spans, roots, by_root
    received.clear()
    gc.collect()
    growth_mb = (tracemalloc.get_traced_memory()[0] - baseline) / 1e6
    tracemalloc.stop()
    assert growth_mb < 8, f"{growth_mb:.1f} MB still allocated after the runs (bounded histories only)"
    provider.shutdown()
