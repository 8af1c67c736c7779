"""``rb-otel train``, the pilot/2 model file, the honest early-warning and stopping figures, ``on_skip="stop"``.

The training runs on real labelled runs (the tau2 runs of ``../shared/data/signal``, unpacked for the test) and on
small generated sets that pin down one rule each. The fitted model is checked against its own plain definition:
the live scorer's score equals the training matrix's logistic score, step by step.
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from components import signal_source
from hypothesis import given, settings
from hypothesis import strategies as st

from rb_otel import ReasonBlocks
from rb_otel.backends.pilot import PilotScorer
from rb_otel.cli import main
from rb_otel.evaluation import evaluate
from rb_otel.evaluation.early import RunTrace, at_first_state, early_warning, stopping
from rb_otel.steering.pilot import FEATURES, PILOT_V2, PilotModel
from rb_otel.steering.pilot.text import TextScore, bucket, step_tokens, text_value
from rb_otel.steering.scoring import ScorerStep
from rb_otel.training import TrainingError, train
from rb_otel.training.dataset import LabelledRun
from rb_otel.training.features import extract, prior_of
from rb_otel.training.fit import AVERAGE, CANDIDATES, TEXT_BITS, fit_candidate
from rb_otel.training.train_model import text_blocks


@pytest.fixture(scope="module")
def tau2() -> Path:
    """The tau2 development records (Grok models; the data root's signal/tau2_grok)."""
    return signal_source("tau2_grok")


@pytest.fixture(scope="module")
def trained(tau2: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    out = tmp_path_factory.mktemp("model") / "pilot.json"
    # leave-one-agent-out is tests/test_held_out.py's subject; here the fit and its own figures are
    return train([tau2], out=out, force=True, shuffles=1, permutations=19, held_out_agents=False), out


# -- the fit on real runs ------------------------------------------------------------------------------------


@pytest.mark.heavy  # the module's fit on the 586 tau2 runs, done once for the three
def test_train_reports_out_of_fold_figures_and_writes_a_versioned_model(trained: Any) -> None:
    result, out = trained
    report = result.report
    # tau2 grouped by user scenario, and one customer across domain variants (airline/8, airline-relaxed/8) joined
    assert report.runs == 586 and report.failed == 321 and report.groups == 56
    names = [f.name for f in report.last_step]
    assert names == ["fit, score at the last step", "characters written", "steps"]
    assert all(0.0 <= f.auroc <= 1.0 for f in report.last_step)
    assert [r.k for r in report.early] == [5, 10, 20]
    assert all(r.runs <= report.runs for r in report.early)
    assert {s.rule.split(" (")[0] for s in report.stopping} == {"stop at the first SKIP", "stop at the first SLOW"}
    assert len(report.chosen) == 5 and set(report.chosen) <= {c.name for c in CANDIDATES}
    assert len(report.order_sensitivity) == 1
    data = json.loads(out.read_text())
    assert data["version"] == PILOT_V2 and data["format"] == "rb-otel pilot model/2"
    trained_on = data["trained"]
    assert trained_on["runs"] == 586 and trained_on["failed"] == 321
    assert trained_on["failure_rate"] == round(321 / 586, 4) and trained_on["date"].startswith("20")
    assert "llm_agent:airline|grok-3" in trained_on["agents"]
    assert data["features"] == list(FEATURES)
    assert data["skip"]["max_false_stops"] == 0.02 and data["fsm"]["skip_window"] in (2, 3, 5)
    assert data["skip"]["on"] == float(report.skip_on)  # off when no threshold held the bound on unseen runs
    assert data["trained"]["permutation_test"]["permutations"] == 19
    model = PilotModel.load(out)
    assert model.version == PILOT_V2 and model.fsm["skip_threshold"] >= model.fsm["slow_threshold"]
    if not report.skip_on:  # SKIP off stays off live, however many runs the agent's baseline holds
        assert model.fsm["skip_threshold"] == 1.0 and "off" in " ".join(report.table())
        assert PilotScorer(model=model).start_run("a|m").fsm_thresholds()["skip_threshold"] == 1.0


@pytest.mark.heavy  # the module's fit on the 586 tau2 runs, done once for the three
def test_the_fitted_model_loads_everywhere_a_pilot_does(trained: Any, tau2: Path) -> None:
    _, out = trained
    assert PilotScorer(model=str(out)).name == PILOT_V2
    rb = ReasonBlocks(scorer="pilot", pilot_model=out)
    assert rb.scorer is not None and rb.scorer.name == PILOT_V2
    with pytest.raises(ValueError, match="pilot_model= is a model for scorer='pilot'"):
        ReasonBlocks(pilot_model=out)
    first = max(tau2.glob("*.json"), key=lambda p: p.stat().st_size)
    result = evaluate([first], pilot_model=out)
    assert result.scorer == PILOT_V2 and result.runs


@pytest.mark.heavy  # the module's fit on the 586 tau2 runs, done once for the three
def test_the_thresholds_keep_the_false_stop_budget_on_the_fits_own_scores(trained: Any) -> None:
    result, _ = trained
    from rb_otel.evaluation.metrics import wilson_upper

    skip = next(s for s in result.report.stopping if "SKIP" in s.rule)
    # cross-fitted (chosen without the runs they judge), and held as an upper bound, not only on average
    successful = result.report.runs - result.report.failed
    assert wilson_upper(round(skip.stopped_successful * successful), successful) <= 0.02


# -- the runtime score is the training definition -----------------------------------------------------------


def _runs(n: int, seed: int = 0) -> list[LabelledRun]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        failed = rng.random() < 0.4
        steps = []
        for k in range(rng.randint(3, 14)):
            error = rng.random() < (0.35 if failed else 0.1)
            action = rng.choice(["bash", "search", None])
            steps.append(
                ScorerStep(
                    thought="hmm, maybe " * rng.randint(0, 3) + f"step {k} " + "x" * rng.randint(0, 300),
                    action=action,
                    action_input=f"python t{k % 3}.py && ls" if action == "bash" else '{"q": "a"}' if action else None,
                    observation=("Traceback ValueError exit code: 1" if error else "ok exit code: 0") + " done",
                    error=error,
                    tokens=rng.randint(100, 5000) * (k + 1),
                )
            )
        tokens = [s.tokens for s in steps]
        out.append(LabelledRun(f"r{i}", "test", f"agent-{i % 2}|m", f"g{i % 37}", failed, steps,
                               list(np.maximum.accumulate(tokens)), tokens))  # fmt: skip
    return out


@pytest.mark.parametrize("candidate", [*CANDIDATES, AVERAGE], ids=[c.name for c in [*CANDIDATES, AVERAGE]])
def test_the_live_score_is_the_training_definition(candidate: Any) -> None:
    """Live scoring (PilotRun through the scorer) gives every row the probability of the fit's plain definition
    (``Fitted.logits``), for each family and for the average of them (two blocks of text weights)."""
    runs = _runs(90)
    prior = prior_of(runs)
    data = extract(runs, prior)
    fitted = fit_candidate(data, range(60), candidate)
    blocks = text_blocks(fitted)
    if candidate is AVERAGE:
        assert [b.value for b in blocks] == ["log", "tf"]  # both ways of counting, in one model
    model = PilotModel(fitted.intercept, tuple(fitted.dense), prior, {}, version=PILOT_V2, features=FEATURES,
                       text=blocks[0] if blocks else None, more_text=blocks[1:])  # fmt: skip
    saved = model.as_dict()  # the file keeps every block
    assert [b.value for b in PilotModel.from_mapping(saved).text_blocks] == [b.value for b in blocks]
    assert PilotModel.from_mapping(saved).as_dict() == saved
    scorer = PilotScorer(model=model)  # a fresh store: baselines learn in the same order as extract()
    expected = 1.0 / (1.0 + np.exp(-fitted.logits(data)))
    got = []
    for run in runs:
        live = scorer.start_run(run.agent)
        got += [live.score(step) for step in run.steps]
        live.finish()
    assert np.allclose(got, expected, rtol=1e-9, atol=1e-9)


TOKENS = st.sampled_from(["act:bash", "err", "obs:fail", "obs:ok", "cmd:ls", "rc:1"])


@settings(max_examples=60, deadline=None)
@given(steps=st.lists(st.lists(TOKENS, max_size=6), min_size=1, max_size=25), kind=st.sampled_from(["log", "tf"]))
def test_the_incremental_text_score_is_the_plain_sum(steps: list[list[str]], kind: str) -> None:
    weights = {bucket(t, TEXT_BITS): w for t, w in (("act:bash", 0.3), ("err", 1.2), ("obs:fail", -0.7), ("rc:1", 2.0))}
    score = TextScore(weights, TEXT_BITS, kind)
    counts: dict[int, int] = {}
    for n, tokens in enumerate(steps, start=1):
        score.add(tokens)
        for t in tokens:
            counts[bucket(t, TEXT_BITS)] = counts.get(bucket(t, TEXT_BITS), 0) + 1
        plain = sum(w * text_value(kind, counts.get(b, 0), n) for b, w in weights.items() if counts.get(b, 0))
        assert math.isclose(score.value, plain, rel_tol=1e-9, abs_tol=1e-12)


def test_step_tokens_read_what_the_agent_did_and_saw() -> None:
    step = ScorerStep(
        thought="I will run the tests",
        action="bash",
        action_input="cd /repo && timeout 60 python -m pytest tests/ | tail -5",
        observation="<returncode>1</returncode><output>FAILED for user_4417 zx9k1 - AssertionError\n2 failed",
        error=True,
    )
    tokens = step_tokens(step, repeated=True)
    assert {"act:bash", "repeat", "err", "cmd:cd", "cmd:python", "cmd:tail", "rc:1", "exc:AssertionError"} <= set(
        tokens
    )
    assert "obs:failed" in tokens and "obs:user" not in tokens and not any("zx" in t for t in tokens)  # ids left out
    structured = step_tokens(
        ScorerStep(thought="", action="cancel_reservation", action_input='{"reservation_id": "X"}')
    )
    assert structured == ["act:cancel_reservation", "arg:reservation_id"]


# -- saying so plainly ---------------------------------------------------------------------------------------


def _write_steplog(path: Path, runs: list[tuple[str, bool, list[str]]]) -> None:
    records = []
    for run_id, failed, thoughts in runs:  # JSONL: a run header, then its entries
        records.append({"run_id": run_id, "outcome": "failure: x" if failed else "success"})
        records += [{"step": i, "fsm_state": "NORMAL", "thought_preview": t} for i, t in enumerate(thoughts)]
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n")


def test_too_few_runs_are_said_plainly_and_not_written(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rng = random.Random(3)
    runs = [(f"run{i}", rng.random() < 0.5, [f"thinking {k} " * rng.randint(1, 9) for k in range(rng.randint(2, 9))])
            for i in range(40)]  # fmt: skip
    source = tmp_path / "runs.jsonl"
    _write_steplog(source, runs)
    out = tmp_path / "pilot.json"
    assert main(["train", str(source), "--out", str(out), "--quiet"]) == 1
    captured = capsys.readouterr()
    assert "only 40 runs" in captured.out and "do not trust this fit yet" in captured.out
    assert "not written" in captured.err and not out.exists()
    assert main(["train", str(source), "--out", str(out), "--quiet", "--force"]) == 0
    assert out.exists() and "not trusted: written because of --force" in capsys.readouterr().err
    assert PilotModel.load(out).trained["trusted"] is False


def test_a_constant_model_is_never_silent() -> None:
    from rb_otel.training.features import PrefixData
    from rb_otel.training.report import TrainingReport

    runs = _runs(40)
    rows = sum(len(r.steps) for r in runs)
    run_of = np.repeat(np.arange(len(runs)), [len(r.steps) for r in runs])
    step_of = np.concatenate([np.arange(1, len(r.steps) + 1) for r in runs])
    flat = PrefixData(runs, np.zeros((rows, len(FEATURES))), [[] for _ in range(rows)], run_of, step_of)
    fitted = fit_candidate(flat, range(len(runs)), CANDIDATES[1])  # nothing varies: every weight stays zero
    assert fitted.constant
    report = TrainingReport(runs=400, failed=100, groups=40, agents={}, sources={}, folds=5, chosen=[],
                            last_step=[], early=[], stopping=[], order_sensitivity=[])  # fmt: skip
    from rb_otel.training.report import Figure

    report.last_step = [Figure("fit", 0.6, 0.5, 0.7, 400), Figure("chars", 0.55, 0.5, 0.6, 400, True)]
    report.check(10, constant=fitted.constant)
    assert report.warnings == ["the fitted model is a constant (every weight is zero): it says the same of every run"]
    assert not report.trusted


def test_nothing_to_fit_is_an_error_that_says_what_to_pass(tmp_path: Path) -> None:
    source = tmp_path / "good.jsonl"
    _write_steplog(source, [(f"r{i}", False, ["ok"]) for i in range(5)])
    with pytest.raises(TrainingError, match="all 5 labelled runs succeeded"):
        train([source])
    with pytest.raises(TrainingError, match="max_false_stops"):
        train([source], max_false_stops=1.5)


# -- early warning and stopping: one definition -------------------------------------------------------------


def test_early_warning_compares_with_baselines_from_the_same_prefix() -> None:
    # the score at step 2 separates the outcomes perfectly; characters so far point the other way
    runs = [
        RunTrace(True, [0.1, 0.9, 0.9], [10, 20, 30], [5, 6, 7], [1, 1, 1]),
        RunTrace(True, [0.2, 0.8], [12, 25], [5, 9], [1, 1]),
        RunTrace(False, [0.3, 0.1, 0.2, 0.1], [90, 180, 270, 300], [50, 60, 70, 80], [1, 1, 1, 1]),
        RunTrace(False, [0.1], [100], [60], [1]),  # not going at step 2: left out there
    ]
    [row] = early_warning(runs, steps=(2,))
    assert (row.runs, row.failed, row.score, row.chars, row.prompt_tokens) == (3, 2, 1.0, 0.0, 0.0)
    assert early_warning(runs, steps=(4,)) == []  # one outcome left: no row


def test_stopping_counts_false_stops_and_what_is_saved() -> None:
    runs = [
        RunTrace(True, [0.1] * 10, [0] * 10, [0] * 10, [100] * 10, ("NORMAL",) * 3 + ("SKIP",) * 7),
        RunTrace(False, [0.1] * 4, [0] * 4, [0] * 4, [100] * 4, ("NORMAL", "SLOW", "NORMAL", "NORMAL")),
        RunTrace(False, [0.1] * 6, [0] * 6, [0] * 6, [100] * 6, ("NORMAL",) * 6),
    ]
    skip = stopping(runs, "skip", at_first_state("SKIP"))
    assert (skip.stopped_failing, skip.stopped_successful) == (1.0, 0.0)
    assert skip.steps_saved == pytest.approx(6 / 20) and skip.tokens_saved == pytest.approx(600 / 2000)
    slow = stopping(runs, "slow", at_first_state("SLOW"))  # SKIP counts as SLOW or worse
    assert (slow.stopped_failing, slow.stopped_successful) == (1.0, 0.5)
    assert slow.steps_saved == pytest.approx((6 + 2) / 20)


def test_evaluate_reports_each_signal_once_with_prefix_baselines_and_stopping(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rng = random.Random(5)
    runs = [(f"run{i}", i % 2 == 0, [f"maybe try {k} " * rng.randint(1, 5) for k in range(rng.randint(5, 25))])
            for i in range(40)]  # fmt: skip
    source = tmp_path / "runs.jsonl"
    _write_steplog(source, runs)
    out = tmp_path / "e.json"
    assert main(["evaluate", str(source), "--json", str(out), "--quiet"]) == 0
    text = capsys.readouterr().out
    report = json.loads(out.read_text())
    names = [s["name"] for s in report["signals"]]
    assert "run risk" not in names  # the pilot's run risk is its last score: one row, not two
    assert len(names) == len(set(names))
    assert [r["step"] for r in report["early_warning"]] == [5, 10, 20]
    assert {"auroc_score", "auroc_chars_so_far", "auroc_prompt_tokens_so_far"} <= set(report["early_warning"][0])
    assert [s["rule"] for s in report["stopping"]] == ["stop at the first SKIP", "stop at the first SLOW"]
    assert report["agents"][0]["agent"] == "|" and report["agents"][0]["earlier_runs_when_scored"] == [0, 39]
    assert "early warning (runs still going at step k" in text and "if runs had been stopped" in text
    assert main(["evaluate", str(source), "--json", "--quiet"]) == 0
    assert json.loads(capsys.readouterr().out)["runs"] == 40  # --json alone: only the JSON, on stdout


# -- your own traces -------------------------------------------------------------------------------------------


@pytest.fixture
def exported_runs(tmp_path: Path) -> tuple[Path, dict[str, bool]]:
    from conftest import add
    from langchain.agents import create_agent
    from langchain_core.messages import AIMessage

    from rb_otel.telemetry.setup import configure
    from rb_otel.testing import ScriptedChatModel, tool_call

    traces = tmp_path / "traces.jsonl"
    providers = configure(service_name="train-test", traces_file=traces, metrics_file=tmp_path / "m.jsonl")
    rb = ReasonBlocks(tracer_provider=providers.tracer_provider, meter_provider=providers.meter_provider,
                      capture_content=True)  # fmt: skip
    labels = {}
    for i in range(6):
        calls = 2 + i % 3
        script = [tool_call("add", {"a": k, "b": i}, f"c{k}", content=f"adding pass {k}") for k in range(calls)]
        mw = rb.middleware(agent_name="calc", run_id=f"run-{i}", metadata={"task_id": f"t{i % 3}"})
        agent = create_agent(ScriptedChatModel(script=[*script, AIMessage("done")]), [add], middleware=[mw])
        agent.invoke({"messages": [("user", "add")]})
        labels[f"run-{i}"] = i % 2 == 0
    rb.close()
    providers.shutdown()
    return traces, labels


def test_evaluate_and_train_read_rb_otels_own_traces(
    exported_runs: tuple[Path, dict[str, bool]], tmp_path: Path
) -> None:
    traces, labels = exported_runs
    by_outcome = evaluate([traces])  # outcomes from rb.outcome: every run succeeded
    assert len(by_outcome.runs) == 6 and not any(r.failed for r in by_outcome.runs)
    labels_file = tmp_path / "labels.json"
    labels_file.write_text(json.dumps(labels))
    joined = evaluate([traces], labels=labels_file)  # labels joined by rb.run_id
    assert sorted((r.run_id, not r.failed) for r in joined.runs) == sorted(labels.items())
    assert {r.group for r in joined.runs} == {"t0", "t1", "t2"}  # grouped by rb.metadata.task_id
    assert all(r.steps >= 3 for r in joined.runs)
    result = train([traces], labels=labels_file, shuffles=0, folds=3)
    assert result.report.runs == 6 and any("only 6 runs" in w for w in result.report.warnings)


# -- on_skip="stop" ----------------------------------------------------------------------------------------------

_EAGER = {"fast_threshold": 0.0, "slow_threshold": 0.01, "skip_threshold": 0.02, "hysteresis_margin": 0.0,
          "slow_window": 1, "skip_window": 1}  # fmt: skip


def _struggling_agent(rb: ReasonBlocks, **kwargs: Any) -> Any:
    from conftest import add
    from langchain.agents import create_agent
    from langchain_core.messages import AIMessage

    from rb_otel.testing import ScriptedChatModel, tool_call

    script = [tool_call("add", {"a": i, "b": 1}, f"c{i}", content="Hmm, maybe wait? not sure, try again") for i in
              range(8)]  # fmt: skip
    model = ScriptedChatModel(script=[*script, AIMessage("The answer is 9.")])
    return create_agent(model, [add], middleware=[rb.middleware(agent_name="s", **kwargs)])


def test_on_skip_stop_ends_the_run_with_a_message_the_caller_recognises(otel: Any) -> None:
    from rb_otel.integrations.langchain import was_stopped

    rb = ReasonBlocks(fsm_thresholds=_EAGER, tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    out = _struggling_agent(rb, on_skip="stop").invoke({"messages": [("user", "go")]})
    final = out["messages"][-1]
    assert was_stopped(final) and not final.tool_calls and "on_skip='stop'" in final.content
    log = out["rb_step_log"]
    assert log[-1]["fsm_state"] == "SKIP" and "on_skip='stop'" in log[-1]["skipped_reason"]
    root = otel.spans("invoke_agent")[0]
    attributes = dict(root.attributes or {})
    assert attributes["rb.outcome"] == "stopped" and attributes["rb.entered_skip"] is True
    assert "error.type" not in attributes
    assert [e.name for e in root.events].count("rb.run.stopped") == 1
    assert len(otel.spans("chat")) == len(log) - 1  # the stopped step made no model call
    assert otel.metric_sum("rb.runs", rb__outcome="stopped") == 1
    assert otel.metric_sum("rb.runs.skip", gen_ai__agent__name="s") == 1


def test_on_skip_escalate_is_the_default_and_unknown_values_are_refused(otel: Any) -> None:
    rb = ReasonBlocks(fsm_thresholds=_EAGER, tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    out = _struggling_agent(rb).invoke({"messages": [("user", "go")]})
    assert not out["messages"][-1].response_metadata.get("rb_otel_stopped")
    assert dict(otel.spans("invoke_agent")[0].attributes or {})["rb.outcome"] == "success"
    with pytest.raises(ValueError, match="on_skip must be one of 'escalate', 'stop'"):
        rb.middleware(on_skip="halt")


def test_on_skip_stop_through_the_model_wrapper(otel: Any) -> None:
    from conftest import add
    from langchain.agents import create_agent

    from rb_otel.integrations.langchain import was_stopped
    from rb_otel.testing import ScriptedChatModel, tool_call

    rb = ReasonBlocks(fsm_thresholds=_EAGER, tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    script = [tool_call("add", {"a": i, "b": 1}, f"c{i}", content="Hmm, maybe not sure") for i in range(8)]
    model = rb.chat_model(ScriptedChatModel(script=script), agent_name="w", on_skip="stop")
    out = create_agent(model, [add]).invoke({"messages": [("user", "go")]})
    assert was_stopped(out["messages"][-1])
    assert dict(otel.spans("invoke_agent")[0].attributes or {})["rb.outcome"] == "stopped"


def test_a_run_is_trained_under_the_key_its_worker_scored_it_by(tmp_path: Path) -> None:
    """The worker looks an agent's learned model up by ``agent_key(agent_name, model=...)``; its calls may name
    another model (a routed call, a dated snapshot). The run span says the worker's key (``rb.agent.key``) and the
    fit keys the run by it, so the model ``train --watch`` writes is the one the workers look up."""
    from conftest import add
    from langchain.agents import create_agent
    from langchain_core.messages import AIMessage

    from rb_otel.steering.agent_keys import agent_key
    from rb_otel.telemetry.setup import configure
    from rb_otel.testing import ScriptedChatModel, tool_call
    from rb_otel.training.dataset import read_dataset

    traces = tmp_path / "traces.jsonl"
    providers = configure(service_name="key-test", traces_file=traces, metrics_file=tmp_path / "m.jsonl")
    rb = ReasonBlocks(scorer="pilot", tracer_provider=providers.tracer_provider,
                      meter_provider=providers.meter_provider, capture_content=True)  # fmt: skip
    script = [tool_call("add", {"a": 1, "b": 2}, "c0", content="adding"), AIMessage("done")]
    mw = rb.middleware(agent_name="calc", model="openai:GPT-4o", run_id="run-1")
    agent = create_agent(ScriptedChatModel(script=script, model_name="gpt-4o-2024-08-06"), [add], middleware=[mw])
    agent.invoke({"messages": [("user", "add")]})
    rb.close()
    providers.shutdown()
    labels = tmp_path / "labels.json"
    labels.write_text(json.dumps({"run-1": True}))
    (run,) = read_dataset([traces], labels=labels).runs
    assert run.agent == agent_key("calc", "openai:GPT-4o") == "calc|gpt-4o"  # not the calls' gpt-4o-2024-08-06
    assert "rb.agent.key" in traces.read_text()
