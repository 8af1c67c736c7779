"""The pilot scorer's cost per step, warm (a run of 100 steps of real-sized thoughts, its agent baseline known).

    python benchmarks/bench_pilot.py [--runs 200] [--kind coding] [--model pilot.json]

``--kind`` scores the runs with that kind's default model (the agent-relative size for coding and customer
service); without it, the model of a run of no known kind (pilot/1). ``--model`` scores them with a model file
(what ``rb-otel train`` writes, or the ``model`` of a record ``train --watch`` stored: a fit's model may carry text
weights in two blocks, the costliest kind of model).

Prints the median and 90th percentile microseconds per ``score`` call over rounds; numbers, not assertions.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _thoughts import thoughts

from rb_otel.backends.pilot import PilotScorer
from rb_otel.steering.pilot.kinds import AGENT_KINDS
from rb_otel.steering.scoring import ScorerStep


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--kind", choices=AGENT_KINDS, default="")
    parser.add_argument("--model", default=None, help="a pilot model file (default: the kind's default model)")
    args = parser.parse_args()
    real = thoughts()
    steps = [
        ScorerStep(thought=real[i % len(real)][0], action=real[i % len(real)][1] or None,
                   action_input=real[i % len(real)][2], observation="ok", error=i % 9 == 0)
        for i in range(100)
    ]  # fmt: skip
    scorer = PilotScorer(model=args.model) if args.model else PilotScorer()
    per_step = []
    for _ in range(args.runs):
        run = scorer.start_run("bench|model", kind=args.kind)
        started = time.perf_counter()
        for step in steps:
            run.score(step)
        per_step.append((time.perf_counter() - started) / len(steps) * 1e6)
        run.finish()
    warm = per_step[len(per_step) // 10 :]
    median, p90 = statistics.median(warm), statistics.quantiles(warm, n=10)[-1]
    name = scorer.name_for(args.kind) + (f" ({args.model})" if args.model else "")
    print(f"{name} score(): median {median:.1f} µs/step, p90 {p90:.1f} µs/step ({len(warm)} warm runs of 100 steps)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
