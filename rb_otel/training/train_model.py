"""``rb-otel train``: fit the pilot to your own agent's labelled runs, measured honestly before it is written.

``train(paths, labels=..., out="pilot.json")`` reads the runs (any importer format, or rb-otel's OTLP/JSON
traces), extracts every prefix's features with the pilot's own runtime code, chooses a model family and fits it
(:mod:`rb_otel.training.fit`), cross-validates the whole procedure by task group (:mod:`rb_otel.training.cv`),
tests it against the same procedure on shuffled outcomes (:mod:`rb_otel.training.permutation`), chooses the
SLOW/SKIP thresholds from the out-of-fold scores for the false-stop budget, as an upper bound
(:mod:`rb_otel.training.thresholds`), and writes a ``pilot/2`` model file only when the report trusts the fit
(``force=True`` writes it anyway). Needs the ``[train]`` extra (scipy); scoring with the file needs nothing more
than rb-otel.
"""

from __future__ import annotations

import datetime
import math
import os
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from rb_otel._version import __version__
from rb_otel.analysis.fleet import FleetFilter
from rb_otel.analysis.imported import read_from_source
from rb_otel.evaluation.caveats import LABELS_HINT
from rb_otel.evaluation.early import at_first_state, early_warning, stopping
from rb_otel.evaluation.metrics import auroc, auroc_interval, oriented_values
from rb_otel.files import write_atomically
from rb_otel.importers.detect import input_files
from rb_otel.importers.labels import Labels
from rb_otel.steering.pilot import FEATURES, PILOT_V2, PilotModel, TextWeights
from rb_otel.steering.pilot.fingerprint import FitFingerprint
from rb_otel.steering.pilot.text import TEXT_VALUES
from rb_otel.training.cv import OutOfFold, early_step, nested_out_of_fold, select
from rb_otel.training.dataset import Dataset, LabelledRun, read_dataset
from rb_otel.training.earned import run_traces
from rb_otel.training.features import PrefixData, extract, prior_of
from rb_otel.training.fit import CANDIDATES, TEXT_BITS, Fitted, fit_candidate
from rb_otel.training.held_out import agent_unit, leave_one_agent_out
from rb_otel.training.permutation import PERMUTATIONS, permutation_test
from rb_otel.training.relative_skip import choose_relative_skip
from rb_otel.training.report import MIN_FAILURES, MIN_RUNS, Figure, TrainingReport
from rb_otel.training.stages import Stages, stages_of
from rb_otel.training.thresholds import SKIP_OFF, choose_fsm, fold_thresholds, holding_bound
from rb_otel.urls import display_url

__all__ = ["TrainingError", "TrainingResult", "fold_thresholds", "train", "train_dataset"]


class TrainingError(ValueError):
    """The runs cannot be fitted (none labelled, one outcome only, scipy missing); the message says what to do."""


@dataclass(slots=True)
class TrainingResult:
    model: PilotModel
    report: TrainingReport
    written: Path | None


def _require_scipy() -> None:
    try:
        import scipy  # noqa: F401
    except ImportError:
        raise TrainingError("rb-otel train needs scipy: pip install 'rb-otel[train]'") from None


def train(
    paths: Sequence[str | Path],
    *,
    labels: str | Path | Labels | None = None,
    out: str | Path | None = None,
    max_false_stops: float = 0.02,
    force: bool = False,
    format: str = "auto",
    folds: int = 5,
    shuffles: int = 3,
    seed: int = 0,
    progress: Stages | Callable[[str], None] | None = None,
    permutations: int = PERMUTATIONS,
    held_out_agents: bool = True,
    where: FleetFilter | None = None,
    engine: str = "python",
) -> TrainingResult:
    """Fit, cross-validate and (when trusted, or with ``force``) write a pilot/2 model (module docstring).
    ``permutations``: fits on shuffled outcomes for the test against chance (0 skips it: never trusted then).
    ``held_out_agents``: with runs of two or more agents, hold each out in turn
    (:mod:`rb_otel.training.held_out`); SKIP is then on only where it held its budget on the held-out agents.
    ``paths`` may be one trace store's URL; ``where`` (time window, agent, service) and ``engine="chdb"`` select
    the runs in the source (:mod:`rb_otel.analysis.imported`). ``progress``: each stage and its counts
    (:class:`~rb_otel.training.stages.Stages`), or a function of one line per stage.

    Raises :class:`TrainingError` when there is nothing to fit, and
    :class:`~rb_otel.importers.model.RecordError` for an unreadable input.
    """
    if not 0.0 <= max_false_stops < 1.0:
        raise TrainingError(f"max_false_stops must be in [0, 1), got {max_false_stops!r}")
    _require_scipy()
    stages = stages_of(progress)
    stored = read_from_source(paths, where, engine)
    stages.stage("reading the runs", None if stored else len(input_files(paths)), "file")
    dataset = read_dataset(paths, labels=labels, format=format, where=where, engine=engine, done=stages.advance)
    _checked_runs(dataset, paths)
    return train_dataset(
        dataset,
        out=out,
        max_false_stops=max_false_stops,
        force=force,
        folds=folds,
        shuffles=shuffles,
        seed=seed,
        progress=stages,
        permutations=permutations,
        held_out_agents=held_out_agents,
    )


