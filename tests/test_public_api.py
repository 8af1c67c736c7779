"""The 1.0 surface: one public API, no alias left for a name that moved (CHANGELOG.md lists each), ReasonBlocks'
own compatibility arguments accepted with a warning, no ignored argument in silence, and the GenAI events as the
conventions emit them."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest
from conftest import Otel, add, calc_script

import rb_otel
from rb_otel import ReasonBlocks, ReasonBlocksConfig
from rb_otel.testing import ScriptedChatModel, tool_call


def test_the_public_face_is_what_users_build_with() -> None:
    assert len(rb_otel.__all__) <= 30
    for name in rb_otel.__all__:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert getattr(rb_otel, name) is not None  # every public name resolves, none warns
    for command in ("configure", "replay", "evaluate", "train", "render_report", "ab_report"):
        assert callable(getattr(rb_otel, command))
    assert {"SteeringSession", "DifficultyFSM", "TraceStateManager", "E1Injection", "clear_caches"}.isdisjoint(
        rb_otel.__all__
    )


#: Names ``rb_otel`` exported before they moved (CHANGELOG.md): each is gone from here, with no warning first.
FORMER_NAMES = (
    "BaseInjection", "DifficultyFSM", "E1Injection", "E2Injection", "E3Injection", "HashingEmbeddings",
    "InMemoryPatternStore", "LocalMonitorBackend", "MonitorBackend", "MonitorSteeringInjection", "Pattern",
    "PatternStore", "SteeringSession", "TraceStateManager", "clear_caches", "create_injections", "render_pattern",
    "score_step", "ETrace", "MonitorEvaluation", "PendingInjection", "StepRecord", "TraceState",
    "ReasonBlocksMiddleware", "build_steps_from_messages", "compress_tool_output", "loop_signals",
    "run_messages_agent_loop", "arun_messages_agent_loop", "claude_agent_telemetry",
)  # fmt: skip


@pytest.mark.parametrize("name", FORMER_NAMES)
def test_a_name_that_moved_out_of_rb_otel_is_gone_without_a_warning(name: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(AttributeError, match=rf"module 'rb_otel' has no attribute '{name}'"):
            getattr(rb_otel, name)
    assert name not in rb_otel.__all__ and not hasattr(rb_otel, "_MOVED")


def test_the_engine_lives_in_rb_otel_steering() -> None:
    from rb_otel import steering

    for name in ("SteeringSession", "DifficultyFSM", "TraceStateManager", "create_injections", "LocalMonitorBackend",
                 "InMemoryPatternStore", "clear_caches", "score_step", "render_pattern"):  # fmt: skip
        assert name in steering.__all__ and getattr(steering, name) is not None


def test_reasonblocks_own_compatibility_arguments_warn_and_keep_working_and_ours_are_gone(otel: Otel) -> None:
    from rb_otel.steering import score_step

    with pytest.raises(TypeError, match="unexpected keyword argument 'score_fn'"):
        ReasonBlocks(score_fn=score_step)  # type: ignore[call-arg]  # rb-otel's own former name: scorer=
    rb = ReasonBlocks(scorer=score_step)
    assert rb.scorer_name == "heuristic" and rb.score_fn is score_step  # the same documented text path
    with pytest.warns(DeprecationWarning, match=r"use telemetry_enabled="):
        quiet = ReasonBlocks(live_streaming_enabled=False)
    assert quiet.telemetry_enabled is False and quiet.live_streaming_enabled is False
    with pytest.warns(DeprecationWarning, match=r"monitor_names=.*never had an effect"):
        ReasonBlocks(monitor_names=["loop"])
    with pytest.warns(DeprecationWarning, match=r"ReasonBlocksConfig\(enable_distillation=\.\.\.\) does nothing"):
        ReasonBlocksConfig(enable_distillation=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ReasonBlocksConfig()  # the defaults do not warn


def test_a_text_function_is_a_scorer_too() -> None:
    def half(thought: str) -> float:
        return 0.5

    rb = ReasonBlocks(scorer=half)
    session = rb.new_session()
    session.end_step(session.begin_step(thought="anything"))
    assert session.step_log[0].difficulty == 0.5 and rb.scorer_name == "half"


def test_ignored_combinations_are_said(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("WARNING", logger="rb_otel"):
        ReasonBlocks(export_runs_to_api=True)
        ReasonBlocks(steering_budget_s=0.5)
        ReasonBlocks(telemetry_enabled=False, capture_content=True)
    said = " | ".join(r.getMessage() for r in caplog.records)
    assert "export_runs_to_api=True needs an api_key" in said
    assert "steering_budget_s bounds rb-api calls" in said
    assert "capture_content is set but telemetry_enabled=False" in said
    with pytest.raises(ValueError, match="evaluation_events: expected 'logs', 'span' or 'both'"):
        ReasonBlocks(evaluation_events="nowhere")


def test_one_way_from_a_configuration(otel: Otel) -> None:
    from rb_otel.integrations.langchain import ReasonBlocksMiddleware
    from rb_otel.integrations.langchain.general_monitor import GeneralMonitorMiddleware
    from rb_otel.integrations.langchain.token_saving import TokenSavingMiddleware

    config = ReasonBlocksConfig(enable_e1=False, enable_general_monitor=True, monitor_task_profile="qa")
    stack = ReasonBlocks.from_config(config, tracer_provider=otel.tracer_provider, agent_name="cfg")
    assert [type(m) for m in stack][1:] == [GeneralMonitorMiddleware, TokenSavingMiddleware]
    assert isinstance(stack[0], ReasonBlocksMiddleware)
    from langchain.agents import create_agent

    agent = create_agent(ScriptedChatModel(script=calc_script()), [add], middleware=stack)
    out = agent.invoke({"messages": [("user", "add")]})
    assert out["messages"][-1].content == "The answer is 30."
    assert not any("E1Injection" in e.get("injection_sources", []) for e in out["rb_step_log"])
    assert dict(otel.spans("invoke_agent")[0].attributes or {})["rb.task_profile"] == "qa"


def test_experiment_runs_record_their_on_fraction_and_the_report_reads_it(tmp_path: Path) -> None:
    from rb_otel.cli import main
    from rb_otel.telemetry.setup import configure

    traces = tmp_path / "t.jsonl"
    providers = configure(traces_file=traces, metrics_file=tmp_path / "m.jsonl")
    rb = ReasonBlocks(tracer_provider=providers.tracer_provider, meter_provider=providers.meter_provider)
    from langchain.agents import create_agent

    for unit in range(12):
        mw = rb.ab_middleware("frac", unit_id=f"u{unit}", on_fraction=0.25, agent_name="ab")
        create_agent(ScriptedChatModel(script=calc_script(1)), [add], middleware=[mw]).invoke(
            {"messages": [("user", "x")]}
        )
    providers.shutdown()
    spans = [json.loads(line) for line in traces.read_text().splitlines()]
    fractions = {a["value"]["doubleValue"] for d in spans for r in d["resourceSpans"] for s in r["scopeSpans"]
                 for sp in s["spans"] for a in sp["attributes"] if a["key"] == "rb.experiment.on_fraction"}  # fmt: skip
    assert fractions == {0.25}
    report = rb_otel.ab_report([traces], "frac")
    assert report["srm"]["on_fraction"] == 0.25 and not any("assumed 0.5" in c for c in report["caveats"])
    assert main(["ab-report", str(traces), "--experiment", "frac", "--json"]) == 0


def test_the_cli_json_option_means_one_thing_everywhere(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from rb_otel.cli import build_parser

    parser = build_parser()
    for command in (["evaluate", "x"], ["ab-report", "x", "--experiment", "e"], ["baselines", "x"], ["train", "x"]):
        assert parser.parse_args([*command, "--json"]).json == "-"
        assert parser.parse_args([*command, "--json", "out.json"]).json == "out.json"
        assert parser.parse_args(command).json is None


# -- GenAI events as log records, parented to their span -----------------------------------------------------


def _struggle(rb: ReasonBlocks) -> dict[str, Any]:
    from langchain.agents import create_agent
    from langchain_core.messages import AIMessage

    hard = "Hmm, maybe the error is in src/a.py, not sure; the traceback failed with KeyError again and again."
    script = [tool_call("add", {"a": 1, "b": 1}, f"c{i}", content=hard) for i in range(4)] + [AIMessage("done")]
    agent = create_agent(ScriptedChatModel(script=script), [add], middleware=[rb.middleware(agent_name="e")])
    result: dict[str, Any] = agent.invoke({"messages": [("user", "x")]})
    return result


@pytest.mark.parametrize("mode", ["logs", "span", "both"])
def test_evaluation_results_are_log_based_events_parented_to_their_chat_span(otel: Otel, mode: str) -> None:
    rb = ReasonBlocks(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider,
                      logger_provider=otel.logger_provider, evaluation_events=mode)  # fmt: skip
    out = _struggle(rb)
    fired = sum(len(e["monitors_fired"]) for e in out["rb_step_log"])
    assert fired > 0
    chats = {s.context.span_id: s for s in otel.spans("chat")}
    logged = otel.logs("gen_ai.evaluation.result")
    on_spans = [e for s in chats.values() for e in s.events if e.name == "gen_ai.evaluation.result"]
    assert len(logged) == (fired if mode in ("logs", "both") else 0)
    assert len(on_spans) == (fired if mode in ("span", "both") else 0)
    for record in logged:
        span = chats[record.span_id]  # parented to the chat span whose monitors fired
        assert record.trace_id == span.context.trace_id
        assert record.attributes["gen_ai.evaluation.name"] in span.attributes["rb.monitors_fired"]
        assert record.attributes["gen_ai.evaluation.score.label"] == "fired"


def test_replayed_evaluations_are_log_based_events_too(otel: Otel) -> None:
    from format_fixtures import fixture

    from rb_otel.importers import replay

    record = fixture("tau_bench/handwritten_single_run_loopy.json")  # loops: monitors fire on it
    replay(record, scorer="heuristic", tracer_provider=otel.tracer_provider, logger_provider=otel.logger_provider)
    fired = sum(len(dict(s.attributes or {}).get("rb.monitors_fired", ())) for s in otel.spans("chat"))
    assert fired > 0 and len(otel.logs("gen_ai.evaluation.result")) == fired


# -- names against the conventions package -----------------------------------------------------------------------


def test_the_gen_ai_names_are_the_conventions_own() -> None:
    from opentelemetry.semconv._incubating.attributes import error_attributes, gen_ai_attributes, server_attributes
    from opentelemetry.semconv._incubating.metrics import gen_ai_metrics
    from opentelemetry.semconv.schemas import Schemas

    from rb_otel.telemetry import names
    from rb_otel.telemetry.hub import SCHEMA_URL

    known = {
        str(v)
        for module in (gen_ai_attributes, error_attributes, server_attributes, gen_ai_metrics)
        for k, v in vars(module).items()
        if k.isupper() and isinstance(v, str)
    }
    ours = {v for k, v in vars(names).items() if k.isupper() and isinstance(v, str) and v.startswith("gen_ai.")}
    # our own additions to the gen_ai namespace, each with its reason (docs/telemetry.md), and the conventions'
    # event names, which the Python package does not generate constants for (they are in its YAML only)
    beyond = {"gen_ai.invoke_agent.duration", "gen_ai.execute_tool.duration"}
    beyond |= {"gen_ai.evaluation.result", "gen_ai.client.inference.operation.details"}
    assert sorted(ours - known - beyond) == []
    assert "error.type" in known and names.ERROR_TYPE == "error.type"
    assert SCHEMA_URL in {s.value for s in Schemas}


def test_tracer_meter_and_logger_carry_the_schema_url(otel: Otel) -> None:
    from rb_otel.telemetry.hub import SCHEMA_URL

    rb = ReasonBlocks(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider,
                      logger_provider=otel.logger_provider)  # fmt: skip
    _struggle(rb)
    assert {s.instrumentation_scope.schema_url for s in otel.exporter.get_finished_spans()} == {SCHEMA_URL}
    data = otel.reader.get_metrics_data()
    assert data is not None
    assert {sm.scope.schema_url for rm in data.resource_metrics for sm in rm.scope_metrics} == {SCHEMA_URL}


def test_importing_rb_otel_never_imports_the_engine_or_a_framework() -> None:
    heavy = "{'langchain', 'langgraph', 'scipy', 'redis'}"
    loaded = "{m.split('.')[0] for m in sys.modules}"
    code = f"import sys, rb_otel; rb_otel.ReasonBlocks; print(sorted({loaded} & {heavy}))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert done.stdout.strip() == "[]"


def test_the_public_names_are_listed_once() -> None:
    # the stub is the one list: type checkers read it, the package loads each name from it, __all__ is its names
    from rb_otel.lazy_names import names_in_stub

    stub = Path(rb_otel.__file__).with_suffix(".pyi")
    homes = names_in_stub(stub, "rb_otel")
    assert rb_otel.__all__ == sorted(homes) and "__version__" in homes
    assert "_LAZY" not in vars(rb_otel) and "TYPE_CHECKING" not in Path(rb_otel.__file__).read_text(encoding="utf-8")
    for name, module in homes.items():
        assert getattr(rb_otel, name) is getattr(__import__(module, fromlist=[name]), name)
