"""The rows an experiment's answer is computed from: one :class:`ArmRun` per run of the experiment, and one
:class:`ArmUsage` per arm and model. :func:`arm_runs` and :func:`arm_usage` build them from runs read in Python
(trace files); a trace store's queries build the same rows in SQL (:mod:`rb_otel.analysis.experiment`). Either way
:func:`rb_otel.ab.experiment_report.answer` computes the statistics from them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from rb_otel.report.traces import ReportRun

__all__ = ["ArmRun", "ArmUsage", "arm_runs", "arm_usage"]


@dataclass(frozen=True, slots=True)
class ArmRun:
    """One run of an experiment as the report reads it: the files path (:func:`arm_runs`) and a trace store's
    query (:mod:`rb_otel.analysis.experiment`) both produce these, so the statistics are computed once.

    The fields are the joined run's (the parts of a resumed run: the last part's attributes, the sums of the
    parts' totals, the first part's start)."""

    run_id: str
    experiment: str
    arm: str
    unit: str
    outcome: str  # "" when the run never finished
    start_ns: int
    tokens: int | None  # None: no model call of the run reported usage (unknown, not 0)
    partly_unreported: bool  # some calls reported no usage (counted without them)
    steps: int
    max_state: str
    task_profile: str
    entered_skip: bool
    chars_saved: int | None  # None: TokenSaving did not run
    on_fraction: float | None  # the rb.experiment.on_fraction recorded


@dataclass(frozen=True, slots=True)
class ArmUsage:
    """Every model call of an arm's runs to one model (the response's model, else the request's), summed: what
    cost is priced from (a price is linear in tokens, so pricing the sums is pricing each call)."""

    arm: str
    model: str
    calls: int  # calls that reported any tokens
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int


def _int(run: ReportRun, key: str) -> int:
    value = run.attributes.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def arm_runs(runs: Iterable[ReportRun]) -> list[ArmRun]:
    """The :class:`ArmRun` of every run (read from trace files) that belongs to an experiment."""
    out = []
    for run in runs:
        attributes = run.attributes
        experiment = attributes.get("rb.experiment.id")
        if experiment is None:
            continue
        fraction = attributes.get("rb.experiment.on_fraction")
        saved = "rb.token_saving.chars_saved" in attributes
        unit = attributes.get("rb.experiment.unit")
        out.append(
            ArmRun(
                run_id=run.run_id,
                experiment=str(experiment),
                arm=str(attributes.get("rb.experiment.arm") or ""),
                unit="" if unit is None else str(unit),
                outcome=run.outcome,
                start_ns=round(run.start * 1e9),
                tokens=run.tokens,
                partly_unreported=bool(_int(run, "rb.usage.unreported")),
                steps=_int(run, "rb.steps") or len(run.steps),
                max_state=str(attributes.get("rb.max_state") or run.most_severe or ""),
                task_profile=str(attributes.get("rb.task_profile") or ""),
                entered_skip=bool(attributes.get("rb.entered_skip")),
                chars_saved=_int(run, "rb.token_saving.chars_saved") if saved else None,
                on_fraction=float(fraction) if isinstance(fraction, int | float) else None,
            )
        )
    return out


def arm_usage(runs: Iterable[ReportRun], arm_of: Mapping[str, str]) -> list[ArmUsage]:
    """The :class:`ArmUsage` rows of ``runs`` whose run id ``arm_of`` maps to an arm."""
    sums: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for run in runs:
        arm = arm_of.get(run.run_id)
        if arm is None:
            continue
        for call in (*run.steps, *run.calls):  # every model call costs, a step or not
            row = sums[(arm, call.response_model or call.model)]
            row[0] += bool(call.input_tokens or call.output_tokens or call.cache_read_tokens)
            row[1] += call.input_tokens
            row[2] += call.output_tokens
            row[3] += call.cache_read_tokens
    return [ArmUsage(arm, model, *row) for (arm, model), row in sorted(sums.items())]
