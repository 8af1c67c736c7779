"""``rb-otel evaluate``: would steering have flagged these failures? Replays labelled runs and measures it.

``evaluate(paths, labels=None, scorer="pilot")`` replays every run (one scorer for all of them, so the pilot's
per-agent baselines learn in file order, as they would live), then reports for each signal its AUROC for
failure with a 95% interval (bootstrap over tasks when a task has several runs), side by side with the trivial
baselines (the run's step count and character count): the score at the last step, the run risk, the most
severe FSM state, the largest monitor composite; early warning (the score at steps 5, 10 and 20, over the runs
that reached them); the states reached per outcome; and calibration of the run risk.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rb_otel.evaluation.metrics import auroc, auroc_interval, calibration_bins
from rb_otel.importers.labels import Labels, load_labels
from rb_otel.importers.model import ImportProblem, RecordError, ReplayResult
from rb_otel.importers.replay import replay
from rb_otel.steering.baselines import agent_key
from rb_otel.steering.scorers import Scorer, resolve_scorer
from rb_otel.telemetry.silent import silent_providers
from rb_otel.types import FSMState

__all__ = ["EARLY_STEPS", "Evaluation", "EvaluationError", "RunOutcome", "Signal", "evaluate"]

EARLY_STEPS = (5, 10, 20)
_SEVERITY = {s.value: s.severity for s in FSMState}


class EvaluationError(ValueError):
    """The inputs cannot be evaluated (no outcomes, labels matching nothing); the message says what to do."""


@dataclass(frozen=True, slots=True)
class RunOutcome:
    """What evaluation keeps of one replayed run."""

    run_id: str
    source: str
    agent: str
    task: str
    failed: bool
    steps: int
    chars: int
    scores: tuple[float, ...]
    risk: float | None
    max_state: str
    max_composite: float


@dataclass(frozen=True, slots=True)
class Signal:
    name: str
    auroc: float
    low: float
    high: float
    runs: int
    baseline: bool = False  # a trivial baseline, for comparison

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "auroc": self.auroc,
            "ci95": [self.low, self.high],
            "runs": self.runs,
            "baseline": self.baseline,
        }


@dataclass(slots=True)
class Evaluation:
    scorer: str
    runs: list[RunOutcome]
    signals: list[Signal]
    states: dict[str, dict[str, int]]
    calibration: list[tuple[float, float, int]]
    problems: list[ImportProblem] = field(default_factory=list)
    unlabelled: int = 0

    def as_dict(self) -> dict[str, Any]:
        failed = sum(r.failed for r in self.runs)
        return {
            "scorer": self.scorer,
            "runs": len(self.runs),
            "failed": failed,
            "unlabelled_skipped": self.unlabelled,
            "signals": [s.as_dict() for s in self.signals],
            "states_reached": self.states,
            "calibration": [{"predicted": p, "observed": o, "runs": n} for p, o, n in self.calibration],
            "problems": [str(p) for p in self.problems],
        }

    def table(self) -> list[str]:
        failed = sum(r.failed for r in self.runs)
        lines = [f"{len(self.runs)} runs ({failed} failed), scorer {self.scorer}", ""]
        lines.append(f"{'signal':<34}{'AUROC':>7}  {'95% interval':<15}{'runs':>6}")
        for s in self.signals:
            name = f"{s.name} (baseline)" if s.baseline else s.name
            interval = f"{s.low:.2f}-{s.high:.2f}" if s.low == s.low else "n/a"
            lines.append(f"{name:<34}{s.auroc:>7.3f}  {interval:<15}{s.runs:>6}")
        lines += ["", "most severe state reached, by outcome:"]
        for outcome, counts in self.states.items():
            total = sum(counts.values()) or 1
            shares = ", ".join(f"{state} {n} ({n / total:.0%})" for state, n in counts.items())
            lines.append(f"  {outcome:<10} {shares}")
        return lines


def _failed(outcome: str) -> bool | None:
    if outcome == "success":
        return False
    if outcome.startswith("failure"):
        return True
    return None  # unlabelled, unfinished


def _outcome(result: ReplayResult) -> RunOutcome:
    scores = tuple(e.difficulty for e in result.steps if e.difficulty is not None)
    return RunOutcome(
        run_id=result.run_id,
        source=result.source,
        agent=agent_key(result.agent_name, result.model),
        task=result.task_id or result.run_id,
        failed=bool(_failed(result.outcome)),
        steps=result.step_count,
        chars=result.chars,
        scores=scores,
        risk=result.risk,
        max_state=result.max_state,
        max_composite=result.max_composite,
    )


def _signal(
    name: str, runs: Sequence[RunOutcome], value: Callable[[RunOutcome], float], *, baseline: bool = False
) -> Signal:
    y = [r.failed for r in runs]
    s = [value(r) for r in runs]
    clusters = [r.task for r in runs]
    repeated = len(set(clusters)) < len(clusters)
    low, high = auroc_interval(y, s, clusters if repeated else None, resamples=500)
    return Signal(name, auroc(y, s), low, high, len(runs), baseline)


def evaluate(
    paths: Sequence[str | Path],
    *,
    labels: str | Path | Labels | None = None,
    scorer: str | Scorer | Callable[..., float] | None = "pilot",
    format: str = "auto",
    progress: Callable[[str, int], None] | None = None,
) -> Evaluation:
    """Replay ``paths`` (files or directories) and measure each signal against the runs' outcomes.

    Raises :class:`EvaluationError` when no run has an outcome (naming the files and how to pass labels) or when
    ``labels`` match no run (listing run ids of both sides); :class:`RecordError` for an unreadable input.
    ``progress(path, runs so far)`` is called after each path.
    """
    outcomes = load_labels(labels) if isinstance(labels, str | Path) else labels
    shared = resolve_scorer(scorer)
    results: list[ReplayResult] = []
    problems: list[ImportProblem] = []
    tracer_provider, meter_provider = silent_providers()  # measuring only: nothing is exported
    for path, in_directory in _files(paths):
        try:
            found = replay(
                path,
                format=format,
                scorer=shared,
                labels=outcomes,
                tracer_provider=tracer_provider,
                meter_provider=meter_provider,
            )
        except RecordError as exc:
            if not in_directory:
                raise
            problems.append(ImportProblem(exc.path, exc.where, exc.problem))  # e.g. a labels file among the runs
            continue
        results += found
        problems += [p for p in (found[0].problems if found else []) if p not in problems]
        if progress is not None:
            progress(str(path), len(results))
    if not results:
        raise EvaluationError(f"no runs found in {', '.join(map(str, paths))}")
    if outcomes is not None:
        matched = [r for r in results if outcomes.outcome_of(r.run_id) is not None]
        if not matched:
            ours = ", ".join(r.run_id for r in results[:3])
            theirs = ", ".join(list(outcomes)[:3])
            raise EvaluationError(
                f"{outcomes.path}: the labels match no run; runs look like: {ours}; labels look like: {theirs}"
            )
    labelled = [r for r in results if _failed(r.outcome) is not None]
    if not labelled:
        raise EvaluationError(
            f"{', '.join(map(str, paths))}: these runs carry no outcome; pass --labels FILE (SWE-bench results.json, "
            "mini-swe-agent results_summary.json, or {run_id: true|false}) or labels= in Python"
        )
    runs = [_outcome(r) for r in labelled]
    return Evaluation(
        scorer=shared.name,
        runs=runs,
        signals=_signals(runs),
        states=_states(runs),
        calibration=calibration_bins([r.failed for r in runs], [r.risk or 0.0 for r in runs]),
        problems=problems,
        unlabelled=len(results) - len(labelled),
    )


def _files(paths: Sequence[str | Path]) -> list[tuple[Path, bool]]:
    """``(file, found in a directory)``: directories expanded to their files in name order, so progress is per
    file; a path that does not exist is kept, for replay to report."""
    out: list[tuple[Path, bool]] = []
    for path in map(Path, paths):
        if path.is_dir():
            out += [(p, True) for p in sorted(path.iterdir()) if p.is_file() and not p.name.startswith(".")]
        else:
            out.append((path, False))
    return out


def _signals(runs: list[RunOutcome]) -> list[Signal]:
    scored = [r for r in runs if r.scores]
    out = [
        _signal("score at the last step", scored, lambda r: r.scores[-1]),
        _signal("run risk", scored, lambda r: r.risk or 0.0),
        _signal("most severe FSM state", runs, lambda r: _SEVERITY.get(r.max_state, 0)),
        _signal("largest monitor composite", runs, lambda r: r.max_composite),
    ]
    for k in EARLY_STEPS:
        reached = [r for r in scored if len(r.scores) >= k]
        if len({r.failed for r in reached}) == 2:
            out.append(_signal(f"score at step {k}", reached, _score_at(k)))
    out.append(_signal("characters written", runs, lambda r: r.chars, baseline=True))
    out.append(_signal("steps", runs, lambda r: r.steps, baseline=True))
    return out


def _score_at(k: int) -> Callable[[RunOutcome], float]:
    def value(run: RunOutcome) -> float:
        return run.scores[k - 1]

    return value


def _states(runs: list[RunOutcome]) -> dict[str, dict[str, int]]:
    order = [s.value for s in (FSMState.INIT, FSMState.FAST, FSMState.NORMAL, FSMState.SLOW, FSMState.SKIP)]
    out: dict[str, dict[str, int]] = {}
    for label, failed in (("failed", True), ("succeeded", False)):
        counts = Counter(r.max_state for r in runs if r.failed is failed)
        out[label] = {state: counts.get(state, 0) for state in order if counts.get(state, 0)}
    return out


def _print_progress(path: str, runs: int) -> None:
    """Progress on standard error: a line per file while files are few, then every 50 runs."""
    if runs < 50 or runs % 50 == 0:
        print(f"  replayed {path}: {runs} runs so far", file=sys.stderr)


__all__ += ["RecordError"]
