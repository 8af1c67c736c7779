"""Leave one agent out: does a pilot fitted on some agents say anything about an agent it never saw?

For each agent in turn (:func:`agent_unit`: the model behind the agent key, so one model's runs on a domain and
on its policy variants are one agent), the whole fitting procedure runs on the *other* agents' runs only (those
of its kind, :func:`agent_kind`, coding or tool use, when its kind has another agent: a pilot is a default for
a kind of agent; else all the others, and the report says so): the
prior, the model (with two or more training agents the average of every family,
:data:`~rb_otel.training.fit.AVERAGE`, which needs no choice; ``family=None`` chooses one family instead by an
inner cross-validation that holds agents out, the previous round's procedure; with one training agent, a family
chosen by task-grouped cross-validation), the weights, and the SLOW/SKIP thresholds (chosen on the training side's
out-of-fold scores for the false-stop budget). The held-out agent is then scored with the live view (the same
:class:`~rb_otel.steering.pilot.PilotRun`, its own label-free baseline learned from its earlier runs in file
order) and compared with the same-prefix size baselines: steps, characters and prompt tokens, each *oriented on
the training agents* (its direction learned where the fit was) and also at its best in either direction on the
held-out agent itself, the harder comparison. ``keep_tasks_apart`` also keeps every task group the held-out agent
ran out of its fit (no customer on both sides).

**SKIP that holds its budget.** The thresholds chosen on the training agents are applied to the held-out agent:
the share of its successful runs stopped (false stops), with the Wilson upper bound (z = 1, about 84%
one-sided: the bound the thresholds were chosen under) of that share, and the share of its failing runs stopped,
with the tokens a stop would not have spent. SKIP *holds* on an agent when that bound is within the budget and it
stops at least :data:`~rb_otel.training.thresholds.MIN_USEFUL_STOPS` of the failing runs; a pilot fitted on all
the agents turns SKIP on only when it held on every held-out agent with enough successful runs to say so
(:data:`MIN_SUCCESSFUL`), and the report says why where it is off.
"""

from __future__ import annotations

import math
import multiprocessing
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from rb_otel.evaluation.metrics import auroc, wilson_upper
from rb_otel.steering.fsm import DifficultyFSM
from rb_otel.steering.pilot.kinds import infer_agent_kind
from rb_otel.training.converged import tokens_after_last_change  # (its home now; still importable from here)
from rb_otel.training.cv import grouped_folds, out_of_fold, select, select_for_transfer
from rb_otel.training.dataset import LabelledRun, agent_unit
from rb_otel.training.features import agent_balanced, extract, prior_of
from rb_otel.training.fit import AVERAGE, Candidate, fit_candidate
from rb_otel.training.held_out_figures import (
    EARLY_STEP,
    MIN_SUCCESSFUL,
    Baseline,
    HeldOutAgent,
    HeldOutReport,
    SkipFigures,
)
from rb_otel.training.relative_skip import choose_relative_skip, relative_stops
from rb_otel.training.thresholds import MIN_USEFUL_STOPS, SKIP_OFF, choose_fsm, fsm_states

__all__ = [
    "EARLY_STEP",
    "MIN_EACH_OUTCOME",
    "MIN_SUCCESSFUL",
    "FittedSide",
    "HeldOutAgent",
    "HeldOutReport",
    "agent_unit",
    "fit_side",
    "leave_one_agent_out",
    "leave_one_harness_out",
    "scored_agent",
    "size_probabilities",
    "tokens_after_last_change",
]

#: An agent is held out only with at least this many runs of each outcome (fewer cannot rank a fit's scores).
MIN_EACH_OUTCOME = 20
#: A held-out agent's fit needs at least this many training runs.
MIN_TRAINING_RUNS = 20
_THRESHOLD_FOLDS = 5  # the training side's out-of-fold scores the thresholds are chosen on


def agent_kind(runs: Sequence[LabelledRun]) -> str:
    """The kind of agent ``runs`` come from (:mod:`rb_otel.steering.pilot.kinds`): coding when the tools its runs
    called include a shell or a file editor, else customer service. Label-free: what the agent did."""
    return infer_agent_kind({s.action for r in runs for s in r.steps if s.action})


def _written(run: LabelledRun) -> list[int]:
    return [int(c) for c in np.cumsum([len(s.thought or "") + len(s.action_input or "") for s in run.steps])]


