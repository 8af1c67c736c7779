"""The steering signal on real runs: the public trajectory formats, labels, scorers, the pilot and ``evaluate``.

Real runs come from the development records' data root (``tests/components.py``: ``signal_source``): 12
mini-swe-agent runs with their evaluation's outcomes and one tau2-bench results file, copied into a temporary
folder. No test asserts a figure fitted
on the data it checks: the pilot is tested for its contracts (range, prefix-only, determinism, baselines), not for
its AUROC.
"""

from __future__ import annotations

import json
import math
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from components import signal_source
from conftest import Otel
from format_fixtures import fixture
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage

from rb_otel import ReasonBlocks
from rb_otel.backends.baselines.cache import BaselineCache
from rb_otel.backends.pilot import PilotScorer
from rb_otel.cli import main
from rb_otel.evaluation import EvaluationError, evaluate
from rb_otel.evaluation.metrics import auroc
from rb_otel.importers import RecordError, detect, replay
from rb_otel.importers.formats.mini_swe_agent import split_response
from rb_otel.importers.labels import load_labels
from rb_otel.steering.fsm import DifficultyFSM
from rb_otel.steering.injections import create_injections
from rb_otel.steering.pilot import PILOT_SIZE, PilotModel, pilot_fsm_thresholds
from rb_otel.steering.pilot.kinds import CODING
from rb_otel.steering.scoring import JudgeScorer, ScorerStep, resolve_scorer, score_step
from rb_otel.steering.session import SteeringSession
from rb_otel.steering.state import TraceStateManager
from rb_otel.testing import ScriptedChatModel, tool_call

#: The mini-swe-agent runs (Gemini 3 Pro) and the tau2-bench file (grok-3, airline) the tests read, by name.
MINI_RUNS = (
    "django__django-11163", "django__django-13410", "django__django-14765", "django__django-16255",
    "django__django-16429", "django__django-16569", "django__django-17029", "matplotlib__matplotlib-23314",
    "pydata__xarray-4629", "sympy__sympy-13480", "sympy__sympy-16886", "sympy__sympy-23534",
)  # fmt: skip
TAU2_FILE = "2025-10-12T22:50:14.798563_airline_llm_agent_grok-3_user_simulator_grok-3.json"


