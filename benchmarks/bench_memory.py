"""Memory over many runs: RSS after warm-up across sequential runs and across rounds of concurrent runs.

One steered agent (the performance issue's workload), spans through a BatchSpanProcessor into an in-memory
exporter that is drained (cleared) every ``--drain`` runs, metrics into an in-memory reader. RSS is sampled
every ``--every`` runs; the report gives the growth from the first sample after warm-up to the last, and the
largest step between samples. Then ``--rounds`` rounds of ``--concurrent`` runs at once on as many threads; RSS
rises over the first rounds for the bare agent too (the allocator's per-thread arenas fill), so the report gives
the growth over the second half of the rounds, once that plateau is reached.

    python benchmarks/bench_memory.py [--runs 5000] [--concurrent 200] [--rounds 10] [--json FILE]
"""

from __future__ import annotations

import argparse
import gc
import itertools
import json
from concurrent.futures import ThreadPoolExecutor

from langchain.agents import create_agent
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from peer_run import SCRIPT, _rss_mb, add

from rb_otel import ReasonBlocks
from rb_otel.testing import ScriptedChatModel

QUESTION = {"messages": [("user", "what is 1+2?")]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5000)
    parser.add_argument("--warmup", type=int, default=300)
    parser.add_argument("--every", type=int, default=500)
    parser.add_argument("--drain", type=int, default=100)
    parser.add_argument("--concurrent", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=16)
    parser.add_argument("--json")
    args = parser.parse_args()
    if args.runs < args.every:
        parser.error(f"--runs ({args.runs}) must be at least --every ({args.every}): growth needs two samples")
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(BatchSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    rb = ReasonBlocks(tracer_provider=tracer_provider, meter_provider=MeterProvider(metric_readers=[reader]))
    middleware = rb.middleware(agent_name="soak")
    agent = create_agent(
        ScriptedChatModel(script=SCRIPT), [add], middleware=[middleware], system_prompt="You are a calculator."
    )

    def drain() -> None:
        tracer_provider.force_flush()
        exporter.clear()
        reader.get_metrics_data()

    for i in range(args.warmup):
        agent.invoke(QUESTION)
        if i % args.drain == 0:
            drain()
    drain()
    gc.collect()
    samples = [(0, _rss_mb())]
    print(f"sequential: RSS after {args.warmup} warm-up runs {samples[0][1]:.1f} MB")
    for i in range(1, args.runs + 1):
        agent.invoke(QUESTION)
        if i % args.drain == 0:
            drain()
        if i % args.every == 0:
            gc.collect()
            samples.append((i, _rss_mb()))
            print(f"  after {i:>5} runs: {samples[-1][1]:.1f} MB")
    sequential_growth = samples[-1][1] - samples[0][1]
    largest_step = max(b[1] - a[1] for a, b in itertools.pairwise(samples))
    print(f"sequential growth {sequential_growth:+.1f} MB over {args.runs} runs (largest step {largest_step:+.1f} MB)")

    rounds = []
    with ThreadPoolExecutor(max_workers=args.concurrent) as pool:
        for r in range(args.rounds):
            list(pool.map(lambda _: agent.invoke(QUESTION), range(args.concurrent)))
            drain()
            gc.collect()
            rounds.append(_rss_mb())
            print(f"  concurrent round {r + 1} ({args.concurrent} runs at once): {rounds[-1]:.1f} MB")
    half = len(rounds) // 2
    concurrent_growth = rounds[-1] - rounds[half - 1] if half else 0.0
    last = len(rounds) - half
    quarter = max(len(rounds) // 4, 1)
    tail_growth = rounds[-1] - rounds[-quarter - 1] if len(rounds) > quarter else 0.0
    print(
        f"concurrent: {rounds[0]:.1f} MB after round 1, {concurrent_growth:+.1f} MB over the last {last} rounds, "
        f"{tail_growth:+.1f} MB over the last {quarter}"
    )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {
                    "sequential_mb": samples,
                    "sequential_growth_mb": sequential_growth,
                    "concurrent_mb": rounds,
                    "concurrent_growth_mb": concurrent_growth,
                    "concurrent_tail_growth_mb": tail_growth,
                },
                f,
                indent=1,
            )


if __name__ == "__main__":
    main()
