"""``run_messages_agent_loop`` with the real ``anthropic`` SDK against a scripted Messages API on 127.0.0.1."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from adapter_parity import PROMPT, STEP_KEYS, langchain_reference, span_tree, step_rows
from conftest import Otel
from model_api import Reply, ScriptedModelAPI, anthropic_error, by_turn, message, spans_text, text, thinking, tool_use
from opentelemetry.trace import StatusCode

from rb_otel import ReasonBlocks
from rb_otel.integrations.anthropic import arun_messages_agent_loop, run_messages_agent_loop

anthropic = pytest.importorskip("anthropic", reason="the Anthropic SDK is the [anthropic] extra")

KEY = "sk-ant-test-NEVER-IN-TELEMETRY-0123456789"
THOUGHT = "Adding the next pair of numbers."
TOOLS = [{"name": "add", "description": "Add two integers.", "input_schema": {"type": "object"}}]


def calc_replies(n_calls: int = 4, **usage: int) -> list[Reply]:
    """The conversation of ``conftest.calc_script`` as Messages API replies."""
    calls = [
        message([text(THOUGHT), tool_use(f"call_{i}", "add", {"a": i, "b": i + 1})], **usage) for i in range(n_calls)
    ]
    return [*calls, message([text("The answer is 30.")], **usage)]


def dispatch(name: str, arguments: dict[str, Any]) -> Any:
    assert name == "add"
    return arguments["a"] + arguments["b"]


def client(api: ScriptedModelAPI, **options: Any) -> Any:
    return anthropic.Anthropic(api_key=KEY, base_url=api.url, **options)


def loop(api: ScriptedModelAPI, session: Any = None, **kw: Any) -> dict[str, Any]:
    options = {k: kw.pop(k) for k in ("max_retries", "timeout") if k in kw}
    return run_messages_agent_loop(
        client(api, **options),
        model=kw.pop("model", "claude-test-1"),
        messages=kw.pop("messages", [{"role": "user", "content": "what is 1+2?"}]),
        tool_specs=TOOLS,
        dispatch=kw.pop("dispatch", dispatch),
        system=kw.pop("system", PROMPT),
        session=session,
        **kw,
    )


def test_a_plain_loop_runs_tools_and_returns_the_documented_dict() -> None:
    messages = [{"role": "user", "content": "what is 1+2?"}]
    with ScriptedModelAPI(by_turn(calc_replies())) as api:
        out = loop(api, messages=messages)
    assert out["final_text"] == "The answer is 30." and out["stop_reason"] == "end_turn"
    assert out["tool_calls"] == [("add", {"a": i, "b": i + 1}, 2 * i + 1) for i in range(4)]
    assert len(out["messages"]) == 1 + 2 * 4 + 1 and messages == [{"role": "user", "content": "what is 1+2?"}]
    assert out["messages"][2]["content"][0] == {"type": "tool_result", "tool_use_id": "call_0", "content": "1"}
    bodies = [r.body for r in api.requests]
    assert all(b["system"] == PROMPT and b["tools"] == TOOLS and b["max_tokens"] == 4096 for b in bodies)


def test_the_same_span_tree_and_steps_as_the_langchain_middleware(otel: Otel) -> None:
    keys = (*STEP_KEYS, "rb.injection_sources")  # it steers: the same guidance too
    langchain_tree, langchain_steps = langchain_reference(otel, keys)
    rb = ReasonBlocks(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    session = rb.session(framework="anthropic", agent_name="calc")
    with ScriptedModelAPI(by_turn(calc_replies())) as api:
        out = loop(api, session)
    rb.telemetry.flush()
    assert out["final_text"] == "The answer is 30."
    assert span_tree(otel) == langchain_tree
    assert step_rows(otel, keys) == langchain_steps
    assert [e.fsm_state for e in session.step_log] == ["INIT", "NORMAL", "NORMAL", "NORMAL", "NORMAL"]
    (root,) = otel.spans("invoke_agent")
    assert root.attributes["rb.framework"] == "anthropic" and root.attributes["rb.outcome"] == "success"
    tools = otel.spans("execute_tool")
    assert [t.attributes["gen_ai.tool.call.id"] for t in sorted(tools, key=lambda s: s.start_time or 0)] == [
        f"call_{i}" for i in range(4)
    ]


def test_guidance_is_an_uncached_block_after_the_cached_system_prompt(otel: Otel) -> None:
    rb = ReasonBlocks(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    session = rb.session(framework="anthropic", agent_name="calc")
    with ScriptedModelAPI(by_turn(calc_replies())) as api:
        loop(api, session)
    first, *rest = [r.body for r in api.requests]
    base, guidance = first["system"]
    assert base == {"type": "text", "text": PROMPT, "cache_control": {"type": "ephemeral"}}
    assert guidance["text"].startswith("[REASONBLOCKS]\n") and "cache_control" not in guidance
    fired = {e.step for e in session.step_log if e.injections}
    for step, body in enumerate(rest, start=1):
        assert (body["system"] == PROMPT) is (step not in fired)


def test_no_system_prompt_and_nothing_fired_sends_no_system() -> None:
    with ScriptedModelAPI(by_turn(calc_replies())) as api:
        loop(api, system="")
    assert all("system" not in r.body for r in api.requests)


def test_tokens_count_cache_reads_and_writes(otel: Otel) -> None:
    rb = ReasonBlocks(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    session = rb.session(framework="anthropic", agent_name="calc")
    usage = {"cache_read_input_tokens": 100, "cache_creation_input_tokens": 50}
    with ScriptedModelAPI(by_turn(calc_replies(1, **usage))) as api:
        loop(api, session)
    rb.telemetry.flush()
    assert [e.tokens for e in session.step_log] == [20 + 10 + 100 + 50] * 2
    chat = otel.spans("chat ")[0].attributes or {}
    assert chat["gen_ai.usage.input_tokens"] == 170 and chat["gen_ai.usage.output_tokens"] == 10
    assert chat["gen_ai.usage.cache_read.input_tokens"] == 100
    assert chat["gen_ai.usage.cache_creation.input_tokens"] == 50


def test_thinking_blocks_are_part_of_the_thought(otel: Otel) -> None:
    rb = ReasonBlocks(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    session = rb.session(framework="anthropic", agent_name="calc")
    hard = "Hmm, maybe the error is in src/a.py, not sure; the traceback failed with KeyError again."
    replies = [message([thinking(hard), tool_use("c0", "add", {"a": 1, "b": 2})]), message([text("3")])]
    with ScriptedModelAPI(by_turn(replies)) as api:
        loop(api, session)
    assert session.step_log[1].thought_preview == hard[:120]
    assert api.requests[1].body["messages"][1]["content"][0]["type"] == "thinking"  # sent back as it came


def test_routing_strips_the_provider_prefix(otel: Otel) -> None:
    rb = ReasonBlocks(
        tracer_provider=otel.tracer_provider,
        meter_provider=otel.meter_provider,
        model_routing={"NORMAL": "anthropic:claude-strong-2"},
    )
    session = rb.session(framework="anthropic", agent_name="calc")
    with ScriptedModelAPI(by_turn(calc_replies())) as api:
        loop(api, session)
    assert [r.body["model"] for r in api.requests] == ["claude-test-1"] + ["claude-strong-2"] * 4
    assert [e.model_id for e in session.step_log][1:] == ["anthropic:claude-strong-2"] * 4
    rb.telemetry.flush()
    routed = [s for s in otel.spans("chat ") if s.attributes["rb.step"] > 0]
    assert {s.attributes["gen_ai.request.model"] for s in routed} == {"claude-strong-2"}


def test_a_429_with_retry_after_is_retried_by_the_sdk_inside_one_chat_span(otel: Otel) -> None:
    rb = ReasonBlocks(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    session = rb.session(framework="anthropic", agent_name="calc")
    with ScriptedModelAPI(by_turn(calc_replies(0))) as api:
        api.add("/v1/messages", anthropic_error(429, "rate_limit_error", **{"retry-after": "0"}))
        out = loop(api, session, max_retries=2)
    assert out["final_text"] == "The answer is 30." and len(api.requests) == 2
    rb.telemetry.flush()
    (chat,) = otel.spans("chat ")
    assert chat.status.status_code is StatusCode.UNSET


@pytest.mark.parametrize(
    ("reply", "error"),
    [
        (anthropic_error(500, "api_error"), "InternalServerError"),
        (Reply(raw=b"{not json"), "JSONDecodeError"),  # what the SDK itself raises for a body it cannot parse
        (Reply(message([text("late")]).body, delay=2.0), "APITimeoutError"),
    ],
    ids=["500", "malformed", "slow"],
)
def test_model_errors_reach_the_caller_unchanged_and_every_span_ends(
    otel: Otel, reply: Reply, error: str, caplog: pytest.LogCaptureFixture
) -> None:
    rb = ReasonBlocks(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    session = rb.session(framework="anthropic", agent_name="calc")
    caplog.set_level(logging.DEBUG)
    with ScriptedModelAPI(by_turn(calc_replies())) as api:
        api.add("/v1/messages", message([text(THOUGHT), tool_use("call_0", "add", {"a": 0, "b": 1})]))
        api.add("/v1/messages", reply)
        with pytest.raises(Exception) as caught:
            loop(api, session, max_retries=0, timeout=0.5)
    assert type(caught.value).__name__ == error
    rb.telemetry.flush()
    chats = sorted(otel.spans("chat "), key=lambda s: s.start_time or 0)
    assert [c.status.status_code for c in chats] == [StatusCode.UNSET, StatusCode.ERROR]
    assert chats[1].attributes["error.type"] == f"{type(caught.value).__module__}.{error}"  # fully qualified
    (root,) = otel.spans("invoke_agent")
    assert root.attributes["rb.outcome"] == f"failure: {error}" and root.status.status_code is StatusCode.ERROR
    assert len(session.step_log) == 1  # the failed call is a span, not a step
    assert KEY not in spans_text(otel.exporter.get_finished_spans()) and KEY not in caplog.text


def test_the_api_key_never_reaches_spans_or_logs(otel: Otel, caplog: pytest.LogCaptureFixture) -> None:
    rb = ReasonBlocks(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider, capture_content=True)
    caplog.set_level(logging.DEBUG)
    with ScriptedModelAPI(by_turn(calc_replies())) as api:
        loop(api, rb.session(framework="anthropic", agent_name="calc"))
    headers = api.requests[0].headers  # the SDK did send the key, to the server only
    assert KEY in (headers.get("x-api-key") or "") + (headers.get("authorization") or "")
    rb.telemetry.flush()
    recorded = spans_text(otel.exporter.get_finished_spans())
    assert "what is 1+2?" in recorded  # content capture is on: the prompt is there, the key is not
    assert KEY not in recorded and KEY not in caplog.text


def test_a_tool_exception_propagates_and_ends_its_span(otel: Otel) -> None:
    rb = ReasonBlocks(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    failure = KeyError("missing")

    def broken(name: str, arguments: dict[str, Any]) -> Any:
        raise failure

    with ScriptedModelAPI(by_turn(calc_replies())) as api, pytest.raises(KeyError) as caught:
        loop(api, rb.session(framework="anthropic", agent_name="calc"), dispatch=broken)
    assert caught.value is failure
    rb.telemetry.flush()
    (tool,) = otel.spans("execute_tool")
    assert tool.status.status_code is StatusCode.ERROR
    assert otel.spans("invoke_agent")[0].attributes["rb.outcome"] == "failure: KeyError"


def test_max_steps_stops_the_loop(otel: Otel) -> None:
    rb = ReasonBlocks(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    with ScriptedModelAPI(by_turn(calc_replies())) as api:
        out = loop(api, rb.session(framework="anthropic", agent_name="calc"), max_steps=2)
    assert out["stop_reason"] == "max_steps" and len(api.requests) == 2 and len(out["tool_calls"]) == 2
    rb.telemetry.flush()
    assert otel.spans("invoke_agent")[0].attributes["rb.outcome"] == "failure: max_steps"


def test_concurrent_async_loops_on_one_reasonblocks_keep_their_runs_apart(otel: Otel) -> None:
    rb = ReasonBlocks(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)

    async def adispatch(name: str, arguments: dict[str, Any]) -> Any:
        await asyncio.sleep(0.001)
        return dispatch(name, arguments)

    async def many(api: ScriptedModelAPI) -> list[dict[str, Any]]:
        async with anthropic.AsyncAnthropic(api_key=KEY, base_url=api.url) as aclient:
            loops = [
                arun_messages_agent_loop(
                    aclient,
                    model="claude-test-1",
                    messages=[{"role": "user", "content": f"question {i}"}],
                    tool_specs=TOOLS,
                    dispatch=adispatch,
                    system=PROMPT,
                    session=rb.session(framework="anthropic", agent_name="calc", run_id=f"run-{i}"),
                )
                for i in range(6)
            ]
            return list(await asyncio.gather(*loops))

    with ScriptedModelAPI(by_turn(calc_replies())) as api:
        outs = asyncio.run(many(api))
    assert all(o["final_text"] == "The answer is 30." for o in outs)
    rb.telemetry.flush()
    roots = {r.attributes["rb.run_id"]: r for r in otel.spans("invoke_agent")}
    assert sorted(roots) == [f"run-{i}" for i in range(6)]
    for root in roots.values():
        children = [
            s for s in otel.exporter.get_finished_spans() if s.parent and s.parent.span_id == root.context.span_id
        ]
        assert sorted(s.attributes["rb.step"] for s in children if s.name.startswith("chat ")) == [0, 1, 2, 3, 4]
        assert sum(s.name.startswith("execute_tool") for s in children) == 4


def test_the_sync_loop_refuses_an_async_client() -> None:
    with pytest.raises(TypeError, match="arun_messages_agent_loop"):
        run_messages_agent_loop(
            anthropic.AsyncAnthropic(api_key=KEY, base_url="http://127.0.0.1:9"),
            model="m",
            messages=[],
            tool_specs=[],
            dispatch=dispatch,
        )


def test_a_failing_steering_core_never_stops_the_loop(caplog: pytest.LogCaptureFixture) -> None:
    from rb_otel.steering import SteeringSession, TraceStateManager

    class BrokenSession(SteeringSession):
        def begin_step(self, **kwargs: Any) -> Any:
            raise RuntimeError("steering is broken")

    with ScriptedModelAPI(by_turn(calc_replies())) as api:
        out = loop(api, BrokenSession(score_fn=len, state_manager=TraceStateManager(), injections=[]))
    assert out["final_text"] == "The answer is 30." and len(out["tool_calls"]) == 4
    assert all(r.body["system"] == PROMPT for r in api.requests)  # every call went out unmodified
    assert caplog.text.count("steering the call failed, calling the model unmodified") == 5


def test_the_facade_runs_the_loop_in_one_call(otel: Otel) -> None:
    rb = ReasonBlocks(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    with ScriptedModelAPI(by_turn(calc_replies())) as api:
        out = rb.anthropic_loop(
            client(api),
            model="claude-test-1",
            messages=[{"role": "user", "content": "what is 1+2?"}],
            tool_specs=TOOLS,
            dispatch=dispatch,
            system=PROMPT,
            agent_name="calc",
            run_id="one-call",
        )
    assert out["final_text"] == "The answer is 30." and out["rb_run_id"] == "one-call"
    assert [e["step"] for e in out["rb_step_log"]] == [0, 1, 2, 3, 4]
    rb.telemetry.flush()
    (root,) = otel.spans("invoke_agent")
    assert root.attributes["rb.framework"] == "anthropic" and root.attributes["rb.run_id"] == "one-call"


def test_the_previous_releases_session_maker_warns_and_still_works(otel: Otel) -> None:
    rb = ReasonBlocks(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    with pytest.warns(DeprecationWarning, match=r"rb.anthropic_loop\(client"):
        session = rb.claude_messages_session(agent_name="calc")
    with ScriptedModelAPI(by_turn(calc_replies())) as api:
        loop(api, session)
    assert len(session.step_log) == 5
