"""``rb-otel evaluate``: would steering have flagged these failures? Replays labelled runs and measures it.

``evaluate(paths, labels=None, scorer="pilot")`` replays every run (one scorer for all of them, so the pilot's
per-agent baselines learn in file order, as they would live; ``pilot_model=`` scores with a fitted pilot/2;
reading and replaying: :mod:`~rb_otel.evaluation.labelled_runs`), then reports, each signal once, its AUROC for
failure with a 95% interval (bootstrap over task groups when a group has several runs) beside the trivial
baselines (the run's characters and steps); **early warning** at steps 5, 10 and 20 beside the baselines a live
run has from the same first k steps, over the runs still going (:mod:`rb_otel.evaluation.early`: one definition
everywhere); **stopping** at the first SKIP and at the first SLOW (false stops, failing runs stopped, steps and
tokens saved); the per-agent baselines each run was scored against; the states reached per outcome; and
calibration of the run risk.
"""

from __future__ import annotations

import math
import sys
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rb_otel.analysis.fleet import FleetFilter
from rb_otel.analysis.imported import read_from_source
from rb_otel.backends.pilot import PilotScorer
from rb_otel.evaluation.caveats import fit_caveat, outcome_caveats
from rb_otel.evaluation.early import (
    EARLY_STEPS,
    EarlyRow,
    RunTrace,
    StopFigures,
    at_first_state,
    early_warning,
    stop_curve,
    stop_line,
    stopping,
)
from rb_otel.evaluation.labelled_runs import EvaluationError, keep_labelled, replay_files, replay_trace_source
from rb_otel.evaluation.metrics import auroc, auroc_interval, calibration_bins
from rb_otel.importers.labels import Labels, failed_of, load_labels
from rb_otel.importers.model import ImportProblem, RecordError, ReplayResult
from rb_otel.steering.pilot.fingerprint import FitFingerprint, task_keys
from rb_otel.steering.scoring import Scorer, resolve_scorer
from rb_otel.types import FSMState

__all__ = ["EARLY_STEPS", "Evaluation", "EvaluationError", "RunOutcome", "Signal", "evaluate", "print_progress"]


@dataclass(frozen=True, slots=True)
class RunOutcome:
    """What evaluation keeps of one replayed run (per-step sequences are over its scored steps)."""

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
    group: str = ""
    states: tuple[str, ...] = ()
    prefix_chars: tuple[int, ...] = ()
    prefix_prompt_tokens: tuple[int, ...] = ()
    tokens: tuple[int, ...] = ()
    earlier_runs: int | None = None
    #: Its task group's keys (:func:`~rb_otel.steering.pilot.fingerprint.task_keys`), to tell if a fit saw its task.
    task_keys: tuple[str, ...] = ()

    def trace(self) -> RunTrace:
        return RunTrace(self.failed, self.scores, self.prefix_chars, self.prefix_prompt_tokens, self.tokens,
                        self.states)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Signal:
    name: str
    auroc: float
    low: float
    high: float
    runs: int
    baseline: bool = False  # a trivial baseline, for comparison

    def as_dict(self) -> dict[str, Any]:
        """JSON: ``null`` where a figure is not defined (one outcome only), as JSON has no NaN."""
        return {
            "name": self.name,
            "auroc": _known(self.auroc),
            "ci95": [_known(self.low), _known(self.high)],
            "runs": self.runs,
            "baseline": self.baseline,
        }


def _known(value: float) -> float | None:
    return None if math.isnan(value) else value


@dataclass(frozen=True, slots=True)
class AgentRow:
    """One agent key: its runs, failures, and how many earlier runs its baseline held when they were scored."""

    agent: str
    runs: int
    failed: int
    earlier_first: int | None
    earlier_last: int | None

    def as_dict(self) -> dict[str, Any]:
        return {"agent": self.agent, "runs": self.runs, "failed": self.failed,
                "earlier_runs_when_scored": [self.earlier_first, self.earlier_last]}  # fmt: skip


