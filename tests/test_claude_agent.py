"""``claude_agent_telemetry`` over a recorded ``query()`` stream built from the Claude Agent SDK's own types."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from adapter_parity import langchain_reference, span_tree, step_rows
from conftest import Otel
from opentelemetry.trace import StatusCode

from rb_otel import ReasonBlocks

sdk = pytest.importorskip("claude_agent_sdk", reason="the Claude Agent SDK is the [claude-agent] extra")

THOUGHT = "Adding the next pair of numbers."
USAGE = {"input_tokens": 20, "output_tokens": 10, "cache_read_input_tokens": 5}


def calc_stream(*, split_turns: bool = False, result: str = "success") -> list[Any]:
    """The calculator conversation as the SDK streams it (``split_turns``: one message per block, as the CLI
    does, sharing a ``message_id``)."""
    stream: list[Any] = [sdk.SystemMessage(subtype="init", data={"model": "claude-test-1", "session_id": "s1"})]
    for i in range(4):
        blocks = [sdk.TextBlock(THOUGHT), sdk.ToolUseBlock(id=f"toolu_{i}", name="add", input={"a": i, "b": i + 1})]
        parts = [[b] for b in blocks] if split_turns else [blocks]
        stream += [sdk.AssistantMessage(p, model="claude-test-1", message_id=f"msg_{i}", usage=USAGE) for p in parts]
        stream.append(sdk.UserMessage([sdk.ToolResultBlock(tool_use_id=f"toolu_{i}", content=str(2 * i + 1))]))
    stream.append(
        sdk.AssistantMessage(
            [sdk.TextBlock("The answer is 30.")], model="claude-test-1", message_id="msg_4", usage=USAGE
        )
    )
    stream.append(
        sdk.ResultMessage(
            subtype=result,
            duration_ms=10,
            duration_api_ms=8,
            is_error=result != "success",
            num_turns=5,
            session_id="s1",
            usage=USAGE,
        )
    )
    return stream


async def replay(messages: list[Any], *, fail_after: int | None = None) -> AsyncIterator[Any]:
    for i, message in enumerate(messages):
        if i == fail_after:
            raise ConnectionError("the CLI went away")
        await asyncio.sleep(0)
        yield message


def consume(stream: AsyncIterator[Any]) -> list[Any]:
    async def drain() -> list[Any]:
        return [m async for m in stream]

    return asyncio.run(drain())


@pytest.mark.parametrize("split_turns", [False, True])
def test_the_same_tree_and_steps_as_the_langchain_middleware(otel: Otel, split_turns: bool) -> None:
    tree, steps = langchain_reference(otel)
    rb = ReasonBlocks(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)

    recorded = calc_stream(split_turns=split_turns)
    seen = consume(rb.claude_agent(replay(recorded), agent_name="calc"))
    assert seen == recorded  # every message passes through unchanged
    rb.telemetry.flush()
    assert span_tree(otel) == tree
    assert step_rows(otel) == steps
    (root,) = otel.spans("invoke_agent")
    assert root.attributes["rb.outcome"] == "success" and root.attributes["rb.framework"] == "claude-agent-sdk"
    assert root.attributes["rb.tokens"] == 5 * 35
    chat = otel.spans("chat ")[0].attributes or {}
    assert chat["gen_ai.usage.input_tokens"] == 25 and chat["gen_ai.usage.cache_read.input_tokens"] == 5
    for tool in otel.spans("execute_tool"):
        assert tool.status.status_code is StatusCode.UNSET


def test_chat_spans_end_when_their_turn_does_not_after_its_tools(otel: Otel) -> None:
    rb = ReasonBlocks(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    consume(rb.claude_agent(replay(calc_stream()), agent_name="calc"))
    rb.telemetry.flush()
    chats = sorted(otel.spans("chat "), key=lambda s: s.start_time or 0)
    tools = sorted(otel.spans("execute_tool"), key=lambda s: s.start_time or 0)
    for chat, tool in zip(chats, tools, strict=False):
        assert chat.end_time is not None and tool.end_time is not None and chat.end_time <= tool.end_time


def test_an_error_result_and_an_error_tool_result(otel: Otel) -> None:
    rb = ReasonBlocks(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    stream = calc_stream(result="error_max_turns")
    stream[2] = sdk.UserMessage([sdk.ToolResultBlock(tool_use_id="toolu_0", content="no such file", is_error=True)])
    consume(rb.claude_agent(replay(stream), agent_name="calc"))
    rb.telemetry.flush()
    first_tool = min(otel.spans("execute_tool"), key=lambda s: s.start_time or 0)
    assert first_tool.status.status_code is StatusCode.ERROR
    assert otel.spans("invoke_agent")[0].attributes["rb.outcome"] == "failure: error_max_turns"


def test_a_stream_that_raises_ends_the_run_and_the_error_propagates(otel: Otel) -> None:
    rb = ReasonBlocks(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    with pytest.raises(ConnectionError):
        consume(rb.claude_agent(replay(calc_stream(), fail_after=2), agent_name="calc"))
    rb.telemetry.flush()
    (root,) = otel.spans("invoke_agent")
    assert root.attributes["rb.outcome"] == "failure: ConnectionError" and root.status.status_code is StatusCode.ERROR
    assert all(s.end_time is not None for s in otel.exporter.get_finished_spans())
    assert len(otel.spans("execute_tool")) == 1  # the tool in flight ended with the run


def test_a_stream_closed_before_its_result_is_not_a_success(otel: Otel) -> None:
    rb = ReasonBlocks(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)

    async def first_two() -> None:
        stream = rb.claude_agent(replay(calc_stream()), agent_name="calc")
        async for i, _ in _enumerate(stream):
            if i == 1:
                break
        await stream.aclose()

    asyncio.run(first_two())
    consume(rb.claude_agent(replay(calc_stream()[:-1]), agent_name="calc"))
    rb.telemetry.flush()
    assert sorted(r.attributes["rb.outcome"] for r in otel.spans("invoke_agent")) == [
        "failure: GeneratorExit",
        "failure: incomplete",
    ]


async def _enumerate(stream: AsyncIterator[Any]) -> AsyncIterator[tuple[int, Any]]:
    i = 0
    async for item in stream:
        yield i, item
        i += 1
