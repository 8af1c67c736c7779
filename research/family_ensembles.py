"""Why a pilot meant for agents it was not fitted to averages the model families instead of choosing one
(docs/signal.md, "A default pilot per kind"): every family, the choice, and three averages, held out agent by agent.

    python research/family_ensembles.py [--data DATA_ROOT] [--kind coding] [--json out.json]

For each development agent with 20 runs of each outcome, held out within its kind as ``make held-out`` does
(the prior, the features and agent-balanced weights from the *other* agents of its kind only; the held-out agent
scored with the live view), every family of :data:`rb_otel.training.fit.CANDIDATES` is fitted on the training
agents and the held-out agent is scored by each of them and by three averages of them:

- ``mean of logits``: the plain mean of the six families' logits (one linear model, scored live with two blocks
  of text weights: :data:`rb_otel.training.fit.AVERAGE`, what ``make held-out`` now fits);
- ``mean of standardised logits``: each family's logit divided by its standard deviation on the training rows,
  then averaged (also linear), so that no family's scale dominates;
- ``mean of ranks``: each family's scores ranked among the held-out agent's runs at the step judged, then
  averaged. Not computable live (a rank needs the other runs): a reference only.

and by ``one family, chosen``: the family an inner cross-validation over the training agents chooses (the median
per-agent criterion over at most four folds of whole agents: the previous round's procedure). Each figure is set
beside the same-prefix size baselines oriented on the training agents (``_baselines`` of
:mod:`rb_otel.training.held_out`, as in the headline), at step 10 and at the last step.

The averages were tried *after* the previous round's held-out figures had been seen: the choice of the average is
one degree of freedom taken on these agents, which docs/signal.md says beside its figures.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import sys
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rb_otel.datasets import data_root  # noqa: E402
from rb_otel.evaluation.metrics import auroc  # noqa: E402
from rb_otel.steering.pilot.kinds import AGENT_KINDS  # noqa: E402
from rb_otel.training.cv import select_for_transfer  # noqa: E402
from rb_otel.training.dataset import LabelledRun, agent_unit  # noqa: E402
from rb_otel.training.development import SHIP_MARGIN, read_kind  # noqa: E402
from rb_otel.training.features import agent_balanced, extract, prior_of  # noqa: E402
from rb_otel.training.fit import CANDIDATES, fit_candidate  # noqa: E402
from rb_otel.training.held_out import EARLY_STEP, MIN_EACH_OUTCOME, _baselines, _inner_folds  # noqa: E402

CHOSEN = "one family, chosen"
LIVE_AVERAGES = ("mean of logits", "mean of standardised logits")
AVERAGES = (*LIVE_AVERAGES, "mean of ranks")


def say(line: str) -> None:
    print(f"  {line}", file=sys.stderr, flush=True)


def _ranks(values: Sequence[float]) -> NDArray[np.float64]:
    order = np.argsort(np.argsort(np.asarray(values, dtype=np.float64), kind="stable"), kind="stable")
    return np.asarray(order, dtype=np.float64) / max(len(values) - 1, 1)


def _at(per_run: list[NDArray[np.float64]], step: int | None, rows: Sequence[int]) -> list[float]:
    """Each run's score after ``step`` (``None``: its last step), for the runs ``rows``."""
    return [float(per_run[i][-1] if step is None else per_run[i][step - 1]) for i in rows]


