"""An honest pilot: baselines oriented on the training side, a trust gate that shuffled outcomes cannot pass, a
false-stop budget held as an upper bound on runs the thresholds never saw, the live view in training, and task
groups that keep one customer on one side. Real development runs (the data root's signal/tau2_grok) and small generated
sets that pin down one rule each."""

from __future__ import annotations

import dataclasses
import math
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from components import signal_source
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from rb_otel.evaluation.metrics import auroc, oriented_auroc, wilson_upper
from rb_otel.integrations.langchain._messages import last_turn
from rb_otel.steering.fsm import DifficultyFSM
from rb_otel.steering.scoring import ScorerStep
from rb_otel.training import fold_thresholds, train_dataset
from rb_otel.training.cv import grouped_folds
from rb_otel.training.dataset import Dataset, LabelledRun, grouped, read_dataset, task_family
from rb_otel.training.permutation import shuffled_outcomes
from rb_otel.training.report import Figure, TrainingReport
from rb_otel.training.thresholds import SKIP_OFF, choose_fsm, reaches
from rb_otel.types import FSMState


@pytest.fixture(scope="module")
def tau2_runs(tmp_path_factory: pytest.TempPathFactory) -> list[LabelledRun]:
    return read_dataset([signal_source("tau2_grok")]).runs


# -- baselines oriented on the training side --------------------------------------------------------------------


def test_a_baseline_that_predicts_failure_by_being_small_is_flipped() -> None:
    rng = random.Random(3)
    failed = [rng.random() < 0.5 for _ in range(400)]
    small_when_failing = [rng.gauss(0.0 if f else 1.0, 1.0) for f in failed]
    folds = [i % 5 for i in range(400)]
    raw = auroc(failed, small_when_failing)
    oriented = oriented_auroc(failed, small_when_failing, folds)
    assert raw < 0.35 and oriented.sign == -1 and math.isclose(oriented.auroc, 1 - raw, abs_tol=1e-9)


def test_the_report_compares_with_the_flipped_baseline() -> None:
    fit = Figure("fit, score at the last step", 0.60, 0.5, 0.7, 300)
    chars = Figure("characters written", 0.65, 0.55, 0.75, 300, baseline=True, sign=-1)  # oriented: flipped
    report = TrainingReport(300, 100, 300, {}, {}, 5, [], [fit, chars], [], [], [])
    report.check(10, constant=False)
    assert any("does not beat the characters written baseline (oriented -: 0.650)" in w for w in report.warnings)


# -- a trust gate shuffled outcomes cannot pass -------------------------------------------------------------------


def test_shuffling_keeps_each_agents_failure_rate() -> None:
    agents = ["a"] * 50 + ["b"] * 30
    failed = [i % 3 == 0 for i in range(50)] + [i % 2 == 0 for i in range(30)]
    out = shuffled_outcomes(agents, failed, seed=4)
    assert out[:50].sum() == sum(failed[:50]) and out[50:].sum() == sum(failed[50:])
    assert out.tolist() != [float(f) for f in failed]


def _subset(runs: list[LabelledRun], n: int, seed: int) -> list[LabelledRun]:
    groups = sorted({r.group for r in runs})
    random.Random(seed).shuffle(groups)
    keep, out = set(), []
    for g in groups:
        keep.add(g)
        out = [r for r in runs if r.group in keep]
        if len(out) >= n:
            break
    return out


@pytest.mark.heavy  # 39 permutation fits in worker processes of its own
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_shuffled_outcomes_are_refused(tau2_runs: list[LabelledRun], seed: int) -> None:
    runs = _subset(tau2_runs, 150, seed)
    rng = np.random.default_rng(100 + seed)
    outcomes = rng.permutation([r.failed for r in runs])
    shuffled = [dataclasses.replace(r, failed=bool(o)) for r, o in zip(runs, outcomes, strict=True)]
    result = train_dataset(Dataset(shuffled, files=1), shuffles=0, permutations=39, seed=seed, held_out_agents=False)
    assert not result.report.trusted, result.report.table()
    assert result.report.permutation is not None and len(result.report.permutation.null) == 39


