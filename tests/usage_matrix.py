"""The usage matrix: LangGraph deployment shapes run under rb-otel or under the official GenAI LangChain
instrumentation (each side in a process of its own: the official instrumentor patches LangChain process-wide).

    python tests/usage_matrix.py rb|official

Prints JSON: per case, the ``chat`` spans (model, parent operation, status, usage), the ``execute_tool`` spans,
the ``invoke_agent`` spans' usage totals (rb-otel's), what the case raised, and whether every span that started
ended. Scripted models, real agents and middleware.
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import contextlib

from conftest import add, calc_script, explode
from langchain.agents import create_agent
from langchain.agents.middleware import (
    HumanInTheLoopMiddleware,
    ModelFallbackMiddleware,
    ModelRetryMiddleware,
    SummarizationMiddleware,
)
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.errors import GraphRecursionError
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import Command
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from rb_otel.testing import ScriptedChatModel, tool_call


class _InOrder(ScriptedChatModel):
    """Answers its i-th call with ``script[i]`` whatever the prompt holds (a summarized history is shorter)."""

    calls: int = 0

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
        index, self.calls = self.calls, self.calls + 1
        answered = ScriptedChatModel(script=[self.script[min(index, len(self.script) - 1)]])
        return answered._generate(messages, stop, run_manager, **kwargs)


class _FailsOnce(ScriptedChatModel):
    failed: bool = False

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
        if not self.failed:
            self.failed = True
            raise RuntimeError("flaky")
        return super()._generate(messages, stop, run_manager, **kwargs)


@tool
def big() -> str:
    """Return a large result."""
    return "x" * 100_000


@tool
def fragile(a: int) -> int:
    """A tool whose errors are handled (returned to the model)."""
    raise ValueError(f"bad {a}")


fragile.handle_tool_error = True


class Side:
    """How one side builds an agent: rb-otel's middleware (and wrapper), or nothing (the instrumentor records)."""

    def __init__(self, name: str, provider: TracerProvider) -> None:
        self.name = name
        self.rb: Any = None
        if name == "rb":
            from rb_otel import ReasonBlocks

            self.rb = ReasonBlocks(tracer_provider=provider, telemetry_batch_window=0)

    def agent(self, model: Any, tools: list[Any], middleware: Sequence[Any] = (), **kwargs: Any) -> Any:
        ours = [self.rb.middleware(agent_name="calc")] if self.rb is not None else []
        return create_agent(model, tools, middleware=[*middleware, *ours], name="calc", **kwargs)

    def wrapped(self, model: Any) -> Any:
        return self.rb.chat_model(model, agent_name="calc") if self.rb is not None else model


def _summarized(side: Side) -> None:
    summarizer = ScriptedChatModel(script=[AIMessage("A summary.")], model_name="summarizer-1")
    script = [tool_call("add", {"a": i, "b": 1}, f"c{i}", content="pad " * 200) for i in range(6)] + [AIMessage("ok")]
    middleware = [SummarizationMiddleware(summarizer, trigger=("messages", 6), keep=("messages", 2))]
    side.agent(_InOrder(script=script), [add], middleware).invoke({"messages": [("user", "x")]})


def _retried(side: Side) -> None:
    retry = ModelRetryMiddleware(max_retries=2, initial_delay=0.0, jitter=False)
    side.agent(_FailsOnce(script=calc_script(1)), [add], [retry]).invoke({"messages": [("user", "x")]})


def _fallback(side: Side) -> None:
    primary = ScriptedChatModel(script=calc_script(1), model_name="primary-1", raise_on_call=0)
    backup = ScriptedChatModel(script=calc_script(1), model_name="backup-1")
    side.agent(primary, [add], [ModelFallbackMiddleware(backup)]).invoke({"messages": [("user", "x")]})


def _fallback_wrapper(side: Side) -> None:
    primary = side.wrapped(ScriptedChatModel(script=calc_script(1), model_name="primary-1", raise_on_call=0))
    backup = ScriptedChatModel(script=calc_script(1), model_name="backup-1")
    create_agent(primary, [add], middleware=[ModelFallbackMiddleware(backup)], name="calc").invoke(
        {"messages": [("user", "x")]}
    )


def _hitl(side: Side) -> None:
    config = {"configurable": {"thread_id": "t"}}
    agent = side.agent(
        ScriptedChatModel(script=calc_script(1)),
        [add],
        [HumanInTheLoopMiddleware(interrupt_on={"add": True})],
        checkpointer=InMemorySaver(),
    )
    agent.invoke({"messages": [("user", "x")]}, config)
    agent.invoke(Command(resume={"decisions": [{"type": "approve"}]}), config)


def _subagent(side: Side) -> None:
    sub = create_agent(ScriptedChatModel(script=calc_script(1), model_name="sub-1"), [add], name="sub")

    @tool
    def delegate(task: str) -> str:
        """Give the task to a subagent."""
        return str(sub.invoke({"messages": [("user", task)]})["messages"][-1].content)

    script = [tool_call("delegate", {"task": "add"}, "c1", content="Delegating."), AIMessage("done")]
    side.agent(ScriptedChatModel(script=script), [delegate]).invoke({"messages": [("user", "x")]})


def _as_node(side: Side) -> None:
    agent = side.agent(ScriptedChatModel(script=calc_script(1)), [add])
    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_edge(START, "agent")
    graph.add_edge("agent", END)
    graph.compile().invoke({"messages": [("user", "x")]})


