"""Train the pilot scorer from the Gemini and Grok development sources and report how well it transfers.

    python research/pilot1_weights.py [--data DATA_ROOT] [--out rb_otel/steering/pilot/pilot_weights.json]

Reads the two development sources it was fitted on (signal/mini_swe_agent_gemini3pro and signal/tau2_grok) from the
data root (``--data``, else ``RB_OTEL_DATA``, ``../shared/data`` beside the repository or ``make data``'s ``data/``).

(``make pilot1-weights``.) The shipped pilot/1 is this script's; every other pilot is ``rb-otel train``'s
(the library's one trainer), which this script shares its importers, features, FSM and figures with.
Reproducible: the runs are read in file order through the package's own importers, features come from the same
``PilotRun`` code the scorer runs live, and the fit is deterministic (IRLS).

Honesty rules, kept by construction:

* every figure printed under "cross-validation" is out of sample: folds group runs by task (a task never sits
  on both sides), and "across sources" trains on one source and tests on the other (prior, weights and FSM
  thresholds all fitted on the training side only);
* FSM thresholds are chosen on the training side by a fixed rule (SLOW on at most 18% of the training side's
  successful runs, SKIP on at most 1.5%: the targets' 20% and 2% less a margin), never by looking at the test
  side; the fixed thresholds serve an agent's first runs, the quantiles (relative to the agent) the rest;
* the shipped weights are fitted on everything, and their in-sample figures are not reported as results.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rb_otel.backends.baselines.cache import BaselineCache  # noqa: E402
from rb_otel.backends.pilot import PilotScorer  # noqa: E402
from rb_otel.datasets import DataNotFound, data_root, source_folder  # noqa: E402
from rb_otel.evaluation.metrics import auroc  # noqa: E402
from rb_otel.importers.detect import detect  # noqa: E402
from rb_otel.importers.labels import load_labels  # noqa: E402
from rb_otel.importers.model import ImportProblem  # noqa: E402
from rb_otel.importers.replay import READERS  # noqa: E402
from rb_otel.steering.fsm import DifficultyFSM  # noqa: E402
from rb_otel.steering.pilot.run import _HEDGES, FEATURES_V1, PILOT_NAME, RELATIVE_AFTER, PilotModel, PilotRun  # noqa: E402
from rb_otel.steering.scoring import ScorerStep  # noqa: E402
from rb_otel.training.kept_apart import refuse_kept_apart, refuse_kept_apart_files  # noqa: E402

# The shipped pilot/1 reads the first ten features; `rb-otel train` fits pilot/2 models on all of them.
FEATURES = FEATURES_V1
from rb_otel.types import FSMState  # noqa: E402

SOURCES = {"tau2_grok.tar.xz": "tau2 (customer service, Grok)", "mini_swe_agent_gemini3pro.tar.xz": "SWE (Gemini 3)"}
SLOW_WINDOW, SKIP_WINDOW = 3, 8
SLOW, SKIP = FSMState.SLOW.severity, FSMState.SKIP.severity
SLOW_SUCCESS_SHARE, SKIP_SUCCESS_SHARE = 0.18, 0.015
L2 = 1.0


@dataclass
class Run:
    source: str
    agent: str
    task: str
    failed: bool
    steps: list[ScorerStep]
    features: np.ndarray = field(default_factory=lambda: np.zeros((0, len(FEATURES))))


def source_folders(root: Path) -> dict[str, Path]:
    """Each source's folder under the data root (``signal/<name>``, its archive unpacked outside the repository)."""
    try:
        return {name: source_folder("signal/" + name.removesuffix(".tar.xz"), root) for name in SOURCES}
    except DataNotFound as exc:
        raise SystemExit(str(exc)) from None