@pytest.mark.heavy  # 39 permutation fits in worker processes of its own
def test_the_cli_refuses_shuffled_outcomes_and_writes_nothing(tmp_path: Path) -> None:
    import json

    from rb_otel.cli import main

    files = sorted(signal_source("tau2_grok").glob("*.json"))[::3]  # a third of the files: ~220 runs in ~50 task groups
    rng = random.Random(7)
    labels = {r.run_id: rng.random() < 0.5 for r in read_dataset(files).runs}  # every outcome says nothing
    assert len(labels) >= 150
    (tmp_path / "labels.json").write_text(json.dumps(labels))
    out = tmp_path / "pilot.json"
    arguments = ["train", *map(str, files), "--labels", str(tmp_path / "labels.json"), "--out", str(out), "--quiet"]
    code = main([*arguments, "--no-held-out-agents"])  # the gate is the subject, not the agents held out
    assert code == 1 and not out.exists()


# -- the false-stop budget holds ------------------------------------------------------------------------------


def _scores(rng: random.Random, failing: bool, n: int) -> list[float]:
    level = 0.55 if failing else 0.35
    return [min(max(rng.gauss(level, 0.15), 0.0), 1.0) for _ in range(n)]


@settings(max_examples=8, deadline=None)
@given(st.integers(0, 10_000), st.sampled_from([0.01, 0.02, 0.05]))
def test_skips_upper_bound_on_false_stops_is_within_the_budget(seed: int, budget: float) -> None:
    rng = random.Random(seed)
    ok = [_scores(rng, False, rng.randint(4, 20)) for _ in range(150)]
    bad = [_scores(rng, True, rng.randint(4, 20)) for _ in range(80)]
    fsm = choose_fsm(ok, ok + bad, max_false_stops=budget, failing=bad)
    if fsm["skip_threshold"] >= SKIP_OFF:
        return  # SKIP off: nothing is stopped
    machine = DifficultyFSM(**fsm)
    stops = sum(reaches(machine, s, FSMState.SKIP) is not None for s in ok)
    assert wilson_upper(stops, len(ok)) <= budget


def test_thresholds_come_from_the_training_side_only() -> None:
    rng = random.Random(5)
    runs = [LabelledRun(f"r{i}", "gen", "a", f"g{i % 40}", i % 3 == 0, [], [], []) for i in range(240)]
    probabilities = [_scores(rng, r.failed, 12) for r in runs]
    folds = grouped_folds([r.group for r in runs], 5, 0)
    before = fold_thresholds(runs, probabilities, folds, 0.02)
    changed = [list(p) if folds[i] != 0 else [0.99] * 12 for i, p in enumerate(probabilities)]  # fold 0 only
    after = fold_thresholds(runs, changed, folds, 0.02)
    assert after[0] == before[0]  # fold 0 is judged by thresholds its own runs never touched
    assert any(after[f] != before[f] for f in range(1, 5))  # the others did see fold 0's runs


# -- the training view is the live view ----------------------------------------------------------------------


def test_a_text_only_turn_has_no_observation_live_and_in_training(tmp_path: Path) -> None:
    import json

    live = last_turn(
        [
            HumanMessage("change my flight"),
            AIMessage("", tool_calls=[{"name": "find", "args": {"id": 1}, "id": "c1", "type": "tool_call"}]),
            ToolMessage("flight 1", tool_call_id="c1"),
            AIMessage("Which date would you like?"),
            HumanMessage("Tuesday, please."),
        ]
    )
    assert live.action is None and live.observation is None  # the user's reply is not what the turn saw
    sim = {
        "id": "s1",
        "task_id": "8",
        "reward_info": {"reward": 1.0},
        "messages": [
            {"role": "user", "content": "change my flight"},
            {
                "role": "assistant",
                "content": "Let me look.",
                "tool_calls": [{"id": "c1", "name": "find", "arguments": {"id": 1}}],
            },
            {"role": "tool", "id": "c1", "content": "flight 1"},
            {"role": "assistant", "content": "Which date would you like?"},
            {"role": "user", "content": "Tuesday, please."},
            {"role": "assistant", "content": "Done."},
        ],
    }
    data = {
        "info": {"agent_info": {"llm": "m"}, "environment_info": {"domain_name": "airline"}},
        "tasks": [],
        "simulations": [sim],
    }
    (tmp_path / "r.json").write_text(json.dumps(data))
    (run,) = read_dataset([tmp_path / "r.json"], format="tau2_bench").runs
    text_only = [s for s in run.steps if s.action is None]
    assert text_only and all(s.observation is None for s in text_only)
    assert any(s.observation for s in run.steps if s.action == "find")  # a tool result is still seen