@dataclass(slots=True)
class Evaluation:
    scorer: str
    runs: list[RunOutcome]
    signals: list[Signal]
    states: dict[str, dict[str, int]]
    calibration: list[tuple[float, float, int]]
    problems: list[ImportProblem] = field(default_factory=list)
    unlabelled: int = 0
    early: list[EarlyRow] = field(default_factory=list)
    stopping: list[StopFigures] = field(default_factory=list)
    agents: list[AgentRow] = field(default_factory=list)
    #: What the figures cannot say (:mod:`rb_otel.evaluation.caveats`): few runs, one outcome, in-sample runs.
    caveats: list[str] = field(default_factory=list)
    #: With a fitted model whose file fingerprints its training runs: ``"in-sample"`` (every run was in its fit),
    #: ``"not in the fit"`` (these figures are on the runs it never saw); ``""`` when not known.
    sample: str = ""
    #: The figures on the runs in the fit, when some were and some were not (the figures above are on the others).
    in_sample: Evaluation | None = None

    def stop_curve(self, window: int = 2) -> list[StopFigures]:
        """Savings against false stops as a stop threshold on the score moves (the HTML report's plot)."""
        return stop_curve([r.trace() for r in self.runs if r.scores], window)

    def as_dict(self) -> dict[str, Any]:
        failed = sum(r.failed for r in self.runs)
        return {
            "scorer": self.scorer,
            "runs": len(self.runs),
            "failed": failed,
            "unlabelled_skipped": self.unlabelled,
            "signals": [s.as_dict() for s in self.signals],
            "early_warning": [r.as_dict() for r in self.early],
            "stopping": [s.as_dict() for s in self.stopping],
            "agents": [a.as_dict() for a in self.agents],
            "states_reached": self.states,
            "calibration": [{"predicted": p, "observed": o, "runs": n} for p, o, n in self.calibration],
            "problems": [str(p) for p in self.problems],
            "caveats": list(self.caveats),
            "sample": self.sample,
            "in_sample": self.in_sample.as_dict() if self.in_sample is not None else None,
        }

    def table(self) -> list[str]:
        failed = sum(r.failed for r in self.runs)
        sample = f", {self.sample}" if self.sample else ""
        lines = [f"{len(self.runs)} runs ({failed} failed){sample}, scorer {self.scorer}", ""]
        if self.caveats:
            lines += ["caveats:", *(f"  - {c}" for c in self.caveats), ""]
        lines.append(f"{'signal':<34}{'AUROC':>7}  {'95% interval':<15}{'runs':>6}")
        for s in self.signals:
            name = f"{s.name} (baseline)" if s.baseline else s.name
            interval = f"{s.low:.2f}-{s.high:.2f}" if s.low == s.low else "n/a"
            value = "n/a" if s.auroc != s.auroc else f"{s.auroc:.3f}"
            lines.append(f"{name:<34}{value:>7}  {interval:<15}{s.runs:>6}")
        if self.early:
            lines += ["", "early warning (runs still going at step k; baselines from the same first k steps):"]
            lines.append(
                f"  {'step':>4} {'runs':>6} {'failed':>6} {'score':>7} {'chars so far':>13} {'prompt tokens':>14}"
            )
            for r in self.early:
                tokens = "n/a" if r.prompt_tokens != r.prompt_tokens else f"{r.prompt_tokens:.3f}"
                lines.append(f"  {r.k:>4} {r.runs:>6} {r.failed:>6} {r.score:>7.3f} {r.chars:>13.3f} {tokens:>14}")
        if self.stopping:
            lines += ["", "if runs had been stopped:"] + [f"  {stop_line(s)}" for s in self.stopping]
        if self.agents:
            lines += ["", "agents (the key baselines are kept under; earlier runs its baseline held when scored):"]
            for a in self.agents:
                held = "n/a" if a.earlier_first is None else f"{a.earlier_first}..{a.earlier_last}"
                lines.append(f"  {a.agent:<40} {a.runs:>5} runs {a.failed:>5} failed  earlier runs {held}")
        lines += ["", "most severe state reached, by outcome:"]
        for outcome, counts in self.states.items():
            total = sum(counts.values()) or 1
            shares = ", ".join(f"{state} {n} ({n / total:.0%})" for state, n in counts.items())
            lines.append(f"  {outcome:<10} {shares}")
        if self.in_sample is not None:
            lines += ["", f"in-sample: the {len(self.in_sample.runs)} runs in the model's fit (flattering):", ""]
            lines += [f"  {line}" if line else line for line in self.in_sample.table()]
        return lines