def read_runs(folder: Path, source: str) -> list[Run]:
    refuse_kept_apart_files([folder])  # no kept-apart agent's records reach a fit (rb_otel.training.kept_apart)
    labels_file = folder / "results_summary.json"
    labels = load_labels(labels_file) if labels_file.is_file() else None
    runs: list[Run] = []
    problems: list[ImportProblem] = []
    for path in sorted(folder.glob("*.json")):
        if path == labels_file:
            continue
        for run in READERS[detect(path)](path, problems):
            refuse_kept_apart([run])
            outcome = labels.outcome_of(run.run_id) if labels is not None else run.outcome == "success"
            if outcome is None:
                continue
            steps = [s.as_scorer_step() for s in run.steps]
            if steps:
                runs.append(Run(source, f"{run.agent_name}|{run.model}", run.task_id or run.run_id, not outcome, steps))
    for problem in problems:
        print(f"skipped: {problem}", file=sys.stderr)
    return runs


def prior_of(runs: list[Run]) -> dict[str, float]:
    """A typical agent's normal, label-free: the run-weighted mean of the agents' own baselines."""
    store = BaselineCache()
    zero = PilotModel(0.0, (0.0,) * len(FEATURES), _neutral_prior(), {})
    for run in runs:
        scorer = PilotRun(zero, store, run.agent)
        for step in run.steps:
            scorer.features(step)
        scorer.finish()
    per_agent = [store.get(a) for a in sorted({r.agent for r in runs})]
    total = sum(b.runs for b in per_agent)

    def mean(values: list[float]) -> float:
        return sum(v * b.runs for v, b in zip(values, per_agent, strict=True)) / total

    steps = [len(r.steps) for r in runs]
    chars = [sum(len(s.thought) + len(s.action_input or "") for s in r.steps) for r in runs]
    return {
        "mean_steps": float(np.mean(steps)),
        "mean_chars": float(np.mean(chars)),
        "mean_context": float(np.mean([max((s.tokens for s in r.steps), default=0) for r in runs]) or 1.0),
        "mean_hedges": max(
            float(np.mean([sum(len(_HEDGES.findall(s.thought.lower())) for s in r.steps) for r in runs])), 1.0
        ),
        "mean_errors": max(float(np.mean([sum(s.error for s in r.steps) for r in runs])), 1.0),
        "log_cps": mean([b.log_cps for b in per_agent]),
        "error_rate": mean([b.error_rate for b in per_agent]),
        "repeat_rate": mean([b.repeat_rate for b in per_agent]),
        "hedging": mean([b.hedging for b in per_agent]),
    }


def _neutral_prior() -> dict[str, float]:
    return {"mean_steps": 20.0, "mean_chars": 20000.0, "mean_context": 20000.0, "mean_hedges": 5.0, "mean_errors": 2.0,
            "log_cps": 6.0, "error_rate": 0.1, "repeat_rate": 0.05, "hedging": 0.01}  # fmt: skip


def extract(runs: list[Run], prior: dict[str, float]) -> None:
    """Each run's features at every step, baselines learned online per agent in file order (as evaluate does)."""
    store = BaselineCache()
    zero = PilotModel(0.0, (0.0,) * len(FEATURES), prior, {})
    for run in runs:
        scorer = PilotRun(zero, store, run.agent)
        run.features = np.array([scorer.features(step) for step in run.steps])
        scorer.finish()


def fit(runs: list[Run]) -> tuple[float, np.ndarray]:
    """Weighted L2 logistic regression over every prefix, every weight constrained to be >= 0.

    Each feature means "more than this agent's normal", and more than normal is never evidence of health: a
    weight that comes out negative is a fit to one harness's quirk (on the development data the length weights
    flip sign between sources), so the feature is dropped and the rest refitted. Each source weighs the same,
    each task within it one share, split over its runs, and each run's prefixes share its weight (a long run is
    not worth more than a short one)."""
    active = list(range(len(FEATURES)))
    while True:
        intercept, weights = _fit_active(runs, active)
        negative = [i for i in active if weights[i] < 0]
        if not negative:
            return intercept, weights
        active.remove(min(negative, key=lambda i: weights[i]))