@pytest.fixture(scope="session")
def signal_data(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A slice of the development records: 12 mini-swe-agent runs with the evaluation's results_summary.json,
    and one tau2-bench results file, copied into a temporary folder so tests may add files."""
    gemini, grok = signal_source("mini_swe_agent_gemini3pro"), signal_source("tau2_grok")
    root = tmp_path_factory.mktemp("signal")
    (root / "mini").mkdir()
    (root / "tau2_grok").mkdir()
    for name in MINI_RUNS:
        shutil.copy(gemini / f"{name}.traj.json", root / "mini")
    shutil.copy(grok / TAU2_FILE, root / "tau2_grok")
    shutil.copy(gemini / "results_summary.json", root / "labels.json")
    return {"tau2": root / "tau2_grok", "mini": root / "mini", "labels": root / "labels.json"}


# -- importers -----------------------------------------------------------------------------------------------


def test_tau2_results_file(signal_data: dict[str, Path], otel: Otel) -> None:
    path = max(signal_data["tau2"].glob("*.json"), key=lambda p: p.stat().st_size)
    data = json.loads(path.read_text())
    assert detect(path) == "tau2_bench"
    results = replay(path, tracer_provider=otel.tracer_provider)
    assert [r.run_id for r in results] == [s["id"] for s in data["simulations"]]
    for result, sim in zip(results, data["simulations"], strict=True):
        assert (result.outcome == "success") == (sim["reward_info"]["reward"] >= 1)
        assert result.step_count == sum(m["role"] == "assistant" for m in sim["messages"])
        assert result.agent_name.endswith(":" + data["info"]["environment_info"]["domain_name"])
    calls = [m["tool_calls"][0]["name"] for s in data["simulations"] for m in s["messages"] if m.get("tool_calls")]
    tools = [s for s in otel.spans("execute_tool") if s.name.startswith("execute_tool ")]
    assert len(tools) >= len(calls) > 0


def test_mini_swe_agent_trajectory(signal_data: dict[str, Path]) -> None:
    path = sorted(signal_data["mini"].glob("*.traj.json"))[0]
    data = json.loads(path.read_text())
    assert detect(path) == "mini_swe_agent"
    from rb_otel.importers.formats import mini_swe_agent

    [run] = list(mini_swe_agent.read(path, []))
    assistant = [m for m in data["messages"] if m["role"] == "assistant"]
    steps = list(run.steps)
    assert len(steps) == len(assistant) and run.outcome == "unlabelled"
    for step, message in zip(steps, assistant, strict=True):
        thought, commands = split_response(message["content"])
        assert "```bash\n" not in thought or len(commands) != 1
        if len(commands) == 1:
            assert step.action == "bash" and step.action_input == commands[0][:2000]
            assert step.tools[0].result is not None
        else:
            assert step.error_type == "format_error" and not step.tools


def test_mini_swe_agent_return_codes_and_format_errors(tmp_path: Path) -> None:
    messages = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "fix it"},
        {"role": "assistant", "content": "THOUGHT: look\n\n```bash\nls\n```"},
        {"role": "user", "content": "<returncode>2</returncode>\n<output>no</output>"},
        {"role": "assistant", "content": "two\n```bash\na\n```\n```bash\nb\n```"},
        {"role": "user", "content": "Please always provide EXACTLY ONE action"},
    ]
    path = tmp_path / "x.traj.json"
    path.write_text(json.dumps({"trajectory_format": "mini-swe-agent-1", "messages": messages, "info": {}}))
    [result] = replay(path, scorer="pilot", keep_steps=True)
    from rb_otel.importers.formats import mini_swe_agent

    [run] = list(mini_swe_agent.read(path, []))
    first, second = run.steps
    assert first.thought == "look" and first.tools[0].error == "exit code 2" and first.failed
    assert second.error_type == "format_error" and second.failed
    assert result.outcome == "unlabelled" and result.step_count == 2


def test_mini_swe_agent_malformed_top_level(tmp_path: Path) -> None:
    path = tmp_path / "bad.traj.json"
    path.write_text(json.dumps({"trajectory_format": "mini-swe-agent-1", "messages": "nope"}))
    with pytest.raises(RecordError, match=r"bad\.traj\.json: top level: expected an object with a 'messages' list"):
        replay(path)


def test_tau_bench_results_list_skips_a_malformed_element(tmp_path: Path, otel: Otel) -> None:
    runs = json.loads(fixture("tau_bench/handwritten_results.json").read_text())
    path = tmp_path / "results.json"
    path.write_text(json.dumps([runs[0], {"task_id": 1, "reward": "x", "traj": []}, runs[1]]))
    assert detect(path) == "tau_bench"
    results = replay(path, tracer_provider=otel.tracer_provider)
    assert [r.run_id for r in results] == [f"task-{r['task_id']}-trial-{r['trial']}" for r in (runs[0], runs[1])]
    assert [r.outcome == "success" for r in results] == [r["reward"] >= 1 for r in (runs[0], runs[1])]
    [problem] = results[0].problems
    assert problem.where == "element 1" and "reward" in problem.problem


def test_swe_agent_exit_status_in_any_case(tmp_path: Path) -> None:
    # a submitted patch is not a resolved issue: the outcome comes from --labels (SWE-bench's results)
    cases = (("Submitted", "unlabelled"), ("submitted (exit_cost)", "unlabelled"), ("exit_format", "failure"))
    for status, outcome in cases:
        path = tmp_path / f"{outcome}.traj"
        path.write_text(json.dumps({"trajectory": [{"thought": "t", "action": "ls"}], "info": {"exit_status": status}}))
        [result] = replay(path)
        assert result.outcome.startswith(outcome)


def test_directory_replay_with_labels_and_rescore_spans(signal_data: dict[str, Path], otel: Otel) -> None:
    labels = load_labels(signal_data["labels"])
    results = replay(signal_data["mini"], scorer="pilot", labels=labels, tracer_provider=otel.tracer_provider)
    assert len(results) == len(MINI_RUNS)
    for result in results:
        assert result.outcome == ("success" if labels[result.run_id] else "failure: unresolved")
        assert result.risk is not None and 0.0 <= result.risk <= 1.0
        assert result.max_state in ("NORMAL", "SLOW", "SKIP", "FAST")
        assert len(result.monitor_scores) == result.step_count
    chats = otel.spans("chat")
    scored = [dict(s.attributes or {}) for s in chats if "rb.difficulty" in (s.attributes or {})]
    # SWE-bench runs are a coding agent's: scored by the coding default (the agent-relative size: no learned default
    # cleared the cold-start floor on a harness it never saw)
    assert scored and all(a["rb.scorer"] == PilotModel.default_for(CODING).version == PILOT_SIZE for a in scored)
    assert all("rb.monitor.composite" in a for a in scored)
    roots = otel.spans("invoke_agent")
    assert {s.attributes["rb.run_id"]: s.attributes["rb.risk"] for s in roots} == {  # type: ignore[index]
        r.run_id: pytest.approx(r.risk) for r in results
    }


# -- labels --------------------------------------------------------------------------------------------------


def test_label_file_shapes(tmp_path: Path) -> None:
    swe = tmp_path / "results.json"
    swe.write_text(json.dumps({"resolved": ["a"], "unresolved": ["b"]}))
    only = tmp_path / "resolved_only.json"
    only.write_text(json.dumps({"resolved": ["a"]}))
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps({"a": True, "b": False}))
    summary = tmp_path / "summary.json"
    summary.write_text(json.dumps({"instances": [{"instance_id": "a", "resolved": True}]}))
    assert [load_labels(swe).outcome_of(x) for x in "abc"] == [True, False, None]
    assert [load_labels(only).outcome_of(x) for x in "ab"] == [True, False]
    assert [load_labels(plain).outcome_of(x) for x in ("a", "b", "a.traj", "a.json", "b.traj.json")] == [
        True, False, True, True, False
    ]  # fmt: skip
    assert load_labels(summary).outcome_of("a") is True
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"instances": [{"instance_id": "a"}]}))
    with pytest.raises(RecordError, match=r"bad\.json: instances\[0\]"):
        load_labels(bad)
    with pytest.raises(RecordError, match="no such labels file"):
        load_labels(tmp_path / "missing.json")


# -- scorers -------------------------------------------------------------------------------------------------

step_strategy = st.builds(
    ScorerStep,
    thought=st.text(max_size=300),
    action=st.one_of(st.none(), st.sampled_from(["bash", "edit", "search"])),
    action_input=st.one_of(st.none(), st.text(max_size=80)),
    observation=st.one_of(st.none(), st.text(max_size=80)),
    error=st.booleans(),
    tokens=st.integers(0, 10_000),
)


@settings(max_examples=60, deadline=None)
@given(runs=st.lists(st.lists(step_strategy, min_size=1, max_size=25), min_size=1, max_size=4))
def test_pilot_scores_are_probabilities_from_the_prefix_only(runs: list[list[ScorerStep]]) -> None:
    first, second = PilotScorer(), PilotScorer()
    for steps in runs:
        full = first.start_run("agent|m")
        scores = [full.score(s) for s in steps]
        assert all(0.0 < v < 1.0 and math.isfinite(v) for v in scores)
        assert full.risk() == scores[-1]
        # The same prefix, scored by a scorer with the same history, gives the same scores: no look-ahead.
        cut = len(steps) // 2 + 1
        prefix = second.start_run("agent|m")
        assert [prefix.score(s) for s in steps[:cut]] == scores[:cut]
        for s in steps[cut:]:
            prefix.score(s)
        full.finish()
        prefix.finish()


def test_pilot_baselines_are_per_agent_bounded_and_persisted(tmp_path: Path) -> None:
    path = tmp_path / "baselines.json"
    scorer = PilotScorer(baselines=BaselineCache(path, max_agents=2))
    run = [ScorerStep(thought="look at the file", action="bash", action_input="ls")] * 4
    for agent in ("a", "b", "c"):
        one = scorer.start_run(agent)
        for step in run:
            one.score(step)
        one.finish()
    assert len(scorer.baselines) == 2  # "a" was the least recently used
    assert scorer.baselines.flush()  # written in the background: flushed before another process reads
    assert sorted(a.agent for a in scorer.baselines.summaries.agents()) == ["b", "c"]
    reloaded = PilotScorer(baselines=path)
    again, fresh = reloaded.start_run("c"), PilotScorer().start_run("c")
    learned = [again.score(s) for s in run]
    assert learned != [fresh.score(s) for s in run]  # the baseline of "c" came back
    same = scorer.start_run("c")
    assert learned == [same.score(s) for s in run]
    path.write_text("{not json")
    with pytest.raises(ValueError, match="not a baseline store"):
        BaselineCache(path)


def test_a_callable_scorer_sees_the_step_and_the_run_so_far() -> None:
    seen: list[tuple[str, int]] = []

    def by_errors(step: ScorerStep, steps: Sequence[ScorerStep]) -> float:
        seen.append((step.thought, len(steps)))
        return sum(s.error for s in steps) / len(steps)

    session = _session(scorer=by_errors)
    for thought, error in (("a", False), ("b", True), ("c", True)):
        session.end_step(session.begin_step(thought=thought, error=error))
    assert seen == [("a", 1), ("b", 2), ("c", 3)]
    assert [e.difficulty for e in session.step_log] == [0.0, 0.5, pytest.approx(2 / 3)]
    assert session.scorer_name == "by_errors" and session.risk == pytest.approx((0 + 0.5 + 2 / 3) / 3)


def test_scorer_boundary_errors() -> None:
    with pytest.raises(ValueError, match="unknown scorer 'pilott'"):
        resolve_scorer("pilott")
    assert resolve_scorer(lambda thought: 0.5).start_run().score(ScorerStep(thought="x")) == 0.5  # a text scorer
    with pytest.raises(TypeError, match="takes no argument"):
        resolve_scorer(lambda: 0.5)


@settings(max_examples=40, deadline=None)
@given(thoughts=st.lists(st.text(max_size=200), min_size=1, max_size=10))
def test_the_default_stays_the_documented_heuristic(thoughts: list[str]) -> None:
    rb_default, rb_named = ReasonBlocks(telemetry_enabled=False), ReasonBlocks(scorer="heuristic")
    sessions = [rb_default.new_session(), rb_named.new_session()]
    for session in sessions:
        for thought in thoughts:
            session.end_step(session.begin_step(thought=thought))
    expected = [score_step(t) for t in thoughts]
    for session in sessions:
        assert [e.difficulty for e in session.step_log] == expected
    assert rb_default.scorer_name == rb_named.scorer_name == "heuristic"


def test_pilot_preset_on_reasonblocks() -> None:
    rb = ReasonBlocks(scorer="pilot", telemetry_enabled=False)
    preset = pilot_fsm_thresholds()
    assert preset and {k: getattr(rb.fsm.thresholds, k) for k in preset} == preset
    overridden = ReasonBlocks(scorer="pilot", fsm_thresholds={"slow_window": 9})
    assert overridden.fsm.thresholds.slow_window == 9


def test_judge_scorer_with_a_scripted_model() -> None:
    model = ScriptedChatModel(script=[AIMessage(content="Probability of failure: 0.9")])
    prompts: list[str] = []

    def ask(prompt: str) -> str:
        prompts.append(prompt)
        return model.invoke(prompt).text

    judge = JudgeScorer(ask, every=2, weight=1.0, base="heuristic")
    run = judge.start_run()
    steps = [ScorerStep(thought=f"step {i}", action="bash", action_input="ls", observation="ok") for i in range(4)]
    scores = [run.score(s) for s in steps]
    assert scores[1] == scores[3] == 0.9 and scores[0] == score_step("step 0")
    assert len(prompts) == 2 and "action: bash 'ls'" in prompts[0]
    silent = JudgeScorer(lambda p: "no idea", every=1, base="heuristic").start_run()
    assert silent.score(steps[0]) == score_step("step 0")  # no number: the base score
    failing = JudgeScorer(lambda p: 1 / 0, every=1, base="heuristic").start_run()  # type: ignore[arg-type,return-value]
    assert failing.score(steps[0]) == score_step("step 0")


def _session(**kwargs: Any) -> SteeringSession:
    return SteeringSession(
        score_fn=score_step,
        fsm=DifficultyFSM(),
        state_manager=TraceStateManager(),
        injections=create_injections(e_traces_enabled=False),
        **kwargs,
    )


# -- evaluate ------------------------------------------------------------------------------------------------


def test_auroc_matches_pairwise_counting() -> None:
    y = [True, False, True, False, True]
    s = [0.9, 0.1, 0.4, 0.4, 0.2]
    pairs = [(a, b) for a, ya in zip(s, y, strict=True) if ya for b, yb in zip(s, y, strict=True) if not yb]
    expected = sum(1.0 if a > b else 0.5 if a == b else 0.0 for a, b in pairs) / len(pairs)
    assert auroc(y, s) == pytest.approx(expected)


def test_evaluate_cli_writes_json_and_html(
    signal_data: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_json, out_html = tmp_path / "e.json", tmp_path / "e.html"
    argv = [str(signal_data["mini"]), "--labels", str(signal_data["labels"])]
    assert main(["evaluate", *argv, "--json", str(out_json), "--html", str(out_html), "--quiet"]) == 0
    report = json.loads(out_json.read_text())
    assert report["runs"] == len(MINI_RUNS) and report["scorer"] == PILOT_SIZE  # a coding agent's runs: its default
    names = {s["name"] for s in report["signals"]}
    assert {"score at the last step", "most severe FSM state", "characters written", "steps"} <= names
    assert sum(sum(c.values()) for c in report["states_reached"].values()) == len(MINI_RUNS)
    page = out_html.read_text()
    assert "data:image/png;base64," in page and "Calibration" in page
    assert "score at the last step" in capsys.readouterr().out


def test_evaluate_bad_inputs(signal_data: dict[str, Path], tmp_path: Path) -> None:
    with pytest.raises(EvaluationError, match=r"carries an outcome .*; pass --labels FILE"):
        evaluate([signal_data["mini"]])
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps({"nobody": True}))
    with pytest.raises(EvaluationError, match=r"match no run; runs look like: .*; labels look like: nobody"):
        evaluate([signal_data["mini"]], labels=wrong)
    out = tmp_path / "never.json"
    assert main(["evaluate", str(signal_data["mini"]), "--json", str(out), "--quiet"]) == 2
    assert not out.exists()  # nothing half-written


# -- monitors on bash-only agents ----------------------------------------------------------------------------


def _features(command: str, action: str = "bash") -> Any:
    from rb_otel.steering.monitors.features import _compute
    from rb_otel.types import StepRecord

    return _compute(StepRecord(step_index=0, thought="t", action=action, action_input=command, difficulty=0.5))


@pytest.mark.parametrize(
    ("command", "edit"),
    [
        ("sed -i 's/a/b/' src/x.py", True),
        ("cat > fix.py <<'EOF'\nprint(1)\nEOF", True),
        ("echo hi | tee out.txt", True),
        ("git apply fix.diff", True),
        ("grep -n foo src/a.py", False),
        ("python t.py > /dev/null 2>&1", False),
    ],
)
def test_shell_edits_count_as_edits(command: str, edit: bool) -> None:
    assert _features(command).is_edit is edit
    assert _features(command, action="search").is_edit is False  # only shell actions are read as commands


@settings(max_examples=50, deadline=None)
@given(names=st.lists(st.from_regex(r"[a-z]{2,6}\.[a-z]{2,6}(\.[a-z]{2,5})?", fullmatch=True), min_size=1, max_size=6))
def test_names_inside_a_heredoc_are_not_paths(names: list[str]) -> None:
    body = "\n".join(f"x = {name}(1)" for name in names)
    features = _features(f"cat > src/fix.py <<'EOF'\n{body}\nEOF\npython src/fix.py")
    assert features.paths == frozenset({"src/fix.py"}) and features.is_edit


# -- the pilot live, in a LangChain agent, and its relative FSM ----------------------------------------------


def test_pilot_in_a_live_agent_stamps_scorer_and_risk(otel: Otel) -> None:
    from conftest import add, calc_script
    from langchain.agents import create_agent

    rb = ReasonBlocks(scorer="pilot", tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    mw = rb.middleware(agent_name="calc")
    agent = create_agent(ScriptedChatModel(script=calc_script()), [add], middleware=[mw], system_prompt="Add.")
    out = agent.invoke({"messages": [("user", "what is 1+2?")]})
    scored = [dict(s.attributes or {}) for s in otel.spans("chat") if "rb.difficulty" in (s.attributes or {})]
    # a tool that is no shell or editor: a customer-service agent, scored by that kind's default (the size)
    assert len(scored) == 4 and {a["rb.scorer"] for a in scored} == {PILOT_SIZE}
    root = dict(otel.spans("invoke_agent")[0].attributes or {})
    assert root["rb.risk"] == pytest.approx(out["rb_step_log"][-1]["difficulty"], abs=1e-4)
    assert rb.scorer is not None and len(rb.scorer.baselines) == 1  # the run taught its agent's baseline


def test_heuristic_runs_carry_scorer_and_mean_risk(otel: Otel) -> None:
    from conftest import add, calc_script
    from langchain.agents import create_agent

    rb = ReasonBlocks(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    agent = create_agent(
        ScriptedChatModel(script=calc_script()), [add], middleware=[rb.middleware(agent_name="c")], system_prompt="x"
    )
    out = agent.invoke({"messages": [("user", "go")]})
    scores = [e["difficulty"] for e in out["rb_step_log"] if "difficulty" in e]
    assert {dict(s.attributes or {}).get("rb.scorer") for s in otel.spans("chat")} >= {"heuristic"}
    root = dict(otel.spans("invoke_agent")[0].attributes or {})
    assert root["rb.risk"] == pytest.approx(sum(scores) / len(scores), abs=1e-3)


def test_pilot_thresholds_become_relative_to_the_agent() -> None:
    from rb_otel.steering.pilot.baselines import RELATIVE_AFTER

    scorer = PilotScorer()
    calm = [
        ScorerStep(
            thought="Reading the file to find the function.",
            action="bash",
            action_input=f"cat f{i}.py",
            observation="ok",
            tokens=1000 + 100 * i,
        )
        for i in range(6)
    ]
    for _ in range(RELATIVE_AFTER - 1):
        run = scorer.start_run("a")
        assert run.fsm_thresholds() == pilot_fsm_thresholds()  # too few runs: the model's fixed preset
        for step in calm:
            run.score(step)
        run.finish()
    run = scorer.start_run("a")
    for step in calm:
        run.score(step)
    run.finish()
    relative = scorer.start_run("a").fsm_thresholds()
    peaks = sorted(scorer.baselines.get("a").quantile("peak_slow", q) or 0 for q in (0.0, 1.0))
    assert peaks[0] <= relative["slow_threshold"] <= max(peaks[1], relative["fast_threshold"] + 0.1)
    # A run far outside this agent's normal reaches SLOW under its relative thresholds; a normal one does not.
    struggling = [
        ScorerStep(
            thought="Hmm, maybe wait, perhaps the error is elsewhere? Not sure, try again.",
            action="bash",
            action_input="python t.py",
            observation="Traceback",
            error=True,
            tokens=50_000,
        )
        for _ in range(12)
    ]
    states = {}
    for name, steps in (("calm", calm), ("struggling", struggling)):
        one = scorer.start_run("a")
        fsm = DifficultyFSM(**one.fsm_thresholds())
        from rb_otel.types import FSMState

        state, history = FSMState.INIT, []
        worst = state
        for step in steps:
            history.append(one.score(step))
            state = fsm.transition(state, history)
            worst = max(worst, state, key=lambda s: s.severity)
        states[name] = worst.value
    assert states == {"calm": "NORMAL", "struggling": states["struggling"]} and states["struggling"] in ("SLOW", "SKIP")


message_strategy = st.one_of(
    st.fixed_dictionaries({"role": st.just("user"), "content": st.text(max_size=30)}),
    st.fixed_dictionaries(
        {
            "role": st.just("assistant"),
            "content": st.text(max_size=30),
            "tool_calls": st.lists(
                st.fixed_dictionaries(
                    {
                        "id": st.sampled_from(["c1", "c2"]),
                        "name": st.sampled_from(["get", "think"]),
                        "arguments": st.just({"thought": "hm"}),
                    }
                ),
                max_size=2,
            ),
        }
    ),
    st.fixed_dictionaries(
        {
            "role": st.just("tool"),
            "id": st.sampled_from(["c1", "c2"]),
            "content": st.text(max_size=20),
            "error": st.booleans(),
        }
    ),
    st.integers(),  # malformed
)


@settings(max_examples=40, deadline=None)
@given(
    sims=st.lists(
        st.one_of(
            st.fixed_dictionaries(
                {
                    "id": st.uuids().map(str),
                    "task_id": st.integers(0, 5).map(str),
                    "messages": st.lists(message_strategy, max_size=8),
                    "reward_info": st.fixed_dictionaries({"reward": st.sampled_from([0.0, 0.5, 1.0])}),
                }
            ),
            st.just({"id": "broken", "messages": "nope"}),
        ),
        max_size=6,
        unique_by=lambda s: s["id"],
    )
)
def test_tau2_reader_keeps_order_outcomes_and_lists_every_bad_record(sims: list[dict[str, Any]]) -> None:
    import tempfile

    from rb_otel.importers.formats import tau2_bench

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "r.json"
        path.write_text(json.dumps({"info": {"environment_info": {"domain_name": "airline"}}, "simulations": sims}))
        problems: list[Any] = []
        runs = list(tau2_bench.read(path, problems))
    good = [s for s in sims if isinstance(s["messages"], list)]
    assert [r.run_id for r in runs] == [s["id"] for s in good]
    for run, sim in zip(runs, good, strict=True):
        assert (run.outcome == "success") == (sim["reward_info"]["reward"] >= 1)
        assistant = [m for m in sim["messages"] if isinstance(m, dict) and m.get("role") == "assistant"]
        assert len(list(run.steps)) == len(assistant)
        assert run.task_id == f"airline/{sim['task_id']}"
    bad_messages = sum(isinstance(m, int) for s in good for m in s["messages"])
    assert len(problems) == (len(sims) - len(good)) + bad_messages


@settings(max_examples=50, deadline=None)
@given(
    quoted=st.lists(st.from_regex(r"[a-z]{1,5}(/[a-z]{1,5}|\.[a-z]{1,3}){1,3}", fullmatch=True), min_size=1, max_size=4)
)
def test_quoted_arguments_are_patterns_not_paths(quoted: list[str]) -> None:
    from rb_otel.steering.monitors.features import shell_paths

    command = "grep -rn " + " ".join(f"'{q}'" for q in quoted) + ' "x.y" src/app.py > /dev/null'
    assert shell_paths(command) == frozenset({"src/app.py"})


def test_fired_monitors_are_evaluation_events_live_and_replayed(otel: Otel, signal_data: dict[str, Path]) -> None:
    from conftest import add
    from langchain.agents import create_agent

    hard = "Hmm, maybe the error is in src/a.py, not sure; the traceback failed with KeyError again and again."
    rb = ReasonBlocks(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    script = [tool_call("add", {"a": 1, "b": 1}, f"c{i}", content=hard) for i in range(4)] + [AIMessage("done")]
    agent = create_agent(ScriptedChatModel(script=script), [add], middleware=[rb.middleware(agent_name="e")])
    out = agent.invoke({"messages": [("user", "x")]})
    replay(signal_data["mini"], scorer="pilot", tracer_provider=otel.tracer_provider)
    checked = 0
    for span in otel.spans("chat"):
        fired = list((span.attributes or {}).get("rb.monitors_fired", ()))
        events = [dict(e.attributes or {}) for e in span.events if e.name == "gen_ai.evaluation.result"]
        assert [e["gen_ai.evaluation.name"] for e in events] == fired
        assert all(e["gen_ai.evaluation.score.label"] == "fired" and e["gen_ai.evaluation.score.value"] >= 0.6
                   for e in events)  # fmt: skip
        checked += len(events)
    live_fired = sum(len(e["monitors_fired"]) for e in out["rb_step_log"])
    assert live_fired > 0 and checked > live_fired  # live and replayed spans both carry them


# -- every field the readers fill, against the raw record (what a mutation of a key or a default would break) --


def test_mini_swe_agent_fields_match_the_raw_record(signal_data: dict[str, Path]) -> None:
    from rb_otel.importers.formats import mini_swe_agent

    path = sorted(signal_data["mini"].glob("*.traj.json"))[0]
    data = json.loads(path.read_text())
    [run] = list(mini_swe_agent.read(path, []))
    steps = list(run.steps)
    info, messages = data["info"], data["messages"]
    assert (run.run_id, run.task_id, run.source, run.agent_name) == (
        data["instance_id"], data["instance_id"], "mini_swe_agent", "mini-swe-agent"
    )  # fmt: skip
    # the agent: the harness's major version and the configured model without its provider path
    assert run.model == info["config"]["model"]["model_name"].rsplit("/", 1)[-1] and run.synthetic_timing
    assert run.harness == "mini-swe-agent " + info["mini_version"].split(".")[0]
    assert run.task == next(m["content"] for m in messages if m["role"] == "user")[:2000]
    attributes = dict(run.attributes)
    assert len(attributes.pop("rb.metadata.prompt_digest")) == 12
    assert attributes == {
        "rb.metadata.mini_swe_agent.exit_status": info["exit_status"],
        "rb.metadata.mini_swe_agent.api_calls": info["model_stats"]["api_calls"],
        "rb.metadata.mini_swe_agent.agent_type": info["config"]["agent_type"],
        "rb.metadata.mini_swe_agent.version": info["mini_version"],
        "rb.metadata.prompt_variant": "stock",  # mini-swe-agent's own prompt; no report in the copied folder
    }
    assert run.summary == {"exit_status": info["exit_status"], "model_stats": info["model_stats"]}
    assistant = [(i, m) for i, m in enumerate(messages) if m["role"] == "assistant"]
    for step, (i, message) in zip(steps, assistant, strict=True):
        response = message["extra"]["response"]
        usage, raw = response["usage"], response["choices"][0]["message"]
        reply = messages[i + 1]["content"] if i + 1 < len(messages) and messages[i + 1]["role"] == "user" else None
        thought, commands = split_response(message["content"])
        reasoning = raw.get("reasoning") or ""
        assert step.thought == "\n".join(p for p in (reasoning, thought) if p)
        assert (step.input_tokens, step.output_tokens) == (usage["prompt_tokens"], usage["completion_tokens"])
        assert step.tokens == usage["prompt_tokens"] + usage["completion_tokens"]
        assert step.reasoning_tokens == (usage.get("completion_tokens_details") or {}).get("reasoning_tokens")
        assert step.model == response["model"]
        kept = reply if not reply or len(reply) <= 4000 else f"{reply[:2000]}\n{reply[-2000:]}"  # head and tail
        assert step.observation == (kept or None)
        if len(commands) == 1:
            [tool] = step.tools
            assert (tool.name, tool.arguments, tool.result, tool.call_id) == (
                "bash",
                commands[0],
                reply,
                f"step-{step.index}",
            )
            code = (
                int(reply.split("<returncode>")[1].split("</returncode>")[0])
                if reply and "<returncode>" in reply
                else 0
            )
            assert tool.error == (None if code == 0 else f"exit code {code}")
    assert [s.index for s in steps] == list(range(len(steps)))


def test_tau_bench_fields_match_the_raw_record(tmp_path: Path) -> None:
    from rb_otel.importers.formats import tau_bench

    raw = json.loads(fixture("tau_bench/handwritten_results.json").read_text())
    path = tmp_path / "results.json"
    path.write_text(json.dumps(raw))
    runs = list(tau_bench.read(path, []))
    for run, element in zip(runs, raw, strict=True):
        assert (run.source, run.agent_name, run.task_id) == ("tau_bench", "tau-bench", str(element["task_id"]))
        assert run.attributes == {"rb.metadata.reward": float(element["reward"])} and run.synthetic_timing
        assert run.task == next(m["content"] for m in element["traj"] if m["role"] == "user")[:2000]
        assert len(list(run.steps)) == sum(m["role"] == "assistant" for m in element["traj"])
    assert tau_bench.reward_outcome(0.5) == "failure: reward 0.5" and tau_bench.reward_outcome(1) == "success"
    no_trial = {k: v for k, v in raw[0].items() if k != "trial"}
    path.write_text(json.dumps([no_trial]))
    problems: list[Any] = []
    [run] = list(tau_bench.read(path, problems))
    assert run.run_id == f"task-{no_trial['task_id']}-trial-0" and problems == []
    assert tau_bench.reward_outcome(None) == tau_bench.reward_outcome(True) == "unfinished"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (
            "{}",
            "{path}: top level: expected a JSON list of results {{task_id, trial, reward, traj}}, or one such result",
        ),
    ],
)
def test_tau_bench_top_level_message(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "r.json"
    path.write_text(content)
    with pytest.raises(RecordError) as raised:
        replay(path, format="tau_bench")
    assert str(raised.value) == message.format(path=path)


def test_reader_problems_name_the_element_and_the_problem(tmp_path: Path) -> None:
    from rb_otel.importers.formats import mini_swe_agent, tau_bench

    path = tmp_path / "r.json"
    path.write_text(json.dumps([1, {"traj": [], "reward": None}]))
    problems: list[Any] = []
    assert list(tau_bench.read(path, problems)) == []
    assert [str(p) for p in problems] == [
        f"{path}: element 0: expected an object with a 'traj' message list",
        f"{path}: element 1: 'reward' must be a number, got None",
    ]
    traj = tmp_path / "t.traj.json"
    traj.write_text(
        json.dumps({"trajectory_format": "mini-swe-agent-1", "messages": [3, {"role": "user", "content": "go"}]})
    )
    problems = []
    [run] = list(mini_swe_agent.read(traj, problems))
    assert [str(p) for p in problems] == [f"{traj}: messages[0]: expected an object with a 'role'"]
    assert run.task == "go" and run.run_id == "t" and list(run.steps) == []


def test_labels_messages_and_paths(tmp_path: Path) -> None:
    missing = tmp_path / "missing.json"
    with pytest.raises(RecordError) as raised:
        load_labels(missing)
    assert str(raised.value) == f"{missing}: file: no such labels file"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"instances": [{"instance_id": "a", "resolved": True}, {"resolved": True}]}))
    with pytest.raises(RecordError) as raised:
        load_labels(bad)
    assert str(raised.value) == f"{bad}: instances[1]: expected {{instance_id, resolved: true|false}}"
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"a": 1}))
    with pytest.raises(RecordError) as raised:
        load_labels(other)
    assert str(raised.value) == (
        f"{other}: top level: not a labels file: expected SWE-bench results.json ({{'resolved': [ids]}}), "
        "mini-swe-agent results_summary.json ({'instances': [...]}) or {run_id: true|false}"
    )
    for shape in ({"resolved": ["a"], "error": ["b"]}, {"instances": [{"instance_id": "a", "resolved": True}]},
                  {"a": True}):  # fmt: skip
        good = tmp_path / "good.json"
        good.write_text(json.dumps(shape))
        labels = load_labels(good)
        assert labels.path == str(good) and labels.outcome_of("a") is True and len(labels) == len(list(labels))
    mixed = tmp_path / "mixed.json"
    mixed.write_text(json.dumps({"resolved": ["a", "b"], "unresolved": ["b", "c"]}))
    assert [load_labels(mixed).outcome_of(x) for x in "abc"] == [True, True, False]  # resolved wins
    assert load_labels(mixed)["c"] is False
    for not_labels in ([True], {}, {"a": True, "b": 1}):
        other.write_text(json.dumps(not_labels))
        with pytest.raises(RecordError, match="not a labels file"):
            load_labels(other)


def test_mini_swe_agent_fallbacks_and_defaults(tmp_path: Path) -> None:
    from rb_otel.importers.formats import mini_swe_agent

    long_command = "echo " + "x" * 2100
    messages = [
        {"role": "user", "content": "the task"},
        {"role": "assistant", "content": f"THOUGHT: go\n\n```bash\n{long_command}\n```",
         "extra": {"response": {"model": "resp-model", "choices": [{"message": {"reasoning_content": "why"}}]}}},
        {"role": "user", "content": "<returncode>0</returncode>"},
        {"role": "assistant", "content": "THOUGHT: last\n\n```bash\nls\n```"},
    ]  # fmt: skip
    path = tmp_path / "file-name.traj.json"
    data = {"trajectory_format": "mini-swe-agent-1", "instance_id": "the-instance", "messages": messages,
            "info": {"config": {"model": {"model_name": "config-model"}}}}  # fmt: skip
    path.write_text(json.dumps(data))
    [run] = list(mini_swe_agent.read(path, []))
    first, last = run.steps
    assert run.run_id == "the-instance" and run.model == "config-model" and run.task == "the task"
    assert first.thought == "why\ngo" and first.model == "resp-model" and first.action_input == long_command[:2000]
    assert (first.input_tokens, first.output_tokens, first.reasoning_tokens, first.tokens) == (None, None, None, 0)
    assert last.observation is None and last.tools[0].result is None and last.tools[0].error is None
    assert last.model == "" and last.thought == "last"
    del data["instance_id"], data["info"]
    path.write_text(json.dumps(data))
    [run] = list(mini_swe_agent.read(path, []))
    assert run.run_id == "file-name" and run.model == "resp-model"  # the file's name; the responses' model


def test_reader_edges_without_optional_fields(tmp_path: Path) -> None:
    from rb_otel.importers.formats import mini_swe_agent, tau_bench

    bare = tmp_path / "bare.json"
    bare.write_text(
        json.dumps({"trajectory_format": "mini-swe-agent-1", "messages": [{"role": "assistant", "content": "x"}]})
    )
    [run] = list(mini_swe_agent.read(bare, []))
    assert (run.run_id, run.task, run.model) == ("bare", "", "")
    assert run.attributes["rb.metadata.mini_swe_agent.exit_status"] == "" and run.summary["exit_status"] == ""
    results = tmp_path / "results.json"
    results.write_text(json.dumps([{"task_id": 3, "reward": 1, "traj": [{"role": "user", "content": "hi"}, 7]}]))
    problems: list[Any] = []
    [one] = list(tau_bench.read(results, problems))
    assert one.task == "hi" and [str(p) for p in problems] == [
        f"{results}: element 0: traj[1]: expected an object with a 'role'"
    ]


def test_a_replayed_runs_largest_composite_is_its_spans_largest(otel: Otel, signal_data: dict[str, Path]) -> None:
    results = replay(signal_data["mini"], scorer="pilot", tracer_provider=otel.tracer_provider)
    by_run: dict[str, float] = {}
    roots = {s.context.span_id: dict(s.attributes or {})["rb.run_id"] for s in otel.spans("invoke_agent")}
    for span in otel.spans("chat"):
        run_id = roots[span.parent.span_id]  # type: ignore[union-attr]
        composite = float(dict(span.attributes or {}).get("rb.monitor.composite", 0.0))  # type: ignore[arg-type]
        by_run[run_id] = max(by_run.get(run_id, 0.0), composite)
    assert {r.run_id: r.max_composite for r in results} == pytest.approx(by_run)
    assert any(v > 0 for v in by_run.values())
