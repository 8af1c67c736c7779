"""Overhead of rb-otel per model call: the same create_agent agent bare, with the middleware and with the model
wrapper (``rb.chat_model``).

Workload (the performance issue's): a deterministic scripted model, 5 model calls and 4 tool calls per run,
sync invoke, spans through a BatchSpanProcessor into an in-memory exporter, metrics into an in-memory reader.
Bare and instrumented runs alternate one run at a time in one process (so slow drifts of this machine's speed
hit all alike); each pass reports the median of the per-run ratios against the bare run beside it and the
overhead per model call. Numbers, not assertions.

    python benchmarks/bench_middleware.py [--runs 200] [--passes 5] [--json FILE] [--reasoning-chars N]

``--reasoning-chars N``: the long-reasoning variant: each model turn carries N characters of reasoning (a
standard ``reasoning`` content block beside its text, as reasoning models answer through LangChain), which the
step scorer reads with the thought.
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


def script(reasoning_chars: int = 0, *, as_text: bool = False) -> list[AIMessage]:
    """The workload's five answers; with ``reasoning_chars``, each with a reasoning block of that many characters
    (real agent text from the benchmark corpus, a different mix per turn), or with ``as_text`` that text as the
    answer's visible text (a model that thinks aloud: the thought itself is long)."""
    if reasoning_chars <= 0:
        return SCRIPT
    from _thoughts import thoughts
    from bench_steering import long_thoughts

    reasoning = [t for t, _, _ in long_thoughts(thoughts(), reasoning_chars)]
    turns = []
    for i, message in enumerate(SCRIPT):
        if as_text:
            turns.append(
                AIMessage(content=f"{reasoning[i % len(reasoning)]} {message.text}", tool_calls=message.tool_calls)
            )
            continue
        blocks: list[Any] = [
            {"type": "reasoning", "reasoning": reasoning[i % len(reasoning)]},
            {"type": "text", "text": message.text},
        ]
        turns.append(AIMessage(content=blocks, tool_calls=message.tool_calls))
    return turns


def build(integration: str = "middleware", reasoning_chars: int = 0) -> tuple[Any, Any, InMemorySpanExporter]:
    """The bare agent, the steered one (``integration``: ``middleware`` or ``wrapper``) and the span exporter."""
    model = ScriptedChatModel(script=script(reasoning_chars))
    bare = create_agent(model, [add], system_prompt="You are a calculator.")
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(BatchSpanProcessor(exporter))
    meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
    rb = ReasonBlocks(tracer_provider=tracer_provider, meter_provider=meter_provider)
    if integration == "wrapper":
        steered = create_agent(rb.chat_model(model, agent_name="bench"), [add], system_prompt="You are a calculator.")
    else:
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
    parser.add_argument("--reasoning-chars", type=int, default=0, help="long-reasoning variant: N characters a turn")
    args = parser.parse_args()
    if args.reasoning_chars:
        print(f"reasoning: {args.reasoning_chars:,} characters per model turn")
    bare, middleware, exporter = build("middleware", args.reasoning_chars)
    _, wrapper, wrapper_exporter = build("wrapper", args.reasoning_chars)
    variants = {"middleware": middleware, "wrapper": wrapper}
    for agent in (bare, middleware, wrapper):
        time_runs(agent, 30)
    rows = []
    for p in range(args.passes):
        times: dict[str, list[float]] = {"bare": [], **{name: [] for name in variants}}
        for _ in range(args.runs):
            for name, agent in (("bare", bare), *variants.items()):
                times[name].append(_one(agent))
        exporter.clear()
        wrapper_exporter.clear()
        for name in variants:
            pairs = list(zip(times["bare"], times[name], strict=True))
            rows.append(
                {
                    "pass": p,
                    "integration": name,
                    "bare_ms": statistics.median(times["bare"]),
                    "rb_otel_ms": statistics.median(times[name]),
                    "ratio": statistics.median(s_ / b_ for b_, s_ in pairs),
                    "overhead_per_model_call_us": statistics.median((s_ - b_) / MODEL_CALLS * 1000 for b_, s_ in pairs),
                }
            )
            row = rows[-1]
            print(
                f"pass {p} {name:10s}: bare {row['bare_ms']:.2f} ms/run  rb-otel {row['rb_otel_ms']:.2f} ms/run  "
                f"ratio {row['ratio']:.3f}x  overhead {row['overhead_per_model_call_us']:.0f} us per model call",
                flush=True,
            )
    summary = {}
    for name in variants:
        mine = [r for r in rows if r["integration"] == name]
        summary[name] = {
            "ratio": statistics.median(r["ratio"] for r in mine),
            "overhead_per_model_call_us": statistics.median(r["overhead_per_model_call_us"] for r in mine),
        }
        print(
            f"{name}: median over passes {summary[name]['ratio']:.3f}x the bare agent, "
            f"{summary[name]['overhead_per_model_call_us']:.0f} us per model call"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"passes": rows, "summary": summary}, f, indent=1)


if __name__ == "__main__":
    main()