def _outcome(result: ReplayResult) -> RunOutcome:
    scored = [(i, e) for i, e in enumerate(result.steps) if e.difficulty is not None]
    chars, prompt = result.prefix_chars, result.prefix_prompt_tokens
    return RunOutcome(
        run_id=result.run_id,
        source=result.source,
        agent=result.agent_key or f"{result.agent_name}|{result.model}",
        task=result.task_id or result.run_id,
        failed=bool(failed_of(result.outcome)),
        steps=result.step_count,
        chars=result.chars,
        scores=tuple(e.difficulty for _, e in scored if e.difficulty is not None),
        risk=result.risk,
        max_state=result.max_state,
        max_composite=result.max_composite,
        group=result.group_id or result.task_id or result.run_id,
        states=tuple(e.fsm_state for _, e in scored),
        prefix_chars=tuple(chars[i] if i < len(chars) else 0 for i, _ in scored),
        prefix_prompt_tokens=tuple(prompt[i] if i < len(prompt) else 0 for i, _ in scored),
        tokens=tuple(e.tokens for _, e in scored),
        earlier_runs=result.earlier_runs,
        task_keys=task_keys(result.run_id, result.group_id, result.task_id),
    )


def _signal(
    name: str, runs: Sequence[RunOutcome], value: Callable[[RunOutcome], float], *, baseline: bool = False
) -> Signal:
    y = [r.failed for r in runs]
    s = [value(r) for r in runs]
    clusters = [r.group for r in runs]
    repeated = len(set(clusters)) < len(clusters)
    low, high = auroc_interval(y, s, clusters if repeated else None, resamples=500)
    return Signal(name, auroc(y, s), low, high, len(runs), baseline)


def evaluate(
    paths: Sequence[str | Path],
    *,
    labels: str | Path | Labels | None = None,
    scorer: str | Scorer | Callable[..., float] | None = "pilot",
    pilot_model: str | Path | None = None,
    format: str = "auto",
    progress: Callable[[str, int], None] | None = None,
    where: FleetFilter | None = None,
    engine: str = "python",
) -> Evaluation:
    """Replay ``paths`` (files or directories) and measure each signal against the runs' outcomes.

    ``pilot_model`` (a model file ``rb-otel train`` wrote) scores with that pilot; it implies ``scorer="pilot"``.
    Raises :class:`EvaluationError` when no run has an outcome (naming the files and how to pass labels) or when
    ``labels`` match no run (listing run ids of both sides); :class:`RecordError` for an unreadable input;
    ``ValueError`` for a model file that is not one.
    ``progress(path, runs so far)`` is called after each file (a skipped one too).
    ``paths`` may be one trace store's URL; ``where`` (time window, agent, service) and ``engine="chdb"`` select
    the runs in the source (:mod:`rb_otel.analysis.imported`), which raises
    :class:`~rb_otel.analysis.sources.SourceError` when it cannot be reached or read.
    """
    outcomes = load_labels(labels) if isinstance(labels, str | Path) else labels
    if pilot_model is not None:
        if scorer not in ("pilot", None):
            raise EvaluationError("pilot_model= scores with the pilot; it cannot be combined with another scorer")
        shared: Scorer = PilotScorer(model=pilot_model, baselines="memory://")
    else:
        shared = resolve_scorer(scorer)
        if isinstance(shared, PilotScorer) and scorer == "pilot":
            shared = PilotScorer(baselines="memory://")  # measuring: baselines learned here, in file order
    if read_from_source(paths, where, engine):
        results = replay_trace_source(paths, where, engine, scorer=shared, outcomes=outcomes, progress=progress)
    else:
        results = replay_files(paths, shared, outcomes, format, progress)
    labelled = keep_labelled(results.results, outcomes, paths)
    runs = [_outcome(r) for r in labelled]
    unlabelled = len(results.results) - len(labelled)
    if pilot_model is None or not isinstance(shared, PilotScorer):
        # the pilot scores each run with its kind's model: name every model that scored one (pilot/1, pilot/3)
        used = sorted({r.scorer for r in labelled if r.scorer})
        return _evaluation(", ".join(used) or shared.name, runs, results.problems, unlabelled)
    return _split_by_fit(str(pilot_model), shared, runs, results.problems, unlabelled)


