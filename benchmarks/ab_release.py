"""What each of this release's performance changes bought, by A/B in one process (numbers, not assertions).

Each change is measured by alternating single runs of the benchmark workload (``bench_middleware.py``: 5 model
calls, 4 tool calls, spans and metrics into the SDK) with and without it, in a random order per pair, and
reporting the median per-pair difference in ms and in Python function calls per run (the call count is
deterministic, so it shows a change the timing noise of this machine can hide):

* ``coalesced counter adds``: ``Batch.add`` summing equal waiting adds, against queueing each add (the previous
  release's ``Batch.add``);
* ``model wrapper``: ``rb.chat_model(model)`` against ``rb.middleware()`` on the same agent.

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

from bench_middleware import SCRIPT, _one, add
from langchain.agents import create_agent
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from rb_otel import ReasonBlocks
from rb_otel.telemetry import batch as batch_module
from rb_otel.testing import ScriptedChatModel

PROMPT = "You are a calculator."


def _queue_each_add(self: Any, counter: Any, value: float, attributes: Any, context: Any) -> None:
    """The previous release's ``Batch.add``: every add queued on its own."""
    self._queue.append(batch_module._Measurement(counter.add, value, attributes, context))


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pairs", type=int, default=300)
    parser.add_argument("--json")
    args = parser.parse_args()
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(BatchSpanProcessor(exporter))
    rb = ReasonBlocks(tracer_provider=tracer_provider, meter_provider=MeterProvider([InMemoryMetricReader()]))
    model = ScriptedChatModel(script=SCRIPT)
    middleware = create_agent(model, [add], middleware=[rb.middleware(agent_name="ab")], system_prompt=PROMPT)
    wrapper = create_agent(rb.chat_model(model, agent_name="ab-wrapper"), [add], system_prompt=PROMPT)
    coalescing = batch_module.Batch.add

    def with_add(implementation: Any) -> Callable[[], float]:
        def run() -> float:
            batch_module.Batch.add = implementation  # type: ignore[method-assign]
            try:
                return _one(middleware)
            finally:
                batch_module.Batch.add = coalescing  # type: ignore[method-assign]
                if len(exporter.get_finished_spans()) > 2000:
                    exporter.clear()

        return run

    rows = [
        ab("coalesced counter adds", with_add(_queue_each_add), with_add(coalescing), args.pairs),
        ab("model wrapper", lambda: _one(middleware), lambda: _one(wrapper), args.pairs),
    ]
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(rows, handle, indent=1)


if __name__ == "__main__":
    main()