def _fit_active(runs: list[Run], active: list[int]) -> tuple[float, np.ndarray]:
    per_task: dict[tuple[str, str], int] = defaultdict(int)
    tasks_per_source: dict[str, set[str]] = defaultdict(set)
    for run in runs:
        per_task[run.source, run.task] += 1
        tasks_per_source[run.source].add(run.task)
    x = np.vstack([r.features[:, active] for r in runs])
    y = np.concatenate([np.full(len(r.steps), float(r.failed)) for r in runs])
    w = np.concatenate(
        [
            np.full(len(r.steps), 1.0 / (len(r.steps) * per_task[r.source, r.task] * len(tasks_per_source[r.source])))
            for r in runs
        ]
    )
    w *= len(runs) / w.sum()
    mu, sd = x.mean(axis=0), x.std(axis=0) + 1e-9
    z = np.hstack([np.ones((len(x), 1)), (x - mu) / sd])
    beta = np.zeros(z.shape[1])
    penalty = np.diag([0.0] + [L2] * (z.shape[1] - 1))
    for _ in range(50):
        p = 1.0 / (1.0 + np.exp(-(z @ beta)))
        gradient = z.T @ (w * (p - y)) + penalty @ beta
        hessian = (z * (w * p * (1 - p))[:, None]).T @ z + penalty
        step = np.linalg.solve(hessian, gradient)
        beta -= step
        if np.abs(step).max() < 1e-8:
            break
    scaled = beta[1:] / sd
    weights = np.zeros(len(FEATURES))
    weights[active] = scaled
    return float(beta[0] - (scaled * mu).sum()), weights


def scores_of(run: Run, intercept: float, weights: np.ndarray) -> np.ndarray:
    return np.asarray(1.0 / (1.0 + np.exp(-(intercept + run.features @ weights))), dtype=np.float64)


def max_state(scores: np.ndarray, fsm: DifficultyFSM) -> int:
    """The most severe state the run reaches (``FSMState.severity``, the library's one order)."""
    return max((state.severity for state in fsm.replay(scores)), default=FSMState.INIT.severity)


def reached(scores: np.ndarray, threshold: float, window: int) -> bool:
    run = 0
    for value in scores:
        run = run + 1 if value > threshold else 0
        if run >= window:
            return True
    return False


def _relative(
    runs: list[Run], scored: list[np.ndarray], fixed: dict[str, float], slow_q: float, skip_q: float
) -> list[tuple[float, float]]:
    """Each run's (slow, skip) thresholds as ``PilotRun.fsm_thresholds`` sets them (fast simulation for the
    threshold search; the reported figures run the real scorer)."""
    peaks: dict[str, list[tuple[float, float]]] = defaultdict(list)
    out = []
    for run, scores in zip(runs, scored, strict=True):
        earlier = peaks[run.agent]
        if len(earlier) >= RELATIVE_AFTER:
            slows = sorted(p[0] for p in earlier[-400:])
            skips = sorted(p[1] for p in earlier[-400:])
            slow = slows[min(int(slow_q * len(slows)), len(slows) - 1)]
            skip = skips[min(int(skip_q * len(skips)), len(skips) - 1)]
            slow = min(max(slow, fixed["fast_threshold"] + 2 * fixed["hysteresis_margin"]), 0.99)
            out.append((slow, min(max(skip, slow), 1.0)))
        else:
            out.append((fixed["slow_threshold"], fixed["skip_threshold"]))
        earlier.append((_peak(scores, SLOW_WINDOW), _peak(scores, SKIP_WINDOW)))
    return out


def _peak(scores: np.ndarray, window: int) -> float:
    """The highest score sustained over ``window`` steps (0 for a shorter run), as ``PilotRun`` keeps it."""
    if len(scores) < window:
        return 0.0
    return float(max(scores[i : i + window].min() for i in range(len(scores) - window + 1)))


