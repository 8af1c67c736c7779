"""ReasonBlocksMiddleware on real create_agent agents with a scripted model and in-memory OpenTelemetry."""

from __future__ import annotations

import asyncio
import inspect
import itertools
import json
import threading
import uuid
from typing import Any

import pytest
from conftest import Otel, add, calc_script, explode
from hypothesis import given
from hypothesis import strategies as st
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, SystemMessage
from langchain_core.tools import ToolException, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.errors import GraphRecursionError
from langgraph.types import Command, interrupt
from opentelemetry.trace import SpanKind, StatusCode
from pydantic import Field

from rb_otel import ReasonBlocks
from rb_otel.integrations.langchain._messages import _dump
from rb_otel.integrations.langchain._model_step import steered_system_message
from rb_otel.integrations.langchain.state import add_steps
from rb_otel.steering import DifficultyFSM, SteeringSession, TraceStateManager
from rb_otel.testing import ScriptedChatModel, tool_call

HARD = "Hmm, maybe the error is in src/a.py, not sure; the traceback failed with KeyError again."


def agent_for(rb: ReasonBlocks, model: ScriptedChatModel, tools: list[Any] | None = None, **mw_kw: Any):
    mw = rb.middleware(**{"agent_name": "calc", **mw_kw})
    return create_agent(model, tools or [add], middleware=[mw], system_prompt="You are a calculator."), mw


def check_tree(otel: Otel, *, runs: int = 1, chats: int = 5, tools: int = 4) -> None:
    roots = otel.spans("invoke_agent")
    assert len(roots) == runs
    for root in roots:
        assert root.kind is SpanKind.INTERNAL and root.name == "invoke_agent calc"
        children = [
            s for s in otel.exporter.get_finished_spans() if s.parent and s.parent.span_id == root.context.span_id
        ]
        assert sum(s.name.startswith("chat ") for s in children) == chats
        assert sum(s.name.startswith("execute_tool ") for s in children) == tools
        assert all(s.context.trace_id == root.context.trace_id for s in children)
        assert all(s.kind is SpanKind.CLIENT for s in children if s.name.startswith("chat "))