def _evaluation(scorer: str, runs: list[RunOutcome], problems: list[ImportProblem], unlabelled: int) -> Evaluation:
    """The figures on ``runs``, with their caveats."""
    traces = [r.trace() for r in runs if r.scores]
    return Evaluation(
        scorer=scorer,
        runs=runs,
        signals=_signals(runs),
        states=_states(runs),
        calibration=calibration_bins([r.failed for r in runs], [r.risk or 0.0 for r in runs]),
        problems=problems,
        unlabelled=unlabelled,
        early=early_warning(traces),
        stopping=[
            stopping(traces, "stop at the first SKIP", at_first_state("SKIP")),
            stopping(traces, "stop at the first SLOW", at_first_state("SLOW")),
        ],
        agents=_agents(runs),
        caveats=outcome_caveats([r.failed for r in runs], unlabelled),
    )


def _split_by_fit(
    model: str, scorer: PilotScorer, runs: list[RunOutcome], problems: list[ImportProblem], unlabelled: int
) -> Evaluation:
    """The figures of a fitted model, split by its file's fingerprint into the runs it was fitted on (the run, or
    a run of its task: in-sample) and the runs it never saw; the main figures are on the latter when there are
    any."""
    trained, name = scorer.model.trained, scorer.name
    fit = FitFingerprint.from_dict(trained.get("fingerprint"))
    if fit is None:
        evaluation = _evaluation(name, runs, problems, unlabelled)
        evaluation.caveats.append(f"{model} records no fingerprint of its training runs (written before rb-otel "
                                  "kept one, or not by rb-otel train): whether these runs were in its fit is "
                                  "unknown")  # fmt: skip
        return evaluation
    seen = [r for r in runs if fit.saw_run(r.run_id) or fit.saw_task(r.task_keys)]
    unseen = [r for r in runs if not (fit.saw_run(r.run_id) or fit.saw_task(r.task_keys))]
    cross = trained.get("cross_validation")
    out_of_fold = cross.get("auroc_last_step") if isinstance(cross, Mapping) else None
    caveat = fit_caveat(model, len(seen), len(unseen), out_of_fold if isinstance(out_of_fold, float) else None)
    evaluation = _evaluation(name, unseen or seen, problems, unlabelled)
    evaluation.sample = "not in the fit" if unseen else "in-sample"
    if seen and unseen:
        evaluation.in_sample = _evaluation(name, seen, [], 0)
        evaluation.in_sample.sample = "in-sample"
    if caveat is not None:
        evaluation.caveats.insert(0, caveat)
    return evaluation


def _signals(runs: list[RunOutcome]) -> list[Signal]:
    scored = [r for r in runs if r.scores]
    out = [_signal("score at the last step", scored, lambda r: r.scores[-1])]
    # The run risk is a signal of its own only when it differs from the last score (the pilot's is the same).
    if any(r.risk is not None and abs(r.risk - r.scores[-1]) > 1e-9 for r in scored):
        out.append(_signal("run risk", scored, lambda r: r.risk or 0.0))
    out += [
        _signal("most severe FSM state", runs, lambda r: FSMState.severity_of(r.max_state)),
        _signal("largest monitor composite", runs, lambda r: r.max_composite),
        _signal("characters written", runs, lambda r: r.chars, baseline=True),
        _signal("steps", runs, lambda r: r.steps, baseline=True),
    ]
    return out


def _agents(runs: list[RunOutcome]) -> list[AgentRow]:
    by: dict[str, list[RunOutcome]] = defaultdict(list)
    for r in runs:
        by[r.agent].append(r)
    rows = []
    for agent, items in sorted(by.items(), key=lambda kv: -len(kv[1])):
        earlier = [r.earlier_runs for r in items if r.earlier_runs is not None]
        rows.append(
            AgentRow(
                agent,
                len(items),
                sum(r.failed for r in items),
                earlier[0] if earlier else None,
                earlier[-1] if earlier else None,
            )
        )
    return rows


def _states(runs: list[RunOutcome]) -> dict[str, dict[str, int]]:
    order = [s.value for s in (FSMState.INIT, FSMState.FAST, FSMState.NORMAL, FSMState.SLOW, FSMState.SKIP)]
    out: dict[str, dict[str, int]] = {}
    for label, failed in (("failed", True), ("succeeded", False)):
        counts = Counter(r.max_state for r in runs if r.failed is failed)
        out[label] = {state: counts.get(state, 0) for state in order if counts.get(state, 0)}
    return out


def print_progress(path: str, runs: int) -> None:
    """Progress on standard error: a line per file while files are few, then every 50 runs."""
    if runs < 50 or runs % 50 == 0:
        print(f"  replayed {path}: {runs} runs so far", file=sys.stderr)


__all__ += ["AgentRow", "RecordError"]