def choose_fsm(runs: list[Run], intercept: float, weights: np.ndarray) -> dict[str, float]:
    """The lowest thresholds (fixed, for agents with few runs) and quantiles (relative, for the rest) keeping
    SLOW/SKIP on at most the fixed shares of the training side's successful runs."""
    scored = [scores_of(r, intercept, weights) for r in runs]
    good = [i for i, r in enumerate(runs) if not r.failed]
    grid = np.round(np.arange(0.05, 0.99, 0.005), 4)

    def lowest(window: int, share: float) -> float:
        for t in grid:
            if np.mean([reached(scored[i], float(t), window) for i in good]) <= share:
                return float(t)
        return float(grid[-1])

    slow = lowest(SLOW_WINDOW, SLOW_SUCCESS_SHARE)
    skip = max(lowest(SKIP_WINDOW, SKIP_SUCCESS_SHARE), slow)
    all_scores = np.concatenate(scored)
    fast = float(min(np.quantile(all_scores, 0.10), slow - 0.05))
    margin = float(min(0.05, (slow - fast) / 2))  # below the gap, so the exits stay meaningful
    fixed = {"fast_threshold": round(max(fast, 0.0), 4), "slow_threshold": slow, "skip_threshold": skip,
             "hysteresis_margin": round(margin, 4)}  # fmt: skip
    quantiles = np.round(np.arange(0.50, 1.0, 0.01), 2)

    def share(q_slow: float, q_skip: float, window: int, column: int) -> float:
        limits = _relative(runs, scored, fixed, q_slow, q_skip)
        return float(np.mean([reached(scored[i], limits[i][column], window) for i in good]))

    slow_q = next((float(q) for q in quantiles if share(q, q, SLOW_WINDOW, 0) <= SLOW_SUCCESS_SHARE), 0.99)
    skip_q = next(
        (float(q) for q in quantiles if q >= slow_q and share(slow_q, q, SKIP_WINDOW, 1) <= SKIP_SUCCESS_SHARE), 0.99
    )
    return {**fixed, "fast_window": 6, "slow_window": SLOW_WINDOW, "skip_window": SKIP_WINDOW,
            "slow_quantile": slow_q, "skip_quantile": skip_q}  # fmt: skip


def report(
    test: list[Run], intercept: float, weights: np.ndarray, fsm: dict[str, float], prior: dict[str, float]
) -> dict[str, float]:
    """The figures on ``test``, through the real scorer: ``PilotScorer`` with these weights, runs in file order
    (each agent's baseline learning online), each run's FSM from ``fsm_thresholds()`` as a live run's."""
    model = PilotModel(intercept, tuple(float(w) for w in weights), prior, fsm)
    scorer = PilotScorer(model)
    scored, states = [], []
    for run in test:
        one = scorer.start_run(run.agent)
        machine = DifficultyFSM(**one.fsm_thresholds())
        scores = np.array([one.score(step) for step in run.steps])
        one.finish()
        scored.append(scores)
        states.append(max_state(scores, machine))
    y = [r.failed for r in test]
    chars = [sum(len(s.thought) + len(s.action_input or "") for s in r.steps) for r in test]
    return {
        "runs": len(test),
        "failed": int(sum(y)),
        "auroc_last": auroc(y, [s[-1] for s in scored]),
        "auroc_step10": auroc(y, [s[min(9, len(s) - 1)] for s in scored]),
        "auroc_max_state": auroc(y, states),
        "auroc_chars": auroc(y, chars),
        "auroc_steps": auroc(y, [len(r.steps) for r in test]),
        "slow_failed": float(np.mean([st >= SLOW for st, f in zip(states, y, strict=True) if f])),
        "slow_succeeded": float(np.mean([st >= SLOW for st, f in zip(states, y, strict=True) if not f])),
        "skip_succeeded": float(np.mean([st >= SKIP for st, f in zip(states, y, strict=True) if not f])),
    }


