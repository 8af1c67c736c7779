"""The shapes a LangGraph deployment has beyond the plain agent loop: model calls made by other middleware and by
tools, retries and fallbacks, providers that report no usage. Real LangChain agents and middleware, scripted
models, spans in memory."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from conftest import Otel, add, calc_script
from langchain.agents import create_agent
from langchain_core.messages import AIMessage
from usage_matrix import _InOrder

from rb_otel import ReasonBlocks
from rb_otel.ab.experiment_report import report as ab_report
from rb_otel.telemetry.otlp_json import OtlpJsonSpanExporter
from rb_otel.testing import ScriptedChatModel


def _attributes(span: Any) -> dict[str, Any]:
    return dict(span.attributes or {})


# -- unknown usage is not zero --------------------------------------------------------------------------------


def test_calls_without_usage_leave_no_usage_attributes_and_are_counted(otel: Otel) -> None:
    rb = ReasonBlocks(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    model = ScriptedChatModel(script=calc_script(2), usage=False)
    create_agent(model, [add], middleware=[rb.middleware(agent_name="calc")]).invoke({"messages": [("user", "x")]})
    rb.telemetry.flush()
    chats = otel.spans("chat ")
    assert len(chats) == 3
    for chat in chats:
        keys = set(_attributes(chat))
        assert not {k for k in keys if k.startswith("gen_ai.usage.")} and "rb.tokens" not in keys
    (run,) = otel.spans("invoke_agent")
    attributes = _attributes(run)
    assert attributes["rb.usage.unreported"] == 3
    assert "rb.tokens" not in attributes and "gen_ai.usage.input_tokens" not in attributes
    assert otel.metric_points("rb.run.tokens") == []  # no run total recorded: it is unknown


def test_a_run_with_some_calls_unreported_says_how_many(otel: Otel) -> None:
    rb = ReasonBlocks(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    reporting = ScriptedChatModel(script=calc_script(1))
    create_agent(reporting, [add], middleware=[rb.middleware(agent_name="calc")]).invoke({"messages": [("user", "x")]})
    (run,) = otel.spans("invoke_agent")
    assert "rb.usage.unreported" not in _attributes(run) and _attributes(run)["rb.tokens"] > 0


def test_ab_report_says_when_token_figures_miss_data(tmp_path: Path) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    traces = tmp_path / "traces.jsonl"
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(OtlpJsonSpanExporter(traces)))
    rb = ReasonBlocks(tracer_provider=provider)
    for unit in range(12):
        mw = rb.ab_middleware("usage", unit_id=f"u{unit}", agent_name="calc")
        model = ScriptedChatModel(script=calc_script(1), usage=mw.arm == "on")  # the on arm's provider reports it
        create_agent(model, [add], middleware=[mw]).invoke({"messages": [("user", "x")]})
    rb.close()
    result = ab_report([traces], experiment_id="usage")
    off = result["arms"]["off"]["tokens_per_run"]
    assert off["runs_without_usage"] == result["arms"]["off"]["n_runs"] > 0 and off["median"] is None
    assert result["arms"]["on"]["tokens_per_run"]["runs_without_usage"] == 0
    assert any(c.startswith("missing usage: in the off arm") for c in result["caveats"]), result["caveats"]
    json.dumps(result)  # still JSON


def test_a_reply_with_usage_in_the_last_chunk_only_counts_it(otel: Otel) -> None:
    rb = ReasonBlocks(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    model = ScriptedChatModel(script=[AIMessage("The answer is 3.")])
    agent = create_agent(model, [add], middleware=[rb.middleware(agent_name="calc")])
    chunks = list(agent.stream({"messages": [("user", "x")]}, stream_mode="messages"))
    assert chunks
    (run,) = otel.spans("invoke_agent")
    assert _attributes(run)["rb.tokens"] > 0 and "rb.usage.unreported" not in _attributes(run)


# -- every model call in the run is on the run ----------------------------------------------------------------


def _long_script(n: int) -> list[AIMessage]:
    from rb_otel.testing import tool_call

    return [
        tool_call("add", {"a": i, "b": 1}, f"c{i}", content=f"Adding {i} and one. " + "pad " * 200) for i in range(n)
    ] + [AIMessage("done")]


def test_the_summarizers_calls_are_chat_spans_of_the_run_and_count_in_its_tokens(otel: Otel) -> None:
    from langchain.agents.middleware import SummarizationMiddleware

    rb = ReasonBlocks(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    summarizer = ScriptedChatModel(script=[AIMessage("A summary of the work so far.")], model_name="summarizer-1")
    summarize = SummarizationMiddleware(summarizer, trigger=("messages", 6), keep=("messages", 2))
    mw = rb.middleware(agent_name="calc")
    agent = create_agent(_InOrder(script=_long_script(6)), [add], middleware=[summarize, mw])
    agent.invoke({"messages": [("user", "x")]})
    rb.telemetry.flush()
    (run,) = otel.spans("invoke_agent")
    side = otel.spans("chat summarizer-1")
    assert side, [s.name for s in otel.spans("chat ")]
    for span in side:
        a = _attributes(span)
        assert span.parent is not None and span.parent.span_id == run.context.span_id  # under the run
        assert a["rb.call.source"] == "middleware:SummarizationMiddleware"
        assert a["gen_ai.usage.input_tokens"] > 0 and "rb.step" not in a and "rb.fsm_state" not in a
    steps = list(otel.spans("chat scripted-1"))
    assert len(mw.step_log) == len(steps)  # the summarizer made no step
    step_tokens = sum(_attributes(s)["gen_ai.usage.input_tokens"] for s in steps)
    side_tokens = sum(_attributes(s)["gen_ai.usage.input_tokens"] for s in side)
    assert _attributes(run)["gen_ai.usage.input_tokens"] == step_tokens + side_tokens
    assert _attributes(run)["rb.tokens"] == sum(e.tokens for e in mw.step_log) + sum(
        _attributes(s)["gen_ai.usage.input_tokens"] + _attributes(s)["gen_ai.usage.output_tokens"] for s in side
    )


def test_a_model_a_tool_calls_and_a_subagent_without_rb_otel_are_on_the_run(otel: Otel) -> None:
    from langchain_core.tools import tool

    from rb_otel.testing import tool_call

    helper = ScriptedChatModel(script=[AIMessage("helped")], model_name="helper-1")
    sub = create_agent(ScriptedChatModel(script=calc_script(1), model_name="sub-1"), [add])

    @tool
    def ask_helper(question: str) -> str:
        """Ask the helper model."""
        return str(helper.invoke(question).content)

    @tool
    def delegate(task: str) -> str:
        """Give the task to a subagent."""
        return str(sub.invoke({"messages": [("user", task)]})["messages"][-1].content)

    rb = ReasonBlocks(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    script = [
        tool_call("ask_helper", {"question": "how?"}, "c1", content="Asking."),
        tool_call("delegate", {"task": "add"}, "c2", content="Delegating."),
        AIMessage("done"),
    ]
    mw = rb.middleware(agent_name="lead")
    create_agent(ScriptedChatModel(script=script), [ask_helper, delegate], middleware=[mw]).invoke(
        {"messages": [("user", "x")]}
    )
    rb.telemetry.flush()
    (run,) = otel.spans("invoke_agent")
    sources = {s.name: _attributes(s).get("rb.call.source") for s in otel.spans("chat ") if s.name != "chat scripted-1"}
    assert sources == {"chat helper-1": "tool:ask_helper", "chat sub-1": "tool:delegate"}
    assert all(s.context.trace_id == run.context.trace_id for s in otel.spans("chat "))
    assert len(mw.step_log) == 3


def test_the_wrappers_fallback_call_is_the_step_it_is(otel: Otel) -> None:
    from langchain.agents.middleware import ModelFallbackMiddleware

    rb = ReasonBlocks(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    primary = rb.chat_model(
        ScriptedChatModel(script=calc_script(1), model_name="primary-1", raise_on_call=0), agent_name="calc"
    )
    backup = ScriptedChatModel(script=calc_script(1), model_name="backup-1")
    agent = create_agent(primary, [add], middleware=[ModelFallbackMiddleware(backup)])
    out = agent.invoke({"messages": [("user", "x")]})
    assert out["messages"][-1].content == "The answer is 30."
    rb.telemetry.flush()
    log = primary.step_log
    assert log and log[0].attempts == 2 and log[0].tokens > 0
    (first_backup, *_) = sorted(otel.spans("chat backup-1"), key=lambda s: s.start_time or 0)
    assert _attributes(first_backup)["rb.step"] == 0 and _attributes(first_backup)["rb.attempt"] == 2
    (run,) = otel.spans("invoke_agent")
    assert _attributes(run)["rb.tokens"] > 0 and _attributes(run)["rb.steps"] == len(log)


def test_the_official_instrumentor_beside_rb_otel_is_named_once() -> None:
    import subprocess
    import sys

    here = str(Path(__file__).resolve().parent)
    code = f"""
import logging, sys
sys.path.insert(0, {here!r})
logging.basicConfig(level=logging.WARNING)
from opentelemetry.instrumentation.genai.langchain import LangChainInstrumentor
from opentelemetry.sdk.trace import TracerProvider
from langchain.agents import create_agent
from conftest import add, calc_script
from rb_otel import ReasonBlocks
from rb_otel.testing import ScriptedChatModel
provider = TracerProvider()
LangChainInstrumentor().instrument(tracer_provider=provider)
rb = ReasonBlocks(tracer_provider=provider)
for _ in range(3):
    agent = create_agent(ScriptedChatModel(script=calc_script(1)), [add], middleware=[rb.middleware(agent_name="c")])
    agent.invoke({{"messages": [("user", "x")]}})
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("opentelemetry-instrumentation-genai-langchain is also instrumenting LangChain") == 1
    assert "Run one or the other" in done.stderr