def _size_signals(runs: Sequence[LabelledRun], k: int | None) -> dict[str, list[float]]:
    """Each size baseline's value per run: at the last step (``k`` None), or after step ``k``."""
    if k is None:
        return {"steps": [float(len(r.steps)) for r in runs], "characters": [float(_written(r)[-1]) for r in runs],
                "prompt tokens": [float(r.prompt_tokens[-1]) for r in runs]}  # fmt: skip
    return {"characters so far": [float(_written(r)[k - 1]) for r in runs],
            "prompt tokens so far": [float(r.prompt_tokens[k - 1]) for r in runs]}  # fmt: skip


def _baselines(train: Sequence[LabelledRun], held: Sequence[LabelledRun], k: int | None) -> tuple[Baseline, ...]:
    out = []
    y_train, y_held = [r.failed for r in train], [r.failed for r in held]
    trained, scored = _size_signals(train, k), _size_signals(held, k)
    for name, values in scored.items():
        if not any(values):
            continue  # a harness that reports no tokens: no such baseline
        a_train = auroc(y_train, trained[name]) if any(trained[name]) else float("nan")
        sign = -1 if (not math.isnan(a_train) and a_train < 0.5) else 1
        a = auroc(y_held, values)
        out.append(Baseline(name, a if sign > 0 else 1.0 - a, sign, max(a, 1.0 - a)))
    return tuple(out)


def _absolute_stops(probabilities: Sequence[Sequence[float]], fsm: dict[str, float]) -> list[int | None]:
    machine = DifficultyFSM(**fsm)
    return [next((i for i, s in enumerate(fsm_states(machine, p)) if s == "SKIP"), None) for p in probabilities]


def _skip_figures(held: Sequence[LabelledRun], stops: Sequence[int | None], on: bool, budget: float) -> SkipFigures:
    ok = [s for r, s in zip(held, stops, strict=True) if not r.failed]
    bad = [(r, s) for r, s in zip(held, stops, strict=True) if r.failed]
    false_stops = sum(s is not None for s in ok)
    upper = wilson_upper(false_stops, len(ok))
    stopped = [(r, s) for r, s in bad if s is not None]
    share = len(stopped) / len(bad) if bad else float("nan")
    saved = float(np.mean([sum(r.tokens[s + 1 :]) for r, s in stopped])) if stopped else 0.0
    holds = on and upper <= budget and (share >= MIN_USEFUL_STOPS)
    if not on:
        why = "off: on the training agents no threshold kept the budget and stopped a useful share"
    elif upper > budget:
        why = (f"off: {false_stops} false stop(s) of {len(ok)} successful runs, upper bound {upper:.1%} > "
               f"budget {budget:.1%}")  # fmt: skip
    elif not share >= MIN_USEFUL_STOPS:
        why = f"off: stops {share:.1%} of failing runs (under {MIN_USEFUL_STOPS:.0%})"
    else:
        why = (f"holds: stops {share:.1%} of failing runs, {false_stops} false stop(s) of {len(ok)} "
               f"(upper bound {upper:.1%}), {saved:,.0f} tokens saved per stopped run")  # fmt: skip
    return SkipFigures(on, false_stops, len(ok), upper, share, len(bad), saved, holds, why)


#: At most this many inner folds choose the family: training agents are dealt into them (largest first), so the
#: choice costs the same with five training agents as with fifteen.
INNER_AGENT_FOLDS = 4


def _inner_folds(train: Sequence[LabelledRun], seed: int) -> NDArray[np.int64]:
    """The inner folds the family is chosen by: the training agents dealt into at most :data:`INNER_AGENT_FOLDS`
    folds, each agent whole in one (so the choice prefers what transfers to an agent it did not see), else, with
    one training agent, grouped by task."""
    units = [agent_unit(r) for r in train]
    if len(set(units)) >= 2:
        return grouped_folds(units, min(INNER_AGENT_FOLDS, len(set(units))), seed)
    return grouped_folds([r.group for r in train], 3, seed)


@dataclass(slots=True)
class FittedSide:
    """What a held-out agent is scored with, fitted on the training runs only: the prior, the model, its SLOW/SKIP
    thresholds and relative SKIP rule (``None``: SKIP off), and what it was fitted on."""

    prior: dict[str, float]
    model: Any
    family: str
    fsm: dict[str, float]
    relative: tuple[float, int] | None
    trained_on: tuple[str, ...]
    training_runs: int
    requests: bool = False