def train_dataset(
    dataset: Dataset,
    *,
    out: str | Path | None = None,
    max_false_stops: float = 0.02,
    force: bool = False,
    folds: int = 5,
    shuffles: int = 3,
    seed: int = 0,
    progress: Stages | Callable[[str], None] | None = None,
    permutations: int = PERMUTATIONS,
    held_out_agents: bool = True,
) -> TrainingResult:
    """:func:`train` on runs already read (a subset of a dataset, say: ``training/half_split.py`` fits on half
    the task groups and tests on the other half)."""
    _require_scipy()
    stages = stages_of(progress)
    runs = _checked_runs(dataset, ["the runs"])
    stages.stage(f"extracting the features of {len(runs)} labelled runs from {dataset.files} file(s)")
    prior = prior_of(runs)
    data = extract(runs, prior)
    stages.stage(f"{folds}-fold cross-validation by task ({len(data.run)} prefixes)", folds, "fold")
    oof = nested_out_of_fold(data, k=folds, seed=seed, done=stages.advance, workers=min(os.cpu_count() or 1, 4))
    report = _report(data, oof, dataset, folds=folds, max_false_stops=max_false_stops)
    if permutations > 0:
        stages.stage("the test against chance (fits on shuffled outcomes)", permutations, "fit")
        real = report.last_step[0].auroc
        report.permutation = permutation_test(data, oof.folds, oof.chosen, real, permutations=permutations, seed=seed,
                                              done=stages.advance)  # fmt: skip
    stages.stage("file-order sensitivity and the final fit", shuffles * folds + 1, "fit")
    report.order_sensitivity = _order_sensitivity(runs, prior, oof, shuffles=shuffles, seed=seed, done=stages.advance)
    candidate, _ = select(data, range(len(runs)), seed=seed)
    fitted = fit_candidate(data, range(len(runs)), candidate)
    stages.advance()
    report.final_candidate = candidate.name
    report.check(early_step([len(r.steps) for r in runs]), fitted.constant)
    if report.permutation is None:
        report.warnings.append("no test against chance was run (permutations=0): the fit cannot be trusted")
    probabilities = data.probabilities(oof.logits)
    several = len({agent_unit(r) for r in runs}) >= 2
    if held_out_agents and several:
        agents = len({agent_unit(r) for r in runs})
        stages.stage("leave one agent out (each scored by a fit on the others)", agents, "agent")
        report.held_out = leave_one_agent_out(
            runs,
            max_false_stops=max_false_stops,
            seed=seed,
            progress=stages.note,
            done=stages.advance,
            workers=min(os.cpu_count() or 1, 4),
        )
    fsm = choose_fsm(
        [p for p, r in zip(probabilities, runs, strict=True) if not r.failed],
        probabilities,
        max_false_stops=max_false_stops,
        failing=[p for p, r in zip(probabilities, runs, strict=True) if r.failed],
        # None: no bound kept the budget on the cross-fitted folds (or, with several agents, on held-out ones)
        z=None if report.held_out is not None and not report.held_out.skip_holds else report.bound_strictness,
    )
    if report.held_out is not None and report.held_out.skip_holds:
        relative = choose_relative_skip(runs, probabilities, fsm, max_false_stops)
        if relative is None:
            fsm["skip_threshold"] = SKIP_OFF
        else:  # relative to each agent's own runs, the rule that held on the held-out agents
            fsm = {**fsm, "skip_threshold": SKIP_OFF, "skip_quantile": relative[0], "skip_window": relative[1]}
    report.skip_on = fsm["skip_threshold"] < SKIP_OFF or "skip_quantile" in fsm
    model = _model(fitted, prior, fsm, runs, dataset, report, max_false_stops)
    written = None
    if out is not None and (report.trusted or force):
        written = _write(Path(out), model)
    return TrainingResult(model, report, written)


