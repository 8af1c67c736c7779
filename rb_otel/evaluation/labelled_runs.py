"""The labelled runs ``rb-otel evaluate`` measures: read from files, folders or a trace store, replayed with the
scorer being measured (nothing exported), and kept when their outcome is known (:func:`failed_of`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from rb_otel.analysis.fleet import FleetFilter
from rb_otel.analysis.imported import source_runs
from rb_otel.evaluation.caveats import LABELS_HINT
from rb_otel.importers.detect import NotRuns, input_files, no_runs
from rb_otel.importers.labels import Labels, failed_of, with_recorded
from rb_otel.importers.model import ImportProblem, RecordError, ReplayResult
from rb_otel.importers.outcome_events import recorded_outcomes
from rb_otel.importers.reading import SeenRuns, not_runs_problem
from rb_otel.importers.replay import replay, replay_runs
from rb_otel.steering.scoring import Scorer
from rb_otel.telemetry.silent import silent_providers
from rb_otel.urls import display_url

__all__ = ["EvaluationError", "Replayed", "keep_labelled", "replay_files", "replay_trace_source"]


class EvaluationError(ValueError):
    """The inputs cannot be evaluated (no outcomes, labels matching nothing); the message says what to do."""


@dataclass(slots=True)
class Replayed:
    """The runs an evaluation replayed, and the problems met reading them."""

    results: list[ReplayResult]
    problems: list[ImportProblem]


def replay_files(
    paths: Sequence[str | Path],
    scorer: Scorer,
    outcomes: Labels | None,
    format: str,
    progress: Callable[[str, int], None] | None,
) -> Replayed:
    """Every run in ``paths`` (files, or folders read in path order), replayed with ``scorer`` and nothing
    exported. Inside a folder, a file of no run format is passed over (said once) and a bad one is a problem line;
    a file named on its own raises instead. ``EvaluationError`` when no run is found. The outcome events among
    ``paths`` set outcomes too, behind ``outcomes`` (:func:`~rb_otel.importers.outcome_events.recorded_outcomes`)."""
    paths, recorded = recorded_outcomes(paths)
    outcomes = with_recorded(outcomes, recorded)
    results: list[ReplayResult] = []
    problems: list[ImportProblem] = []
    passed_over: list[Path] = []
    seen = SeenRuns()  # one read: a run saved in two files is replayed once
    tracer_provider, meter_provider = silent_providers()  # measuring only: nothing is exported
    for path, in_directory in input_files(paths, passed_over):
        try:
            found = replay(
                path,
                format=format,
                scorer=scorer,
                labels=outcomes,
                tracer_provider=tracer_provider,
                meter_provider=meter_provider,
                seen=seen,
            )
        except NotRuns:
            if not in_directory:
                raise
            passed_over.append(path)
            continue
        except RecordError as exc:
            if not in_directory:
                raise
            problems.append(ImportProblem(exc.path, exc.where, exc.problem))  # e.g. a labels file among the runs
            found = []
        results += found
        problems += [p for p in (found[0].problems if found else []) if p not in problems]
        if progress is not None:
            progress(str(path), len(results))
    if (line := not_runs_problem(", ".join(map(str, paths)), passed_over)) is not None:
        problems.append(line)
    if not results:
        raise EvaluationError(no_runs(paths, problems))
    return Replayed(results, problems)


def replay_trace_source(
    paths: Sequence[str | Path],
    where: FleetFilter | None,
    engine: str,
    *,
    scorer: Scorer,
    outcomes: Labels | None,
    progress: Callable[[str, int], None] | None,
) -> Replayed:
    """The runs of one trace store (``paths``: its URL) that ``where`` selects, replayed with ``scorer``; the
    outcome events recorded there set outcomes too, behind ``outcomes``."""
    paths, recorded = recorded_outcomes(paths)
    outcomes = with_recorded(outcomes, recorded)
    found = source_runs(paths, where, engine=engine)
    tracer_provider, meter_provider = silent_providers()  # measuring only: nothing is exported
    results = replay_runs(found.runs, identity=found.shown, scorer=scorer, labels=outcomes,
                          tracer_provider=tracer_provider, meter_provider=meter_provider)  # fmt: skip
    if progress is not None:
        progress(found.shown, len(results))
    if not results:
        raise EvaluationError(f"no runs found in {found.shown} under the filters given")
    return Replayed(results, found.problems)


def keep_labelled(
    results: list[ReplayResult], outcomes: Labels | None, paths: Sequence[str | Path]
) -> list[ReplayResult]:
    """The runs with an outcome; ``EvaluationError`` saying what to pass when labels match no run or no run has
    one."""
    if outcomes is not None:
        matched = [r for r in results if outcomes.outcome_of(r.run_id) is not None]
        if not matched:
            ours = ", ".join(r.run_id for r in results[:3])
            theirs = ", ".join(list(outcomes)[:3])
            raise EvaluationError(
                f"{outcomes.path}: the labels match no run; runs look like: {ours}; labels look like: {theirs}"
            )
    labelled = [r for r in results if failed_of(r.outcome) is not None]
    if not labelled:
        raise EvaluationError(
            f"{', '.join(map(display_url, paths))}: none of the {len(results)} runs carries an outcome (a harness's "
            f"exit status, SWE-agent's 'submitted' say, tells how the agent stopped, not whether it succeeded); "
            f"pass {LABELS_HINT}"
        )
    return labelled
