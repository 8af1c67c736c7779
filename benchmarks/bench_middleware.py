"""Overhead of rb-otel per model call: the same create_agent agent with and without the middleware.

Workload (the performance issue's): a deterministic scripted model, 5 model calls and 4 tool calls per run,
sync invoke, spans through a BatchSpanProcessor into an in-memory exporter, metrics into an in-memory reader.
Bare and instrumented runs alternate one run at a time in one process (so slow drifts of this machine's speed
hit both alike); each pass reports the median of the per-pair ratios and the overhead per model call.
Numbers, not assertions.

    python benchmarks/bench_middleware.py [--runs 200] [--passes 5] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from rb_otel import ReasonBlocks
from rb_otel.testing import ScriptedChatModel, tool_call


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


SCRIPT = [
    tool_call("add", {"a": i, "b": i + 1}, f"c{i}", content=f"Adding {i} and {i + 1} next.") for i in range(4)
] + [AIMessage("The answer is 30.")]
MODEL_CALLS = 5


def build() -> tuple[Any, Any, InMemorySpanExporter]:
    model = ScriptedChatModel(script=SCRIPT)
    bare = create_agent(model, [add], system_prompt="You are a calculator.")
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(BatchSpanProcessor(exporter))
    meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
    rb = ReasonBlocks(tracer_provider=tracer_provider, meter_provider=meter_provider)
    steered = create_agent(
        model, [add], middleware=[rb.middleware(agent_name="bench")], system_prompt="You are a calculator."
    )
    return bare, steered, exporter


def time_runs(agent: Any, runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        out.append(_one(agent))
    return out


def _one(agent: Any) -> float:
    started = time.perf_counter()
    agent.invoke({"messages": [("user", "what is 1+2?")]})
    return (time.perf_counter() - started) * 1000


def time_pairs(bare: Any, steered: Any, runs: int) -> tuple[list[float], list[float]]:
    """``runs`` pairs, bare then steered; returns both timing lists (ms)."""
    bare_ms, steered_ms = [], []
    for _ in range(runs):
        bare_ms.append(_one(bare))
        steered_ms.append(_one(steered))
    return bare_ms, steered_ms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--passes", type=int, default=5)
    parser.add_argument("--json")
    args = parser.parse_args()
    bare, steered, exporter = build()
    time_runs(bare, 30)
    time_runs(steered, 30)
    rows = []
    for p in range(args.passes):
        bare_ms, steered_ms = time_pairs(bare, steered, args.runs)
        exporter.clear()
        b, st = statistics.median(bare_ms), statistics.median(steered_ms)
        ratio = statistics.median(s_ / b_ for b_, s_ in zip(bare_ms, steered_ms, strict=True))
        rows.append(
            {
                "pass": p,
                "bare_ms": b,
                "rb_otel_ms": st,
                "ratio": ratio,
                "overhead_per_model_call_us": statistics.median(
                    (s_ - b_) / MODEL_CALLS * 1000 for b_, s_ in zip(bare_ms, steered_ms, strict=True)
                ),
            }
        )
        print(
            f"pass {p}: bare {b:.2f} ms/run  rb-otel {st:.2f} ms/run  ratio {ratio:.2f}x  "
            f"overhead {rows[-1]['overhead_per_model_call_us']:.0f} us per model call"
        )
    ratio = statistics.median(r["ratio"] for r in rows)
    per_call = statistics.median(r["overhead_per_model_call_us"] for r in rows)
    print(f"median over passes: {ratio:.2f}x the bare agent, {per_call:.0f} us per model call")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"passes": rows, "ratio": ratio, "overhead_per_model_call_us": per_call}, f, indent=1)


if __name__ == "__main__":
    main()