# -- one customer, one group -------------------------------------------------------------------------------------


def test_one_customer_under_edited_instructions_is_one_group() -> None:
    assert task_family("airline-relaxed/8") == task_family("airline_tighter_policy/8") == "airline/8"
    assert task_family("django__django-11099") == ""

    def run(i: int, group: str, task: str) -> LabelledRun:
        return LabelledRun(
            f"r{i}", "tau2_bench", "a", group, bool(i % 2), [ScorerStep("x")], [0], [0], task_family(task)
        )

    runs = grouped([run(0, "scenario/aa", "airline/8"), run(1, "scenario/bb", "airline-relaxed/8"),
                    run(2, "scenario/bb", "airline-relaxed/9"), run(3, "scenario/cc", "telecom/1")])  # fmt: skip
    assert runs[0].group == runs[1].group == runs[2].group != runs[3].group  # joined through a shared scenario too
    folds = grouped_folds([r.group for r in runs], 2, 0)
    assert folds[0] == folds[1] == folds[2]


def test_the_development_runs_keep_every_customer_on_one_side(tau2_runs: list[LabelledRun]) -> None:
    by_family: dict[str, set[str]] = {}
    for r in tau2_runs:
        if r.family:
            by_family.setdefault(r.family, set()).add(r.group)
    assert all(len(groups) == 1 for groups in by_family.values())
    assert len({r.group for r in tau2_runs}) == 56  # 57 scenarios, airline/8 and airline-relaxed/8 joined
    folds = grouped_folds([r.group for r in tau2_runs], 5, 0)
    for family in by_family:
        members = [i for i, r in enumerate(tau2_runs) if r.family == family]
        assert len({int(folds[i]) for i in members}) == 1, family


@pytest.mark.heavy  # 39 permutation fits in worker processes of its own
def test_a_real_fit_that_loses_to_chance_is_not_trusted(tau2_runs: list[LabelledRun]) -> Any:
    # Since the fits read no benchmark words (docs/signal.md, "A cold start judged by harnesses it never saw"), the
    # grok fork's pooled fit ranks its held-out task groups the wrong way out of fold (the between-task confound of
    # grok-3), where it used to be trusted on the task names. The gate must see it: the permutation test and the
    # size baselines each refuse it, in words. 19 permutations cannot reach p < 0.05; 39 can.
    result = train_dataset(Dataset(tau2_runs, files=52), shuffles=0, permutations=39, held_out_agents=False)
    report = result.report
    test = report.permutation
    assert test is not None and len(test.null) == 39
    assert test.real < test.null_mean and test.p_value >= 0.05, report.table()
    assert not report.trusted
    assert any("does not beat shuffled outcomes" in w for w in report.warnings)
    assert any("does not beat the characters written baseline" in w for w in report.warnings)


def test_permutations_in_worker_processes_match_the_ones_in_turn_withone_blas_thread_each(
    tau2_runs: list[LabelledRun],
) -> None:
    # the parallel path is the plain one, run elsewhere: the same null, permutation for permutation; and each worker
    # keeps to one BLAS thread (the workers share the cores out; their own BLAS threads oversubscribed them)
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from rb_otel.training.cv import grouped_folds
    from rb_otel.training.features import extract, prior_of
    from rb_otel.training.fit import CANDIDATES
    from rb_otel.training.permutation import one_blas_thread, permutation_test

    runs = _subset(tau2_runs, 120, 3)
    data = extract(runs, prior_of(runs))
    folds = grouped_folds([r.group for r in runs], 3, 0)
    chosen = [CANDIDATES[0].name] * 3
    in_turn = permutation_test(data, folds, chosen, 0.6, permutations=4, seed=2, workers=1)
    in_workers = permutation_test(data, folds, chosen, 0.6, permutations=4, seed=2, workers=2)
    assert in_workers.null == in_turn.null and len(set(in_turn.null)) > 1

    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("fork"), initializer=one_blas_thread) as pool:
        assert set(pool.submit(_blas_threads).result(timeout=60)) == {1}


def _blas_threads() -> list[int]:
    from threadpoolctl import threadpool_info

    return [pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"]
