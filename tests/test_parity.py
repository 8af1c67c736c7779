"""ReasonBlocks parity on LangChain: TokenSavingMiddleware, GeneralMonitorMiddleware, ReasonBlocksConfig.

Real ``create_agent`` agents with scripted models; the Anthropic classifier with the real SDK against a local
HTTP server that speaks the Messages API.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import anthropic
import pytest
from hypothesis import given
from hypothesis import strategies as st
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool

from rb_otel import (
    GeneralMonitorMiddleware,
    ReasonBlocks,
    ReasonBlocksConfig,
    TokenSavingMiddleware,
    build_middleware,
    make_anthropic_classifier,
)
from rb_otel.integrations.langchain.state import StatefulReasonBlocksMiddleware
from rb_otel.integrations.langchain.token_saving import build_steps_from_messages
from rb_otel.steering import DifficultyFSM, TraceStateManager, score_step
from rb_otel.steering.token_saving import compress_tool_output, heuristic_classifier, keep_words
from rb_otel.testing import ScriptedChatModel, tool_call
from tests.conftest import Otel

BIG = "".join(f"line {i}: value={i * 7} status=ok\n" for i in range(200))  # ~5,000 characters


@tool
def dump(n: int) -> str:
    """Print a long log."""
    return BIG + f"end {n}"


def _script(n: int, thought: str = "Reading the next log.") -> list[AIMessage]:
    return [tool_call("dump", {"n": i}, f"d{i}", content=f"{thought} ({i})") for i in range(n)] + [AIMessage("done")]


def _rb(otel: Otel) -> ReasonBlocks:
    return ReasonBlocks(
        tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider, telemetry_batch_window=0
    )


@given(st.text(max_size=3000), st.integers(10, 2000), st.integers(0, 500), st.integers(0, 500))
def test_compress_tool_output_has_the_documented_shape(content: str, threshold: int, head: int, tail: int) -> None:
    out = compress_tool_output(content, threshold, head, tail)
    if len(content) <= threshold:
        assert out == content
        return
    kept_tail = content[len(content) - tail :] if tail else ""
    omitted = len(content) - len(content[:head]) - len(kept_tail)
    assert out == f"{content[:head]}\n\n[... {omitted} chars truncated ...]\n\n{kept_tail}"


def test_old_tool_outputs_shrink_in_the_returned_state_under_the_same_ids(otel: Otel) -> None:
    rb = _rb(otel)
    saver = TokenSavingMiddleware(keep_recent_tool_messages=2)
    agent = create_agent(
        ScriptedChatModel(script=_script(6)), [dump], middleware=[rb.middleware(agent_name="logs"), saver]
    )
    out = agent.invoke({"messages": [("user", "read the logs")]})
    tools = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert len(tools) == 6 and all(m.id for m in tools)
    # compressed on the calls after them, except the two most recent, which stay whole
    for message in tools[:-2]:
        assert "chars truncated" in message.content and len(message.content) < 1800
    assert all(m.content.startswith(BIG) for m in tools[-2:])
    assert len({m.id for m in tools}) == 6  # replaced in place: no duplicates under new ids
    assert saver.stats.compressions == 4 and saver.stats.chars_saved > 4 * 3000
    [run] = otel.spans("invoke_agent")
    assert run.attributes is not None
    assert run.attributes["rb.token_saving.chars_saved"] == saver.stats.chars_saved
    assert run.attributes["rb.token_saving.compressions"] == 4
    assert otel.metric_sum("rb.token_saving.chars_saved") == saver.stats.chars_saved


def test_early_exit_fires_once_per_run_when_the_signals_say_so(otel: Otel) -> None:
    seen: list[int] = []

    def signals(steps: list[dict[str, Any]]) -> dict[str, float]:
        seen.append(len(steps))
        return {"streak": 0.8}

    saver = TokenSavingMiddleware(early_exit_min_call_index=3, signals_fn=signals, enable_compression=False)
    agent = create_agent(ScriptedChatModel(script=_script(6)), [dump], middleware=[saver])
    out = agent.invoke({"messages": [("user", "x")]})
    nudges = [m for m in out["messages"] if isinstance(m, HumanMessage) and m.content == saver.early_exit_text]
    assert len(nudges) == 1 and saver.stats.early_exits == 1
    assert seen[0] == 3  # first asked at call index 3, with the steps so far


def test_no_early_exit_without_signals_or_below_the_threshold() -> None:
    saver = TokenSavingMiddleware(
        early_exit_min_call_index=3, signals_fn=lambda steps: {"hedge": 0.9, "diversity": 0.5}
    )
    agent = create_agent(ScriptedChatModel(script=_script(5)), [dump], middleware=[saver])
    out = agent.invoke({"messages": [("user", "x")]})
    assert not any(isinstance(m, HumanMessage) and m.content == saver.early_exit_text for m in out["messages"])
    assert saver.stats.early_exits == 0  # 0.5 is not > 0.5: the rule is strict


def test_perplexity_compression_keeps_recent_messages_whole_and_caches_decisions() -> None:
    prose = " ".join(f"the parser in src/module_{i}.py returned an unexpected value of {i} again" for i in range(12))
    script = [tool_call("dump", {"n": i}, f"d{i}", content=f"{prose} ({i})") for i in range(8)] + [AIMessage("ok")]
    saver = TokenSavingMiddleware(
        enable_compression=False,
        enable_perplexity_compression=True,
        perplexity_classifier=heuristic_classifier(),
        perplexity_recent_cutoff=3,
        perplexity_mid_cutoff=5,
    )
    out = create_agent(ScriptedChatModel(script=script), [dump], middleware=[saver]).invoke(
        {"messages": [("user", "x")]}
    )
    thoughts = [m for m in out["messages"] if isinstance(m, AIMessage)]
    assert thoughts[-1].content == "ok" and thoughts[-2].content.startswith(prose)  # recent: full fidelity
    assert len(thoughts[0].content) < len(prose) * 0.5  # old tier: about 30% of the words
    assert "src/module_0.py" in thoughts[0].content  # identifiers are what the heuristic keeps
    assert all(t.tool_calls for t in thoughts[:-1])  # only content changes; tool calls stay
    assert saver.stats.perplexity_compressions > 0 and saver.stats.perplexity_chars_saved > 0
    assert saver.stats.perplexity_cache_hits > 0


@pytest.mark.parametrize(
    "kwargs",
    [{"compress_threshold_chars": -1}, {"head_keep_chars": 1000, "tail_keep_chars": 1000},
     {"perplexity_keep_ratio_mid": 1.5}, {"perplexity_mid_cutoff": 1}, {"signals_fn": 3}, {"early_exit_text": ""}],
)  # fmt: skip
def test_bad_token_saving_arguments_fail_at_construction(kwargs: dict[str, Any]) -> None:
    with pytest.raises((ValueError, TypeError)):
        TokenSavingMiddleware(**kwargs)


def test_build_steps_from_messages_follows_the_spec() -> None:
    two = AIMessage(
        "Two at once.",
        tool_calls=[{"name": "a", "args": {"x": 1}, "id": "c1"}, {"name": "b", "args": {}, "id": "c2"}],
    )
    messages = [
        HumanMessage("go"),
        two,
        ToolMessage("ok a", tool_call_id="c1"),
        ToolMessage("boom", tool_call_id="c2", status="error"),
        AIMessage("Finished."),
    ]
    assert build_steps_from_messages(messages) == [
        {"step_index": 0, "action": "a", "action_input": {"x": 1}, "thought": "Two at once.", "observation": "ok a",
         "is_error": False},
        {"step_index": 1, "action": "b", "action_input": {}, "thought": "Two at once.", "observation": "boom",
         "is_error": True},
        {"step_index": 2, "action": "", "action_input": {}, "thought": "Finished.", "observation": "",
         "is_error": False},
    ]  # fmt: skip


# -- the Anthropic classifier against a local Messages API -------------------------------------------------------


class _Messages(BaseHTTPRequestHandler):
    answers: ClassVar[list[tuple[int, str]]] = []
    requests: ClassVar[list[dict[str, Any]]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        key = self.headers.get("x-api-key") or self.headers.get("authorization", "").removeprefix("Bearer ")
        type(self).requests.append({"body": body, "key": key})
        status, text = type(self).answers.pop(0)
        words = json.loads(body["messages"][0]["content"])
        payload = text.replace("{ALL}", json.dumps([1] * len(words))).replace(
            "{HALF}", json.dumps([i % 2 for i in range(len(words))])
        )
        if status == 200:
            payload = json.dumps({"id": "msg_1", "type": "message", "role": "assistant", "model": body["model"],
                                  "content": [{"type": "text", "text": payload}], "stop_reason": "end_turn",
                                  "stop_sequence": None, "usage": {"input_tokens": 5, "output_tokens": 5}})  # fmt: skip
        else:
            payload = json.dumps({"type": "error", "error": {"type": "api_error", "message": "down"}})
        data = payload.encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def messages_api() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Messages)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Messages.answers, _Messages.requests = [], []
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_anthropic_classifier_uses_the_model_and_falls_back_on_any_failure(messages_api: str) -> None:
    client = anthropic.Anthropic(api_key="sk-ant-test-key", base_url=messages_api, max_retries=0, timeout=5)
    classify = make_anthropic_classifier(client, target_keep_ratio=0.5)
    words = "the parser in src/a.py returned 42 and then the same value again".split()
    fallback = heuristic_classifier(0.5)(words)
    _Messages.answers = [(200, "{HALF}"), (500, ""), (200, "not json"), (200, "[1, 0]"), (200, "Sure: {ALL}")]
    assert classify(words) == [bool(i % 2) for i in range(len(words))]
    assert classify(words) == fallback  # HTTP 500
    assert classify(words) == fallback  # not a list
    assert classify(words) == fallback  # wrong length
    assert classify(words) == [True] * len(words)  # the array is found inside prose
    first = _Messages.requests[0]
    assert first["key"] == "sk-ant-test-key" and first["body"]["model"] == "claude-haiku-4-5-20251001"
    assert "50%" in first["body"]["system"]
    # the classifier through keep_words: the tier's ratio reaches the model's prompt
    _Messages.answers = [(200, "{ALL}")]
    assert keep_words(" ".join(words), classify, keep_ratio=0.3) == " ".join(words)
    assert "30%" in _Messages.requests[-1]["body"]["system"]


# -- the general monitor --------------------------------------------------------------------------------------


def test_general_monitor_hints_a_loop_once_per_cooldown_and_the_chat_span_says_so(otel: Otel) -> None:
    rb = _rb(otel)
    same = [tool_call("dump", {"n": 1}, f"d{i}", content="Let me read the log again.") for i in range(7)]
    monitor = GeneralMonitorMiddleware(max_tool_calls=30, cooldown=4)
    agent = create_agent(
        ScriptedChatModel(script=[*same, AIMessage("done")]),
        [dump],
        middleware=[rb.middleware(agent_name="m"), monitor],
    )
    out = agent.invoke({"messages": [("user", "x")]})
    hints = [
        m for m in out["messages"] if isinstance(m, HumanMessage) and m.additional_kwargs.get("rb_general_monitor")
    ]
    assert [h.additional_kwargs["rb_general_monitor"] for h in hints] == ["semantic_loop", "semantic_loop"]
    assert out["messages"].index(hints[1]) - out["messages"].index(hints[0]) > 4 * 2  # the cooldown held
    assert monitor.fired["semantic_loop"] == 2
    hinted = [s for s in otel.spans("chat") if s.attributes and "rb.general_monitor.rules" in s.attributes]
    assert len(hinted) == 2 and all(s.attributes["rb.general_monitor.rules"] == ("semantic_loop",) for s in hinted)
    assert all(any(e.name == "rb.general_monitor.hint" for e in s.events) for s in hinted)


def test_general_monitor_verification_skip_and_quiet_on_healthy_runs() -> None:
    @tool
    def edit_file(path: str) -> str:
        """Edit a file."""
        return "edited"

    edits = [tool_call("edit_file", {"path": f"f{i}.py"}, f"e{i}", content=f"Editing f{i}.py now.") for i in range(4)]
    monitor = GeneralMonitorMiddleware()
    out = create_agent(ScriptedChatModel(script=[*edits, AIMessage("done")]), [edit_file], middleware=[monitor]).invoke(
        {"messages": [("user", "x")]}
    )
    rules = [
        m.additional_kwargs["rb_general_monitor"]
        for m in out["messages"]
        if m.additional_kwargs.get("rb_general_monitor")
    ]
    assert rules == ["verification_skip"]
    healthy = create_agent(ScriptedChatModel(script=_script(3)), [dump], middleware=[GeneralMonitorMiddleware()])
    assert not any(
        m.additional_kwargs.get("rb_general_monitor") for m in healthy.invoke({"messages": [("user", "x")]})["messages"]
    )
    with pytest.raises(ValueError, match="pack"):
        GeneralMonitorMiddleware(pack="v2")


# -- ReasonBlocksConfig and build_middleware -----------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore:rb_otel.build_middleware:DeprecationWarning")  # the deprecated path itself
def test_build_middleware_order_and_requirements(otel: Otel) -> None:
    rb = _rb(otel)
    config = ReasonBlocksConfig(enable_general_monitor=True)
    with pytest.raises(ValueError, match="score_fn, fsm, state_manager"):
        build_middleware(config, rb)
    built = build_middleware(config, rb, score_fn=score_step, fsm=DifficultyFSM(), state_manager=TraceStateManager())
    assert [type(m) for m in built] == [StatefulReasonBlocksMiddleware, GeneralMonitorMiddleware, TokenSavingMiddleware]
    quiet = ReasonBlocksConfig(enable_e1=False, enable_e2=False, enable_e3=False, enable_monitor_steering=False)
    assert [type(m) for m in build_middleware(quiet, rb)] == [TokenSavingMiddleware]
    assert build_middleware(ReasonBlocksConfig(enable_token_saving=False, enable_e1=False, enable_e2=False,
                                               enable_e3=False, enable_monitor_steering=False), rb) == []  # fmt: skip
    agent = create_agent(ScriptedChatModel(script=_script(3)), [dump], middleware=built)
    out = agent.invoke({"messages": [("user", "x")]})
    assert len(out["rb_step_log"]) == 4 and otel.spans("invoke_agent")
    with pytest.raises(ValueError, match="e1_top_k"):
        ReasonBlocksConfig(e1_top_k=0)


@pytest.mark.filterwarnings("ignore:rb_otel.build_middleware:DeprecationWarning")  # the deprecated path itself
def test_a_config_without_e_traces_injects_no_patterns(otel: Otel) -> None:
    rb = _rb(otel)
    config = ReasonBlocksConfig(enable_e1=False, enable_e2=False, enable_e3=False, enable_token_saving=False)
    [mw] = build_middleware(config, rb, score_fn=score_step, fsm=DifficultyFSM(), state_manager=TraceStateManager())
    out = create_agent(ScriptedChatModel(script=_script(3)), [dump], middleware=[mw]).invoke(
        {"messages": [("user", "x")]}
    )
    assert all(src == "MonitorSteeringInjection" for e in out["rb_step_log"] for src in e["injection_sources"])


def test_keep_words_passes_the_ratio_only_to_classifiers_that_take_it() -> None:
    calls: list[list[str]] = []

    def words_only(words: list[str]) -> list[bool]:
        calls.append(words)
        return [len(w) > 3 for w in words]

    assert (
        keep_words("the parser failed on line four", words_only, keep_ratio=0.3, window_words=3)
        == "parser failed line four"
    )
    assert len(calls) == 2  # one call per window, never retried

    def broken(words: list[str], *, keep_ratio: float = 0.5) -> list[bool]:
        raise TypeError("a bug inside the classifier")

    with pytest.raises(TypeError, match="a bug inside"):  # surfaces, is not mistaken for a signature mismatch
        keep_words("a b c", broken, keep_ratio=0.5)
