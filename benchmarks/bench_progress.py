"""Cost per step of the pilot's progress signals (docs/signal.md, "Progress signals"), on real steps.

    python benchmarks/bench_progress.py [--rounds 5]

Reads development records from the data root (``RB_OTEL_DATA``, ``../shared/data`` or ``make data``'s ``data/``):
the first 12 Gemini 3 Pro mini-swe-agent runs and the first tau2-bench file of the Grok runs, then times,
per step, :class:`~rb_otel.steering.pilot.progress.ProgressTracker` (``add`` and ``values``, what the pilot does
each step) and each rule on its own. Prints the median of ``--rounds`` passes in microseconds per step.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rb_otel.datasets import source_folder  # noqa: E402
from rb_otel.steering.pilot import progress  # noqa: E402
from rb_otel.training.dataset import read_dataset  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    gemini, grok = source_folder("signal/mini_swe_agent_gemini3pro"), source_folder("signal/tau2_grok")
    runs = read_dataset(sorted(gemini.glob("*.traj.json"))[:12], labels=gemini / "results_summary.json").runs
    runs += read_dataset(sorted(grok.glob("*.json"))[:1]).runs
    steps = [s for r in runs for s in r.steps]
    calls = [s for s in steps if s.action is not None]

    def tracker() -> None:
        for run in runs:
            t = progress.ProgressTracker()
            for s in run.steps:
                t.add(s)
                t.values()

    rules = {
        "ProgressTracker.add + values (the pilot's step)": (tracker, len(steps)),
        "change (call_writes)": (
            lambda: [progress.call_writes(s.action or "", s.action_input or "") for s in calls],
            len(calls),
        ),
        "re-read target": (
            lambda: [progress._read_target(s.action or "", s.action_input or "") for s in calls],
            len(calls),
        ),
        "test run": (lambda: [progress._runs_tests(s.action or "", s.action_input or "") for s in calls], len(calls)),
        "failing observation": (lambda: [progress.observation_fails(s) for s in calls], len(calls)),
        "refusal": (lambda: [progress.is_refusal(s.thought) for s in steps if s.action is None], len(steps)),
    }
    print(f"{len(runs)} runs, {len(steps)} steps ({len(calls)} calls); median of {args.rounds} rounds")
    for name, (work, count) in rules.items():
        times = []
        for _ in range(args.rounds):
            started = time.perf_counter()
            work()
            times.append((time.perf_counter() - started) / count * 1e6)
        print(f"  {name:<50} {statistics.median(times):7.2f} us per step")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
