"""docs/learning.md's SKIP ceiling: the most a stop on one size could catch, in hindsight and on first labels.

    python research/skip_ceiling.py [--data DATA_ROOT] [--json out.json] [--max-false-stops 0.02]

Issue 60 asks for a SKIP that holds on the runs after an agent's first labels: at least 10% of its later failing
runs stopped, with the Wilson upper bound (z = 1) of its later successful runs stopped at most 2%. Before the
watcher's choice is blamed, this asks whether any such stop exists on the agent's size at all.

For every development agent with 150 runs or more (the agents of ``research/online.py``, read natively, nothing
the data's README keeps apart let in), and for each of the three same-prefix sizes (the steps taken, the
characters written so far, the largest call so far in tokens), it tries every rule "stop at step k when the size
there is beyond x" in either direction (more, or less, means failure), for every step k and every threshold x the
runs give, and keeps the one that stops the most failing runs of the agent while the Wilson upper bound of its
successful runs stopped stays within the budget. It chooses on *all* the agent's runs and judges on the same runs,
so it is a ceiling (in hindsight, in-sample): a SKIP whose threshold is chosen on the first labels and judged on
the runs after them does no better, except by luck. A stop on "the steps taken" is a stop on length alone: stop at
step k, whatever the run has done.

Then the same choice made the way a deployment would make it: on the first 170, 255 or 383 labelled runs of each
agent (three of the watcher's refits, where at least 50 runs come after), in the fixed shuffled orders of
``research/online.py`` (seeds 0, 1, 2), the best rule of the three sizes within the budget, judged on the agent's
later runs by issue 60's hold (at least 10% of the later failing runs stopped, the Wilson upper bound of the later
successful runs stopped at most 2%).

The figures go to ``research/skip_ceiling_report.json``; the script changes nothing in the library.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rb_otel.datasets import data_root  # noqa: E402
from rb_otel.evaluation.metrics import wilson_upper  # noqa: E402
from rb_otel.evaluation.online import ordered  # noqa: E402
from rb_otel.steering.pilot.kinds import AGENT_KINDS  # noqa: E402
from rb_otel.training.dataset import LabelledRun  # noqa: E402
from rb_otel.training.development import read_kind  # noqa: E402

MIN_RUNS = 150
#: The share of the failing runs issue 60's SKIP must stop.
TARGET_STOPS = 0.10
SIZES = ("steps taken", "characters written so far", "largest call so far")
#: The labels a deployment's choice is made on (three of the watcher's refits; those that leave an agent at least
#: MIN_LATER later runs), and the replay orders.
CUTS = (170, 255, 383)
MIN_LATER = 50
SEEDS = (0, 1, 2)


def sizes_by_step(run: LabelledRun, size: str) -> NDArray[np.float64]:
    """The run's ``size`` after each of its steps."""
    if size == "steps taken":
        return np.arange(1, len(run.steps) + 1, dtype=np.float64)
    if size == "largest call so far":
        return np.maximum.accumulate(np.asarray(run.prompt_tokens, dtype=np.float64))
    return np.cumsum([len(s.thought or "") + len(s.action_input or "") for s in run.steps], dtype=np.float64)


def best_stop(runs: list[LabelledRun], size: str, max_false_stops: float) -> dict[str, Any]:
    """The rule "stop at step k when ``size`` is beyond x" that stops the most failing runs within the budget."""
    failed = np.array([r.failed for r in runs], dtype=bool)
    lengths = np.array([len(r.steps) for r in runs])
    by_step = [sizes_by_step(r, size) for r in runs]
    n_failing, n_successful = int(failed.sum()), int((~failed).sum())
    best: dict[str, Any] = {"stopped_failing": 0.0, "rule": None}
    for step in range(1, int(lengths.max()) + 1):
        reached = np.flatnonzero(lengths >= step)
        values = np.array([by_step[i][step - 1] for i in reached])
        directions = (1,) if size == "steps taken" else (1, -1)  # every run there has taken as many steps
        for direction in directions:
            # a threshold x stops the runs whose signed size is at least x: sorted descending, the runs stopped at
            # each distinct value are a prefix, so its failing and successful counts are cumulative sums
            order = np.argsort(-direction * values, kind="stable")
            signed = direction * values[order]
            bad = np.cumsum(failed[reached[order]])
            good = np.arange(1, len(order) + 1) - bad
            ends = np.r_[np.flatnonzero(np.diff(signed)), len(signed) - 1]  # the last run of each distinct value
            for end in ends[bad[ends] / n_failing > best["stopped_failing"]]:
                bound = wilson_upper(int(good[end]), n_successful)
                if bound <= max_false_stops:
                    rule = {"step": step, "direction": "more" if direction > 0 else "less",
                            "threshold": float(direction * signed[end])}  # fmt: skip
                    best = {
                        "stopped_failing": float(bad[end] / n_failing),
                        "stopped_successful": float(good[end] / n_successful),
                        "false_stop_bound": bound,
                        "rule": rule,
                    }
    return best


