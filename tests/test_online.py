"""``rb-otel evaluate --online``: the prequential replay (what each run was scored by, what the learner had seen),
its figures (sizes oriented on the labelled runs only, SKIP counted from the moment it was earned) and its CLI."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rb_otel.cli import main
from rb_otel.evaluation.online import OnlineRun, online_figures, ordered, replay_agent
from rb_otel.steering.pilot import PilotModel
from rb_otel.steering.scoring import ScorerStep
from rb_otel.training.dataset import LabelledRun
from rb_otel.training.earned import with_states as _with_states
from rb_otel.training.watch import AgentFit, refit_due

#: ``rb.scorer`` of a coding agent's runs before it has a model of its own (the kind's default).
DEFAULT = PilotModel.default_for("coding").version


def _run(i: int, agent: str = "a|m", *, failed: bool | None = None, steps: int = 12) -> LabelledRun:
    rng = random.Random(i)
    failed = rng.random() < 0.4 if failed is None else failed
    body = [ScorerStep(thought=("hmm maybe " if failed else "") + f"step {k}", action="bash", action_input="ls",
                       observation="Traceback exit code: 1" if failed and k % 3 == 0 else "ok", tokens=100 * (k + 1))
            for k in range(steps)]  # fmt: skip
    return LabelledRun(f"{agent}-r{i}", "test", agent, f"g{i}", failed, body, [100 * (k + 1) for k in range(steps)],
                       [100] * steps)  # fmt: skip


class _Learner:
    """A fit that records what reaches it (the runs, in order) and answers ``trusted`` in turn."""

    def __init__(self, trusted: list[bool], skip: bool = False) -> None:
        self.trusted = trusted
        self.skip = skip
        self.seen: list[list[str]] = []

    def __call__(self, runs: list[LabelledRun], *, agent: str, **_: Any) -> AgentFit:
        self.seen.append([r.run_id for r in runs])
        ok = self.trusted.pop(0) if self.trusted else True
        model = _with_states(PilotModel.default_for("coding"), agent, len(runs), ok, ok and self.skip)
        return AgentFit(agent, len(runs), ok, ok, ok and self.skip, model if ok else None, "", 0.0)


def test_each_run_is_scored_by_the_model_its_agent_had_when_it_started() -> None:
    runs = [_run(i) for i in range(130)]
    learner = _Learner([True, False, True])
    records = replay_agent(runs, fit=learner)
    assert [r.labels_before for r in records] == list(range(130))
    # the learner saw exactly the runs that had ended, in order, on the watcher's schedule
    assert [len(s) for s in learner.seen] == [50, 75, 113]
    assert all(s == [r.run_id for r in runs[: len(s)]] for s in learner.seen)
    names = [r.model for r in records]
    assert set(names[:50]) == {DEFAULT}  # the kind's default before any fit
    assert set(names[50:75]) == {"pilot/agent:a|m@50"}  # from the run after the fit, not the one that ended it
    assert set(names[75:113]) == {DEFAULT}  # a fit that is not trusted withdraws the model
    assert set(names[113:]) == {"pilot/agent:a|m@113"}
    assert all(len(r.risk) == 12 and all(0.0 <= x <= 1.0 for x in r.risk) for r in records)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.sampled_from(["a|m", "b|m", "c|m"]), min_size=1, max_size=40), st.integers(0, 10**6))
def test_a_seed_fixes_each_agents_order_whatever_else_is_read(agents: list[str], seed: int) -> None:
    runs = [_run(i, a, steps=2) for i, a in enumerate(agents)]
    in_file_order = ordered(runs, None)
    assert {a: [r.run_id for r in rs] for a, rs in in_file_order.items()} == {
        a: [r.run_id for r in runs if r.agent == a] for a in set(agents)
    }
    shuffled = ordered(runs, seed)
    alone = ordered([r for r in runs if r.agent == agents[0]], seed)
    assert [r.run_id for r in shuffled[agents[0]]] == [r.run_id for r in alone[agents[0]]]
    assert sorted(r.run_id for r in shuffled[agents[0]]) == sorted(r.run_id for r in in_file_order[agents[0]])
    assert ordered(runs, seed).keys() == shuffled.keys()


def _record(i: int, failed: bool, labels: int, chars: int, *, risk: float = 0.5, skip_on: bool = False,
            skip_step: int | None = None) -> OnlineRun:  # fmt: skip
    return OnlineRun(f"r{i}", "a|m", failed, labels, "m", [risk] * 12, skip_step, skip_on, [chars] * 12, [0] * 12)


def test_size_baselines_are_oriented_on_the_runs_labelled_before_the_cut() -> None:
    # before the cut longer runs failed; after it, shorter ones do: the baseline keeps the earlier direction
    before = [_record(i, i % 2 == 0, i, 1000 if i % 2 == 0 else 10) for i in range(50)]
    after = [_record(50 + i, i % 2 == 0, 50 + i, 10 if i % 2 == 0 else 1000) for i in range(40)]
    figures = online_figures(before + after, cuts=(50,))["a|m"]["after_50"]
    assert figures["last"]["size"]["characters"] == {"auroc": 0.0, "direction": 1}
    assert figures["step_10"]["size"]["characters"]["auroc"] == 0.0
    assert figures["last"]["runs"] == 40 and "prompt tokens" not in figures["last"]["size"]  # no tokens reported


def test_skip_is_counted_from_the_moment_the_agent_earned_it() -> None:
    records = [_record(i, i % 2 == 0, i, 10, skip_step=3) for i in range(60)]  # the default's SKIP: not counted
    records += [_record(60 + i, i % 4 == 0, 60 + i, 10, skip_on=True, skip_step=3 if i % 4 == 0 and i < 40 else None)
                for i in range(100)]  # fmt: skip
    skip = online_figures(records)["a|m"]["skip"]
    assert skip["earned"] and skip["labels_when_earned"] == 60 and skip["from_run"] == 61
    assert (skip["failing"], skip["successful"]) == (25, 75)
    assert skip["stopped_failing"] == pytest.approx(10 / 25) and skip["false_stops"] == 0.0
    assert skip["held"] is True  # 0 of 75: the bound is 1.3%
    assert online_figures(records[:60])["a|m"]["skip"] == {"earned": False}


def _steplog(path: Path, n: int) -> None:
    lines = []
    for i in range(n):
        failed = i % 3 == 0
        lines.append({"run_id": f"run{i}", "outcome": "failure: x" if failed else "success", "agent_name": "calc"})
        lines += [{"step": k, "fsm_state": "NORMAL", "thought_preview": ("hmm maybe " if failed else "") + f"step {k}"}
                  for k in range(3 + i % 9)]  # fmt: skip
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")


def test_evaluate_online_writes_one_object_per_run_and_prints_the_figures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "runs.jsonl"
    _steplog(source, 70)
    out = tmp_path / "online.jsonl"
    assert main(["evaluate", str(source), "--online", "--json", str(out), "--quiet"]) == 0
    objects = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(objects) == 70
    assert set(objects[0]) >= {"run_id", "agent", "outcome", "labels_before", "model", "steps", "risk", "skip_step"}
    assert [o["run_id"] for o in objects] == [f"run{i}" for i in range(70)]  # file order
    assert [o["labels_before"] for o in objects] == list(range(70))
    assert all(len(o["risk"]) == o["steps"] and o["outcome"] in ("success", "failure") for o in objects)
    printed = capsys.readouterr().out
    assert "prequential replay of 70 runs (file order)" in printed and "SKIP never earned" in printed
    assert main(["evaluate", str(source), "--online", "--json", str(out), "--seed", "3", "--quiet"]) == 0
    shuffled = [json.loads(line)["run_id"] for line in out.read_text().splitlines()]
    assert sorted(shuffled) == sorted(o["run_id"] for o in objects) and shuffled != [o["run_id"] for o in objects]


def test_evaluate_online_says_plainly_when_there_is_nothing_to_replay(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["evaluate", str(tmp_path / "missing.jsonl"), "--online"]) == 2
    assert capsys.readouterr().err.startswith("error: ")
    empty = tmp_path / "runs.jsonl"
    empty.write_text('{"run_id": "r1"}\n{"step": 0, "thought_preview": "x"}\n')
    assert main(["evaluate", str(empty), "--online"]) == 2
    assert "no labelled runs to replay" in capsys.readouterr().err


def test_the_replay_refits_on_the_watchers_schedule() -> None:
    learner = _Learner([False] * 10)
    replay_agent([_run(i, steps=2) for i in range(260)], fit=learner)
    fitted_at = [len(s) for s in learner.seen]
    expected, last = [], None
    for n in range(1, 261):
        if refit_due(n, last):
            expected.append(n)
            last = n
    assert fitted_at == expected == [50, 75, 113, 170, 255]
