"""What each of this release's performance changes bought, by A/B in one process (numbers, not assertions).

Each change is measured by alternating single runs of the benchmark workload (``bench_middleware.py``: 5 model
calls, 4 tool calls, spans and metrics into the SDK) with and without it, in a random order per pair, and
reporting the median per-pair difference in ms and in Python function calls per run (the call count is
deterministic, so it shows a change the timing noise of this machine can hide):

* ``summed counters``: the contract's counters as in-process sums behind observable instruments
  (``Instruments(meter)``), against the SDK's synchronous counters (``Instruments(meter, summed=False)``, the
  previous release's), on the 5-call workload;
* ``bounded thought view``: the heuristic scorer and the monitors reading a long thought's head and tail
  (``text_view``), against the previous release (the scorer reading all of it, the monitors its first 4,000
  characters), on steering sessions of 20 steps with 50,000-character thoughts (``bench_steering.py``'s corpus)
  and on the workload whose model writes 50,000 characters of visible thought per turn.

    python benchmarks/ab_release.py [--pairs 300] [--json FILE]
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import random
import statistics
from collections.abc import Callable
from typing import Any

from _thoughts import thoughts
from bench_middleware import _one, add, script
from bench_steering import long_thoughts, run_steps
from langchain.agents import create_agent
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from rb_otel import ReasonBlocks
from rb_otel.steering import scoring
from rb_otel.steering.monitors import features
from rb_otel.telemetry import hub
from rb_otel.telemetry.instruments import Instruments
from rb_otel.testing import ScriptedChatModel

PROMPT = "You are a calculator."
VIEW = (scoring.text_view, features.text_view)


def _previous_views(on: bool) -> None:
    """The previous release's reading of a long thought (``on``), or this release's."""
    if on:
        scoring.text_view = lambda text: text  # type: ignore[assignment]
        features.text_view = lambda text: text[:4000]  # type: ignore[assignment]
    else:
        scoring.text_view, features.text_view = VIEW  # type: ignore[assignment]


def _agent(summed: bool = True, thought_chars: int = 0) -> Any:
    """The workload's agent with the middleware, its telemetry's counters summed or the SDK's."""
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(BatchSpanProcessor(exporter))
    plain = hub.Instruments
    hub.Instruments = Instruments if summed else (lambda meter: Instruments(meter, summed=False))  # type: ignore[assignment,misc]
    try:
        rb = ReasonBlocks(tracer_provider=tracer_provider, meter_provider=MeterProvider([InMemoryMetricReader()]))
    finally:
        hub.Instruments = plain  # type: ignore[misc]
    model = ScriptedChatModel(script=script(thought_chars, as_text=True))
    agent = create_agent(model, [add], middleware=[rb.middleware(agent_name="ab")], system_prompt=PROMPT)

    def run() -> float:
        if len(exporter.get_finished_spans()) > 2000:
            exporter.clear()
        return _one(agent)

    return run


def _calls_per_run(run: Callable[[], float], runs: int = 10) -> float:
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(runs):
        run()
    profile.disable()
    return pstats.Stats(profile).total_calls / runs  # type: ignore[attr-defined, no-any-return]


def ab(name: str, before: Callable[[], float], after: Callable[[], float], pairs: int) -> dict[str, float | str]:
    for _ in range(20):
        before()
        after()
    differences, ratios = [], []
    for _ in range(pairs):
        first, second = (before, after) if random.random() < 0.5 else (after, before)
        times = {first: first(), second: second()}
        differences.append(times[after] - times[before])
        ratios.append(times[after] / times[before])
    row: dict[str, float | str] = {
        "change": name,
        "ms_per_run": statistics.median(differences),
        "ratio": statistics.median(ratios),
        "calls_per_run": _calls_per_run(after) - _calls_per_run(before),
    }
    print(
        f"{name:24s} {row['ms_per_run']:+.2f} ms/run (after/before {row['ratio']:.3f}x), "
        f"{row['calls_per_run']:+.0f} function calls per run",
        flush=True,
    )
    return row


def _session_ms(corpus: list[tuple[str, str, str]], previous: bool) -> Callable[[], float]:
    def run() -> float:
        _previous_views(previous)
        try:
            return sum(run_steps(20, corpus)) / 1000.0  # ms for the session's 20 steps
        finally:
            _previous_views(False)

    return run


def _with_views(run: Callable[[], float], previous: bool) -> Callable[[], float]:
    def timed() -> float:
        _previous_views(previous)
        try:
            return run()
        finally:
            _previous_views(False)

    return timed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pairs", type=int, default=300)
    parser.add_argument("--json")
    args = parser.parse_args()
    long_corpus = long_thoughts(thoughts(), 50_000)
    thinking_aloud = _agent(thought_chars=50_000)
    rows = [
        ab("summed counters", _agent(summed=False), _agent(summed=True), args.pairs),
        ab("bounded view (session)", _session_ms(long_corpus, True), _session_ms(long_corpus, False), args.pairs // 3),
        ab(
            "bounded view (agent)",
            _with_views(thinking_aloud, True),
            _with_views(thinking_aloud, False),
            args.pairs // 3,
        ),
    ]
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(rows, handle, indent=1)


if __name__ == "__main__":
    main()
