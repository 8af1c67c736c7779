"""One benchmark variant in a fresh process (instrumentors patch LangChain globally): prints one JSON line.

    python benchmarks/peer_run.py VARIANT --runs 100

Variants: ``bare``, ``rb-otel``, ``openllmetry``, ``openinference``. The workload is the performance
issue's: create_agent with a deterministic scripted model, 5 model calls and 4 tool calls per run, sync invoke,
spans through a BatchSpanProcessor into an in-memory exporter (cleared between runs), metrics into an in-memory
reader.
"""

from __future__ import annotations

import argparse
import gc
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

from rb_otel.testing import ScriptedChatModel, tool_call


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


SCRIPT = [tool_call("add", {"a": i, "b": i + 1}, f"c{i}", content=f"Adding {i} and {i + 1} next.") for i in range(4)]
SCRIPT.append(AIMessage("The answer is 30."))


def _rss_mb() -> float:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * 4096 / 1e6


def build(variant: str, tracer_provider: TracerProvider, meter_provider: MeterProvider) -> Any:
    model = ScriptedChatModel(script=SCRIPT)
    middleware: list[Any] = []
    if variant == "rb-otel":
        from rb_otel import ReasonBlocks

        rb = ReasonBlocks(tracer_provider=tracer_provider, meter_provider=meter_provider)
        middleware = [rb.middleware(agent_name="bench")]
    elif variant == "openllmetry":
        from opentelemetry.instrumentation.langchain import LangchainInstrumentor

        LangchainInstrumentor().instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)
    elif variant == "openinference":
        from openinference.instrumentation.langchain import LangChainInstrumentor

        LangChainInstrumentor().instrument(tracer_provider=tracer_provider)
    elif variant != "bare":
        raise SystemExit(f"unknown variant {variant}")
    return create_agent(model, [add], middleware=middleware, system_prompt="You are a calculator.")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("variant")
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=20)
    args = parser.parse_args()
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(BatchSpanProcessor(exporter))
    meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
    agent = build(args.variant, tracer_provider, meter_provider)
    for _ in range(args.warmup):
        agent.invoke({"messages": [("user", "what is 1+2?")]})
    tracer_provider.force_flush()
    spans_per_run = len(exporter.get_finished_spans()) / max(args.warmup, 1)
    exporter.clear()
    gc.collect()
    rss_before = _rss_mb()
    timings = []
    for _ in range(args.runs):
        started = time.perf_counter()
        agent.invoke({"messages": [("user", "what is 1+2?")]})
        timings.append((time.perf_counter() - started) * 1000)
    tracer_provider.force_flush()
    exporter.clear()
    gc.collect()
    print(
        json.dumps(
            {
                "variant": args.variant,
                "median_ms": statistics.median(timings),
                "min_ms": min(timings),
                "max_ms": max(timings),
                "spans_per_run": spans_per_run,
                "rss_growth_mb": _rss_mb() - rss_before,
            }
        )
    )


if __name__ == "__main__":
    main()