def _concurrent(side: Side) -> None:
    agent = side.agent(ScriptedChatModel(script=calc_script(1)), [add])
    threads = [threading.Thread(target=agent.invoke, args=({"messages": [("user", "x")]},)) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def _batch_one_failing(side: Side) -> None:
    agent = side.agent(ScriptedChatModel(script=calc_script(1), raise_on_call=1), [add])
    agent.batch([{"messages": [("user", "x")]}, {"messages": [("user", "y")]}], return_exceptions=True)


def _abandoned(side: Side) -> None:
    stream = side.agent(ScriptedChatModel(script=calc_script(2)), [add]).stream(
        {"messages": [("user", "x")]}, stream_mode="values"
    )
    next(stream)
    next(stream)
    stream.close()


def _events(side: Side) -> None:
    async def go() -> None:
        agent = side.agent(ScriptedChatModel(script=calc_script(1)), [add])
        async for _ in agent.astream_events({"messages": [("user", "x")]}, version="v2"):
            pass

    asyncio.run(go())


def _cancelled(side: Side) -> None:
    async def go() -> None:
        agent = side.agent(ScriptedChatModel(script=calc_script(1), sleep_s=0.3), [add])
        task = asyncio.create_task(agent.ainvoke({"messages": [("user", "x")]}))
        await asyncio.sleep(0.1)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    asyncio.run(go())


def _invoke(script: list[AIMessage], tools: list[Any], **model: Any) -> Callable[[Side], None]:
    def run(side: Side) -> None:
        side.agent(ScriptedChatModel(script=script, **model), tools).invoke({"messages": [("user", "x")]})

    return run


def _recursion(side: Side) -> None:
    agent = side.agent(ScriptedChatModel(script=[tool_call("add", {"a": 1, "b": 2}, "c")]), [add])
    with contextlib.suppress(GraphRecursionError):
        agent.invoke({"messages": [("user", "x")]}, {"recursion_limit": 6})


def _stream(mode: str) -> Callable[[Side], None]:
    def run(side: Side) -> None:
        for _ in side.agent(ScriptedChatModel(script=calc_script(1)), [add]).stream(
            {"messages": [("user", "x")]}, stream_mode=mode
        ):
            pass

    return run


def _ainvoke(side: Side) -> None:
    asyncio.run(side.agent(ScriptedChatModel(script=calc_script(1)), [add]).ainvoke({"messages": [("user", "x")]}))


PARALLEL = AIMessage(
    content="Two at once.",
    tool_calls=[
        {"name": "add", "args": {"a": 1, "b": 2}, "id": "p1", "type": "tool_call"},
        {"name": "add", "args": {"a": 3, "b": 4}, "id": "p2", "type": "tool_call"},
    ],
)

CASES: dict[str, Callable[[Side], None]] = {
    "invoke": _invoke(calc_script(2), [add]),
    "ainvoke": _ainvoke,
    "stream values": _stream("values"),
    "stream messages": _stream("messages"),
    "astream_events v2": _events,
    "batch, one run failing": _batch_one_failing,
    "20 concurrent runs": _concurrent,
    "parallel tools": _invoke([PARALLEL, AIMessage("done")], [add]),
    "raising tool (handled)": _invoke([tool_call("fragile", {"a": 1}, "f1"), AIMessage("done")], [fragile]),
    "raising tool (unhandled)": _invoke([tool_call("explode", {"a": 1}, "e1"), AIMessage("done")], [explode]),
    "100 KB tool result": _invoke([tool_call("big", {}, "b1"), AIMessage("done")], [big]),
    "summarization": _summarized,
    "retry": _retried,
    "fallback (middleware)": _fallback,
    "fallback (wrapper)": _fallback_wrapper,
    "human in the loop": _hitl,
    "subagent as a tool": _subagent,
    "agent as a StateGraph node": _as_node,
    "recursion limit": _recursion,
    "cancellation": _cancelled,
    "abandoned stream": _abandoned,
    "usage absent": _invoke(calc_script(1), [add], usage=False),
}


def _usage(span: ReadableSpan) -> tuple[int | None, int | None]:
    attrs = span.attributes or {}
    i, o = attrs.get("gen_ai.usage.input_tokens"), attrs.get("gen_ai.usage.output_tokens")
    return (i if isinstance(i, int) else None, o if isinstance(o, int) else None)


def _record(spans: list[ReadableSpan]) -> dict[str, Any]:
    names = {s.context.span_id: str((s.attributes or {}).get("gen_ai.operation.name", "")) for s in spans if s.context}
    out: dict[str, Any] = {"chat": [], "tools": [], "runs": []}
    for span in sorted(spans, key=lambda s: s.start_time or 0):
        attrs = span.attributes or {}
        operation = attrs.get("gen_ai.operation.name")
        parent = names.get(span.parent.span_id, "") if span.parent else ""
        if operation == "chat":
            model = str(attrs.get("gen_ai.request.model", ""))
            out["chat"].append([model, parent, span.status.status_code.name, *_usage(span)])
        elif operation == "execute_tool":
            out["tools"].append([str(attrs.get("gen_ai.tool.name", "")), parent, span.status.status_code.name])
        elif operation == "invoke_agent":
            tokens = attrs.get("rb.tokens")
            out["runs"].append([*_usage(span), tokens if isinstance(tokens, int) else None])
    return out


def main(side_name: str) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    if side_name == "official":
        from opentelemetry.instrumentation.genai.langchain import LangChainInstrumentor

        LangChainInstrumentor().instrument(tracer_provider=provider)
    side = Side(side_name, provider)
    result: dict[str, Any] = {}
    for case, run in CASES.items():
        exporter.clear()
        raised = ""
        try:
            run(side)
        except Exception as exc:  # recorded: the matrix compares what each side lets through
            raised = type(exc).__name__
        if side.rb is not None:
            side.rb.flush()
        in_flight = side.rb.telemetry.runs_in_flight if side.rb is not None else 0
        result[case] = {**_record(list(exporter.get_finished_spans())), "raised": raised, "in_flight": in_flight}
    print(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1])