def fit_side(
    train: list[LabelledRun],
    *,
    max_false_stops: float,
    seed: int = 0,
    fit: Callable[..., Any] = fit_candidate,
    family: Candidate | None = AVERAGE,
    requests: bool = False,
) -> FittedSide:
    """Fit the whole procedure on ``train`` (module docstring): prior, family, weights, thresholds."""
    prior = prior_of(train)
    data = extract(train, prior, requests=requests)
    data.run_weight = agent_balanced(train, agent_unit)
    every = list(range(len(train)))
    units = [agent_unit(r) for r in train]
    if len(set(units)) >= 2 and family is not None:
        candidate = family
    elif len(set(units)) >= 2:
        candidate, _ = select_for_transfer(data, every, units, _inner_folds(train, seed), fit=fit)
    else:
        candidate, _ = select(data, every, folds=_inner_folds(train, seed), fit=fit)
    model = fit(data, every, candidate)
    folds = grouped_folds([r.group for r in train], _THRESHOLD_FOLDS, seed)
    oof = data.probabilities(out_of_fold(data, every, folds, candidate, fit=fit))
    fsm = choose_fsm(
        [p for p, r in zip(oof, train, strict=True) if not r.failed],
        oof,
        max_false_stops=max_false_stops,
        failing=[p for p, r in zip(oof, train, strict=True) if r.failed],
    )
    relative = choose_relative_skip(train, oof, fsm, max_false_stops, unit=agent_unit, min_successful=MIN_SUCCESSFUL)
    return FittedSide(prior, model, candidate.name, fsm, relative, tuple(sorted(set(units))), len(train), requests)


def _early(probabilities: Sequence[Sequence[float]], y: Sequence[bool], going: Sequence[int]) -> float:
    return auroc([y[i] for i in going], [probabilities[i][EARLY_STEP - 1] for i in going]) if going else float("nan")


def size_probabilities(
    held: list[LabelledRun], prior: dict[str, float], *, requests: bool = False
) -> dict[str, list[list[float]]]:
    """Each run's score, step by step, under each label-free size default (:data:`~rb_otel.steering.pilot.model.
    SIZE_DEFAULTS`: no fit, the ``prior`` the kind's typical run), with the live view (extracted once for all)."""
    from rb_otel.steering.pilot.model import SIZE_DEFAULTS, size_default

    scored = extract(held, prior, requests=requests)
    out = {}
    for size in SIZE_DEFAULTS:
        model = size_default(size, prior)
        logits = model.intercept + scored.dense[:, list(model.columns)] @ np.asarray(model.weights, dtype=np.float64)
        out[size] = scored.probabilities(np.asarray(logits, dtype=np.float64))
    return out


def held_out_agent(
    train: list[LabelledRun],
    held: list[LabelledRun],
    *,
    agent: str,
    max_false_stops: float,
    seed: int = 0,
    fit: Callable[..., Any] = fit_candidate,
    family: Candidate | None = AVERAGE,
    requests: bool = False,
) -> HeldOutAgent:
    """Fit on ``train`` only and score ``held`` (module docstring). ``fit`` is the one fitting function used (a
    test passes a recording one to check that no held-out run reaches it). ``family``: the model fitted when
    ``train`` holds two or more agents; ``None`` chooses one family by holding training agents out. ``requests``:
    runs are given their task group as their request (:func:`~rb_otel.training.features.extract`)."""
    side = fit_side(train, max_false_stops=max_false_stops, seed=seed, fit=fit, family=family, requests=requests)
    return scored_agent(side, train, held, agent=agent, max_false_stops=max_false_stops)


def scored_agent(
    side: FittedSide, train: list[LabelledRun], held: list[LabelledRun], *, agent: str, max_false_stops: float
) -> HeldOutAgent:
    """``held`` scored live by ``side`` (fitted on ``train`` only), with the size baselines oriented on ``train``,
    and the two label-free size defaults scored beside it (a kind's default where no learned one clears the floor)."""
    scored = extract(held, side.prior, requests=side.requests)  # the live view: PilotRun, the baseline label-free
    probabilities = scored.probabilities(side.model.logits(scored))
    fsm, relative = side.fsm, side.relative
    if relative is None:
        stops: list[int | None] = [None] * len(held)
    else:
        stops = relative_stops(held, probabilities, fsm, *relative)
    absolute = _absolute_stops(probabilities, fsm)
    y = [r.failed for r in held]
    going = [i for i, r in enumerate(held) if len(r.steps) >= EARLY_STEP]
    train_going = [r for r in train if len(r.steps) >= EARLY_STEP]
    sizes = size_probabilities(held, side.prior, requests=side.requests)
    size, run_size = sizes["agent-relative"], sizes["run"]
    return HeldOutAgent(
        agent=agent,
        runs=len(held),
        failed=sum(y),
        trained_on=side.trained_on,
        training_runs=side.training_runs,
        family=side.family,
        last_step=auroc(y, [p[-1] for p in probabilities]),
        last_baselines=_baselines(train, held, None),
        early_runs=len(going),
        early=_early(probabilities, y, going),
        early_baselines=_baselines(train_going, [held[i] for i in going], EARLY_STEP) if going else (),
        skip=_skip_figures(held, stops, relative is not None, max_false_stops),
        absolute_skip=_skip_figures(held, absolute, fsm["skip_threshold"] < SKIP_OFF, max_false_stops),
        skip_rule=None if relative is None else {"quantile": relative[0], "window": float(relative[1])},
        size_last=auroc(y, [p[-1] for p in size]),
        size_early=_early(size, y, going),
        run_size_last=auroc(y, [p[-1] for p in run_size]),
        run_size_early=_early(run_size, y, going),
    )


