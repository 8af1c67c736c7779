"""docs/signal.md's cold-start table: each development *harness* left out in turn within its kind, the procedure
fitted on the other harnesses of that kind, the left-out harness's agents scored live; whether the learned default
clears the cold-start floor on every one of them, and the agent-relative size beside it.

    python research/leave_one_harness_out.py [--data DATA_ROOT] [--kind coding] [--json out.json] [--requests auto]

Reads every development source of each kind natively from the data root (``rb_otel.training.development``; the
harness of each source is ``development.HARNESSES``, from the data's README and provenance files); nothing the
README keeps apart is let in. Each harness is left out in turn (:func:`rb_otel.training.held_out.
leave_one_harness_out`): its agents with 20 runs of each outcome are scored by a fit that saw no run of their
harness, against the same-prefix size baselines (oriented on the training harnesses, and either way on the agent
itself). ``--requests``: with runs given their task group as their request (the baseline keyed on the agent and
the request, task groups weighing alike), without, or both (the before/after of docs/signal.md); by default both
for customer service and without for coding. The floor
(issue 60): last step at least the best size baseline minus 0.01 on every left-out agent, and step 10 the same
where 50 runs or more are still going; where the learned default does not clear it, the kind's default is a
label-free size: of the agent-relative size and the run's own size (``SIZE_DEFAULTS``), the one that meets the
floor on more left-out agents (``rb_otel/steering/pilot/pilot_size_<kind>.json``, written here with the kind's
prior).
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
from rb_otel.steering.pilot.model import SIZE_DEFAULTS, size_default  # noqa: E402
from rb_otel.training.dataset import agent_unit  # noqa: E402
from rb_otel.training.development import read_kind  # noqa: E402
from rb_otel.training.features import prior_of  # noqa: E402
from rb_otel.training.held_out import leave_one_harness_out  # noqa: E402
from rb_otel.training.kept_apart import refuse_kept_apart  # noqa: E402

PILOT_FOLDER = ROOT / "rb_otel" / "steering" / "pilot"
KINDS = ("customer_service", "coding")


def say(line: str) -> None:
    print(f"  {line}", file=sys.stderr, flush=True)


def kind_report(kind: str, root: Path, max_false_stops: float, requests: list[bool], write: bool) -> dict[str, Any]:
    started = time.perf_counter()
    data = read_kind(kind, root, progress=say)
    refuse_kept_apart(data.runs)
    harnesses = data.harnesses
    agents: dict[str, dict[str, Any]] = {}
    for run, harness in zip(data.runs, harnesses, strict=True):
        one = agents.setdefault(f"{harness}: {agent_unit(run)}", {"successful": 0, "failed": 0, "harness": harness})
        one["failed" if run.failed else "successful"] += 1
    out: dict[str, Any] = {"sources": dict(sorted(data.unlabelled.items())), "agents": agents, "runs": len(data.runs)}
    chosen: str | None = None
    for keyed in requests:
        label = "requests" if keyed else "agent_only"
        report = leave_one_harness_out(data.runs, harnesses, max_false_stops=max_false_stops, progress=say,
                                       workers=min(2, os.cpu_count() or 1), requests=keyed)  # fmt: skip
        print(f"== {kind}, baselines keyed on the agent{' and the request' if keyed else ''}: "
              f"{len(data.runs)} labelled runs, {len(set(harnesses))} harnesses")  # fmt: skip
        print("\n".join(report.lines()))
        met = {size: report.floors_met(size=size) for size in ("", *SIZE_DEFAULTS)}
        print(f"floor (either way) met on {met['']} of {len(report.agents)} left-out agents by the learned default, "
              + ", ".join(f"{met[size]} by the {size} size" for size in SIZE_DEFAULTS))  # fmt: skip
        out[label] = report.as_dict()
        if not keyed or chosen is None:
            # the ship rule for the size default: the one that meets the floor on more left-out agents, judged with
            # the baselines the live scorer keeps (keyed on the agent only, when that pass ran); a tie keeps the
            # agent-relative size, the default before the run size was measured
            chosen = max(SIZE_DEFAULTS, key=lambda size: (met[size], -SIZE_DEFAULTS.index(size)))
    assert chosen is not None
    out["size_default"] = chosen
    print(f"{kind}'s size default: the {chosen} size")
    if write:  # the kind's size default, with a prior of every run of the kind (label-free)
        model = size_default(chosen, prior_of(data.runs), trained={"kind": kind, "prior_from_runs": len(data.runs)})
        path = PILOT_FOLDER / f"pilot_size_{kind}.json"
        path.write_text(json.dumps(model.as_dict(), indent=1) + "\n", encoding="utf-8")
        print(f"wrote {path.relative_to(ROOT)}")
    out["seconds"] = round(time.perf_counter() - started, 1)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--data", type=Path, default=None, help="the data root (default: as rb_otel.datasets finds it)")
    parser.add_argument("--kind", choices=KINDS, action="append", default=[])
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--max-false-stops", type=float, default=0.02)
    parser.add_argument("--requests", choices=("on", "off", "both", "auto"), default="auto", help="auto (the "
                        "default): both for customer service, off for coding, where a task is run once per agent "
                        "and a request-keyed baseline has nothing to compare with")  # fmt: skip
    parser.add_argument("--write-size-models", action="store_true", help="write pilot_size_<kind>.json: the size "
                        "default that meets the floor on more left-out agents (judged with baselines keyed on the "
                        "agent only, as the live scorer keeps them, where that pass runs)")  # fmt: skip
    args = parser.parse_args()
    root = args.data or data_root()

    def passes(kind: str) -> list[bool]:
        if args.requests == "auto":
            return [False, True] if kind == "customer_service" else [False]
        return {"on": [True], "off": [False], "both": [False, True]}[args.requests]

    out = {kind: kind_report(kind, root, args.max_false_stops, passes(kind), args.write_size_models)
           for kind in args.kind or KINDS}  # fmt: skip
    if args.json is not None:  # the kinds run replace theirs; what else the report holds is kept
        report = json.loads(args.json.read_text(encoding="utf-8")) if args.json.exists() else {}
        args.json.write_text(json.dumps({**report, **out}, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
