"""One benchmark variant in a fresh process (instrumentors patch LangChain globally): prints one JSON line.

    python benchmarks/peer_run.py VARIANT --runs 100

Variants: ``bare``, ``rb-otel``, ``openllmetry``, ``openllmetry-nocontent`` (``TRACELOOP_TRACE_CONTENT=false``),
``openinference``, ``agento11y`` (its generation export discarded in-process, spans and metrics to the same
providers; it is a callback handler, so it is passed in the run's config). The workload is the performance
issue's: create_agent with a deterministic scripted model, 5 model calls and 4 tool calls per run, sync invoke,
spans through a BatchSpanProcessor into an in-memory exporter (cleared between runs), metrics into an in-memory
reader.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
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
#: The 1-call workload: one model call, no tool (the fixed per-run cost of each package).
ONE_CALL = [AIMessage("The answer is 3.")]


def _rss_mb() -> float:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * 4096 / 1e6


class _DiscardGenerations:
    """agento11y's generation exporter protocol, accepting everything and sending nothing."""

    def export_generations(self, request: Any) -> Any:
        from agento11y.models import ExportGenerationResult, ExportGenerationsResponse

        return ExportGenerationsResponse(
            results=[ExportGenerationResult(generation_id=g.id, accepted=True) for g in request.generations]
        )

    def export_workflow_steps(self, request: Any) -> Any:
        from agento11y.models import ExportWorkflowStepsResponse

        return ExportWorkflowStepsResponse(results=[])

    def shutdown(self) -> None:
        pass


def build(
    variant: str, tracer_provider: TracerProvider, meter_provider: MeterProvider, script: list[AIMessage] = SCRIPT
) -> tuple[Any, dict[str, Any]]:
    """The agent for ``variant`` and the config to invoke it with."""
    model = ScriptedChatModel(script=script)
    middleware: list[Any] = []
    config: dict[str, Any] = {}
    if variant == "rb-otel":
        from rb_otel import ReasonBlocks

        rb = ReasonBlocks(tracer_provider=tracer_provider, meter_provider=meter_provider)
        middleware = [rb.middleware(agent_name="bench")]
    elif variant == "agento11y":
        from agento11y import Client
        from agento11y.config import ClientConfig
        from agento11y_langchain import Agento11yLangChainHandler

        client = Client(
            ClientConfig(
                tracer_provider=tracer_provider,
                meter_provider=meter_provider,
                generation_exporter=_DiscardGenerations(),
            )
        )
        config = {"callbacks": [Agento11yLangChainHandler(client=client, agent_name="bench")]}
    elif variant.startswith("openllmetry"):
        if variant == "openllmetry-nocontent":
            os.environ["TRACELOOP_TRACE_CONTENT"] = "false"
        from opentelemetry.instrumentation.langchain import LangchainInstrumentor

        LangchainInstrumentor().instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)
    elif variant == "openinference":
        from openinference.instrumentation.langchain import LangChainInstrumentor

        LangChainInstrumentor().instrument(tracer_provider=tracer_provider)
    elif variant != "bare":
        raise SystemExit(f"unknown variant {variant}")
    return create_agent(model, [add], middleware=middleware, system_prompt="You are a calculator."), config


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("variant")
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--calls", type=int, choices=(1, 5), default=5, help="model calls per run")
    args = parser.parse_args()
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(BatchSpanProcessor(exporter))
    meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
    agent, config = build(args.variant, tracer_provider, meter_provider, SCRIPT if args.calls == 5 else ONE_CALL)
    for _ in range(args.warmup):
        agent.invoke({"messages": [("user", "what is 1+2?")]}, config=config)
    tracer_provider.force_flush()
    spans_per_run = len(exporter.get_finished_spans()) / max(args.warmup, 1)
    exporter.clear()
    gc.collect()
    rss_before = _rss_mb()
    timings = []
    for i in range(args.runs):
        started = time.perf_counter()
        agent.invoke({"messages": [("user", "what is 1+2?")]}, config=config)
        timings.append((time.perf_counter() - started) * 1000)
        if i % 20 == 19:  # drain, so no variant is slowed by a growing heap of finished spans
            tracer_provider.force_flush()
            exporter.clear()
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