def held_out_families(train: list[LabelledRun], held: list[LabelledRun]) -> dict[str, Any]:
    """Every family and average, fitted on ``train``, scored on ``held`` (module docstring)."""
    prior = prior_of(train)
    data = extract(train, prior)
    data.run_weight = agent_balanced(train, agent_unit)
    scored = extract(held, prior)
    every = list(range(len(train)))
    logits: dict[str, list[NDArray[np.float64]]] = {}
    scales: dict[str, float] = {}
    for candidate in CANDIDATES:
        model = fit_candidate(data, every, candidate)
        scales[candidate.name] = float(np.std(model.logits(data))) or 1.0
        z = model.logits(scored)
        logits[candidate.name] = [z[scored.run == i] for i in range(len(held))]
    units = [agent_unit(r) for r in train]
    choice, _ = select_for_transfer(data, every, units, _inner_folds(train, 0))
    logits[CHOSEN] = logits[choice.name]
    names = [c.name for c in CANDIDATES]
    logits["mean of logits"] = [np.mean([logits[n][i] for n in names], axis=0) for i in range(len(held))]
    logits["mean of standardised logits"] = [
        np.mean([logits[n][i] / scales[n] for n in names], axis=0) for i in range(len(held))
    ]
    y = [r.failed for r in held]
    going = [i for i, r in enumerate(held) if len(r.steps) >= EARLY_STEP]
    out: dict[str, Any] = {"runs": len(held), "failed": sum(y), "early_runs": len(going), "chosen": choice.name,
                           "scores": {}}  # fmt: skip
    for step, rows, key in ((None, list(range(len(held))), "last"), (EARLY_STEP, going, "early")):
        train_rows = train if step is None else [r for r in train if len(r.steps) >= step]
        baselines = _baselines(train_rows, [held[i] for i in rows], step)
        best = max((b.oriented for b in baselines), default=0.5)
        labels = [y[i] for i in rows]
        figures = {name: auroc(labels, _at(logits[name], step, rows)) for name in (*names, CHOSEN, *LIVE_AVERAGES)}
        figures["mean of ranks"] = auroc(
            labels, list(np.mean([_ranks(_at(logits[n], step, rows)) for n in names], axis=0))
        )
        out["scores"][key] = {"best_oriented_size": best, "auroc": figures,
                              "margin": {n: a - best for n, a in figures.items()}}  # fmt: skip
    return out


_JOBS: dict[str, Any] = {}


def _job(index: int) -> dict[str, Any]:
    train, held = _JOBS["jobs"][index][1:]
    return held_out_families(train, held)


def kind_report(kind: str, root: Path, workers: int) -> dict[str, Any]:
    runs = read_kind(kind, root, progress=say).runs
    units = [agent_unit(r) for r in runs]
    jobs = []
    for agent in sorted(set(units)):
        held = [r for r, u in zip(runs, units, strict=True) if u == agent]
        failed = sum(r.failed for r in held)
        if min(failed, len(held) - failed) < MIN_EACH_OUTCOME:
            continue
        jobs.append((agent, [r for r, u in zip(runs, units, strict=True) if u != agent], held))
    say(f"{kind}: holding out {len(jobs)} agents, six families each, {workers} worker(s)")
    _JOBS["jobs"] = jobs
    if workers > 1 and "fork" in multiprocessing.get_all_start_methods():
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
            results = list(pool.map(_job, range(len(jobs))))
    else:
        results = [_job(i) for i in range(len(jobs))]
    agents = {agent: figures for (agent, _, _), figures in zip(jobs, results, strict=True)}
    return {"agents": agents, "summary": summarise(agents)}


def summarise(agents: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per scorer: the median and worst held-out agent's margin, and whether it would meet the default rule
    (median at step 10 at least SHIP_MARGIN, below zero on no agent with 100 runs or more) and the issue's
    target (step 10 + 0.05 on every agent with 100 runs or more)."""
    names = [*(c.name for c in CANDIDATES), CHOSEN, *AVERAGES]
    out = {}
    for name in names:
        early = {a: f["scores"]["early"]["margin"][name] for a, f in agents.items()}
        last = {a: f["scores"]["last"]["margin"][name] for a, f in agents.items()}
        large = [a for a, f in agents.items() if f["runs"] >= 100]
        out[name] = {
            "early_median": statistics.median(early.values()),
            "early_worst": min(early.values()),
            "last_median": statistics.median(last.values()),
            "last_worst": min(last.values()),
            "default_rule": statistics.median(early.values()) >= SHIP_MARGIN and all(early[a] >= 0 for a in large),
            "early_target_met": f"{sum(early[a] >= SHIP_MARGIN for a in large)} of {len(large)}",
        }
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--data", type=Path, default=None, help="the data root (default: as rb_otel.datasets finds it)")
    parser.add_argument("--kind", choices=AGENT_KINDS, action="append", default=[])
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    root = args.data or data_root()
    out = {kind: kind_report(kind, root, os.cpu_count() or 1) for kind in args.kind or AGENT_KINDS}
    for kind, report in out.items():
        print(f"== {kind} (margins over the best oriented same-prefix size baseline; step {EARLY_STEP} / last)")
        for name, s in report["summary"].items():
            print(f"{name:36s} step {EARLY_STEP}: median {s['early_median']:+.3f} worst {s['early_worst']:+.3f} "
                  f"(+{SHIP_MARGIN} on {s['early_target_met']} agents with 100+ runs); last: median "
                  f"{s['last_median']:+.3f} worst {s['last_worst']:+.3f}; default rule "
                  f"{'met' if s['default_rule'] else 'missed'}")  # fmt: skip
    if args.json is not None:
        args.json.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