def _checked_runs(dataset: Dataset, paths: Sequence[str | Path]) -> list[LabelledRun]:
    """The runs, when they can be fitted; else :class:`TrainingError` saying what is missing and what fixes it."""
    where = ", ".join(map(display_url, paths))
    runs = dataset.runs
    if not runs and dataset.unlabelled:
        raise TrainingError(
            f"{where}: none of the {dataset.unlabelled} runs carries an outcome (a harness's exit status, SWE-agent's "
            f"'submitted' say, tells how the agent stopped, not whether it succeeded); pass {LABELS_HINT}"
        )
    if not runs and dataset.problems:
        raise TrainingError(f"{where}: no runs found; {len(dataset.problems)} file(s) or record(s) skipped, the "
                            f"first: {dataset.problems[0]}")  # fmt: skip
    if not runs:
        found = f"in {dataset.files} file(s) (pass --format if the one detected is wrong)" if dataset.files else (
            "(an empty folder, or no run under the filters given)")  # fmt: skip
        raise TrainingError(f"{where}: no runs found {found}")
    outcomes = Counter(r.failed for r in runs)
    if len(outcomes) < 2:
        only, other = ("failed", "succeeded") if True in outcomes else ("succeeded", "failed")
        fix = f"pass {LABELS_HINT} for the {dataset.unlabelled} without one, or " if dataset.unlabelled else ""
        raise TrainingError(f"{where}: all {len(runs)} labelled runs {only}; a fit needs both outcomes: {fix}add "
                            f"runs that {other}")  # fmt: skip
    if len({r.group for r in runs}) < 2:
        raise TrainingError(f"{where}: all {len(runs)} labelled runs are of one task; the fit is cross-validated "
                            "by task (a task's runs never on both sides), so it needs runs of two tasks or more "
                            f"(and {MIN_RUNS} runs with {MIN_FAILURES} failures to be judged)")  # fmt: skip
    return runs


def _report(
    data: PrefixData, oof: OutOfFold, dataset: Dataset, *, folds: int, max_false_stops: float
) -> TrainingReport:
    runs = data.runs
    probabilities = data.probabilities(oof.logits)
    strictness, states = holding_bound(runs, probabilities, oof.folds, max_false_stops)
    traces = run_traces(runs, probabilities, states)
    y = [r.failed for r in runs]
    groups = [r.group for r in runs]
    repeated = len(set(groups)) < len(groups)

    def figure(name: str, values: Sequence[float], baseline: bool = False) -> Figure:
        """A figure of the fit, or of a baseline oriented on the training side; its interval the wider of a
        bootstrap over groups and the per-fold spread."""
        sign, oriented = 1, np.asarray(values, dtype=np.float64)
        if baseline:
            oriented, sign = oriented_values(y, oriented, oof.folds)
        value = auroc(y, oriented)
        low, high = auroc_interval(y, oriented.tolist(), groups if repeated else None, resamples=500)
        per_fold = tuple(_fold_auroc(y, oriented, oof.folds, f) for f in range(folds))
        known = [a for a in per_fold if not math.isnan(a)]
        if len(known) > 1:
            half = 1.96 * float(np.std(known, ddof=1)) / math.sqrt(len(known))
            low, high = min(low, value - half), max(high, value + half)
        return Figure(name, value, low, high, len(runs), baseline, sign, per_fold)

    agents: dict[str, dict[str, int]] = defaultdict(lambda: {"runs": 0, "failed": 0})
    for r in runs:
        agents[r.agent]["runs"] += 1
        agents[r.agent]["failed"] += int(r.failed)
    return TrainingReport(
        runs=len(runs),
        failed=sum(y),
        groups=len(set(groups)),
        agents=dict(agents),
        sources=dict(Counter(r.source for r in runs)),
        folds=folds,
        chosen=oof.chosen,
        last_step=[
            figure("fit, score at the last step", [p[-1] for p in probabilities]),
            figure("characters written", [t.chars[-1] for t in traces], baseline=True),
            figure("steps", [len(r.steps) for r in runs], baseline=True),
        ],
        early=early_warning(traces, folds=oof.folds.tolist()),
        stopping=[
            stopping(traces, f"stop at the first SKIP (max false stops {max_false_stops:.1%})", at_first_state("SKIP")),
            stopping(traces, "stop at the first SLOW", at_first_state("SLOW")),
        ],
        order_sensitivity=[],
        problems=[str(p) for p in dataset.problems],
        unlabelled=dataset.unlabelled,
        skip_on=strictness is not None,
        bound_strictness=strictness,
    )


def _fold_auroc(y: Sequence[bool], values: NDArray[np.float64], folds: NDArray[np.int64], fold: int) -> float:
    held = folds == fold
    return auroc(np.asarray(y, dtype=bool)[held], values[held])