def leave_one_agent_out(
    runs: Sequence[LabelledRun],
    *,
    max_false_stops: float = 0.02,
    keep_tasks_apart: bool = False,
    seed: int = 0,
    min_each: int = MIN_EACH_OUTCOME,
    within_kind: bool = True,
    progress: Callable[[str], None] | None = None,
    fit: Callable[..., Any] = fit_candidate,
    workers: int = 1,
    done: Callable[[], None] | None = None,
    family: Candidate | None = AVERAGE,
    requests: bool = False,
) -> HeldOutReport:
    """Hold each agent out in turn (module docstring). ``within_kind``: fit on the other agents of its kind
    (:func:`agent_kind`) only; an agent whose kind has no other agent is not held out (listed in ``skipped``).
    ``within_kind=False`` fits on every other agent, of any kind. An agent with fewer than ``min_each`` runs of
    either outcome is not held out (``skipped``, with why); its runs still train the others. ``workers`` > 1 holds
    agents out in that many forked processes at once (each agent's figures are the same either way). ``progress``
    gets a line per agent held out; ``done()`` is called after each agent, held out or not. ``family``: as for
    :func:`held_out_agent`."""
    say = progress or (lambda _: None)
    units = [agent_unit(r) for r in runs]
    kinds = {u: agent_kind([r for r, v in zip(runs, units, strict=True) if v == u]) for u in set(units)}
    report = HeldOutReport([], max_false_stops, keep_tasks_apart)
    jobs: list[tuple[str, str, list[LabelledRun], list[LabelledRun]]] = []
    for agent in sorted(set(units)):
        held = [r for r, u in zip(runs, units, strict=True) if u == agent]
        failed = sum(r.failed for r in held)
        if min(failed, len(held) - failed) < min_each:
            report.skipped[agent] = (
                f"{len(held)} runs, {failed} failed: fewer than {min_each} of each outcome to judge it by"
            )
            continue
        tasks = {r.group for r in held} if keep_tasks_apart else set()
        kind = kinds[agent]
        pool = {u for u in kinds if u != agent and (not within_kind or kinds[u] == kind)}
        if not pool:
            report.skipped[agent] = f"no other {kind} agent to fit on"
            continue
        train = [r for r, u in zip(runs, units, strict=True) if u in pool and r.group not in tasks]
        if len(train) < MIN_TRAINING_RUNS or len({r.failed for r in train}) < 2:
            report.skipped[agent] = f"only {len(train)} training runs left without its agent and tasks"
            continue
        if len({r.group for r in train}) < _THRESHOLD_FOLDS:
            report.skipped[agent] = f"its training runs are in fewer than {_THRESHOLD_FOLDS} task groups"
            continue
        jobs.append((agent, kind, train, held))
    tick = done or (lambda: None)
    for _ in report.skipped:
        tick()
    options = {"max_false_stops": max_false_stops, "seed": seed, "fit": fit, "family": family, "requests": requests}
    for (agent, kind, _, _), figures in zip(jobs, _each_held_out(jobs, options, workers, say), strict=True):
        report.agents.append(replace(figures, agent=agent, kind=kind, across_kinds=not within_kind))
        tick()
    return report


_JOBS: dict[str, Any] = {}  # what forked workers read (inherited, not pickled)


def _held_out_job(index: int) -> HeldOutAgent:
    agent, _, train, held = _JOBS["jobs"][index]
    return held_out_agent(train, held, agent=agent, **_JOBS["options"])


