"""``rb.chat_model(model)``: the middleware's pipeline as a chat model wrapper, on real create_agent agents."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from conftest import Otel, add, calc_script
from langchain.agents import create_agent
from langchain.agents.middleware import ModelRetryMiddleware
from langchain_core.language_models import LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command, interrupt
from opentelemetry.trace import StatusCode

from rb_otel import ReasonBlocks
from rb_otel.testing import ScriptedChatModel, tool_call

HARD = "Hmm, maybe the error is in src/a.py, not sure; the traceback failed with KeyError again."
PROMPT = "You are a calculator."


#: What each ``ToolBindingModel`` call got, in call order; and which models bound tools, in order.
BOUND_CALLS: list[dict[str, Any]] = []
BINDINGS: list[str] = []


class ToolBindingModel(ScriptedChatModel):
    """Binds tools as provider models do (a ``RunnableBinding`` with ``tools=``) and records what each call got."""

    def bind_tools(self, tools: Any, *, tool_choice: str | None = None, **kwargs: Any) -> Runnable[Any, Any]:
        BINDINGS.append(self.model_name)
        return self.bind(tools=[t.name for t in tools], **kwargs)

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        BOUND_CALLS.append({"model": self.model_name, "tools": kw.get("tools")})
        return super()._generate(messages, stop, run_manager)


class FlakyModel(ScriptedChatModel):
    """Raises ``RuntimeError`` on its first ``failures`` calls."""

    failures: int = 0

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        if self.failures > 0:
            self.failures -= 1
            raise RuntimeError("flaky")
        return super()._generate(messages, stop, run_manager)


def _tree(otel: Otel) -> list[tuple[str, str | None]]:
    """(span name, parent span name) of every finished span, in start order."""
    spans = sorted(otel.exporter.get_finished_spans(), key=lambda s: s.start_time or 0)
    names = {s.context.span_id: s.name for s in spans}
    return [(s.name, names.get(s.parent.span_id) if s.parent else None) for s in spans]


def _step_attributes(otel: Otel) -> list[dict[str, Any]]:
    keep = ("rb.step", "rb.fsm_state", "rb.difficulty", "rb.tokens", "rb.tool_calls", "gen_ai.request.model")
    chats = sorted(otel.spans("chat "), key=lambda s: s.start_time or 0)
    return [{k: (s.attributes or {}).get(k) for k in keep} for s in chats]


def test_same_span_tree_step_log_and_metrics_as_the_middleware(otel: Otel) -> None:
    rb = ReasonBlocks(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    middleware_agent = create_agent(
        ScriptedChatModel(script=calc_script()),
        [add],
        middleware=[rb.middleware(agent_name="calc")],
        system_prompt=PROMPT,
    )
    middleware_agent.invoke({"messages": [("user", "what is 1+2?")]})
    rb.telemetry.flush()
    expected_tree, expected_steps = _tree(otel), _step_attributes(otel)
    expected_steps_total = otel.metric_sum("rb.steps")
    otel.exporter.clear()

    model = rb.chat_model(ScriptedChatModel(script=calc_script()), agent_name="calc")
    out = create_agent(model, [add], system_prompt=PROMPT).invoke({"messages": [("user", "what is 1+2?")]})
    rb.telemetry.flush()
    assert out["messages"][-1].content == "The answer is 30."
    assert "rb_step_log" not in out
    assert _tree(otel) == expected_tree
    assert _tree(otel)[0] == ("invoke_agent calc", None) and len(expected_tree) == 10
    assert _step_attributes(otel) == expected_steps
    assert [e.fsm_state for e in model.step_log] == ["INIT", "NORMAL", "NORMAL", "NORMAL", "NORMAL"]
    run_id = otel.spans("invoke_agent")[0].attributes["rb.run_id"]
    assert model.step_log_for(str(run_id)) == model.step_log
    assert otel.metric_sum("rb.steps") == 2 * expected_steps_total


def test_the_system_block_reaches_the_wrapped_model() -> None:
    rb = ReasonBlocks()
    inner = ScriptedChatModel(script=calc_script(), record_system=True)
    create_agent(rb.chat_model(inner), [add], system_prompt=PROMPT).invoke({"messages": [("user", "x")]})
    first = inner.received_system[0]
    assert first is not None and isinstance(first.content, list)
    assert first.content[0]["text"] == PROMPT and first.content[0]["cache_control"] == {"type": "ephemeral"}
    assert first.content[1]["text"].startswith("[REASONBLOCKS]\n")  # E3 fires on the first call


def test_routing_binds_the_agents_tools_to_the_routed_model(otel: Otel) -> None:
    BOUND_CALLS.clear()
    BINDINGS.clear()
    script = [tool_call("add", {"a": i, "b": 1}, f"c{i}", content=HARD + f" ({i})") for i in range(8)]
    strong = ToolBindingModel(script=[*script, AIMessage("done")], model_name="strong-1", provider="anthropic")
    base = ToolBindingModel(script=[*script, AIMessage("done")], model_name="base-1", provider="openai")
    rb = ReasonBlocks(
        tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider, model_routing={"SLOW": strong}
    )
    model = rb.chat_model(base, agent_name="calc")
    create_agent(model, [add], system_prompt=PROMPT).invoke({"messages": [("user", "x")]})
    states = [e.fsm_state for e in model.step_log]
    assert "SLOW" in states
    assert [c["model"] for c in BOUND_CALLS] == ["strong-1" if s == "SLOW" else "base-1" for s in states]
    assert all(c["tools"] == ["add"] for c in BOUND_CALLS)
    assert sorted(BINDINGS) == ["base-1", "strong-1"]  # each model's tools bound once, not on every call
    slow = [s for s in otel.spans("chat ") if s.attributes["rb.fsm_state"] == "SLOW"]
    assert slow and all(s.attributes["gen_ai.request.model"] == "strong-1" for s in slow)


def test_model_errors_propagate_unchanged_and_every_span_ends(otel: Otel) -> None:
    rb = ReasonBlocks(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    failure = ValueError("provider said no")
    inner = ScriptedChatModel(script=calc_script(), raise_on_call=2, error_factory=lambda: failure)
    agent = create_agent(rb.chat_model(inner, agent_name="calc"), [add], system_prompt=PROMPT)
    with pytest.raises(ValueError) as caught:
        agent.invoke({"messages": [("user", "x")]})
    assert caught.value is failure
    rb.telemetry.flush()
    failed = [s for s in otel.spans("chat ") if s.status.status_code is StatusCode.ERROR]
    assert len(failed) == 1 and failed[0].attributes["error.type"] == "ValueError"
    (root,) = otel.spans("invoke_agent")
    assert root.status.status_code is StatusCode.ERROR and root.attributes["rb.outcome"] == "failure: ValueError"


def test_retries_are_their_own_chat_spans(otel: Otel) -> None:
    rb = ReasonBlocks(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    retry = ModelRetryMiddleware(max_retries=2, initial_delay=0.0, jitter=False)
    inner = FlakyModel(script=calc_script(1), failures=1)
    agent = create_agent(rb.chat_model(inner, agent_name="calc"), [add], middleware=[retry], system_prompt=PROMPT)
    out = agent.invoke({"messages": [("user", "x")]})
    assert out["messages"][-1].content == "The answer is 30."
    rb.telemetry.flush()
    statuses = [s.status.status_code for s in sorted(otel.spans("chat "), key=lambda s: s.start_time or 0)]
    assert statuses == [StatusCode.ERROR, StatusCode.UNSET, StatusCode.UNSET]


def test_outside_an_agent_the_call_goes_through_unsteered(otel: Otel) -> None:
    rb = ReasonBlocks(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    model = rb.chat_model(ScriptedChatModel(script=[AIMessage("hello")]))
    assert model.invoke("hi").content == "hello"
    assert model.step_log == [] and otel.spans() == []


def test_async_and_concurrent_runs_stay_apart(otel: Otel) -> None:
    rb = ReasonBlocks(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    agent = create_agent(rb.chat_model(ScriptedChatModel(script=calc_script()), agent_name="calc"), [add])

    async def many() -> list[Any]:
        return list(await asyncio.gather(*(agent.ainvoke({"messages": [("user", "x")]}) for _ in range(4))))

    outs = asyncio.run(many())
    threads = [threading.Thread(target=agent.invoke, args=({"messages": [("user", "y")]},)) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(o["messages"][-1].content == "The answer is 30." for o in outs)
    rb.telemetry.flush()
    roots = otel.spans("invoke_agent")
    assert len(roots) == 8 and len({r.context.trace_id for r in roots}) == 8
    for root in roots:
        children = [
            s for s in otel.exporter.get_finished_spans() if s.parent and s.parent.span_id == root.context.span_id
        ]
        assert sorted(s.attributes.get("rb.step") for s in children if s.name.startswith("chat ")) == [0, 1, 2, 3, 4]


def test_bad_arguments_fail_at_the_boundary() -> None:
    rb = ReasonBlocks()
    with pytest.raises(TypeError, match="chat model or a model id"):
        rb.chat_model(42)
    with pytest.raises(TypeError, match="no state"):
        rb.chat_model(ScriptedChatModel(script=[AIMessage("x")]), step_log_in_state=True)


def test_bind_tools_builds_one_copy_per_tool_set() -> None:
    model = ReasonBlocks().chat_model(ScriptedChatModel(script=[AIMessage("x")]))
    first: Runnable[LanguageModelInput, Any] = model.bind_tools([add])
    assert model.bind_tools([add]) is first
    assert model.bind_tools([add], tool_choice="any") is not first


@tool
def ask_human(question: str) -> str:
    """Ask the human (interrupts the graph until resumed)."""
    return str(interrupt(question))


def test_an_interrupt_is_not_an_error_and_the_resume_continues_the_run(otel: Otel) -> None:
    rb = ReasonBlocks(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    script = [tool_call("ask_human", {"question": "ok?"}, "q1", content="Asking."), AIMessage("Thanks, done.")]
    model = rb.chat_model(ScriptedChatModel(script=script), agent_name="calc")
    agent = create_agent(model, [ask_human], checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "t1"}}
    assert "__interrupt__" in agent.invoke({"messages": [("user", "x")]}, config)
    out = agent.invoke(Command(resume="yes"), config)
    assert out["messages"][-1].content == "Thanks, done."
    rb.telemetry.flush()
    first, second = sorted(otel.spans("invoke_agent"), key=lambda s: s.start_time or 0)
    assert first.attributes["rb.outcome"] == "interrupted" and second.attributes["rb.outcome"] == "success"
    assert first.attributes["rb.run_id"] == second.attributes["rb.run_id"]  # one run, resumed
    assert [e.step for e in model.step_log] == [0, 1]
    tools = sorted(otel.spans("execute_tool"), key=lambda s: s.start_time or 0)
    # the interrupted attempt under the first run span, the resumed tool under the second; neither an error
    assert [t.parent.span_id for t in tools] == [first.context.span_id, second.context.span_id]
    assert all(t.status.status_code is StatusCode.UNSET for t in tools)
