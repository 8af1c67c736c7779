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
