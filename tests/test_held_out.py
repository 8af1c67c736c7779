"""Leave one agent out (docs/signal.md, "Leave one agent out"): no held-out run in its own fit, the SKIP rule
never on where the bound exceeds the budget, and the report on the repository's runs."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from components import signal_source
from hypothesis import given, settings
from hypothesis import strategies as st

from rb_otel.evaluation.metrics import wilson_upper
from rb_otel.steering.scoring.steps import scorer_step
from rb_otel.training.dataset import LabelledRun, read_dataset
from rb_otel.training.fit import fit_candidate
from rb_otel.training.held_out import (
    MIN_SUCCESSFUL,
    HeldOutReport,
    _skip_figures,
    agent_unit,
    leave_one_agent_out,
    tokens_after_last_change,
)
from rb_otel.training.relative_skip import choose_relative_skip, relative_stops


def _run(agent: str, i: int, failed: bool, rng: random.Random) -> LabelledRun:
    """A hand-made run: a failing one loops over the same read and fails its tests more often."""
    steps = []
    for k in range(rng.randint(6, 14)):
        if failed and rng.random() < 0.6:
            steps.append(scorer_step("again", action="bash", action_input="cat a.py",
                                     observation="<returncode>1</returncode>", error=True))  # fmt: skip
        elif k % 4 == 3:
            steps.append(scorer_step("edit", action="bash", action_input=f"sed -i 's/{k}/x/' a.py",
                                     observation="<returncode>0</returncode>"))  # fmt: skip
        else:
            steps.append(scorer_step("look " * rng.randint(1, 30), action="bash", action_input=f"grep -n f{k} a.py",
                                     observation="<returncode>0</returncode>"))  # fmt: skip
    return LabelledRun(
        run_id=f"{agent}-{i}",
        source="hand-made",
        agent=f"coder:{agent.split('-', 1)[0]}|{agent}",
        group=f"task-{i % 15}",
        failed=failed,
        steps=steps,
        prompt_tokens=[100 * (k + 1) for k in range(len(steps))],
        tokens=[100] * len(steps),
    )


@pytest.fixture(scope="module")
def three_agents() -> list[LabelledRun]:
    rng = random.Random(7)
    # 60 runs each, about half failing: every agent has the 20 runs of each outcome it is held out with
    return [_run(agent, i, rng.random() < 0.5, rng) for agent in ("m-a", "m-b", "m-c") for i in range(60)]


def test_agent_unit_is_the_model_behind_the_key(three_agents: list[LabelledRun]) -> None:
    assert agent_unit(three_agents[0]) == "m-a"
    run = three_agents[0]
    assert agent_unit(LabelledRun(**{**_fields(run), "agent": "no-model"})) == "no-model"


def _fields(run: LabelledRun) -> dict[str, Any]:
    return {name: getattr(run, name) for name in LabelledRun.__slots__}  # type: ignore[attr-defined]


def test_a_held_out_agents_runs_never_enter_its_own_fit(three_agents: list[LabelledRun]) -> None:
    """Every fit the procedure makes while an agent is held out (family choice, weights, thresholds) is recorded;
    none may see a run of that agent. Fails if the training side is built from all the runs."""
    seen: list[set[str]] = []

    def recording_fit(data: Any, runs: Any, candidate: Any, **kwargs: Any) -> Any:
        seen.append({agent_unit(data.runs[i]) for i in runs})
        return fit_candidate(data, runs, candidate, **kwargs)

    report = leave_one_agent_out(three_agents, fit=recording_fit)
    assert [a.agent for a in report.agents] == ["m-a", "m-b", "m-c"]
    per_agent = len(seen) // 3
    assert per_agent > 0 and len(seen) == 3 * per_agent
    for k, held in enumerate(("m-a", "m-b", "m-c")):
        for agents in seen[k * per_agent : (k + 1) * per_agent]:
            assert held not in agents
            assert agents  # a fit on nothing is no fit
        assert report.agents[k].trained_on == tuple(a for a in ("m-a", "m-b", "m-c") if a != held)
        assert report.agents[k].training_runs == 120


def test_keeping_tasks_apart_drops_the_held_out_agents_tasks_from_its_fit(three_agents: list[LabelledRun]) -> None:
    shared = [LabelledRun(**{**_fields(r), "group": "only-task"}) if agent_unit(r) != "m-c" else r
              for r in three_agents]  # fmt: skip
    report = leave_one_agent_out(shared, keep_tasks_apart=True)
    assert {a.agent for a in report.agents} == {"m-a", "m-b"}  # each fitted on m-c alone: the task is theirs
    assert all(a.training_runs == 60 for a in report.agents)
    assert "task groups" in report.skipped["m-c"]  # m-a and m-b are in one task: nothing to cross-fit on
    plain = leave_one_agent_out(shared, keep_tasks_apart=False)
    assert [a.training_runs for a in plain.agents] == [120, 120]  # m-b's (or m-a's) runs of the shared task too


def test_the_report_says_every_agent_and_why_skip_is_off(three_agents: list[LabelledRun]) -> None:
    report = leave_one_agent_out(three_agents)
    text = "\n".join(report.lines())
    for agent in ("m-a", "m-b", "m-c"):
        assert agent in text
    data = json.loads(json.dumps(report.as_dict()))
    assert data["method"] == "leave one agent out"
    assert data["skip_holds"] == report.skip_holds
    if not report.skip_holds:
        assert report.why_skip_off() and "SKIP off" in text


# -- the SKIP rule --------------------------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(
    outcomes=st.lists(st.booleans(), min_size=1, max_size=80),
    stops=st.data(),
    budget=st.floats(0.001, 0.2),
    on=st.booleans(),
)
def test_skip_never_holds_where_the_bound_exceeds_the_budget(
    outcomes: list[bool], stops: st.DataObject, budget: float, on: bool
) -> None:
    rng_stops = stops.draw(st.lists(st.one_of(st.none(), st.integers(0, 5)), min_size=len(outcomes),
                                    max_size=len(outcomes)))  # fmt: skip
    held = [LabelledRun(f"r{i}", "s", "a|m", "g", failed, [scorer_step("x")] * 6, [1] * 6, [10] * 6)
            for i, failed in enumerate(outcomes)]  # fmt: skip
    figures = _skip_figures(held, rng_stops, on, budget)
    ok = [s for r, s in zip(held, rng_stops, strict=True) if not r.failed]
    bound = wilson_upper(sum(s is not None for s in ok), len(ok))
    assert figures.upper == bound
    if figures.holds:
        assert on and bound <= budget
    if bound > budget:
        assert not figures.holds
        assert "upper bound" in figures.why or not on


def test_the_report_turns_skip_on_only_where_every_judged_agent_held(three_agents: list[LabelledRun]) -> None:
    report = leave_one_agent_out(three_agents)
    for agent in report.agents:
        assert agent.skip.holds == (agent.skip.on and agent.skip.upper <= report.max_false_stops
                                    and agent.skip.stopped_failing >= 0.02)  # fmt: skip
    judged = [a for a in report.agents if a.skip.successful >= MIN_SUCCESSFUL]
    assert report.skip_holds == (bool(judged) and all(a.skip.holds for a in judged))
    assert not HeldOutReport([], 0.02, False).skip_holds


def test_a_relative_skip_is_chosen_within_the_budget_on_its_training_runs(three_agents: list[LabelledRun]) -> None:
    rng = random.Random(3)
    probabilities = [[min(0.99, 0.3 + 0.5 * r.failed * rng.random() + 0.1 * rng.random())] * len(r.steps)
                     for r in three_agents]  # fmt: skip
    fsm = {"fast_threshold": 0.1, "slow_threshold": 0.5, "skip_threshold": 1.0, "hysteresis_margin": 0.05,
           "fast_window": 6, "slow_window": 2, "skip_window": 3}  # fmt: skip
    chosen = choose_relative_skip(three_agents, probabilities, fsm, 0.05)
    if chosen is not None:
        stops = relative_stops(three_agents, probabilities, fsm, *chosen)
        ok = [s for r, s in zip(three_agents, stops, strict=True) if not r.failed]
        assert wilson_upper(sum(s is not None for s in ok), len(ok)) <= 0.05
    # no agent is stopped before it has the runs a relative threshold needs (label-free, learned in file order)
    stops = relative_stops(three_agents, probabilities, fsm, 0.5, 2)
    assert all(s is None for s in stops[:20])


def test_the_share_of_tokens_after_the_last_change(three_agents: list[LabelledRun]) -> None:
    steps = [scorer_step("a", action="bash", action_input="cat a.py"),
             scorer_step("b", action="bash", action_input="sed -i 's/a/b/' a.py"),
             scorer_step("c", action="bash", action_input="python a.py"),
             scorer_step("d", action="bash", action_input="cat a.py")]  # fmt: skip
    run = LabelledRun("r", "s", "a|m", "g", False, steps, [1] * 4, [10, 20, 30, 40])
    assert tokens_after_last_change(run) == 70 / 100
    assert tokens_after_last_change(LabelledRun("r", "s", "a|m", "g", False, steps[:1], [1], [10])) is None


# -- the repository's runs ------------------------------------------------------------------------------------


def test_leave_one_agent_out_on_the_repositorys_customer_service_runs(tmp_path: Path) -> None:
    """The tau2 development records (the data root's signal/tau2_grok): three of its models, each held out in
    turn; the figures are reported, not asserted (they are docs/signal.md's, measured by
    research/leave_one_agent_out.py), but every one is a number from a fit that did not see the agent."""
    runs = read_dataset([signal_source("tau2_grok")]).runs
    small = [r for r in runs if r.model in {"grok-3-mini", "grok-4", "grok-4-fast-reasoning"}]
    report = leave_one_agent_out(small)
    # grok-3-mini has 16 successful runs: fewer than 20 of each outcome, so it trains the others but is not judged
    assert {a.agent for a in report.agents} == {"tau2 llm_agent|grok-4", "tau2 llm_agent|grok-4-fast-reasoning"}
    assert "fewer than 20 of each outcome" in report.skipped["tau2 llm_agent|grok-3-mini"]
    assert report.as_dict() == leave_one_agent_out(small).as_dict()  # deterministic
    for agent in report.agents:
        assert agent.agent not in agent.trained_on
        assert 0.0 <= agent.last_step <= 1.0
        assert agent.runs == sum(agent_unit(r) == agent.agent for r in small)
        assert {b.name for b in agent.last_baselines} >= {"steps", "characters"}
    assert report.lines()[-1].startswith("SKIP")


def test_train_holds_agents_out_and_writes_skip_only_where_it_held(tmp_path: Path) -> None:
    """``rb-otel train`` on runs of several agents: the report and the model file carry the held-out figures, and
    SKIP is on in the file only when it held on every agent that can judge it."""
    from rb_otel.steering.pilot import PilotModel
    from rb_otel.training import train_dataset
    from rb_otel.training.dataset import Dataset

    rng = random.Random(11)
    runs = [_run(agent, i, rng.random() < 0.5, rng) for agent in ("m-a", "m-b", "m-c") for i in range(60)]
    out = tmp_path / "pilot.json"
    result = train_dataset(Dataset(runs, files=1), out=out, force=True, shuffles=0, permutations=0)
    held = result.report.held_out
    assert held is not None and [a.agent for a in held.agents] == ["m-a", "m-b", "m-c"]
    assert "leave one agent out" in "\n".join(result.report.table())
    model = PilotModel.load(out)
    assert model.trained["held_out_agents"]["agents"][0]["agent"] == "m-a"
    assert bool(model.skip["on"]) == held.skip_holds == result.report.skip_on
    if not held.skip_holds:
        assert model.fsm["skip_threshold"] == 1.0 and "skip_quantile" not in model.fsm
    single = train_dataset(Dataset(runs[:40], files=1), shuffles=0, permutations=0)
    assert single.report.held_out is None  # one agent: nothing to hold out
