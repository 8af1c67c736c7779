"""Many runs in parallel threads through ONE middleware instance: throughput, correctness, lock waits.

For each thread count, ``--runs`` agent runs (the performance issue's workload: 5 model calls, 4 tool calls) are
submitted to a thread pool of that size, once for the bare agent and once for the steered one, and the table
shows runs per second, the ratio, and how busy the CPU was (process CPU seconds / wall seconds; 1.0 is one core).
CPython runs one thread at a time, so throughput is expected to stay flat once one core is busy; a lock convoy
would show as throughput falling as threads are added. Afterwards it checks that nothing leaked between runs:
every run has its own 5 chat spans with steps 0..4 under its own root, and ``rb.runs.active`` is back to 0.

    python benchmarks/bench_scale.py [--runs 1000] [--threads 1,4,16,64,256,1000] [--json FILE]

Run it under ``py-spy record --idle`` (``make profile``) to see where threads wait.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from langchain.agents import create_agent
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from peer_run import SCRIPT, add

from rb_otel import ReasonBlocks
from rb_otel.testing import ScriptedChatModel


def run_all(agent: Any, runs: int, threads: int) -> tuple[float, float]:
    """Wall seconds and CPU seconds for ``runs`` invocations on a pool of ``threads``."""
    cpu0, wall0 = sum(os.times()[:2]), time.perf_counter()
    with ThreadPoolExecutor(max_workers=threads) as pool:
        for future in [pool.submit(agent.invoke, {"messages": [("user", "what is 1+2?")]}) for _ in range(runs)]:
            future.result()
    return time.perf_counter() - wall0, sum(os.times()[:2]) - cpu0


def check_isolation(exporter: InMemorySpanExporter, runs: int) -> str:
    """Every run has its own root and exactly steps 0..4 on its chat spans."""
    spans = exporter.get_finished_spans()
    roots = {s.context.trace_id for s in spans if s.name.startswith("invoke_agent")}
    steps: dict[int, list[int]] = defaultdict(list)
    for span in spans:
        if span.name.startswith("chat") and span.attributes is not None:
            steps[span.context.trace_id].append(int(span.attributes["rb.step"]))  # type: ignore[arg-type]
    bad = sum(1 for trace_id in roots if sorted(steps[trace_id]) != [0, 1, 2, 3, 4])
    return f"{len(roots)}/{runs} runs with their own root, {bad} with wrong steps, {len(spans)} spans"


def runs_active(reader: InMemoryMetricReader) -> float:
    data = reader.get_metrics_data()
    total = 0.0
    for resource in data.resource_metrics if data else []:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name == "rb.runs.active":
                    total += sum(p.value for p in metric.data.data_points)  # type: ignore[attr-defined]
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--threads", default="1,4,16,64,256,1000")
    parser.add_argument("--json")
    args = parser.parse_args()
    model = ScriptedChatModel(script=SCRIPT)
    bare = create_agent(model, [add], system_prompt="You are a calculator.")
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    # Simple (synchronous) export into memory: every span is kept, so isolation can be checked exactly.
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    rb = ReasonBlocks(tracer_provider=tracer_provider, meter_provider=MeterProvider(metric_readers=[reader]))
    steered = create_agent(
        model, [add], middleware=[rb.middleware(agent_name="scale")], system_prompt="You are a calculator."
    )
    run_all(bare, 50, 4)
    run_all(steered, 50, 4)
    exporter.clear()
    rows = []
    print(f"{'threads':>7} {'bare runs/s':>12} {'rb-otel runs/s':>15} {'ratio':>6} {'CPU busy (cores)':>17}  isolation")
    for threads in [int(t) for t in args.threads.split(",")]:
        bare_wall, _ = run_all(bare, args.runs, threads)
        wall, cpu = run_all(steered, args.runs, threads)
        isolation = check_isolation(exporter, args.runs)
        exporter.clear()
        row = {
            "threads": threads,
            "bare_runs_per_s": args.runs / bare_wall,
            "rb_otel_runs_per_s": args.runs / wall,
            "ratio": wall / bare_wall,
            "cpu_cores_busy": cpu / wall,
            "isolation": isolation,
        }
        rows.append(row)
        print(
            f"{threads:>7} {row['bare_runs_per_s']:>12.1f} {row['rb_otel_runs_per_s']:>15.1f} {row['ratio']:>5.2f}x"
            f" {row['cpu_cores_busy']:>17.2f}  {isolation}"
        )
    active = runs_active(reader)
    print(f"rb.runs.active after all runs: {active:g}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows, "runs_active_after": active}, f, indent=1)


if __name__ == "__main__":
    main()