def _each_held_out(
    jobs: list[tuple[str, str, list[LabelledRun], list[LabelledRun]]],
    options: dict[str, Any],
    workers: int,
    say: Callable[[str], None],
) -> Iterator[HeldOutAgent]:
    """Each job's :func:`held_out_agent`, in order, as each is done: in this process, or in ``workers`` forked ones
    (where fork is available; the permutation test's workers, one BLAS thread each)."""
    for agent, kind, train, _ in jobs:
        say(f"holding out {agent} ({kind}): fitting on {len(train)} runs of the other agents")
    if workers <= 1 or len(jobs) <= 1 or "fork" not in multiprocessing.get_all_start_methods():
        for agent, _, train, held in jobs:
            yield held_out_agent(train, held, agent=agent, **options)
        return
    from rb_otel.training.permutation import one_blas_thread

    _JOBS.update(jobs=jobs, options=options)
    try:
        fork = multiprocessing.get_context("fork")
        with ProcessPoolExecutor(workers, mp_context=fork, initializer=one_blas_thread) as pool:
            yield from pool.map(_held_out_job, range(len(jobs)))
    finally:
        _JOBS.clear()


def leave_one_harness_out(
    runs: Sequence[LabelledRun],
    harnesses: Sequence[str],
    *,
    max_false_stops: float = 0.02,
    seed: int = 0,
    min_each: int = MIN_EACH_OUTCOME,
    progress: Callable[[str], None] | None = None,
    workers: int = 1,
    family: Candidate | None = AVERAGE,
    requests: bool = False,
    fit: Callable[..., Any] = fit_candidate,
) -> HeldOutReport:
    """Hold each *harness* out in turn (``harnesses[i]`` is ``runs[i]``'s): the procedure fitted once on the runs
    of every other harness (the caller passes one kind's runs), then each agent of the left-out harness with
    ``min_each`` runs of each outcome scored live as :func:`scored_agent` does, labelled ``"harness: agent"``. What a
    default for agents it never saw must be judged by: models inside one harness share its prompts, tools and
    traces, so leaving out one of them says little about another harness (issue 60). ``fit``: as for
    :func:`held_out_agent`."""
    say = progress or (lambda _: None)
    report = HeldOutReport([], max_false_stops, False, method="leave one harness out")
    jobs: list[tuple[str, list[LabelledRun], list[tuple[str, list[LabelledRun]]]]] = []
    for harness in sorted(set(harnesses)):
        train = [r for r, h in zip(runs, harnesses, strict=True) if h != harness]
        by_agent: dict[str, list[LabelledRun]] = {}
        for r, h in zip(runs, harnesses, strict=True):
            if h == harness:
                by_agent.setdefault(f"{harness}: {agent_unit(r)}", []).append(r)
        judged = []
        for agent, held in sorted(by_agent.items()):
            failed = sum(r.failed for r in held)
            if min(failed, len(held) - failed) < min_each:
                report.skipped[agent] = f"{len(held)} runs, {failed} failed: fewer than {min_each} of each outcome"
            else:
                judged.append((agent, held))
        if not judged:
            continue
        if len(train) < MIN_TRAINING_RUNS or len({r.failed for r in train}) < 2:
            for agent, _ in judged:
                report.skipped[agent] = f"only {len(train)} runs of other harnesses to fit on"
            continue
        jobs.append((harness, train, judged))
    options = {"max_false_stops": max_false_stops, "seed": seed, "family": family, "requests": requests, "fit": fit}
    for harness, train, judged in jobs:
        say(f"leaving out {harness}: fitting on {len(train)} runs of the others, scoring {len(judged)} agent(s)")
    _JOBS.update(harness_jobs=jobs, options=options)
    try:
        if workers <= 1 or len(jobs) <= 1 or "fork" not in multiprocessing.get_all_start_methods():
            results = [_harness_job(i) for i in range(len(jobs))]
        else:
            from rb_otel.training.permutation import one_blas_thread

            fork = multiprocessing.get_context("fork")
            with ProcessPoolExecutor(workers, mp_context=fork, initializer=one_blas_thread) as pool:
                results = list(pool.map(_harness_job, range(len(jobs))))
    finally:
        _JOBS.clear()
    for (harness, _, judged), figures in zip(jobs, results, strict=True):
        for one, (_, held) in zip(figures, judged, strict=True):
            report.agents.append(replace(one, kind=agent_kind(held)))
        say(f"left out {harness}: {len(figures)} agent(s) scored")
    return report


def _harness_job(index: int) -> list[HeldOutAgent]:
    _, train, judged = _JOBS["harness_jobs"][index]
    options = _JOBS["options"]
    side = fit_side(train, **options)
    return [scored_agent(side, train, held, agent=agent, max_false_stops=options["max_false_stops"])
            for agent, held in judged]  # fmt: skip