def test_invoke_span_tree_attributes_and_step_log(otel: Otel) -> None:
    rb = ReasonBlocks(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    agent, mw = agent_for(
        rb,
        ScriptedChatModel(script=calc_script()),
        task="add",
        org_id="acme",
        metadata={"team": "core", "agent_name": "dropped", "nested": {"x": 1}},
        step_log_in_state=True,
    )
    out = agent.invoke({"messages": [("user", "what is 1+2?")]})
    check_tree(otel)
    root = otel.spans("invoke_agent")[0]
    attrs = dict(root.attributes or {})
    assert attrs["gen_ai.operation.name"] == "invoke_agent" and attrs["rb.run_id"] == out["rb_run_id"]
    assert attrs["rb.framework"] == "langchain" and attrs["rb.task_profile"] == "coding"
    assert attrs["rb.org_id"] == "acme" and "rb.project_id" not in attrs
    assert attrs["rb.metadata.team"] == "core" and "rb.metadata.agent_name" not in attrs
    assert "rb.metadata.nested" not in attrs
    assert attrs["rb.outcome"] == "success" and attrs["rb.steps"] == 5
    assert attrs["rb.tokens"] == sum(e.tokens for e in mw.step_log)
    assert attrs["gen_ai.usage.input_tokens"] + attrs["gen_ai.usage.output_tokens"] == attrs["rb.tokens"]
    assert root.status.status_code is StatusCode.UNSET
    # the step log: in the returned state, on the middleware, and by run id
    assert out["rb_step_log"] == [e.as_dict() for e in mw.step_log]
    assert mw.step_log_for(out["rb_run_id"]) == mw.step_log
    assert [e.step for e in mw.step_log] == [0, 1, 2, 3, 4]
    chats = sorted(otel.spans("chat "), key=lambda s: s.attributes["rb.step"])
    for span, entry in zip(chats, mw.step_log, strict=True):
        a = dict(span.attributes or {})
        assert a["gen_ai.operation.name"] == "chat" and a["gen_ai.request.model"] == "scripted-1"
        assert a["gen_ai.provider.name"] == "scripted" and a["gen_ai.response.model"] == "scripted-1"
        assert a["rb.fsm_state"] == entry.fsm_state and a["rb.tokens"] == entry.tokens
        assert a["rb.difficulty"] == entry.difficulty if entry.difficulty is not None else "rb.difficulty" not in a
        assert list(a["rb.tool_calls"]) == entry.tool_calls
        assert list(a["rb.injection_sources"]) == entry.injection_sources
        assert a["rb.latency_ms"] == entry.latency_ms and a["rb.steering.duration_ms"] >= 0
        assert a["gen_ai.usage.input_tokens"] + a["gen_ai.usage.output_tokens"] == entry.tokens
    tool_span = otel.spans("execute_tool")[0]
    t = dict(tool_span.attributes or {})
    assert t["gen_ai.tool.name"] == "add" and t["gen_ai.tool.type"] == "function" and t["gen_ai.tool.call.id"]


@pytest.mark.parametrize("use_async", [False, True])
def test_tool_span_is_current_while_the_tool_runs(otel: Otel, use_async: bool) -> None:
    tracer = otel.tracer_provider.get_tracer("tool-internals")

    @tool
    def lookup(key: str) -> str:
        """Look a key up."""
        with tracer.start_as_current_span("inside lookup"):
            return key.upper()

    @tool
    def broken(key: str) -> str:
        """Always fails, as an error message the agent sees."""
        raise ToolException(f"no such key {key}")

    broken.handle_tool_error = True
    rb = ReasonBlocks(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    script = [
        tool_call("lookup", {"key": "a"}, "c1", content="Looking a up."),
        tool_call("broken", {"key": "b"}, "c2", content="Looking b up."),
        AIMessage("done"),
    ]
    agent, mw = agent_for(rb, ScriptedChatModel(script=script), tools=[lookup, broken])
    unsteered = create_agent(ScriptedChatModel(script=script), [lookup, broken])  # same process, no middleware
    payload = {"messages": [("user", "x")]}
    if use_async:
        asyncio.run(agent.ainvoke(payload))
        asyncio.run(unsteered.ainvoke(payload))
    else:
        agent.invoke(payload)
        unsteered.invoke(payload)
    tools = {dict(s.attributes or {})["gen_ai.tool.name"]: s for s in otel.spans("execute_tool")}
    assert sorted(tools) == ["broken", "lookup"] and len(otel.spans("execute_tool")) == 2
    inside = [s for s in otel.exporter.get_finished_spans() if s.name == "inside lookup"]
    assert len(inside) == 2  # one per agent; only the steered one's sits under an execute_tool span
    parents = sorted(s.parent.span_id if s.parent else 0 for s in inside)
    assert parents == [0, tools["lookup"].context.span_id]
    assert dict(tools["broken"].attributes or {})["error.type"]
    assert tools["broken"].status.status_code is StatusCode.ERROR
    assert dict(tools["lookup"].attributes or {})["rb.step"] == 0
    assert dict(tools["broken"].attributes or {})["rb.step"] == 1
    assert_nothing_open(otel, mw)


def test_run_span_is_child_of_the_callers_span(otel: Otel) -> None:
    rb = ReasonBlocks(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    agent, _ = agent_for(rb, ScriptedChatModel(script=calc_script()))
    tracer = otel.tracer_provider.get_tracer("test")
    with tracer.start_as_current_span("caller") as caller:
        agent.invoke({"messages": [("user", "x")]})
    root = otel.spans("invoke_agent")[0]
    assert root.parent is not None and root.parent.span_id == caller.get_span_context().span_id


@pytest.mark.parametrize("mode", ["updates", "values", "messages", ("messages", "updates")])
def test_stream_modes(otel: Otel, mode: Any) -> None:
    rb = ReasonBlocks(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    agent, mw = agent_for(rb, ScriptedChatModel(script=calc_script()))
    chunks = list(agent.stream({"messages": [("user", "x")]}, stream_mode=mode))
    assert chunks
    check_tree(otel)
    assert len(mw.step_log) == 5 and mw.active_runs == 0


async def test_ainvoke_and_astream(otel: Otel) -> None:
    rb = ReasonBlocks(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    agent, mw = agent_for(rb, ScriptedChatModel(script=calc_script()), step_log_in_state=True)
    out = await agent.ainvoke({"messages": [("user", "x")]})
    assert len(out["rb_step_log"]) == 5
    async for _ in agent.astream({"messages": [("user", "x")]}, stream_mode="messages"):
        pass
    check_tree(otel, runs=2)
    assert mw.active_runs == 0


def test_concurrent_threads_and_tasks_are_isolated(otel: Otel) -> None:
    """The default (node-free) middleware: each run is found by the LangChain run id the caller passes."""
    rb = ReasonBlocks(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    model = ScriptedChatModel(script=calc_script(), sleep_s=0.005)
    agent, mw = agent_for(rb, model)
    run_ids = [uuid.uuid4() for _ in range(16)]

    def worker(run_id: uuid.UUID) -> None:
        agent.invoke({"messages": [("user", "x")]}, {"run_id": run_id})

    threads = [threading.Thread(target=worker, args=(rid,)) for rid in run_ids[:8]]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    async def tasks() -> list[dict[str, Any]]:
        return await asyncio.gather(
            *(agent.ainvoke({"messages": [("user", "x")]}, {"run_id": rid}) for rid in run_ids[8:])
        )

    asyncio.run(tasks())
    for rid in run_ids:
        log = mw.step_log_for(str(rid))
        assert log is not None and [e.step for e in log] == [0, 1, 2, 3, 4]
    check_tree(otel, runs=16)
    span_ids = {dict(s.attributes or {})["rb.run_id"] for s in otel.spans("invoke_agent")}
    assert span_ids == {str(rid) for rid in run_ids}  # rb.run_id is the caller's LangChain run id
    assert mw.active_runs == 0
    assert otel.metric_sum("rb.runs.active") == 0


def test_stateful_variant_returns_the_step_log_under_concurrency(otel: Otel) -> None:
    rb = ReasonBlocks(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    agent, mw = agent_for(rb, ScriptedChatModel(script=calc_script(), sleep_s=0.005), step_log_in_state=True)

    async def tasks() -> list[dict[str, Any]]:
        return await asyncio.gather(*(agent.ainvoke({"messages": [("user", "x")]}) for _ in range(8)))

    outputs = asyncio.run(tasks())
    assert len({o["rb_run_id"] for o in outputs}) == 8
    for o in outputs:
        assert [e["step"] for e in o["rb_step_log"]] == [0, 1, 2, 3, 4]
        assert [e.as_dict() for e in mw.step_log_for(o["rb_run_id"]) or []] == o["rb_step_log"]


def test_step_log_in_state_adds_no_graph_node_and_each_turn_has_its_own_log(otel: Otel) -> None:
    rb = ReasonBlocks(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    bare = create_agent(ScriptedChatModel(script=calc_script()), [add])
    mw = rb.middleware(agent_name="calc")
    agent = create_agent(
        ScriptedChatModel(script=calc_script() * 2), [add], middleware=[mw], checkpointer=InMemorySaver()
    )
    assert set(agent.get_graph().nodes) == set(bare.get_graph().nodes)
    config = {"configurable": {"thread_id": "turns"}}
    first = agent.invoke({"messages": [("user", "x")]}, config)
    second = agent.invoke({"messages": [("user", "again")]}, config)  # same thread: state carried over
    assert first["rb_run_id"] != second["rb_run_id"]
    for out in (first, second):
        assert [e["step"] for e in out["rb_step_log"]] == [0, 1, 2, 3, 4]
        assert out["rb_step_log"] == [e.as_dict() for e in mw.step_log_for(out["rb_run_id"]) or []]


@given(st.lists(st.integers(min_value=1, max_value=30), min_size=1, max_size=6), st.lists(st.integers(0, 40)))
def test_step_log_reducer_keeps_the_latest_run_in_step_order(run_lengths: list[int], stray: list[int]) -> None:
    log: list[dict[str, Any]] = []
    for length in run_lengths:  # consecutive runs on one checkpointed thread, one state update per model call
        for step in range(length):
            log = add_steps(log, [{"step": step, "run": length}])
    assert [e["step"] for e in log] == list(range(run_lengths[-1]))
    assert all(e["run"] == run_lengths[-1] for e in log)
    for step in stray:  # any update: steps stay strictly increasing and the update is the last entry
        entry = {"step": step}
        log = add_steps(log, [entry])
        assert log[-1] is entry
        assert all(a["step"] < b["step"] for a, b in itertools.pairwise(log))
    assert add_steps(log, []) == log


json_like = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=12,
)


@given(json_like)
def test_tool_arguments_read_as_json_dumps_writes_them(value: Any) -> None:
    assert _dump(value) == json.dumps(value, sort_keys=True, default=str, ensure_ascii=False)


def test_tool_arguments_that_are_not_json_read_as_str_or_through_str() -> None:
    assert _dump({"when": uuid.UUID(int=7), "é": 1}) == '{"when": "00000000-0000-0000-0000-000000000007", "é": 1}'
    mixed = {1: "a", "b": 2}  # keys that cannot be sorted: the text of the value instead
    assert _dump(mixed) == str(mixed)


def test_stateless_variant_leaves_the_state_alone(otel: Otel) -> None:
    rb = ReasonBlocks(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    agent, mw = agent_for(rb, ScriptedChatModel(script=calc_script()), step_log_in_state=False)
    out = agent.invoke({"messages": [("user", "x")]})
    assert "rb_step_log" not in out and "rb_run_id" not in out
    assert len(mw.step_log) == 5


def outcome(otel: Otel) -> tuple[str, StatusCode, Any]:
    root = otel.spans("invoke_agent")[-1]
    a = dict(root.attributes or {})
    return a["rb.outcome"], root.status.status_code, a.get("error.type")


def assert_nothing_open(otel: Otel, mw: Any) -> None:
    assert mw.active_runs == 0
    assert otel.metric_sum("rb.runs.active") == 0


def test_model_exception_propagates_and_closes_the_run(otel: Otel) -> None:
    rb = ReasonBlocks(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    agent, mw = agent_for(rb, ScriptedChatModel(script=calc_script(), raise_on_call=2))
    with pytest.raises(RuntimeError, match="scripted model failure"):
        agent.invoke({"messages": [("user", "x")]})
    assert outcome(otel) == ("failure: RuntimeError", StatusCode.ERROR, "RuntimeError")
    failed = [s for s in otel.spans("chat ") if s.status.status_code is StatusCode.ERROR]
    assert len(failed) == 1 and dict(failed[0].attributes or {})["error.type"] == "RuntimeError"
    assert len(mw.step_log) == 2
    assert_nothing_open(otel, mw)
    assert otel.metric_sum("rb.runs", rb__outcome="failure") == 1


def test_tool_exception_propagates_and_closes_the_run(otel: Otel) -> None:
    rb = ReasonBlocks(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    script = [tool_call("explode", {"a": 1}, "c1"), AIMessage("done")]
    agent, mw = agent_for(rb, ScriptedChatModel(script=script), tools=[explode])
    with pytest.raises(ValueError, match="tool failure"):
        agent.invoke({"messages": [("user", "x")]})
    assert outcome(otel) == ("failure: ValueError", StatusCode.ERROR, "ValueError")
    tool_span = otel.spans("execute_tool")[0]
    assert tool_span.status.status_code is StatusCode.ERROR
    assert_nothing_open(otel, mw)


def test_graph_recursion_error_closes_the_run(otel: Otel) -> None:
    rb = ReasonBlocks(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    agent, mw = agent_for(rb, ScriptedChatModel(script=[tool_call("add", {"a": 1, "b": 2}, "c")]))
    with pytest.raises(GraphRecursionError):
        agent.invoke({"messages": [("user", "x")]}, {"recursion_limit": 6})
    assert outcome(otel)[0] == "failure: GraphRecursionError"
    assert outcome(otel)[2] == "langgraph.errors.GraphRecursionError"  # error.type: fully qualified
    assert_nothing_open(otel, mw)


def test_cancellation_closes_the_run(otel: Otel) -> None:
    rb = ReasonBlocks(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    agent, mw = agent_for(rb, ScriptedChatModel(script=calc_script(), sleep_s=0.3))

    async def main() -> None:
        task = asyncio.create_task(agent.ainvoke({"messages": [("user", "x")]}))
        for _ in range(500):  # cancel inside the first model call (a fixed sleep is flaky on a slow machine)
            if mw.active_runs:
                break
            await asyncio.sleep(0.01)
        task.cancel()
        await task

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(main())
    assert outcome(otel)[0] == "failure: CancelledError"
    assert outcome(otel)[2] == "asyncio.exceptions.CancelledError"
    assert all(s.end_time is not None for s in otel.exporter.get_finished_spans())
    assert_nothing_open(otel, mw)


def test_abandoned_stream_closes_the_run(otel: Otel) -> None:
    rb = ReasonBlocks(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    agent, mw = agent_for(rb, ScriptedChatModel(script=calc_script()))
    stream = agent.stream({"messages": [("user", "x")]})
    next(stream)
    stream.close()
    assert otel.spans("invoke_agent")
    assert_nothing_open(otel, mw)


@tool
def ask_human(question: str) -> str:
    """Ask a human."""
    return str(interrupt(question))


def test_interrupt_is_not_an_error_and_resume_continues_the_run(otel: Otel) -> None:
    rb = ReasonBlocks(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    script = [tool_call("ask_human", {"question": "ok?"}, "q1", content="Asking."), AIMessage("Thanks, done.")]
    mw = rb.middleware(agent_name="calc")
    agent = create_agent(ScriptedChatModel(script=script), [ask_human], middleware=[mw], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t1"}}
    out = agent.invoke({"messages": [("user", "x")]}, config)
    assert "__interrupt__" in out
    assert outcome(otel) == ("interrupted", StatusCode.UNSET, None)
    first_root = otel.spans("invoke_agent")[0]
    assert dict(first_root.attributes or {})["gen_ai.conversation.id"] == "t1"
    assert [e["step"] for e in out["rb_step_log"]] == [0]  # the state has the log as far as it got
    out = agent.invoke(Command(resume="yes"), config)
    assert out["rb_step_log"] == [e.as_dict() for e in mw.step_log]  # and the resumed run appended to it
    roots = otel.spans("invoke_agent")
    assert len(roots) == 2 and outcome(otel)[0] == "success"
    assert dict(roots[1].attributes or {})["rb.run_id"] == dict(first_root.attributes or {})["rb.run_id"]
    steps = [e.step for e in mw.step_log]
    assert steps == sorted(steps) and steps[-1] == len(steps) - 1  # the resumed run kept counting
    resumed_tools = [s for s in otel.spans("execute_tool") if s.parent and s.parent.span_id == roots[1].context.span_id]
    assert [s.status.status_code for s in resumed_tools] == [StatusCode.UNSET]  # the tool that resumed is recorded
    assert_nothing_open(otel, mw)


def test_context_manager_defers_finish_for_mark_failure(otel: Otel) -> None:
    rb = ReasonBlocks(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    agent, mw = agent_for(rb, ScriptedChatModel(script=calc_script()))
    with mw:
        agent.invoke({"messages": [("user", "x")]})
        assert otel.spans("invoke_agent") == []  # deferred to __exit__
        mw.mark_failure("answer rejected")
    assert outcome(otel) == ("answer rejected", StatusCode.ERROR, "answer rejected")
    with pytest.raises(RuntimeError), mw:
        agent_for(rb, ScriptedChatModel(script=calc_script(), raise_on_call=0))[0].invoke({"messages": []})
    assert_nothing_open(otel, mw)


def test_flush_session_without_context_manager(otel: Otel) -> None:
    rb = ReasonBlocks(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    mw = rb.middleware(agent_name="calc")
    mw._tracker.open()
    assert mw.active_runs == 1
    mw.flush_session(outcome_status="failure: Abandoned")
    mw.close()
    assert outcome(otel)[0] == "failure: Abandoned" and mw.active_runs == 0


def hard_script(n: int) -> list[AIMessage]:
    return [tool_call("add", {"a": i, "b": 1}, f"c{i}", content=HARD + f" ({i})") for i in range(n)] + [
        AIMessage("done")
    ]


def test_routing_switches_the_model_at_slow(otel: Otel) -> None:
    strong = ScriptedChatModel(script=hard_script(8), model_name="strong-1", provider="anthropic")
    rb = ReasonBlocks(
        tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider, model_routing={"SLOW": strong}
    )
    base = ScriptedChatModel(script=hard_script(8), model_name="base-1", provider="openai")
    agent, mw = agent_for(rb, base)
    agent.invoke({"messages": [("user", "x")]})
    by_step = {s.attributes["rb.step"]: dict(s.attributes or {}) for s in otel.spans("chat ")}
    slow_steps = [e.step for e in mw.step_log if e.fsm_state == "SLOW"]
    assert slow_steps
    for e in mw.step_log:
        attrs = by_step[e.step]
        if e.fsm_state == "SLOW":
            assert attrs["gen_ai.request.model"] == "strong-1" and attrs["rb.model_id"] == "anthropic:strong-1"
            assert e.model_id == "anthropic:strong-1"
        else:
            assert attrs["gen_ai.request.model"] == "base-1" and "rb.model_id" not in attrs and e.model_id == ""


def test_system_blocks_sent_to_the_model_and_history_untouched(otel: Otel) -> None:
    model = ScriptedChatModel(script=hard_script(4), record_system=True)
    rb = ReasonBlocks(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    agent, mw = agent_for(rb, model)
    out = agent.invoke({"messages": [("user", "x")]})
    systems = model.received_system
    assert len(systems) == 5 and all(isinstance(s, SystemMessage) for s in systems)
    for sent, entry in zip(systems, mw.step_log, strict=True):
        assert isinstance(sent, SystemMessage)
        blocks = sent.content
        assert isinstance(blocks, list)
        assert blocks[0] == {"type": "text", "text": "You are a calculator.", "cache_control": {"type": "ephemeral"}}
        if entry.intervention_texts:
            assert blocks[1] == {"type": "text", "text": "[REASONBLOCKS]\n" + "\n\n".join(entry.intervention_texts)}
        else:
            assert len(blocks) == 1
    assert not any(isinstance(m, SystemMessage) for m in out["messages"])  # history untouched


def test_steered_system_message_is_built_once_per_message_and_guidance() -> None:
    base = SystemMessage("You are a calculator.")
    first = steered_system_message(base, "", cache_control=True)
    assert first is steered_system_message(base, "", cache_control=True)  # shared, not rebuilt
    assert first is not None and first.content[-1]["cache_control"] == {"type": "ephemeral"}  # type: ignore[index]
    guided = steered_system_message(base, "Check the tests.", cache_control=True)
    assert guided is not first and guided is not None
    assert guided.content[-1] == {"type": "text", "text": "[REASONBLOCKS]\nCheck the tests."}
    plain = steered_system_message(base, "", cache_control=False)
    assert plain is not None and "cache_control" not in plain.content[0]  # type: ignore[operator]
    assert base.content == "You are a calculator."  # the agent's own message is never touched
    other = SystemMessage("You are a calculator.")  # equal text, another message: its own entry
    assert steered_system_message(other, "", cache_control=True) is not first
    assert steered_system_message(None, "", cache_control=True) is None


def test_no_system_prompt_and_nothing_fired_sends_no_system_message(otel: Otel) -> None:
    model = ScriptedChatModel(script=calc_script(1), record_system=True)
    rb = ReasonBlocks(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider, e_traces_enabled=False)
    agent = create_agent(model, [add], middleware=[rb.middleware()])
    agent.invoke({"messages": [("user", "x")]})
    assert model.received_system == [None, None]


@pytest.mark.parametrize("capture", [False, True])
def test_content_capture(otel: Otel, capture: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true" if capture else "false")
    rb = ReasonBlocks(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    script = [
        tool_call("add", {"a": 1, "b": 2}, "c", content="my key is sk-abcdefghijklmnopqrstuv ok"),
        AIMessage("The answer is 3."),
    ]
    agent, _ = agent_for(rb, ScriptedChatModel(script=script))
    agent.invoke({"messages": [("user", "secret question")]})
    content_keys = {
        "rb.thought_preview",
        "rb.injections",
        "rb.intervention_texts",
        "gen_ai.input.messages",
        "gen_ai.output.messages",
        "gen_ai.tool.call.arguments",
        "gen_ai.tool.call.result",
    }
    seen = set()
    for span in otel.exporter.get_finished_spans():
        seen |= set(span.attributes or {}) & content_keys
        assert "sk-abcdefghijklmnopqrstuv" not in str(dict(span.attributes or {}))
    if capture:
        assert seen == content_keys
        texts = " ".join(str(dict(s.attributes or {})) for s in otel.spans("chat "))
        assert "secret question" in texts and "[REDACTED]" in texts
    else:
        assert seen == set()


def test_capture_argument_wins_over_environment(otel: Otel, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    rb = ReasonBlocks(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider, capture_content=False)
    agent, _ = agent_for(rb, ScriptedChatModel(script=calc_script(1)))
    agent.invoke({"messages": [("user", "x")]})
    assert all("gen_ai.input.messages" not in (s.attributes or {}) for s in otel.spans("chat "))


def test_metrics_after_a_known_script(otel: Otel) -> None:
    rb = ReasonBlocks(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    agent, mw = agent_for(rb, ScriptedChatModel(script=hard_script(6)))
    assert otel.metric_points("rb.runs.skip") == [({"gen_ai.agent.name": "calc"}, 0)]  # initialised at 0
    agent.invoke({"messages": [("user", "x")]})
    log = mw.step_log
    assert otel.metric_sum("rb.steps") == len(log) == 7
    assert otel.metric_sum("rb.steps", rb__fsm_state="SLOW") == sum(e.fsm_state == "SLOW" for e in log)
    assert otel.metric_sum("rb.step.difficulty") == sum(e.difficulty is not None for e in log)
    assert otel.metric_sum("rb.fsm.transitions", rb__fsm__from="INIT", rb__fsm__to="NORMAL") == 1
    assert otel.metric_sum("rb.fsm.transitions", rb__fsm__from="NORMAL", rb__fsm__to="SLOW") == 1
    assert otel.metric_sum("rb.runs", rb__outcome="success", rb__max_state="SLOW") == 1
    assert otel.metric_sum("rb.runs.active") == 0
    fired = sum(len(e.monitors_fired) for e in log)
    assert otel.metric_sum("rb.monitor.fired") == fired
    assert otel.metric_sum("rb.injections") == sum(len(e.injection_sources) for e in log)
    for source in {s for e in log for s in e.injection_sources}:  # one add per source and step, summed right
        expected = sum(e.injection_sources.count(source) for e in log)
        assert otel.metric_sum("rb.injections", rb__injection__source=source) == expected
    assert otel.metric_sum("gen_ai.client.token.usage", gen_ai__token__type="input") == 7
    assert otel.metric_sum("gen_ai.client.operation.duration") == 7
    assert otel.metric_sum("gen_ai.execute_tool.duration") == 6
    assert otel.metric_sum("gen_ai.invoke_agent.duration") == 1
    for attrs, _ in otel.metric_points("rb.steps") + otel.metric_points("rb.runs"):
        assert "rb.run_id" not in attrs and not any("run" in k and "id" in k for k in attrs)
    root = otel.spans("invoke_agent")[0]
    events = [dict(e.attributes or {}) for e in root.events if e.name == "rb.fsm.transition"]
    assert [(e["rb.fsm.from"], e["rb.fsm.to"]) for e in events] == [("INIT", "NORMAL"), ("NORMAL", "SLOW")]


def test_skip_run_counts_once(otel: Otel) -> None:
    rb = ReasonBlocks(
        tracer_provider=otel.tracer_provider,
        meter_provider=otel.meter_provider,
        fsm_thresholds={"skip_window": 3, "skip_threshold": 0.6},
    )
    agent, _ = agent_for(rb, ScriptedChatModel(script=hard_script(8)))
    agent.invoke({"messages": [("user", "x")]})
    assert otel.metric_sum("rb.runs.skip") == 1
    attrs = dict(otel.spans("invoke_agent")[0].attributes or {})
    assert attrs["rb.entered_skip"] is True and attrs["rb.max_state"] == "SKIP"


def test_session_and_middleware_produce_identical_step_logs(otel: Otel) -> None:
    script = hard_script(6)
    rb = ReasonBlocks(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    agent, mw = agent_for(rb, ScriptedChatModel(script=script))
    agent.invoke({"messages": [("user", "x")]})
    session = rb.new_session()
    for i, entry in enumerate(mw.step_log):
        if i == 0:
            d = session.begin_step(thought=None, model_id="scripted:scripted-1")
        else:
            prev = script[i - 1]
            d = session.begin_step(
                thought=str(prev.content),
                action=prev.tool_calls[0]["name"],
                action_input=__import__("json").dumps(prev.tool_calls[0]["args"], sort_keys=True),
                observation=str(i),
                model_id="scripted:scripted-1",
            )
        session.end_step(d, tokens=entry.tokens, tool_calls=entry.tool_calls, latency_ms=entry.latency_ms)
    # when and where (the run's part, its trace) a step was recorded are no steering decision
    strip = lambda e: {k: v for k, v in e.as_dict().items() if k not in ("timestamp", "part")}
    assert [strip(e) for e in session.step_log] == [strip(e) for e in mw.step_log]
    run = otel.spans("invoke_agent")[0].context
    assert {e.part for e in mw.step_log} == {f"{run.trace_id:032x}-{run.span_id:016x}"}
    assert {e.part for e in session.step_log} == {""}  # a session driven by hand knows no part


def test_live_streaming_disabled_exports_nothing_but_fills_the_step_log(otel: Otel) -> None:
    rb = ReasonBlocks(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider, telemetry_enabled=False)
    agent, mw = agent_for(rb, ScriptedChatModel(script=calc_script()))
    agent.invoke({"messages": [("user", "x")]})
    assert otel.exporter.get_finished_spans() == () or list(otel.exporter.get_finished_spans()) == []
    assert otel.metric_points("rb.steps") == []
    assert len(mw.step_log) == 5


def test_a_broken_steering_component_never_breaks_the_agent(otel: Otel) -> None:
    class Exploding:
        def evaluate(self, request: Any) -> Any:
            raise ConnectionError("rb-api unreachable")

    def bad_score(text: str) -> float:
        raise ZeroDivisionError

    rb = ReasonBlocks(
        tracer_provider=otel.tracer_provider,
        meter_provider=otel.meter_provider,
        monitor_backend=Exploding(),
        scorer=bad_score,
    )  # type: ignore[arg-type]
    agent, _mw = agent_for(rb, ScriptedChatModel(script=calc_script()))
    out = agent.invoke({"messages": [("user", "x")]})
    assert out["messages"][-1].content == "The answer is 30."
    assert len(otel.spans("chat ")) >= 1 and otel.spans("invoke_agent")


def test_bad_configuration_fails_at_construction() -> None:
    with pytest.raises(ValueError, match="fsm_thresholds: expected keys among"):
        ReasonBlocks(fsm_thresholds={"slow": 0.5})
    with pytest.raises(ValueError, match="unknown task_profile"):
        ReasonBlocks(task_profile="poetry")
    with pytest.raises(ValueError, match="model_routing"):
        ReasonBlocks(model_routing={"INIT": "openai:gpt-4o"})
    with pytest.raises(TypeError, match="metadata"):
        ReasonBlocks().middleware(metadata=["x"])  # type: ignore[arg-type]


def test_hook_signatures_are_precomputed_and_true() -> None:
    # LangSmith's traceable wrapper calls inspect.signature on each hook at every call; the precomputed one must
    # be what inspect would compute, on the class and on bound methods alike.
    mw = ReasonBlocks().middleware()
    for name in ("wrap_model_call", "awrap_model_call"):
        hook = getattr(type(mw), name)
        assert "__signature__" in vars(hook)
        precomputed = hook.__signature__
        del hook.__signature__
        try:
            assert precomputed == inspect.signature(hook)
        finally:
            hook.__signature__ = precomputed
        assert list(inspect.signature(getattr(mw, name)).parameters) == ["request", "handler"]


def test_api_key_never_appears_in_repr() -> None:
    rb = ReasonBlocks("rb_live_supersecretvalue")
    assert "supersecret" not in repr(rb)


def test_one_run_per_middleware_use_with_given_run_id(otel: Otel) -> None:
    rb = ReasonBlocks(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    agent, mw = agent_for(rb, ScriptedChatModel(script=calc_script()), run_id="my-run", step_log_in_state=True)
    out = agent.invoke({"messages": [("user", "x")]})
    assert out["rb_run_id"] == "my-run" and mw.session is not None and mw.session.run_id == "my-run"
    agent.invoke({"messages": [("user", "x")]})
    assert mw.session.run_id != "my-run"  # the given id names the first run only


def test_unused_imports_guard() -> None:
    # The session type used by the middleware is the public one.
    assert isinstance(ReasonBlocks().new_session(), SteeringSession)
    session = ReasonBlocks().new_session()
    assert session.fsm.thresholds == DifficultyFSM().thresholds  # the default FSM is ReasonBlocks'
    assert TraceStateManager().trace_id != TraceStateManager().trace_id  # each run gets its own id


def test_routing_to_a_model_that_cannot_be_built_keeps_the_agents_model(
    otel: Otel, caplog: pytest.LogCaptureFixture
) -> None:
    rb = ReasonBlocks(
        tracer_provider=otel.tracer_provider,
        meter_provider=otel.meter_provider,
        model_routing={"SLOW": "no-such-provider:model-x"},
    )
    agent, mw = agent_for(rb, ScriptedChatModel(script=hard_script(7)))
    out = agent.invoke({"messages": [("user", "x")]})
    assert out["messages"][-1].content == "done"
    assert any(e.fsm_state == "SLOW" for e in mw.step_log)
    assert all(e.model_id == "" for e in mw.step_log)
    assert {dict(s.attributes or {})["gen_ai.request.model"] for s in otel.spans("chat ")} == {"scripted-1"}
    assert sum("cannot build routed model" in r.getMessage() for r in caplog.records) == 1


def test_innermost_placement_gives_one_chat_span_per_fallback_attempt(otel: Otel) -> None:
    from langchain.agents.middleware import ModelFallbackMiddleware

    rb = ReasonBlocks(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    primary = ScriptedChatModel(script=calc_script(1), model_name="primary-1", raise_on_call=0)
    backup = ScriptedChatModel(script=calc_script(1), model_name="backup-1")
    mw = rb.middleware(agent_name="calc")
    agent = create_agent(primary, [add], middleware=[ModelFallbackMiddleware(backup), mw])
    out = agent.invoke({"messages": [("user", "x")]})
    assert out["messages"][-1].content == "The answer is 30."
    chats = [(s.name, s.status.status_code) for s in sorted(otel.spans("chat "), key=lambda s: s.start_time)]
    assert chats[0] == ("chat primary-1", StatusCode.ERROR)
    assert ("chat backup-1", StatusCode.UNSET) in chats
    # one step of two attempts: each attempt a span of step 0 (the second with rb.attempt 2), one log entry
    assert [(e.step, e.attempts) for e in mw.step_log] == [(0, 2), (1, 1)]
    assert otel.spans("chat primary-1")[0].attributes["rb.step"] == 0
    (backup_first, *_) = sorted(otel.spans("chat backup-1"), key=lambda s: s.start_time or 0)
    assert backup_first.attributes["rb.step"] == 0 and backup_first.attributes["rb.attempt"] == 2
    assert out["rb_step_log"][0]["attempts"] == 2


def test_a_retried_call_is_one_step_with_the_same_guidance(otel: Otel) -> None:
    from langchain.agents.middleware import ModelRetryMiddleware

    rb = ReasonBlocks(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    uninterrupted = rb.middleware(agent_name="calc")
    create_agent(ScriptedChatModel(script=hard_script(4)), [add], middleware=[uninterrupted]).invoke(
        {"messages": [("user", "x")]}
    )
    otel.exporter.clear()
    model = _FailsOnce(script=hard_script(4))  # the first call (standing rules, E3) fails once, then succeeds
    retry = ModelRetryMiddleware(max_retries=2, initial_delay=0.0, jitter=False)
    mw = rb.middleware(agent_name="calc")
    out = create_agent(model, [add], middleware=[retry, mw]).invoke({"messages": [("user", "x")]})
    log = [(e.step, e.fsm_state, e.attempts) for e in mw.step_log]
    assert [(step, state) for step, state, _ in log] == [(e.step, e.fsm_state) for e in uninterrupted.step_log]
    assert [attempts for *_, attempts in log] == [2] + [1] * (len(log) - 1)
    assert [e["step"] for e in out["rb_step_log"]] == list(range(len(log)))
    failed, retried = sorted(
        (s for s in otel.spans("chat ") if s.attributes["rb.step"] == 0), key=lambda s: s.start_time or 0
    )
    assert failed.status.status_code is StatusCode.ERROR and failed.attributes["error.type"] == "RuntimeError"
    assert retried.status.status_code is StatusCode.UNSET and retried.attributes["rb.attempt"] == 2
    sent = model.systems
    assert len(sent) == len(log) + 1 and sent[0] == sent[1]  # the retry carries the first attempt's block
    assert "[REASONBLOCKS]" in sent[0]


class _FailsOnce(ScriptedChatModel):
    """Fails its first call once (then answers it), and keeps the system text of every call."""

    systems: list[str] = Field(default_factory=list)
    failed: bool = False

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
        system = next((m for m in messages if isinstance(m, SystemMessage)), None)
        self.systems.append(str(system.content) if system is not None else "")
        if sum(isinstance(m, AIMessage) for m in messages) == 0 and not self.failed:
            self.failed = True
            raise RuntimeError("flaky")
        return super()._generate(messages, stop, run_manager, **kwargs)


def test_ttl_sweep_closes_runs_nobody_finished(otel: Otel) -> None:
    rb = ReasonBlocks(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    mw = rb.middleware(agent_name="calc")
    run = mw._tracker.open()
    mw._tracker.runs.ttl = 0.0
    assert mw._tracker.runs.sweep(mw._tracker.expire, now=run.touched + 1.0, every=0.0) == 1
    assert mw.active_runs == 0
    assert outcome(otel)[0] == "failure: expired"
    assert otel.metric_sum("rb.runs.active") == 0


def test_a_finished_run_leaves_no_reference_cycles(otel: Otel) -> None:
    # A run's objects (recorder, batch, metrics, spans, session) must be freed by reference counting when the run
    # ends: in a cycle, only the garbage collector frees them, and the run span with its attributes waits with them.
    import gc

    rb = ReasonBlocks(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    agent, _ = agent_for(rb, ScriptedChatModel(script=calc_script()))
    agent.invoke({"messages": [("user", "1+2+3+4+5")]})  # warm-up: process-wide caches fill here
    while gc.collect():  # until nothing is left: freeing one earlier test's objects can free more (weakref callbacks)
        pass
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        for _ in range(3):
            agent.invoke({"messages": [("user", "1+2+3+4+5")]})
        gc.collect()
        cyclic = [type(o) for o in gc.garbage]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    ours = sorted(
        {f"{t.__module__}.{t.__qualname__}" for t in cyclic if t.__module__.startswith(("rb_otel", "opentelemetry"))}
    )
    assert ours == []
    check_tree(otel, runs=4)


def test_a_finished_runs_session_and_recorder_are_freed(otel: Otel) -> None:
    # Nothing process-wide may keep a finished run alive (only its step log stays, in the middleware's history).
    import gc
    import weakref

    from rb_otel.steering.session import SteeringSession

    rb = ReasonBlocks(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    agent, mw = agent_for(rb, ScriptedChatModel(script=calc_script()))
    agent.invoke({"messages": [("user", "x")]})
    session = mw.session
    assert isinstance(session, SteeringSession)
    gone = weakref.ref(session)
    recorder = weakref.ref(session.emitter)  # type: ignore[arg-type]
    del session
    for _ in range(3):
        agent.invoke({"messages": [("user", "y")]})
    gc.collect()
    assert gone() is None and recorder() is None
    manual = rb.session(agent_name="manual")
    manual.finish()
    freed = weakref.ref(manual)
    del manual
    gc.collect()
    assert freed() is None
