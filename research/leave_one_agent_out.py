"""docs/signal.md's headline: each development agent held out in turn within its kind, fitted on the others of
that kind, scored live; whether a kind's pilot may be its default; SKIP per agent; the converged coding runs.

    python research/leave_one_agent_out.py [--data DATA_ROOT] [--kind coding] [--json out.json]

Reads every development source of each kind natively from the data root (``--data``, else ``RB_OTEL_DATA``,
``../shared/data`` beside the repository or ``make data``'s ``data/``; archives are unpacked outside the
repository): customer service, the seven tau2-bench sources; coding, the three mini-swe-agent sources and Claude
Code on Terminal-Bench. An agent is
a harness and a model; runs without an outcome are left out and counted; nothing the data's README keeps apart is
let in (``rb_otel.training.kept_apart``). Each agent with 20 runs of each outcome is held out in turn
(:func:`rb_otel.training.development.held_out`), and :func:`rb_otel.training.development.default_decision`
says what the previous round's rule (agents held out within one harness) would have decided. It no longer
chooses a default: a default is judged by leaving whole harnesses out (``research/leave_one_harness_out.py``,
docs/signal.md "A cold start judged by harnesses it never saw"), and no pilot/3 is written here. For coding, the
converged side and the candidate stop rule
(:mod:`rb_otel.training.converged`). Writes the JSON docs/signal.md's tables come from
(``research/leave_one_agent_out_report.json``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rb_otel.datasets import data_root  # noqa: E402
from rb_otel.steering.pilot.kinds import AGENT_KINDS, CODING  # noqa: E402
from rb_otel.training.converged import converged_rule_by_agent  # noqa: E402
from rb_otel.training.dataset import agent_unit  # noqa: E402
from rb_otel.training.development import default_decision, held_out, read_kind  # noqa: E402


def say(line: str) -> None:
    print(f"  {line}", file=sys.stderr, flush=True)


def kind_report(kind: str, root: Path, max_false_stops: float) -> dict[str, Any]:
    started = time.perf_counter()
    data = read_kind(kind, root, progress=say)
    agents: dict[str, list[int]] = {}
    for run in data.runs:
        agents.setdefault(agent_unit(run), [0, 0])[run.failed] += 1
    report = held_out(data.runs, max_false_stops=max_false_stops, progress=say, workers=os.cpu_count() or 1)
    ships, why = default_decision(report)
    print(f"== {kind}: {len(data.runs)} labelled runs, {len(agents)} agents")
    print("\n".join(report.lines()))
    print(f"the previous round's rule (agents within a harness) for {kind}: {'pilot/3' if ships else 'no pilot/3'} "
          f"({why}); the default is decided by leaving harnesses out (research/leave_one_harness_out.py)")  # fmt: skip
    out: dict[str, Any] = {
        "sources": {
            name: {"unlabelled": data.unlabelled[name], "problems": data.problems[name]} for name in data.unlabelled
        },
        "agents": {name: {"successful": ok, "failed": failed} for name, (ok, failed) in sorted(agents.items())},
        "held_out": report.as_dict(),
        "default": {"ships": ships, "why": why},
    }
    if kind == CODING:
        figures = converged_rule_by_agent(data.runs)
        out["converged"] = [f.as_dict() for f in figures]
        for f in figures:
            rule = (f"k = {f.k}: stops {f.stopped} runs, {f.risky} of them change their patch later "
                    f"({f.risk:.1%}), saves {f.tokens_saved:.1%} of tokens") if f.k is not None else \
                "no k kept the risk within 0.5% on the other agents"  # fmt: skip
            print(f"converged: {f.agent}: successful runs spent {f.after_last_change_mean:.1%} of their tokens "
                  f"(median {f.after_last_change_median:.1%}) after their last change; {rule}")  # fmt: skip
    out["seconds"] = round(time.perf_counter() - started, 1)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--data", type=Path, default=None, help="the data root (default: as rb_otel.datasets finds it)")
    parser.add_argument("--kind", choices=AGENT_KINDS, action="append", default=[])
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--max-false-stops", type=float, default=0.02)
    args = parser.parse_args()
    root = args.data or data_root()
    out = {kind: kind_report(kind, root, args.max_false_stops) for kind in args.kind or AGENT_KINDS}
    if args.json is not None:
        args.json.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
