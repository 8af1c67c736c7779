"""``rb.openai_hooks`` / ``rb.openai_model`` with the real OpenAI Agents SDK and ``openai`` client, against a
scripted Responses / Chat Completions API on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import pytest
from adapter_parity import PROMPT, langchain_reference, span_tree, step_rows
from conftest import Otel
from model_api import Reply, ScriptedModelAPI, spans_text, sse
from opentelemetry.trace import StatusCode

from rb_otel import ReasonBlocks

agents = pytest.importorskip("agents", reason="the OpenAI Agents SDK is the [openai-agents] extra")
openai = pytest.importorskip("openai")

KEY = "sk-openai-test-NEVER-IN-TELEMETRY-987654321"
THOUGHT = "Adding the next pair of numbers."
USAGE = {"input_tokens": 20, "output_tokens": 10, "total_tokens": 30}


@agents.function_tool
def add_numbers(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def responses_reply(done: int, n_calls: int = 4) -> Reply:
    """The Responses API answer after ``done`` tool calls of the calculator conversation."""
    if done < n_calls:
        arguments = json.dumps({"a": done, "b": done + 1})
        output: list[dict[str, Any]] = [
            {
                "type": "message",
                "id": f"msg_{done}",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": THOUGHT, "annotations": []}],
            },
            {
                "type": "function_call",
                "id": f"fc_{done}",
                "call_id": f"call_{done}",
                "name": "add_numbers",
                "arguments": arguments,
                "status": "completed",
            },
        ]
    else:
        output = [
            {
                "type": "message",
                "id": "msg_end",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": "The answer is 30.", "annotations": []}],
            }
        ]
    return Reply(
        {
            "id": f"resp_{done}",
            "object": "response",
            "created_at": 0,
            "model": "gpt-test",
            "status": "completed",
            "output": output,
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "usage": {
                **USAGE,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens_details": {"reasoning_tokens": 0},
            },
        }
    )


def chat_reply(done: int, n_calls: int = 4) -> Reply:
    """The Chat Completions answer after ``done`` tool calls of the calculator conversation."""
    message: dict[str, Any] = {"role": "assistant", "content": "The answer is 30."}
    finish = "stop"
    if done < n_calls:
        call = {
            "id": f"call_{done}",
            "type": "function",
            "function": {"name": "add_numbers", "arguments": json.dumps({"a": done, "b": done + 1})},
        }
        message, finish = {"role": "assistant", "content": THOUGHT, "tool_calls": [call]}, "tool_calls"
    return Reply(
        {
            "id": f"chatcmpl-{done}",
            "object": "chat.completion",
            "created": 0,
            "model": "gpt-test",
            "choices": [{"index": 0, "finish_reason": finish, "message": message}],
            "usage": {"prompt_tokens": 20, "completion_tokens": 10, "total_tokens": 30},
        }
    )


def chat_stream(done: int) -> Reply:
    """:func:`chat_reply` as Chat Completions stream chunks (usage in the last one)."""
    message = chat_reply(done).body["choices"][0]["message"]
    base = {"id": f"chatcmpl-{done}", "object": "chat.completion.chunk", "created": 0, "model": "gpt-test"}
    delta: dict[str, Any] = {"role": "assistant", "content": message["content"]}
    chunks = [{**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}]
    for i, call in enumerate(message.get("tool_calls", ())):
        tool_delta = {"index": i, "id": call["id"], "type": "function", "function": call["function"]}
        chunks.append({**base, "choices": [{"index": 0, "delta": {"tool_calls": [tool_delta]}, "finish_reason": None}]})
    finish = "tool_calls" if message.get("tool_calls") else "stop"
    chunks.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    chunks.append({**base, "choices": [], "usage": {"prompt_tokens": 20, "completion_tokens": 10, "total_tokens": 30}})
    return sse(chunks)


def respond(path: str, body: Any) -> Reply:
    if path.endswith("/chat/completions") and body.get("stream"):
        return chat_stream(sum(1 for m in body["messages"] if m.get("role") == "tool"))
    if path.endswith("/chat/completions"):
        return chat_reply(sum(1 for m in body["messages"] if m.get("role") == "tool"))
    return responses_reply(sum(1 for i in body["input"] if i.get("type") == "function_call_output"))


def client(api: ScriptedModelAPI, **options: Any) -> Any:
    return openai.AsyncOpenAI(api_key=KEY, base_url=api.url + "/v1", **options)


def responses_model(api: ScriptedModelAPI, name: str = "gpt-test", **options: Any) -> Any:
    return agents.OpenAIResponsesModel(model=name, openai_client=client(api, **options))


def chat_model(api: ScriptedModelAPI, name: str = "gpt-test", **options: Any) -> Any:
    return agents.OpenAIChatCompletionsModel(model=name, openai_client=client(api, **options))


def run(agent: Any, hooks: Any = None, text: str = "what is 1+2?") -> Any:
    config = agents.RunConfig(tracing_disabled=True)  # the SDK's own tracing would export to OpenAI's backend
    return asyncio.run(agents.Runner.run(agent, text, hooks=hooks, run_config=config))


def calc_agent(model: Any) -> Any:
    return agents.Agent(name="calc", instructions=PROMPT, tools=[add_numbers], model=model)


@pytest.mark.parametrize("api_kind", ["responses", "chat_completions"])
def test_hooks_record_the_same_tree_and_steps_as_the_langchain_middleware(otel: Otel, api_kind: str) -> None:
    tree, steps = langchain_reference(otel)
    rb = ReasonBlocks(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    hooks = rb.openai_hooks(agent_name="calc")
    with ScriptedModelAPI(respond) as api:
        model = responses_model(api) if api_kind == "responses" else chat_model(api)
        result = run(calc_agent(model), hooks)
    assert result.final_output == "The answer is 30."
    rb.telemetry.flush()
    assert span_tree(otel) == tree
    assert step_rows(otel) == [(s[0], s[1], s[2], ("add_numbers",) if s[3] else s[3]) for s in steps]
    (root,) = otel.spans("invoke_agent")
    assert root.attributes["rb.outcome"] == "success" and root.attributes["rb.framework"] == "openai-agents"
    assert root.attributes["rb.tokens"] == 5 * 30  # every response's tokens, once
    assert not any(s.attributes.get("rb.injection_sources") for s in otel.spans("chat "))  # telemetry only


def test_the_steered_model_injects_guidance_and_the_hooks_add_no_second_chat_span(otel: Otel) -> None:
    rb = ReasonBlocks(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    with ScriptedModelAPI(respond) as api:
        model = rb.openai_model(chat_model(api), agent_name="calc")
        result = run(calc_agent(model), rb.openai_hooks(agent_name="calc"))
    assert result.final_output == "The answer is 30."
    rb.telemetry.flush()
    assert len(otel.spans("chat ")) == 5 and len(otel.spans("invoke_agent")) == 1
    first_system = api.requests[0].body["messages"][0]
    assert first_system["role"] == "system" and first_system["content"].startswith(PROMPT + "\n\n[REASONBLOCKS]\n")
    sources = otel.spans("chat ")[0].attributes
    assert sources is not None and "E3Injection" in sources["rb.injection_sources"]


def test_a_streamed_run_is_steered_and_recorded_like_a_plain_one(otel: Otel) -> None:
    rb = ReasonBlocks(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    config = agents.RunConfig(tracing_disabled=True)

    async def streamed(api: ScriptedModelAPI) -> Any:
        agent = calc_agent(rb.openai_model(chat_model(api), agent_name="calc"))
        result = agents.Runner.run_streamed(
            agent, "what is 1+2?", hooks=rb.openai_hooks(agent_name="calc"), run_config=config
        )
        async for _ in result.stream_events():
            pass
        return result

    with ScriptedModelAPI(respond) as api:
        result = asyncio.run(streamed(api))
    assert result.final_output == "The answer is 30."
    assert all(r.body.get("stream") for r in api.requests)
    assert api.requests[0].body["messages"][0]["content"].startswith(PROMPT + "\n\n[REASONBLOCKS]\n")
    rb.telemetry.flush()
    assert [s[1] for s in step_rows(otel)] == ["INIT", "NORMAL", "NORMAL", "NORMAL", "NORMAL"]
    assert [s[3] for s in step_rows(otel)] == [("add_numbers",)] * 4 + [()]
    (root,) = otel.spans("invoke_agent")
    assert root.attributes["rb.outcome"] == "success" and root.attributes["rb.tokens"] == 150


def test_the_model_alone_opens_and_ends_each_run(otel: Otel) -> None:
    rb = ReasonBlocks(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    with ScriptedModelAPI(respond) as api:
        model = rb.openai_model(responses_model(api), agent_name="calc")
        config = agents.RunConfig(tracing_disabled=True)

        async def twice() -> None:  # one event loop: the client's connections belong to it
            for _ in range(2):
                await agents.Runner.run(calc_agent(model), "what is 1+2?", run_config=config)

        asyncio.run(twice())
    rb.telemetry.flush()
    roots = otel.spans("invoke_agent")
    assert len(roots) == 2 and {r.attributes["rb.outcome"] for r in roots} == {"success"}
    assert span_tree(otel).count(("chat", "invoke_agent")) == 10


def test_routing_builds_each_routed_model_once_through_the_factory(otel: Otel) -> None:
    rb = ReasonBlocks(
        tracer_provider=otel.tracer_provider,
        meter_provider=otel.meter_provider,
        model_routing={"NORMAL": "openai:gpt-strong"},
    )
    built: list[str] = []
    with ScriptedModelAPI(respond) as api:

        def factory(model_id: str) -> Any:
            built.append(model_id)
            return responses_model(api, model_id)

        run(calc_agent(rb.openai_model(responses_model(api), model_factory=factory)))
        run(calc_agent(rb.openai_model(responses_model(api))))  # no factory: noted, not routed
    assert built == ["gpt-strong"]
    models = [r.body["model"] for r in api.requests]
    assert models == ["gpt-test"] + ["gpt-strong"] * 4 + ["gpt-test"] * 5
    rb.telemetry.flush()
    noted = [s.attributes.get("rb.model_id") for s in sorted(otel.spans("chat "), key=lambda s: s.start_time or 0)]
    assert noted[5:] == [None] + ["openai:gpt-strong"] * 4


def test_a_429_with_retry_after_is_retried_by_the_client(otel: Otel) -> None:
    rb = ReasonBlocks(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    with ScriptedModelAPI(respond) as api:
        error = {"error": {"message": "slow down", "type": "rate_limit_error", "code": None, "param": None}}
        api.add("/v1/responses", Reply(error, 429, {"retry-after": "0"}))
        result = run(calc_agent(rb.openai_model(responses_model(api, max_retries=2))))
    assert result.final_output == "The answer is 30." and len(api.requests) == 6
    rb.telemetry.flush()
    assert all(s.status.status_code is StatusCode.UNSET for s in otel.spans("chat "))


@pytest.mark.parametrize(
    ("reply", "error"),
    [
        (
            Reply({"error": {"message": "boom", "type": "server_error", "code": None, "param": None}}, 500),
            "InternalServerError",
        ),
        (Reply(raw=b"{not json"), "JSONDecodeError"),  # what the client itself raises for a body it cannot parse
        (Reply(chat_reply(4).body, delay=2.0), "APITimeoutError"),
    ],
    ids=["500", "malformed", "slow"],
)
def test_model_errors_reach_the_caller_unchanged_and_every_span_ends(
    otel: Otel, reply: Reply, error: str, caplog: pytest.LogCaptureFixture
) -> None:
    rb = ReasonBlocks(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    caplog.set_level(logging.DEBUG)
    hooks = rb.openai_hooks(agent_name="calc")
    with ScriptedModelAPI(respond) as api:
        api.add("/v1/chat/completions", chat_reply(0))
        api.add("/v1/chat/completions", reply)
        model = rb.openai_model(chat_model(api, max_retries=0, timeout=0.5))
        with pytest.raises(Exception) as caught, hooks:
            run(calc_agent(model), hooks)
    assert type(caught.value).__name__ == error
    rb.telemetry.flush()
    chats = sorted(otel.spans("chat "), key=lambda s: s.start_time or 0)
    assert [c.status.status_code for c in chats] == [StatusCode.UNSET, StatusCode.ERROR]
    assert chats[1].attributes["error.type"] == f"{type(caught.value).__module__}.{error}"  # fully qualified
    (root,) = otel.spans("invoke_agent")
    assert root.attributes["rb.outcome"] == f"failure: {error}" and root.status.status_code is StatusCode.ERROR
    assert KEY not in spans_text(otel.exporter.get_finished_spans()) and KEY not in caplog.text


def test_the_api_key_never_reaches_spans_or_logs(otel: Otel, caplog: pytest.LogCaptureFixture) -> None:
    rb = ReasonBlocks(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider, capture_content=True)
    caplog.set_level(logging.DEBUG)
    with ScriptedModelAPI(respond) as api:
        run(calc_agent(rb.openai_model(responses_model(api))), rb.openai_hooks(agent_name="calc"))
    assert KEY in api.requests[0].headers["authorization"]  # sent, to the server only
    rb.telemetry.flush()
    recorded = spans_text(otel.exporter.get_finished_spans())
    assert "what is 1+2?" in recorded and KEY not in recorded and KEY not in caplog.text


def test_concurrent_runs_on_one_reasonblocks_keep_their_runs_apart(otel: Otel) -> None:
    rb = ReasonBlocks(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    hooks = rb.openai_hooks(agent_name="calc")
    config = agents.RunConfig(tracing_disabled=True)

    async def many(api: ScriptedModelAPI) -> list[Any]:
        agent = calc_agent(rb.openai_model(responses_model(api)))
        runs = [agents.Runner.run(agent, f"question {i}", hooks=hooks, run_config=config) for i in range(5)]
        return list(await asyncio.gather(*runs))

    with ScriptedModelAPI(respond) as api:
        results = asyncio.run(many(api))
    assert all(r.final_output == "The answer is 30." for r in results)
    rb.telemetry.flush()
    roots = otel.spans("invoke_agent")
    assert len(roots) == 5 and len({r.context.trace_id for r in roots}) == 5
    for root in roots:
        children = [
            s for s in otel.exporter.get_finished_spans() if s.parent and s.parent.span_id == root.context.span_id
        ]
        assert sorted(s.attributes["rb.step"] for s in children if s.name.startswith("chat ")) == [0, 1, 2, 3, 4]
        assert sum(s.name.startswith("execute_tool") for s in children) == 4


def test_bad_arguments_fail_at_the_boundary() -> None:
    rb = ReasonBlocks()
    with pytest.raises(TypeError, match="agents Model"):
        rb.openai_model("gpt-4o")
    with pytest.raises(TypeError, match="model_factory"):
        rb.openai_model(
            agents.OpenAIResponsesModel(model="m", openai_client=openai.AsyncOpenAI(api_key="x")), model_factory=3
        )
