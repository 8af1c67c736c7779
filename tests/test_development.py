"""The development pipeline: the kept-apart agents never reach a fit, the default-pilot decision, the converged
coding-run rule on hand-made runs, and (on the data root) every development source read by kind."""

from __future__ import annotations

import collections
import json
import random
from pathlib import Path
from typing import Any

import pytest
from components import data_path, signal_source
from hypothesis import given, settings
from hypothesis import strategies as st

from rb_otel.steering.scoring.steps import scorer_step
from rb_otel.training.converged import (
    converged_rule_by_agent,
    converged_stop,
    patch_changes_after,
    tokens_after_last_change,
    written_paths,
)
from rb_otel.training.dataset import LabelledRun, agent_unit, read_dataset
from rb_otel.training.development import SHIP_MARGIN, default_decision, default_model, held_out, read_kind
from rb_otel.training.features import agent_balanced, extract, prior_of
from rb_otel.training.fit import AVERAGE, fit_candidate
from rb_otel.training.held_out import Baseline, HeldOutAgent, HeldOutReport, SkipFigures, agent_kind
from rb_otel.training.kept_apart import kept_apart, refuse_kept_apart


def _bash(command: str, output: str = "", code: int = 0) -> Any:
    return scorer_step("t", action="bash", action_input=command,
                       observation=f"<returncode>{code}</returncode><output>{output}</output>")  # fmt: skip


def _run(steps: list[Any], *, failed: bool = False, model: str = "m", harness: str = "h", source: str = "s",
         run_id: str = "r") -> LabelledRun:  # fmt: skip
    n = len(steps)
    return LabelledRun(run_id, source, f"a|{model}", run_id, failed, steps, [100] * n, [10] * n,
                       harness=harness, model=model)  # fmt: skip


# -- kept apart ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("harness", "model", "source", "why"),
    [
        ("openhands", "claude-3-5-sonnet-20241022", "openhands", "OpenHands"),
        ("aider", "gpt-4o", "swe", "aider"),
        ("tau-bench", "gpt-4o", "tau_bench", "tau-bench"),
        ("tau2 llm_agent", "gpt-oss-120b", "tau2_bench", "gpt-oss-120b"),
        ("tau2 llm_agent", "claude-opus-4-6", "tau2_bench", "Opus 4.6"),
        ("button", "claude-opus-4.6", "tau2_bench", "Opus 4.6"),
    ],
)
def test_the_readmes_kept_apart_agents_are_recognised(harness: str, model: str, source: str, why: str) -> None:
    run = _run([_bash("ls")], harness=harness, model=model, source=source)
    assert why in (kept_apart(run) or "")


def test_the_development_agents_are_not_kept_apart() -> None:
    for harness, model in [("tau2 llm_agent", "grok-3"), ("mini-swe-agent 1", "gemini-3-pro-preview"),
                           ("mini-swe-agent 2", "deepseek-chat"), ("whissle", "whissle")]:  # fmt: skip
        assert kept_apart(_run([_bash("ls")], harness=harness, model=model, source="tau2_bench")) is None


def test_a_kept_apart_run_never_reaches_a_development_fit() -> None:
    """Mixed into the runs a held-out evaluation is given, one kept-apart run stops it before any fit."""
    rng = random.Random(5)
    runs = [_run([_bash(f"cat f{k}.py") for k in range(rng.randint(3, 9))], failed=rng.random() < 0.5,
                 model=f"m{i % 3}", run_id=f"r{i}") for i in range(90)]  # fmt: skip
    intruder = _run([_bash("ls")], model="gpt-oss-120b", run_id="apart")
    fits: list[set[str]] = []

    def recording(data: Any, rows: Any, candidate: Any, **kwargs: Any) -> Any:
        fits.append({data.runs[i].run_id for i in rows})
        return fit_candidate(data, rows, candidate, **kwargs)

    with pytest.raises(ValueError, match=r"1 run\(s\) of agents kept apart from every fit: apart"):
        held_out([*runs, intruder], fit=recording)
    assert not fits
    held_out(runs, fit=recording, min_each=5)  # without it, the same call fits
    assert fits


