"""A/B experiments: arm assignment, the off arm as a true passthrough, experiment telemetry, the statistics."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, SystemMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command, interrupt
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from rb_otel import ReasonBlocks
from rb_otel.ab import assign_arm, newcombe_diff_ci, srm_check
from rb_otel.ab.experiment_report import report
from rb_otel.ab.prices import load_prices
from rb_otel.ab.stats import median, wilson_interval, winsorized_mean
from rb_otel.ab.table import format_report
from rb_otel.cli import main as cli_main
from rb_otel.telemetry.otlp_json import OtlpJsonSpanExporter
from rb_otel.testing import ScriptedChatModel, tool_call
from tests.conftest import Otel, add

HARD = (
    "Hmm, maybe the error is in src/a.py, not sure; the traceback failed with KeyError again and again. "
    "I wonder if perhaps it could be the config? Unclear, maybe not."
)


def hard_script(n: int) -> list[AIMessage]:
    return [tool_call("add", {"a": i, "b": 1}, f"c{i}", content=HARD + f" ({i})") for i in range(n)] + [
        AIMessage("done")
    ]


def _by_spec(experiment_id: str, unit_id: str, on_fraction: float) -> str:
    # the spec's proposal, written out independently of the implementation
    digest = hashlib.sha256(f"{experiment_id}\x1f{unit_id}".encode()).digest()
    return "on" if int.from_bytes(digest[:8], "big") / 2**64 < on_fraction else "off"


@given(st.text(min_size=1, max_size=20), st.text(min_size=1, max_size=20), st.floats(0.0, 1.0))
def test_assign_arm_is_the_specified_hash(experiment_id: str, unit_id: str, on_fraction: float) -> None:
    if not experiment_id.strip():
        return
    assert assign_arm(experiment_id, unit_id, on_fraction) == _by_spec(experiment_id, unit_id, on_fraction)
    assert assign_arm(experiment_id, unit_id, on_fraction) == assign_arm(experiment_id, unit_id, on_fraction)


@pytest.mark.parametrize("on_fraction", [0.5, 0.2, 0.9])
def test_a_thousand_units_split_close_to_the_fraction(on_fraction: float) -> None:
    arms = [assign_arm("exp-1", f"user-{i}", on_fraction) for i in range(1000)]
    on = arms.count("on")
    sd = math.sqrt(1000 * on_fraction * (1 - on_fraction))
    assert abs(on - 1000 * on_fraction) < 4 * sd
    assert not srm_check(on, 1000 - on, on_fraction).flagged


def test_fractions_zero_and_one_are_all_off_and_all_on() -> None:
    assert {assign_arm("e", f"u{i}", 0.0) for i in range(200)} == {"off"}
    assert {assign_arm("e", f"u{i}", 1.0) for i in range(200)} == {"on"}


@pytest.mark.parametrize(
    ("experiment_id", "on_fraction", "match"),
    [("", 0.5, "experiment_id"), ("  ", 0.5, "experiment_id"), ("e", 1.5, "on_fraction"), ("e", -0.1, "on_fraction"),
     ("e", math.nan, "on_fraction"), ("e", True, "on_fraction")],
)  # fmt: skip
def test_bad_experiment_arguments_fail_at_the_boundary(experiment_id: str, on_fraction: Any, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        assign_arm(experiment_id, "u", on_fraction)
    with pytest.raises(ValueError, match=match):
        ReasonBlocks().ab_middleware(experiment_id, "u", on_fraction)


@pytest.mark.parametrize(
    ("successes", "n", "low", "high"),
    # Newcombe (1998), Stat. Med. 17:857-872, Table I, method 3 (the score interval without continuity correction)
    [(81, 263, 0.2553, 0.3662), (15, 148, 0.0624, 0.1605), (0, 20, 0.0000, 0.1611), (1, 29, 0.0061, 0.1718)],
)
def test_the_one_wilson_interval_against_newcombes_table(successes: int, n: int, low: float, high: float) -> None:
    from rb_otel.evaluation.metrics import wilson_upper

    lo, hi = wilson_interval(successes, n)
    assert (round(lo, 4), round(hi, 4)) == (low, high)
    assert wilson_upper(successes, n, 1.959963984540054) == hi  # the SKIP budget's bound is the same function


@pytest.mark.parametrize(("successes", "n"), [(0, 20), (1, 29), (2, 371), (9, 371), (123, 10_000), (4_999, 10_000)])
def test_the_wilson_bound_against_scipy_at_small_and_large_n(successes: int, n: int) -> None:
    """SciPy's Wilson interval (a test-only check: scipy is in the dev extra) at z = 1 (the SKIP budget's bound,
    68.27% two-sided) and at 95%: a change to either term of the half-width moves these."""
    from scipy.stats import binomtest

    from rb_otel.evaluation.metrics import wilson_upper

    for z, level in ((1.0, 0.6826894921370859), (1.959963984540054, 0.95)):
        ci = binomtest(successes, n).proportion_ci(confidence_level=level, method="wilson")
        lo, hi = wilson_interval(successes, n, z)
        assert lo == pytest.approx(ci.low, abs=1e-9) and hi == pytest.approx(ci.high, abs=1e-9)
        assert wilson_upper(successes, n, z) == pytest.approx(ci.high, abs=1e-9)
    assert wilson_upper(0, 0) == 1.0


def test_wilson_and_newcombe_against_newcombes_worked_examples() -> None:
    # Newcombe (1998), Stat. Med. 17:857-872: 81/263 -> 0.2553 to 0.3662; 56/70 - 48/80 -> 0.0524 to 0.3339
    lo, hi = wilson_interval(81, 263)
    assert (round(lo, 4), round(hi, 4)) == (0.2553, 0.3662)
    lo, hi = newcombe_diff_ci(56, 70, 48, 80)
    assert (round(lo, 4), round(hi, 4)) == (0.0524, 0.3339)
    # 9/10 - 3/10 (Newcombe's table II, method 10): 0.6 with 0.1705 to 0.8090
    lo, hi = newcombe_diff_ci(9, 10, 3, 10)
    assert (round(lo, 4), round(hi, 4)) == (0.1705, 0.8090)


def test_srm_against_a_hand_computed_chi_square() -> None:
    # 540 vs 460 at 50/50: chi2 = (40^2 + 40^2) / 500 = 6.4, p = erfc(sqrt(3.2)) = 0.01141
    chi, p, flagged, expected_on, expected_off = srm_check(540, 460, 0.5)
    assert chi == pytest.approx(6.4) and p == pytest.approx(0.011412, abs=1e-6)
    assert not flagged and expected_on == expected_off == 500
    assert srm_check(600, 400, 0.5).flagged  # chi2 = 40, p ~ 2.5e-10
    assert srm_check(3, 0, 0.0).flagged and srm_check(0, 3, 0.0).p_value == 1.0


def test_robust_summaries() -> None:
    assert median([]) is None and median([3, 1, 2]) == 2 and median([4, 1, 2, 3]) == 2.5
    values = [10.0] * 19 + [1_000_000.0]
    assert winsorized_mean(values) == 10.0  # one runaway run does not decide the mean
    assert winsorized_mean([1.0, 2.0]) == 1.5


def _arm_agent(otel: Otel, unit: str, **rb_kw: Any) -> tuple[Any, Any, ScriptedChatModel]:
    rb = ReasonBlocks(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider, **rb_kw)
    model = ScriptedChatModel(script=hard_script(6), record_system=True)
    mw = rb.ab_middleware("exp-passthrough", unit, 0.5, agent_name="calc")
    agent = create_agent(model, [add], middleware=[mw], system_prompt="You are a calculator.")
    return agent, mw, model


def _unit_in(arm: str) -> str:
    return next(f"u{i}" for i in range(100) if assign_arm("exp-passthrough", f"u{i}", 0.5) == arm)


def test_the_off_arm_sends_the_callers_exact_system_message_and_the_on_arm_steers(otel: Otel) -> None:
    off_agent, off_mw, off_model = _arm_agent(otel, _unit_in("off"))
    on_agent, on_mw, on_model = _arm_agent(otel, _unit_in("on"))
    assert (off_mw.arm, on_mw.arm) == ("off", "on")
    off_agent.invoke({"messages": [("user", "x")]})
    on_agent.invoke({"messages": [("user", "x")]})
    assert off_model.received_system and all(
        s == SystemMessage("You are a calculator.") for s in off_model.received_system
    )  # no cache marks, no [REASONBLOCKS]: the request as it came in
    on_texts = [b["text"] for s in on_model.received_system if s for b in s.content if isinstance(b, dict)]
    assert any(t.startswith("[REASONBLOCKS]") for t in on_texts)
    # both arms still score and record
    assert any(e.difficulty is not None for e in off_mw.step_log)
    assert all(not e.injections for e in off_mw.step_log) and any(e.injections for e in on_mw.step_log)
    runs = {s.attributes["rb.experiment.arm"]: s for s in otel.spans("invoke_agent") if s.attributes}
    assert set(runs) == {"on", "off"}
    for arm, span in runs.items():
        assert span.attributes is not None
        assert span.attributes["rb.experiment.id"] == "exp-passthrough"
        assert span.attributes["rb.experiment.unit"] == _unit_in(arm)
    assert otel.metric_sum("rb.runs", rb__experiment__arm="off") == 1
    assert otel.metric_sum("rb.runs", rb__experiment__arm="on") == 1


def test_telemetry_is_forced_on_and_the_caller_cannot_relabel_the_arm(otel: Otel) -> None:
    rb = ReasonBlocks(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider, telemetry_enabled=False)
    unit = _unit_in("off")
    mw = rb.ab_middleware("exp-passthrough", unit, metadata={"arm": "on", "experiment_id": "other", "team": "a"})
    agent = create_agent(ScriptedChatModel(script=hard_script(2)), [add], middleware=[mw])
    agent.invoke({"messages": [("user", "x")]})
    [run] = otel.spans("invoke_agent")
    assert run.attributes is not None
    assert run.attributes["rb.experiment.arm"] == "off" and run.attributes["rb.experiment.id"] == "exp-passthrough"
    assert run.attributes["rb.metadata.team"] == "a" and "rb.metadata.arm" not in run.attributes
    assert mw.session is not None and mw.session.run_metadata["metadata"]["arm"] == "off"
    rb.flush()  # reaches the experiment's always-on telemetry too; its metrics are recorded with streaming off
    assert otel.metric_sum("rb.steps") == len(mw.step_log) > 0


def test_a_middleware_without_a_unit_is_its_own_unit_and_names_its_first_run(otel: Otel) -> None:
    rb = ReasonBlocks(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    mw = rb.ab_middleware("exp-x")
    agent = create_agent(ScriptedChatModel(script=hard_script(1)), [add], middleware=[mw])
    out = agent.invoke({"messages": [("user", "x")]})
    [run] = otel.spans("invoke_agent")
    assert run.attributes is not None
    assert run.attributes["rb.experiment.unit"] == out["rb_run_id"] == run.attributes["rb.run_id"]
    assert run.attributes["rb.experiment.arm"] == mw.arm == assign_arm("exp-x", out["rb_run_id"])


def test_experiment_labels_on_metrics_are_bounded(otel: Otel) -> None:
    rb = ReasonBlocks(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    for i in range(20):
        mw = rb.ab_middleware(f"exp-{i}", "u1", agent_name="calc")
        create_agent(ScriptedChatModel(script=hard_script(0)), [add], middleware=[mw]).invoke(
            {"messages": [("user", "x")]}
        )
    labels = {attrs.get("rb.experiment.id") for attrs, _ in otel.metric_points("rb.runs")}
    assert len(labels) == 17 and "_other" in labels  # 16 ids, then one bucket for the rest
    assert len({s.attributes["rb.experiment.id"] for s in otel.spans("invoke_agent") if s.attributes}) == 20


# -- the report, from a real OTLP/JSON file written by the exporter -----------------------------------------------


def _run_experiment(path: Path, units: int, *, on_fraction: float = 0.5, experiment: str = "exp-report") -> None:
    exporter = OtlpJsonSpanExporter(path)
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    rb = ReasonBlocks(tracer_provider=provider, meter_provider=MeterProvider(), telemetry_batch_window=0)
    for i in range(units):
        mw = rb.ab_middleware(experiment, f"user-{i}", on_fraction, agent_name="calc")
        # the off arm needs more calls here, and every fourth off run fails
        n = 2 if mw.arm == "on" else 4
        script = hard_script(n) if mw.arm == "on" or i % 4 else [*hard_script(n)[:-1], AIMessage("giving up")]
        agent = create_agent(ScriptedChatModel(script=script), [add], middleware=[mw])
        with mw:
            agent.invoke({"messages": [("user", "x")]})
            if mw.arm == "off" and i % 4 == 0:
                mw.mark_failure("failure: gave up")
    provider.shutdown()


def test_the_report_from_an_exported_trace_file(tmp_path: Path) -> None:
    traces = tmp_path / "traces.jsonl"
    _run_experiment(traces, 24)
    with traces.open("a") as handle:
        handle.write("{not json\n")  # a malformed line: named, skipped, the rest read
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"scripted": {"input": 3.0, "output": 15.0}}))
    result = report([traces], "exp-report", prices=load_prices(prices))
    arms = [assign_arm("exp-report", f"user-{i}") for i in range(24)]
    on, off = result["arms"]["on"], result["arms"]["off"]
    assert (on["n_runs"], off["n_runs"]) == (arms.count("on"), arms.count("off"))
    failures = sum(1 for i, a in enumerate(arms) if a == "off" and i % 4 == 0)
    assert off["outcomes"]["failure"] == failures and on["outcomes"]["failure"] == 0
    assert on["success_rate"] == 1.0
    assert off["success_rate"] == pytest.approx((arms.count("off") - failures) / arms.count("off"))
    expected_ci = newcombe_diff_ci(arms.count("on"), arms.count("on"), arms.count("off") - failures, arms.count("off"))
    assert result["comparison"]["success_rate"]["ci_95"] == pytest.approx(list(expected_ci))
    assert on["steps_per_run"]["median"] == 3 and off["steps_per_run"]["median"] == 5
    assert result["comparison"]["tokens_per_run_median"]["pct"] < 0  # fewer calls, fewer tokens on the on arm
    assert result["srm"]["observed"] == {"on": arms.count("on"), "off": arms.count("off")}
    assert any("traces.jsonl: line" in p and "not valid JSON" in p for p in result["problems"])
    assert any(c.startswith("few runs") for c in result["caveats"])
    text = format_report(result)
    assert "success rate difference (on - off)" in text and "sample ratio" in text


def test_ab_report_cli_json_and_a_missing_experiment(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    traces = tmp_path / "traces.jsonl"
    _run_experiment(traces, 6)
    assert cli_main(["ab-report", str(traces), "--experiment", "exp-report", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert set(printed) >= {"arms", "comparison", "srm", "timeseries", "caveats"}
    assert cli_main(["ab-report", str(traces), "--experiment", "nope"]) == 2
    err = capsys.readouterr().err
    assert "no runs of experiment 'nope'" in err and "'exp-report' (6 runs)" in err


def test_an_imbalanced_experiment_is_flagged(tmp_path: Path) -> None:
    traces = tmp_path / "traces.jsonl"
    _run_experiment(traces, 40, on_fraction=0.9)  # assigned at 0.9, analysed as if 0.5
    result = report([traces], "exp-report", on_fraction=0.5)
    assert result["srm"]["flagged"] and any(c.startswith("sample ratio mismatch") for c in result["caveats"])
    assert not report([traces], "exp-report", on_fraction=0.9)["srm"]["flagged"]


@tool
def ask_human(question: str) -> str:
    """Ask a human."""
    return str(interrupt(question))


def test_a_resumed_run_keeps_its_arm_and_stays_a_passthrough(otel: Otel) -> None:
    rb = ReasonBlocks(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    unit = _unit_in("off")
    mw = rb.ab_middleware("exp-passthrough", unit, agent_name="calc")
    script = [tool_call("ask_human", {"question": "ok?"}, "q1", content=HARD), AIMessage("Thanks, done.")]
    model = ScriptedChatModel(script=script, record_system=True)
    agent = create_agent(
        model, [ask_human], middleware=[mw], checkpointer=InMemorySaver(), system_prompt="You are a calculator."
    )
    config: Any = {"configurable": {"thread_id": "t-ab"}}
    assert "__interrupt__" in agent.invoke({"messages": [("user", "x")]}, config)
    agent.invoke(Command(resume="yes"), config)
    roots = otel.spans("invoke_agent")
    assert len(roots) == 2
    for root in roots:
        assert root.attributes is not None
        assert (root.attributes["rb.experiment.arm"], root.attributes["rb.experiment.unit"]) == ("off", unit)
    assert len(model.received_system) == 2
    assert all(s == SystemMessage("You are a calculator.") for s in model.received_system)