def stops(runs: Sequence[LabelledRun], size: str, rule: dict[str, Any]) -> NDArray[np.bool_]:
    """Which of ``runs`` the rule "stop at step k when ``size`` is beyond x" (:func:`best_stop`'s) stops."""
    out = []
    for run in runs:
        step = int(rule["step"])
        if len(run.steps) < step:
            out.append(False)
            continue
        value = sizes_by_step(run, size)[step - 1]
        out.append(bool(value >= rule["threshold"] if rule["direction"] == "more" else value <= rule["threshold"]))
    return np.array(out, dtype=bool)


def chosen_first(runs: list[LabelledRun], cut: int, max_false_stops: float) -> dict[str, Any]:
    """The best one-size rule chosen on the first ``cut`` runs, judged on the rest (issue 60's hold)."""
    chosen = [(best_stop(runs[:cut], size, max_false_stops), size) for size in SIZES]
    best, size = max(chosen, key=lambda c: c[0]["stopped_failing"])
    if best["rule"] is None:
        return {"labels": cut, "rule": None, "held": False}
    later = runs[cut:]
    failed = np.array([r.failed for r in later], dtype=bool)
    stopped = stops(later, size, best["rule"])
    false_stops, successful = int(stopped[~failed].sum()), int((~failed).sum())
    share = float(stopped[failed].mean()) if failed.any() else float("nan")
    bound = wilson_upper(false_stops, successful)
    return {
        "labels": cut, "size": size, "rule": best["rule"], "chosen_on_stopped_failing": best["stopped_failing"],
        "later_failing": int(failed.sum()), "later_successful": successful, "stopped_failing": share,
        "false_stops": false_stops, "false_stop_bound": bound,
        "held": bool(share >= TARGET_STOPS and bound <= max_false_stops),
    }  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=None, help="the data root (default: RB_OTEL_DATA, ../shared/data, data/)")
    parser.add_argument("--json", default=str(ROOT / "research" / "skip_ceiling_report.json"))
    parser.add_argument("--max-false-stops", type=float, default=0.02, help="the budget of the Wilson bound")
    args = parser.parse_args()
    root = Path(args.data) if args.data else data_root()
    runs: list[LabelledRun] = []
    for kind in AGENT_KINDS:
        runs += read_kind(kind, root).runs
    agents = {a: r for a, r in ordered(runs, None).items() if len(r) >= MIN_RUNS}
    report: dict[str, Any] = {
        "what": "the most a SKIP on one size could stop (stop at step k when the size is beyond x, either "
                "direction), chosen and judged in hindsight on all of each agent's runs: a ceiling",
        "max_false_stops": args.max_false_stops,
        "target_stops": TARGET_STOPS,
        "agents": {},
    }  # fmt: skip
    for agent in sorted(agents, key=lambda a: len(agents[a])):
        its = agents[agent]
        started = time.perf_counter()
        figures: dict[str, Any] = {"runs": len(its), "failed": sum(r.failed for r in its)}
        for size in SIZES:
            figures[size] = best_stop(its, size, args.max_false_stops)
        best = max(figures[s]["stopped_failing"] for s in SIZES)
        figures["ceiling"] = best
        figures["reaches_target"] = best >= TARGET_STOPS
        cuts = [cut for cut in CUTS if len(its) - cut >= MIN_LATER]
        figures["chosen_on_the_first_labels"] = {
            str(seed): [chosen_first(ordered(its, seed)[agent], cut, args.max_false_stops) for cut in cuts]
            for seed in SEEDS
        }
        held = sum(c["held"] for cs in figures["chosen_on_the_first_labels"].values() for c in cs)
        report["agents"][agent] = figures
        cells = ", ".join(f"{s}: {figures[s]['stopped_failing']:.1%}" for s in SIZES)
        print(f"{agent} ({len(its)} runs, {figures['failed']} failing): failing runs stopped within the bound, in "
              f"hindsight: {cells}; chosen on the first {' or '.join(map(str, cuts))} labels, held on the later runs "
              f"in {held} of {len(SEEDS) * len(cuts)} ({time.perf_counter() - started:.0f} s)", flush=True)  # fmt: skip
    Path(args.json).write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
