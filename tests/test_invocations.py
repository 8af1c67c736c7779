"""The telemetry invocation API an adapter uses (docs/architecture.md), driven as a custom adapter would."""

from __future__ import annotations

import pytest
from opentelemetry import trace
from opentelemetry.trace import StatusCode

from rb_otel import ReasonBlocks, RunFields
from rb_otel.telemetry import ChatResponse
from tests.conftest import Otel


def _rb(otel: Otel) -> ReasonBlocks:
    return ReasonBlocks(
        tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider, telemetry_batch_window=0
    )


def test_a_custom_adapter_gets_the_same_span_tree(otel: Otel) -> None:
    rb = _rb(otel)
    run = rb.runs.open(RunFields(agent_name="custom", framework="myframework"), run_id="r1")
    run.session.start()
    decision = run.session.begin_step(thought=None, model_id="gpt-4o")
    chat = run.recorder.start_chat(decision.entry, request_model="gpt-4o", provider="openai")
    # while the model runs, its own SDK's spans nest under the chat span
    with trace.get_tracer("provider-sdk", tracer_provider=otel.tracer_provider).start_as_current_span("http POST"):
        pass
    chat.stop(ChatResponse(input_tokens=7, output_tokens=3))
    chat.stop(ChatResponse(input_tokens=999))  # a second end is ignored
    run.session.end_step(decision, tokens=10, tool_calls=["search"])
    tool = run.recorder.start_tool(step=decision.entry.step, name="search", call_id="c1")
    tool.stop("found it")
    run.session.finish(outcome_status="success")
    rb.flush()

    spans = {s.name: s for s in otel.spans()}
    root, model, http, tool_span = (
        spans["invoke_agent custom"],
        spans["chat gpt-4o"],
        spans["http POST"],
        spans["execute_tool search"],
    )
    assert model.parent is not None and model.parent.span_id == root.context.span_id
    assert http.parent is not None and http.parent.span_id == model.context.span_id
    assert tool_span.parent is not None and tool_span.parent.span_id == root.context.span_id
    assert model.attributes is not None and model.attributes["gen_ai.usage.input_tokens"] == 7
    assert root.attributes is not None and root.attributes["rb.framework"] == "myframework"
    assert trace.get_current_span() is trace.INVALID_SPAN  # every context was restored


def test_a_failed_call_ends_its_span_with_the_error_and_the_adapter_reraises(otel: Otel) -> None:
    rb = _rb(otel)
    run = rb.runs.open(RunFields(agent_name="custom"))
    run.session.start()
    decision = run.session.begin_step(thought=None)
    chat = run.recorder.start_chat(decision.entry, request_model="m", provider="p")
    tool = run.recorder.start_tool(step=0, name="t", call_id="")

    def call_the_model() -> None:
        try:
            raise TimeoutError("model timed out")
        except BaseException as exc:
            tool.fail(exc)
            chat.fail(exc)
            chat.stop()  # ignored: already ended
            raise

    with pytest.raises(TimeoutError, match="model timed out"):
        call_the_model()
    run.session.discard_step(decision)
    run.session.finish(outcome_status="failure: TimeoutError")
    rb.flush()
    failed = [s for s in otel.spans() if s.name in ("chat m", "execute_tool t")]
    assert len(failed) == 2
    assert all(s.status.status_code is StatusCode.ERROR for s in failed)
    assert {s.attributes["error.type"] for s in failed if s.attributes} == {"TimeoutError"}
    assert trace.get_current_span() is trace.INVALID_SPAN


def test_an_interrupted_tool_is_not_an_error(otel: Otel) -> None:
    rb = _rb(otel)
    run = rb.runs.open(RunFields(agent_name="custom"))
    run.session.start()
    tool = run.recorder.start_tool(step=0, name="ask_human", call_id="c")
    tool.interrupt()
    run.session.finish(outcome_status="interrupted")
    rb.flush()
    [span] = otel.spans("execute_tool")
    assert span.status.status_code is not StatusCode.ERROR