def test_the_shared_tau_bench_records_are_refused_by_a_development_fit(tmp_path: Path) -> None:
    """The data root's tau-bench GPT-4o trajectories (read as the results list they came from) are one of the
    README's kept-apart agents."""
    elements = [json.loads(p.read_text()) for p in sorted(data_path("tau_bench").glob("*.json"))]
    (tmp_path / "results.json").write_text(json.dumps(elements))
    runs = read_dataset([tmp_path / "results.json"]).runs
    assert runs and all(kept_apart(r) for r in runs)
    with pytest.raises(ValueError, match="kept apart"):
        refuse_kept_apart(runs)


# -- the default per kind ----------------------------------------------------------------------------------------


def _agent(name: str, runs: int, early: float, best: float) -> HeldOutAgent:
    skip = SkipFigures(False, 0, 10, 0.1, 0.0, 10, 0.0, False, "off")
    baselines = (Baseline("characters so far", best, 1, best),)
    return HeldOutAgent(name, runs, runs // 2, ("x",), 100, "size", 0.6, baselines, runs, early, baselines, skip,
                        skip)  # fmt: skip


@given(st.lists(st.tuples(st.integers(20, 400), st.floats(0.4, 0.9), st.floats(0.4, 0.9)), min_size=1, max_size=8))
@settings(max_examples=100, deadline=None)
def test_a_default_ships_only_above_every_baseline_on_the_median_and_below_none_with_100_runs(
    agents: list[tuple[int, float, float]],
) -> None:
    report = HeldOutReport([_agent(f"a{i}", n, e, b) for i, (n, e, b) in enumerate(agents)], 0.02, False)
    ships, why = default_decision(report)
    margins = sorted(e - b for _, e, b in agents)
    median = (margins[(len(margins) - 1) // 2] + margins[len(margins) // 2]) / 2
    below = any(n >= 100 and e - b < 0 for n, e, b in agents)
    assert ships == (median >= SHIP_MARGIN and not below)
    assert f"{median:+.3f}" in why


def _coding_runs(models: tuple[str, ...], per_model: int, seed: int = 0) -> list[LabelledRun]:
    """Made-up coding runs: failing ones see more failures and go on longer (what a fit can learn)."""
    rng = random.Random(seed)
    out = []
    for model in models:
        for i in range(per_model):
            failed = i % 2 == 1
            steps = [_bash(f"sed -i 's/a/b/' src/m{k % 4}.py") if rng.random() < 0.3 else
                     _bash("python -m pytest", "1 failed", code=1) if rng.random() < (0.5 if failed else 0.15) else
                     _bash(f"cat src/m{k % 4}.py", "x" * rng.randint(0, 400))
                     for k in range(rng.randint(4, 16) + (4 if failed else 0))]  # fmt: skip
            out.append(_run(steps, failed=failed, model=model, harness="h", run_id=f"{model}-{i}"))
    return out


def test_a_kinds_default_model_is_the_average_of_the_families_fitted_on_all_its_agents() -> None:
    """``default_model``: pilot/3, the average fitted on every run (agents weighted alike), the decision and the
    held-out figures it rests on recorded in the file, SKIP on only where it held on every judged agent."""
    from rb_otel.steering.pilot.model import PILOT_V3, PilotModel

    runs = _coding_runs(("m1", "m2", "m3"), 44)
    report = held_out(runs)
    assert {a.family for a in report.agents} == {AVERAGE.name}  # the procedure held out is the one fitted
    model = default_model("coding", runs, report)
    assert model.version == PILOT_V3 and model.trained["family"] == AVERAGE.name
    assert model.trained["default"] == dict(zip(("ships", "why"), default_decision(report), strict=True))
    assert model.trained["held_out_agents"] == report.as_dict()
    assert bool(model.skip["on"]) == ("skip_quantile" in model.fsm) and (report.skip_holds or not model.skip["on"])
    prior = prior_of(runs)
    data = extract(runs, prior)
    data.run_weight = agent_balanced(runs, agent_unit)
    fitted = fit_candidate(data, range(len(runs)), AVERAGE)
    assert model.intercept == pytest.approx(fitted.intercept) and model.weights == pytest.approx(tuple(fitted.dense))
    assert {b.value: dict(b.weights) for b in model.text_blocks} == {v: w for v, w in fitted.text.items() if w}
    assert PilotModel.from_mapping(model.as_dict()).as_dict() == model.as_dict()


def test_a_shipped_pilot3_says_it_earned_its_place() -> None:
    """A kind whose default is a pilot/3 file: the file is that kind's, and the decision recorded in it shipped."""
    from rb_otel.steering.pilot.kinds import AGENT_KINDS
    from rb_otel.steering.pilot.model import PILOT_V3, PilotModel

    for kind in AGENT_KINDS:
        model = PilotModel.default_for(kind)
        if model.version == PILOT_V3:
            assert model.trained["kind"] == kind and model.trained["default"]["ships"] is True


# -- converged coding runs ----------------------------------------------------------------------------------


def test_the_rule_stops_k_quiet_steps_after_a_passing_check_that_follows_a_change() -> None:
    steps = [
        _bash("python reproduce.py", "bug"),  # a check before any change is looking, not verifying
        _bash("sed -i 's/a/b/' src/x.py"),  # the change
        _bash("python -m pytest tests/test_x.py", "1 passed"),  # a passing check
        _bash("cat src/x.py"),
        _bash("git diff"),
        _bash("cat src/y.py"),
    ]
    run = _run(steps)
    assert converged_stop(run, 2) == 4 and converged_stop(run, 3) == 5 and converged_stop(run, 4) is None
    failing = _run([*steps[:2], _bash("pytest", "1 failed", code=1), *steps[3:]])
    assert converged_stop(failing, 2) is None  # the check did not pass
    assert not patch_changes_after(run, 4)


def test_a_later_edit_of_the_source_is_the_risk_a_removed_scratch_file_is_not() -> None:
    steps = [
        _bash("cat > reproduce.py <<'EOF'\nprint(1)\nEOF"),
        _bash("sed -i 's/a/b/' src/x.py"),
        _bash("python reproduce.py"),
        _bash("ls"),
        _bash("rm reproduce.py"),  # scratch: written by the run, removed by it
        _bash("sed -i 's/b/c/' src/x.py"),  # the patch changes
    ]
    run = _run(steps)
    assert converged_stop(run, 1) == 3
    assert patch_changes_after(run, 3)
    assert not patch_changes_after(_run(steps[:5]), 3)
    assert written_paths("bash", "sed -i 's/x/y/' a.py b.py") == ({"a.py", "b.py"}, set())
    assert written_paths("bash", "python make.py > out.txt && cat out.txt") == ({"out.txt"}, set())
    assert written_paths("str_replace_editor", '{"command": "str_replace", "path": "/r/a.py"}') == ({"/r/a.py"}, set())
    assert written_paths("bash", "rm -f a.py b.py") == (set(), {"a.py", "b.py"})


def test_the_share_of_tokens_after_the_last_change() -> None:
    run = _run([_bash("cat a.py"), _bash("sed -i 's/a/b/' a.py"), _bash("python a.py"), _bash("cat a.py")])
    run.tokens = [10, 20, 30, 40]
    assert tokens_after_last_change(run) == 70 / 100
    assert tokens_after_last_change(_run([_bash("cat a.py")])) is None


def test_k_is_chosen_on_the_other_agents_only() -> None:
    quiet = [_bash("sed -i 's/a/b/' a.py"), _bash("pytest"), _bash("ls"), _bash("ls"), _bash("ls")]
    risky = [*quiet[:4], _bash("sed -i 's/b/c/' a.py"), _bash("ls")]
    runs = [_run(quiet, model="safe", run_id=f"s{i}") for i in range(25)]
    runs += [_run(risky, model="risky", run_id=f"r{i}") for i in range(25)]
    by = {f.agent: f for f in converged_rule_by_agent(runs)}
    assert by["h|risky"].k == 2 and by["h|risky"].risky == 25  # chosen on "safe", where nothing changes later
    assert by["h|safe"].k is None  # k = 2 is risky on "risky", and a larger k stops none of its runs
    assert by["h|safe"].stopped == 0 and by["h|safe"].risk == 0.0


# -- the development sources (the data root) ----------------------------------------------------------------------


@pytest.mark.heavy  # reads every development source (about 20 s)
def test_every_development_source_is_read_by_kind_with_nothing_kept_apart() -> None:
    signal_source("tau2_grok")  # skips with the reason where there is no data root
    customer = read_kind("customer_service")
    coding = read_kind("coding")
    # each agent is its kind by the tools its runs called (a run that called none has no kind of its own)
    for data, kind in ((customer, "customer_service"), (coding, "coding")):
        by_agent = collections.defaultdict(list)
        for run in data.runs:
            by_agent[agent_unit(run)].append(run)
        assert {agent_kind(runs) for runs in by_agent.values()} == {kind}
    agents = collections.Counter(agent_unit(r) for r in coding.runs)
    assert agents["mini-swe-agent 1|gpt-5-mini"] == 998 and agents["mini-swe-agent 2|deepseek-chat"] == 493
    assert coding.unlabelled["msa2_deepseek_verified"] == 30
    assert coding.unlabelled["terminal_bench_claude_code"] == 6  # Claude Code: results.json says nothing of 6
    assert set(coding.harnesses) == {"mini-swe-agent", "Claude Code"}
    assert not [r for r in customer.runs + coding.runs if kept_apart(r)]
    judged = [a for a, n in collections.Counter(agent_unit(r) for r in customer.runs).items() if n >= 40]
    assert "tau2 llm_agent|grok-3" in judged and "whissle|whissle" in judged


@pytest.mark.heavy  # reads the coding and customer-service sources (about a minute)
def test_each_kinds_shipped_default_is_the_size_the_ship_rule_chose_with_its_kinds_prior() -> None:
    """No learned default cleared the cold-start floor (docs/signal.md): each kind's shipped model is the label-free
    size default that met the floor on more left-out harnesses' agents (the leave-one-harness-out report's
    ``size_default``), no fitted weight, its prior the typical run of the kind's development runs."""
    from rb_otel.steering.pilot.model import PILOT_SIZE, SIZE_DEFAULTS, PilotModel, size_default

    signal_source("msa2_deepseek_verified")  # skips with the reason where there is no data root
    committed = Path(__file__).resolve().parents[1] / "research" / "leave_one_harness_out_report.json"
    report = json.loads(committed.read_text(encoding="utf-8"))
    for kind in ("coding", "customer_service"):
        runs = read_kind(kind).runs
        shipped = PilotModel.default_for(kind)
        assert shipped.version == PILOT_SIZE and not shipped.text_blocks and shipped.trained["kind"] == kind
        assert shipped.trained["size"] in SIZE_DEFAULTS and shipped.trained["size"] == report[kind]["size_default"]
        expected = size_default(shipped.trained["size"], prior_of(runs))
        assert shipped.intercept == pytest.approx(expected.intercept, abs=1e-8)
        assert (shipped.weights, shipped.features) == (expected.weights, expected.features)
        assert dict(shipped.fsm) == dict(expected.fsm)
        assert shipped.prior == pytest.approx({k: round(v, 6) for k, v in expected.prior.items()})


def test_writing_the_patch_out_is_not_a_change_of_the_workspace() -> None:
    assert written_paths("bash", "cd /testbed && git diff src/x.py > patch.txt && cat patch.txt") == (set(), set())
    steps = [_bash("sed -i 's/a/b/' src/x.py"), _bash("pytest"), _bash("ls"), _bash("git diff > patch.txt")]
    assert not patch_changes_after(_run(steps), 2)
