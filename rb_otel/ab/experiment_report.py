"""The experiment report (docs/experiments.md, "The report: rb-otel ab-report": shape), computed from the OTLP/JSON
trace files the runs were exported to.

Every run span of the experiment carries ``rb.experiment.id`` / ``.arm`` / ``.unit``, its outcome (``rb.outcome``),
tokens (``rb.tokens``), steps, most severe state and task profile; its ``chat`` spans carry each call's model and
token split, so cost is priced per call from the model actually used (routing and caching both show). Definitions:

* ``success_rate`` = successes / (successes + failures); interrupted and other outcomes are counted, not rated;
  runs with no outcome (never finished) are ``unfinished``.
* the difference is on - off, with Newcombe's hybrid score 95% interval; ``success_rate_stratified`` combines the
  per-``rb.task_profile`` differences by inverse variance (normal interval).
* the sample-ratio check counts assignment *units* (a unit's runs all land in its arm), one degree of freedom.
* tokens per run: median and 5%-winsorized mean of ``rb.tokens``.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rb_otel.ab.arm_rows import ArmRun, ArmUsage, arm_runs, arm_usage
from rb_otel.ab.assign import ARMS, check_experiment
from rb_otel.ab.prices import Prices
from rb_otel.ab.stats import Z_95, median, newcombe_diff_ci, srm_check, winsorized_mean
from rb_otel.report.traces import RunSpanFilter, load_runs

__all__ = ["ArmRun", "ArmUsage", "ExperimentNotFound", "ab_report", "answer", "arm_runs", "arm_usage", "not_found",
           "recorded_on_fraction", "report", "select_arms"]  # fmt: skip

#: Caveat thresholds: an interval wider than this, fewer finished runs per arm than this, priced share below this.
WIDE_INTERVAL = 0.2
FEW_RUNS = 30
LOW_PRICE_COVERAGE = 0.9


class ExperimentNotFound(ValueError):
    """The experiment has no runs in the files read; the message lists the experiments that do."""


@dataclass(frozen=True, slots=True)
class _Outcomes:
    success: int
    failure: int
    other: int
    unfinished: int

    @property
    def rated(self) -> int:
        return self.success + self.failure

    @property
    def rate(self) -> float | None:
        return self.success / self.rated if self.rated else None


def _outcomes(runs: Sequence[ArmRun]) -> _Outcomes:
    labels = [r.outcome for r in runs]
    success = sum(o == "success" for o in labels)
    failure = sum(o.startswith("failure") for o in labels)
    unfinished = sum(not o for o in labels)
    return _Outcomes(success, failure, len(labels) - success - failure - unfinished, unfinished)


def _cost(runs: Sequence[ArmRun], usage: Sequence[ArmUsage], prices: Prices | None) -> dict[str, Any]:
    cost: dict[str, Any] = {
        "input_tokens": sum(u.input_tokens for u in usage),
        "output_tokens": sum(u.output_tokens for u in usage),
        "cache_read_tokens": sum(u.cache_read_tokens for u in usage),
    }
    if prices is None:
        return cost
    calls = sum(u.calls for u in usage)
    known = [(u, p) for u in usage if u.calls and (p := prices.of(u.model)) is not None]
    total = sum(p.cost(u.input_tokens, u.output_tokens, u.cache_read_tokens) for u, p in known)
    cost["priced_share"] = sum(u.calls for u, _ in known) / calls if calls else 1.0
    cost["cost_per_run_usd"] = total / len(runs) if runs else None
    return cost


def _arm(runs: Sequence[ArmRun], usage: Sequence[ArmUsage], prices: Prices | None) -> dict[str, Any]:
    outcomes = _outcomes(runs)
    tokens = [float(r.tokens) for r in runs if r.tokens is not None]
    steps = [float(r.steps) for r in runs]
    max_states: dict[str, int] = defaultdict(int)
    for run in runs:
        max_states[run.max_state] += 1
    saved = [float(r.chars_saved) for r in runs if r.chars_saved is not None]
    return {
        "n_runs": len(runs),
        "n_units": len({r.unit for r in runs}),
        "outcomes": {
            "success": outcomes.success,
            "failure": outcomes.failure,
            "other": outcomes.other,
            "unfinished": outcomes.unfinished,
        },
        "success_rate": outcomes.rate,
        "tokens_per_run": {
            "median": median(tokens),
            "winsorized_mean": winsorized_mean(tokens),
            # runs with model calls that reported no usage: left out (none reported) or counted without them
            "runs_without_usage": sum(r.tokens is None for r in runs),
            "runs_partly_without_usage": sum(r.tokens is not None and r.partly_unreported for r in runs),
        },
        "steps_per_run": {"median": median(steps), "mean": sum(steps) / len(steps) if steps else None},
        "cost": _cost(runs, usage, prices),
        "reasoning_health": {
            "max_state": {state: count / len(runs) for state, count in sorted(max_states.items())} if runs else {},
            "entered_skip": sum(r.entered_skip for r in runs) / len(runs) if runs else None,
        },
        "token_saving": {"runs": len(saved), "chars_saved_per_run": sum(saved) / len(saved) if saved else None},
    }


def _pct(on: float | None, off: float | None) -> float | None:
    return None if on is None or off is None or off == 0 else on / off - 1.0


def _stratified(by_arm: Mapping[str, Sequence[ArmRun]]) -> dict[str, Any]:
    """Inverse-variance combination of the per-task-profile differences (strata with no variance are left out)."""
    strata: dict[str, dict[str, list[ArmRun]]] = defaultdict(lambda: {"on": [], "off": []})
    for arm in ARMS:
        for run in by_arm[arm]:
            strata[run.task_profile][arm].append(run)
    weights = deltas = 0.0
    rows: dict[str, Any] = {}
    degenerate: list[str] = []
    for name, arms in sorted(strata.items()):
        on, off = _outcomes(arms["on"]), _outcomes(arms["off"])
        if on.rate is None or off.rate is None:
            degenerate.append(name)
            continue
        variance = on.rate * (1 - on.rate) / on.rated + off.rate * (1 - off.rate) / off.rated
        rows[name] = {"delta": on.rate - off.rate, "n_on": on.rated, "n_off": off.rated}
        if variance <= 0:
            degenerate.append(name)
            continue
        weights += 1 / variance
        deltas += (on.rate - off.rate) / variance
    result: dict[str, Any] = {"strata": rows, "degenerate": degenerate}
    if weights:
        delta, half = deltas / weights, Z_95 / math.sqrt(weights)
        result.update(delta=delta, ci_95=[delta - half, delta + half], method="inverse-variance")
    return result


def _timeseries(by_arm: Mapping[str, Sequence[ArmRun]]) -> list[dict[str, Any]]:
    days: dict[tuple[str, str], list[ArmRun]] = defaultdict(list)
    for arm in ARMS:
        for run in by_arm[arm]:
            days[(datetime.fromtimestamp(run.start_ns // 1_000_000_000, UTC).date().isoformat(), arm)].append(run)
    series = []
    for (day, day_arm), runs in sorted(days.items()):
        series.append(
            {
                "day": day,
                "arm": day_arm,
                "runs": len(runs),
                "tokens_per_run": median([float(r.tokens) for r in runs if r.tokens is not None]),
                "success_rate": _outcomes(runs).rate,
            }
        )
    return series


def _caveats(arms: Mapping[str, dict[str, Any]], comparison: dict[str, Any], srm: dict[str, Any]) -> list[str]:
    caveats = []
    ci = comparison["success_rate"]["ci_95"]
    if ci is not None and ci[1] - ci[0] > WIDE_INTERVAL:
        caveats.append(f"wide interval: the success-rate difference is known only to within {ci[0]:+.2f}..{ci[1]:+.2f}")
    for arm in ARMS:
        rated = arms[arm]["outcomes"]["success"] + arms[arm]["outcomes"]["failure"]
        if rated < FEW_RUNS:
            caveats.append(f"few runs: the {arm} arm has {rated} finished runs with an outcome (< {FEW_RUNS})")
        share = arms[arm]["cost"].get("priced_share")
        if share is not None and share < LOW_PRICE_COVERAGE:
            caveats.append(f"low price coverage: {share:.0%} of the {arm} arm's model calls have a price")
        if arms[arm]["outcomes"]["unfinished"]:
            caveats.append(f"{arms[arm]['outcomes']['unfinished']} {arm}-arm runs never finished")
        tokens = arms[arm]["tokens_per_run"]
        if tokens["runs_without_usage"] or tokens["runs_partly_without_usage"]:
            caveats.append(
                f"missing usage: in the {arm} arm {tokens['runs_without_usage']} runs reported no token usage at all "
                f"(left out of tokens per run) and {tokens['runs_partly_without_usage']} had calls without it "
                "(counted without those calls)"
            )
    if srm["flagged"]:
        caveats.append(
            f"sample ratio mismatch: {srm['observed']['on']} on / {srm['observed']['off']} off units is unlikely "
            f"at on_fraction {srm['on_fraction']} (p = {srm['p_value']:.2g}); check the assignment before the results"
        )
    if comparison["success_rate_stratified"]["degenerate"]:
        strata = ", ".join(repr(s) for s in comparison["success_rate_stratified"]["degenerate"])
        caveats.append(f"degenerate strata left out of the stratified estimate: {strata}")
    return caveats


def select_arms(runs: Iterable[ArmRun], experiment_id: str, shown: str) -> dict[str, list[ArmRun]]:
    """The runs of ``experiment_id`` by arm; :class:`ExperimentNotFound` (naming ``shown``) when it has none."""
    found: dict[str, int] = defaultdict(int)
    by_arm: dict[str, list[ArmRun]] = {arm: [] for arm in ARMS}
    for run in runs:
        found[run.experiment] += 1
        if run.experiment == experiment_id and run.arm in by_arm:
            by_arm[run.arm].append(run)
    if not any(by_arm.values()):
        raise not_found(experiment_id, shown, found)
    return by_arm


def not_found(experiment_id: str, shown: str, found: Mapping[str, int]) -> ExperimentNotFound:
    """The error for an experiment with no runs in ``shown``, listing the experiments ``found`` (runs each)."""
    listing = ", ".join(f"{e!r} ({n} runs)" for e, n in sorted(found.items())) or "none"
    return ExperimentNotFound(f"no runs of experiment {experiment_id!r} in {shown}; experiments found: {listing}")


def recorded_on_fraction(by_arm: Mapping[str, Sequence[ArmRun]], experiment_id: str) -> float | None:
    """The ``rb.experiment.on_fraction`` the experiment's runs recorded (``None`` when none did); ``ValueError``
    when they recorded different ones (two assignments mixed under one id)."""
    values = {run.on_fraction for runs in by_arm.values() for run in runs if run.on_fraction is not None}
    if len(values) > 1:
        listed = ", ".join(f"{v:g}" for v in sorted(values))
        raise ValueError(f"experiment {experiment_id!r}: its runs recorded different on fractions ({listed})")
    return values.pop() if values else None


def report(
    files: Sequence[str | Path],
    experiment_id: str,
    *,
    on_fraction: float | None = None,
    prices: Prices | None = None,
    keep: RunSpanFilter | None = None,
) -> dict[str, Any]:
    """The report of ``experiment_id`` from OTLP/JSON trace files (docs/experiments.md, "The report: rb-otel
    ab-report": shape, plus ``problems``: lines
    that could not be read, each ``file: line N: what``; the rest of each file is read).

    ``on_fraction`` (the sample-ratio check's expectation) defaults to the one the runs recorded
    (``rb.experiment.on_fraction``), else 0.5 with a caveat saying so. Raises :class:`ExperimentNotFound` when no
    run of the experiment is in the files. ``keep`` reads only the run parts it keeps (a time window, an agent).
    """
    runs, problems = load_runs(files, keep=keep)
    experiment_runs = arm_runs(runs)
    by_arm = select_arms(experiment_runs, experiment_id, ", ".join(str(f) for f in files))
    arm_of = {r.run_id: r.arm for arm in ARMS for r in by_arm[arm]}
    return answer(by_arm, arm_usage(runs, arm_of), experiment_id, on_fraction=on_fraction, prices=prices,
                  problems=problems)  # fmt: skip


def answer(
    by_arm: Mapping[str, Sequence[ArmRun]],
    usage: Sequence[ArmUsage],
    experiment_id: str,
    *,
    on_fraction: float | None = None,
    prices: Prices | None = None,
    problems: Sequence[str] = (),
) -> dict[str, Any]:
    """The report (:func:`report`'s shape) from an experiment's runs by arm and its model usage: what every source
    of runs computes the statistics from."""
    recorded = recorded_on_fraction(by_arm, experiment_id)
    assumed = on_fraction is None and recorded is None
    fraction = check_experiment(experiment_id, on_fraction if on_fraction is not None else recorded or 0.5)
    arms: dict[str, dict[str, Any]] = {arm: _arm(by_arm[arm], [u for u in usage if u.arm == arm], prices)
                                       for arm in ARMS}  # fmt: skip
    on, off = _outcomes(by_arm["on"]), _outcomes(by_arm["off"])
    ci = list(newcombe_diff_ci(on.success, on.rated, off.success, off.rated)) if on.rated and off.rated else None
    cost_on, cost_off = arms["on"]["cost"].get("cost_per_run_usd"), arms["off"]["cost"].get("cost_per_run_usd")
    tokens_on, tokens_off = arms["on"]["tokens_per_run"]["median"], arms["off"]["tokens_per_run"]["median"]
    comparison = {
        "cost_per_run_usd": {"on": cost_on, "off": cost_off, "pct": _pct(cost_on, cost_off)},
        "tokens_per_run_median": {"on": tokens_on, "off": tokens_off, "pct": _pct(tokens_on, tokens_off)},
        "success_rate": {
            "on": on.rate,
            "off": off.rate,
            "delta": None if on.rate is None or off.rate is None else on.rate - off.rate,
            "ci_95": ci,
            "method": "newcombe",
        },
        "success_rate_stratified": _stratified(by_arm),
    }
    units = {arm: arms[arm]["n_units"] for arm in ARMS}
    check = srm_check(units["on"], units["off"], fraction)
    srm = {
        "observed": units,
        "expected": {"on": check.expected_on, "off": check.expected_off},
        "on_fraction": fraction,
        "chi_square": check.chi_square,
        "p_value": check.p_value,
        "flagged": check.flagged,
    }
    caveats = _caveats(arms, comparison, srm)
    if assumed:
        caveats.append("the runs recorded no on fraction (an older release): the sample-ratio check assumed 0.5")
    return {
        "experiment_id": experiment_id,
        "arms": arms,
        "comparison": comparison,
        "srm": srm,
        "timeseries": _timeseries(by_arm),
        "caveats": caveats,
        "problems": list(problems),
    }


#: ``rb-otel ab-report`` as a library function.
ab_report = report