def train(runs: list[Run]) -> tuple[dict[str, float], float, np.ndarray, dict[str, float]]:
    prior = prior_of(runs)
    extract(runs, prior)
    intercept, weights = fit(runs)
    return prior, intercept, weights, choose_fsm(runs, intercept, weights)


def grouped_folds(runs: list[Run], k: int = 5) -> list[list[Run]]:
    tasks = sorted({r.task for r in runs})
    rng = np.random.default_rng(7)
    order = rng.permutation(len(tasks))
    fold_of = {tasks[i]: n % k for n, i in enumerate(order)}
    return [[r for r in runs if fold_of[r.task] == f] for f in range(k)]


def cross_validate(runs: list[Run], k: int = 5) -> dict[str, float]:
    """Task-grouped k-fold: out-of-fold scores pooled, then the same figures as ``report``."""
    folds = grouped_folds(runs, k)
    rows = []
    for f in range(k):
        held = {id(r) for r in folds[f]}
        prior, intercept, weights, fsm = train([r for r in runs if id(r) not in held])
        rows.append((folds[f], intercept, weights, fsm, prior))
    # Per fold, then a run-weighted mean (each fold's scorer learns its agents' baselines from that fold only).
    reports = [report(test, i, w, fsm, prior) for test, i, w, fsm, prior in rows]
    total = sum(r["runs"] for r in reports)
    return {key: sum(r[key] * r["runs"] for r in reports) / total for key in reports[0]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=None, help="the data root (default: as rb_otel.datasets finds it)")
    parser.add_argument("--out", default=str(ROOT / "rb_otel" / "steering" / "pilot" / "pilot_weights.json"))
    parser.add_argument("--report", default=str(ROOT / "research" / "pilot_report.json"))
    args = parser.parse_args()
    try:
        root = args.data or data_root()
    except DataNotFound as exc:
        raise SystemExit(str(exc)) from None
    folders = source_folders(root)
    by_source = {SOURCES[name]: read_runs(folder, SOURCES[name]) for name, folder in folders.items()}
    results: dict[str, dict[str, float]] = {}
    names = list(by_source)
    for train_name in names:
        for test_name in names:
            if train_name == test_name:
                continue
            prior, intercept, weights, fsm = train(by_source[train_name])
            test = by_source[test_name]
            results[f"train {train_name} -> test {test_name}"] = report(test, intercept, weights, fsm, prior)
    for name in names:
        results[f"task-grouped 5-fold within {name}"] = cross_validate(by_source[name])
    pooled = [r for name in names for r in by_source[name]]
    results["task-grouped 5-fold, both sources pooled"] = cross_validate(pooled)
    prior, intercept, weights, fsm = train(pooled)
    model = {
        "version": PILOT_NAME,
        "features": list(FEATURES),
        "intercept": round(intercept, 6),
        "weights": {f: round(float(w), 6) for f, w in zip(FEATURES, weights, strict=True)},
        "prior": {k: round(v, 6) for k, v in prior.items()},
        "fsm": fsm,
        "trained_on": {name: len(runs) for name, runs in by_source.items()},
    }
    Path(args.out).write_text(json.dumps(model, indent=1) + "\n", encoding="utf-8")
    Path(args.report).write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.out} and {args.report}\n")
    keys = ["auroc_last", "auroc_chars", "auroc_step10", "auroc_max_state", "slow_failed", "slow_succeeded",
            "skip_succeeded"]  # fmt: skip
    print(f"{'out of sample':<58}" + "".join(f"{k.removeprefix('auroc_'):>11}" for k in keys))
    for name, row in results.items():
        print(f"{name:<58}" + "".join(f"{row[k]:>11.3f}" if not math.isnan(row[k]) else f"{'nan':>11}" for k in keys))
    print("\nweights:", json.dumps(model["weights"]), "\nFSM preset:", json.dumps(fsm))
    return 0


if __name__ == "__main__":
    sys.exit(main())
