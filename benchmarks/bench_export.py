"""Span export throughput to a local collector: rotel on 127.0.0.1 receiving OTLP/gRPC (and discarding).

Creates spans shaped like rb-otel's chat spans as fast as one process can for ``--seconds``, through a
``BatchSpanProcessor`` (default settings unless flags say otherwise) and the OTLP gRPC exporter, then reports
spans created per second, spans exported, and spans lost (created - exported).

    python benchmarks/bench_export.py [--seconds 5] [--max-queue 2048] [--batch 512] [--delay-ms 5000]
"""

from __future__ import annotations

import argparse
import importlib.resources
import socket
import subprocess
import time

from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from rb_otel.telemetry.export import CountingSpanExporter

ATTRIBUTES = {
    "gen_ai.operation.name": "chat",
    "gen_ai.request.model": "m",
    "rb.step": 3,
    "rb.fsm_state": "NORMAL",
    "rb.difficulty": 0.42,
    "rb.tokens": 512,
    "rb.monitors_fired": ["semantic_loop"],
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--max-queue", type=int, default=2048)
    parser.add_argument("--batch", type=int, default=512)
    parser.add_argument("--delay-ms", type=int, default=5000)
    args = parser.parse_args()
    agent = str(importlib.resources.files("rotel") / "rotel-agent")
    port = free_port()
    command = [
        agent,
        "start",
        "--otlp-grpc-endpoint",
        f"127.0.0.1:{port}",
        "--otlp-http-endpoint",
        f"127.0.0.1:{free_port()}",
        "--exporter",
        "blackhole",
    ]
    rotel = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.1)
        exporter = CountingSpanExporter(OTLPSpanExporter(endpoint=f"127.0.0.1:{port}", insecure=True))
        provider = TracerProvider()
        processor = BatchSpanProcessor(
            exporter,
            max_queue_size=args.max_queue,
            max_export_batch_size=args.batch,
            schedule_delay_millis=args.delay_ms,
        )
        provider.add_span_processor(processor)
        tracer = provider.get_tracer("bench")
        created = 0
        started = time.perf_counter()
        deadline = started + args.seconds
        while time.perf_counter() < deadline:
            for _ in range(100):
                tracer.start_span("chat m", attributes=ATTRIBUTES).end()
            created += 100
        elapsed = time.perf_counter() - started
        provider.force_flush(30_000)
        provider.shutdown()
        lost = created - exporter.exported - exporter.dropped
        print(
            f"created {created} spans in {elapsed:.1f} s = {created / elapsed:,.0f} spans/s; exported "
            f"{exporter.exported}; failed exports {exporter.dropped}; lost in the queue {lost} "
            f"(max_queue={args.max_queue}, batch={args.batch}, delay={args.delay_ms} ms)"
        )
    finally:
        rotel.terminate()
        rotel.wait(timeout=10)


if __name__ == "__main__":
    main()