def _order_sensitivity(
    runs: list[LabelledRun],
    prior: dict[str, float],
    oof: OutOfFold,
    *,
    shuffles: int,
    seed: int,
    done: Callable[[], None] | None = None,
) -> list[float]:
    """The pooled last-step AUROC again with the runs in shuffled orders (each fold's family kept); ``done()``
    after each fold's fit."""
    out = []
    by_name = {c.name: c for c in CANDIDATES}
    for s in range(shuffles):
        order = np.random.default_rng(seed + 1000 + s).permutation(len(runs))
        shuffled = [runs[i] for i in order]
        data = extract(shuffled, prior)
        folds = oof.folds[order]
        logits = np.full(len(data.run), np.nan)
        for f, name in enumerate(oof.chosen):
            train_runs = np.flatnonzero(folds != f).tolist()
            model = fit_candidate(data, train_runs, by_name[name])
            held = data.rows_of(np.flatnonzero(folds == f).tolist())
            logits[held] = model.logits(data)[held]
            if done is not None:
                done()
        last = [logits[data.run == i][-1] for i in range(len(shuffled))]
        out.append(auroc([r.failed for r in shuffled], last))
    return out


def _model(  # noqa: PLR0917 - what the model file records, each from its own step of train()
    fitted: Fitted,
    prior: dict[str, float],
    fsm: dict[str, float],
    runs: Sequence[LabelledRun],
    dataset: Dataset,
    report: TrainingReport,
    max_false_stops: float,
) -> PilotModel:
    failed = sum(r.failed for r in runs)
    trained = {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "rb_otel": __version__,
        "agents": dict(Counter(r.agent for r in runs)),
        "runs": len(runs),
        "failed": failed,
        "failure_rate": round(failed / len(runs), 4),
        "task_groups": len({r.group for r in runs}),
        "sources": dict(Counter(r.source for r in runs)),
        "files": dataset.files,
        "family": fitted.candidate.name,
        "text_tokens": "tool names, shell programs, argument keys, exit codes, error classes, observation words",
        "text_buckets": fitted.text_buckets,
        "cross_validation": {
            "auroc_last_step": report.last_step[0].auroc,
            "baselines_last_step": {f.name: f.auroc for f in report.last_step[1:]},
            "early_warning": [r.as_dict() for r in report.early],
            "stopping": [s.as_dict() for s in report.stopping],
        },
        "trusted": report.trusted,
        "warnings": report.warnings,
        "permutation_test": report.permutation.as_dict() if report.permutation is not None else None,
        "held_out_agents": report.held_out.as_dict() if report.held_out is not None else None,
        # which runs (and tasks) the fit saw, hashed: evaluate --pilot-model labels its figures on them in-sample
        "fingerprint": FitFingerprint.of((r.run_id, r.task_keys) for r in runs).as_dict(),
    }
    # skip_on 0.0: SKIP off (no threshold held the bound usefully)
    return model_of(fitted, prior, fsm, PILOT_V2, trained, skip_on=report.skip_on, max_false_stops=max_false_stops)


def model_of(
    fitted: Fitted,
    prior: dict[str, float],
    fsm: dict[str, float],
    version: str,
    trained: dict[str, Any],
    *,
    skip_on: bool,
    max_false_stops: float,
) -> PilotModel:
    """The model file of ``fitted``: its weights and text blocks (:func:`text_blocks`), with the prior, the FSM
    preset, what it was trained on and whether SKIP is on."""
    blocks = text_blocks(fitted)
    return PilotModel(
        intercept=fitted.intercept,
        weights=tuple(float(w) for w in fitted.dense),
        prior=prior,
        fsm=fsm,
        version=version,
        features=FEATURES,
        text=blocks[0] if blocks else None,
        more_text=blocks[1:],
        trained=trained,
        skip={
            "max_false_stops": max_false_stops,
            "threshold": fsm["skip_threshold"],
            "window": fsm["skip_window"],
            "on": float(skip_on),
        },
    )


def text_blocks(fitted: Fitted) -> tuple[TextWeights, ...]:
    """``fitted``'s text weights as the model file's blocks, one per way of counting (none when it has none)."""
    blocks = []
    for value, weights in sorted(fitted.text.items()):
        assert value in TEXT_VALUES
        if weights:
            blocks.append(TextWeights(TEXT_BITS, value, weights))
    return tuple(blocks)


def _write(path: Path, model: PilotModel) -> Path:
    import json

    return write_atomically(path, json.dumps(model.as_dict(), indent=1) + "\n")
