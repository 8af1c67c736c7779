"""rb-api backends against a real HTTP server on 127.0.0.1 that misbehaves; the key never leaks."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import pytest
from conftest import Otel
from langchain.agents import create_agent
from langchain_core.messages import AIMessage
from opentelemetry.trace import StatusCode
from rbapi_server import FakeRbApi, fake_rbapi

from rb_otel import ReasonBlocks
from rb_otel.backends.rb_api import RbApiClient, RemoteConfig, RemoteError
from rb_otel.testing import ScriptedChatModel, tool_call

KEY = "rb_test_k3y-sup3rs3cret-value"
HARD = "Hmm, maybe the error is in src/a.py, not sure; the traceback failed with KeyError again."


def run_agent(rb: ReasonBlocks, steps: int = 4) -> tuple[Any, Any]:
    from conftest import add

    script = [tool_call("add", {"a": i, "b": 1}, f"c{i}", content=HARD) for i in range(steps)] + [AIMessage("done")]
    mw = rb.middleware(agent_name="remote", step_log_in_state=True)
    agent = create_agent(ScriptedChatModel(script=script), [add], middleware=[mw], system_prompt="S")
    return agent.invoke({"messages": [("user", "x")]}), mw


def test_healthy_rbapi_is_used_with_bearer_auth_and_spans(otel: Otel) -> None:
    with fake_rbapi() as url:
        rb = ReasonBlocks(
            KEY, base_url=url + "/", tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider
        )
        assert rb.base_url == url  # trailing slash stripped
        out, mw = run_agent(rb)
        requests = list(FakeRbApi.requests)
    assert out["messages"][-1].content == "done"
    assert all(r["headers"]["Authorization"] == f"Bearer {KEY}" for r in requests)
    evaluate = [r for r in requests if r["path"] == "/monitors/evaluate"]
    assert len(evaluate) == 4  # every scored step
    assert evaluate[0]["body"]["task_profile"] == "coding" and evaluate[0]["body"]["steps"][0]["thought"] == HARD
    retrieve = [r["body"]["tier"] for r in requests if r["path"] == "/traces/retrieve"]
    assert sorted(retrieve) == ["e1", "e2", "e3"]  # one call per tier per run
    log = mw.step_log
    assert log[1].monitors_fired == ["semantic_loop"] and log[1].failure_type == "semantic_loop"
    assert "MonitorSteeringInjection" in log[1].injection_sources and "E2Injection" in log[1].injection_sources
    assert all(e.skipped_reason is None for e in log)
    remote = otel.spans("rb.")
    assert {s.name for s in remote} == {"rb.monitors.evaluate", "rb.etraces.retrieve"}
    root = otel.spans("invoke_agent")[0]
    assert all(s.parent.span_id == root.context.span_id for s in remote)
    e2 = next(s for s in remote if (s.attributes or {}).get("rb.etrace.tier") == "e2")
    assert e2.attributes["rb.etrace.count"] == 1 and e2.attributes["server.address"] == "127.0.0.1"


def _timed_run(otel: Otel, budget: float, **modes: list[str]) -> tuple[float, Any, Any, list[float]]:
    """One steered run against an rb-api server in ``modes``: its seconds, result, middleware, and each step's
    own measure of its steering (``rb.steering.duration_ms``)."""
    otel.exporter.clear()
    with fake_rbapi(**modes) as url:
        rb = ReasonBlocks(
            KEY,
            base_url=url,
            steering_budget_s=budget,
            tracer_provider=otel.tracer_provider,
            meter_provider=otel.meter_provider,
        )
        results: list[Any] = []
        worker = threading.Thread(target=lambda: results.append(run_agent(rb, steps=3)), daemon=True)
        started = time.monotonic()
        worker.start()
        worker.join(timeout=300)  # a hang guard
        took = time.monotonic() - started
        assert not worker.is_alive(), f"{modes}: the run hung on rb-api"
    out, mw = results[0]
    return took, out, mw, [s.attributes["rb.steering.duration_ms"] for s in otel.spans("chat ")]


@pytest.mark.serial  # bounds with a reference run measured in turn: steadier alone than beside other workers
@pytest.mark.parametrize("mode", ["slow:3", "500", "malformed", "wrong_shape", "huge", "reset", "429:30"])
def test_misbehaving_rbapi_fails_open_within_the_budget(otel: Otel, mode: str) -> None:
    budget = 0.5
    healthy, _, _, healthy_steps = _timed_run(otel, budget)  # the same run, rb-api answering: the reference
    took, out, mw, durations = _timed_run(otel, budget, **{"*": [mode]})
    # Within the budget: 4 steered steps of at most 0.5 s each (twice that, for a loaded scheduler) on top of what
    # the healthy run took (3 times, so that load cannot fail it). Waiting out the server instead (3 s a call for
    # slow:3, 30 s for 429:30, over 8 calls) fails it.
    assert took < 2 * 4 * budget + 3 * healthy, (mode, took, healthy)
    # The code's own measure of each step's steering is within the budget likewise, never what the server takes.
    assert max(durations) < 2 * budget * 1000 + 3 * max(healthy_steps), (durations, healthy_steps)
    assert out["messages"][-1].content == "done"  # the agent's result is unchanged
    assert len(mw.step_log) == 4
    scored = mw.step_log[1:]
    assert all("rb-api monitors unavailable" in (e.skipped_reason or "") for e in scored), [
        e.skipped_reason for e in scored
    ]
    assert "retrieval failed" in (mw.step_log[0].skipped_reason or "")  # E3 on the first call
    failed = [s for s in otel.spans("rb.") if s.status.status_code is StatusCode.ERROR]
    assert failed and all(s.attributes.get("error.type") for s in failed)
    chat = otel.spans("chat ")[1]
    assert "rb-api monitors unavailable" in chat.attributes["rb.skipped_reason"]


def test_429_with_retry_after_is_retried_then_succeeds() -> None:
    with fake_rbapi(**{"/monitors/evaluate": ["429:0", "429:0", "ok"]}) as url:
        client = RbApiClient(RemoteConfig(api_key=KEY, base_url=url))
        result = client.post("/monitors/evaluate", {"steps": []}, deadline=time.monotonic() + 5)
        assert result["fired"] == ["semantic_loop"]
        assert len(FakeRbApi.requests) == 3


def test_client_errors_are_not_retried() -> None:
    with fake_rbapi(**{"*": ["400"]}) as url:
        client = RbApiClient(RemoteConfig(api_key=KEY, base_url=url))
        with pytest.raises(RemoteError) as info:
            client.post("/monitors/evaluate", {}, deadline=time.monotonic() + 2)
        assert info.value.kind == "http_400"
        assert len(FakeRbApi.requests) == 1


def test_circuit_breaker_stops_calling_a_failing_server() -> None:
    with fake_rbapi(**{"*": ["500"]}) as url:
        client = RbApiClient(
            RemoteConfig(api_key=KEY, base_url=url, max_retries=0, breaker_failures=3, breaker_cooldown_s=60)
        )
        kinds = []
        for _ in range(10):
            with pytest.raises(RemoteError) as info:
                client.post("/monitors/evaluate", {}, deadline=time.monotonic() + 2)
            kinds.append(info.value.kind)
        assert kinds[:3] == ["http_5xx"] * 3 and set(kinds[3:]) == {"circuit_open"}
        assert len(FakeRbApi.requests) == 3


@pytest.mark.parametrize("mode", ["500", "malformed", "reset", "429:0", "slow:3"])
def test_the_api_key_never_leaks(otel: Otel, caplog: pytest.LogCaptureFixture, mode: str) -> None:
    caplog.set_level(logging.DEBUG)
    with fake_rbapi(**{"*": [mode]}) as url:
        rb = ReasonBlocks(
            KEY,
            base_url=url,
            steering_budget_s=0.3,
            tracer_provider=otel.tracer_provider,
            meter_provider=otel.meter_provider,
            capture_content=True,
        )
        run_agent(rb, steps=2)
        client = rb.client
        assert client is not None
        with pytest.raises(RemoteError) as info:
            client.post("/x", {}, deadline=time.monotonic() + 0.2)
    texts = [repr(rb), repr(client), repr(client.config), str(info.value), repr(info.value), caplog.text]
    texts += [str(r.exc_info) for r in caplog.records if r.exc_info]
    texts += [str(dict(s.attributes or {})) + str(s.events) for s in otel.exporter.get_finished_spans()]
    for data in otel.reader.get_metrics_data().resource_metrics:
        texts.append(str(data.to_json()))
    assert all(KEY not in t and "sup3rs3cret" not in t for t in texts)


def test_run_events_are_exported_to_rbapi_in_the_background(otel: Otel) -> None:
    with fake_rbapi() as url:
        rb = ReasonBlocks(
            KEY,
            base_url=url,
            export_runs_to_api=True,
            tracer_provider=otel.tracer_provider,
            meter_provider=otel.meter_provider,
        )
        out, _ = run_agent(rb, steps=2)
        rb.close(timeout=5)
        paths = [r["path"] for r in FakeRbApi.requests if "/v1/monitor/runs" in r["path"]]
    run_id = out["rb_run_id"]
    assert paths[0] == "/v1/monitor/runs"
    assert paths.count(f"/v1/monitor/runs/{run_id}/steps") == 3
    assert paths[-1] == f"/v1/monitor/runs/{run_id}/finish"
    assert rb.run_exporter is not None and rb.run_exporter.sent == 5 and rb.run_exporter.dropped == 0


def test_run_export_never_blocks_and_counts_drops(otel: Otel) -> None:
    from rb_otel.backends.rb_api import RbApiRunExporter

    with fake_rbapi(**{"*": ["slow:0.5"]}) as url:
        client = RbApiClient(RemoteConfig(api_key=KEY, base_url=url))
        exporter = RbApiRunExporter(client, max_queue=3)
        # submit never waits for the server: it drops instead (the count below), so 50 submits end at once
        submitter = threading.Thread(
            target=lambda: [exporter.submit("/v1/monitor/runs", {"run_id": str(i)}) for i in range(50)], daemon=True
        )
        submitter.start()
        submitter.join(timeout=60)  # a hang guard
        assert not submitter.is_alive()
        exporter.close(timeout=3)
    assert exporter.dropped >= 40 and exporter.sent + exporter.failed + exporter.dropped <= 50


def test_remote_config_validation() -> None:
    with pytest.raises(ValueError, match="key is required"):
        RemoteConfig(api_key="")
    with pytest.raises(ValueError, match="http"):
        RemoteConfig(api_key=KEY, base_url="ftp://x")
    assert "rb_test" not in repr(RemoteConfig(api_key=KEY, base_url="http://h"))


def test_bad_input_into_the_middleware(otel: Otel) -> None:
    from conftest import add
    from langchain_core.tools import tool

    @tool
    def huge(n: int) -> str:
        """Return an enormous output."""
        return "\u202e\u0000 🙂 " + "x" * 5_000_000

    script = [
        AIMessage(
            content=[{"type": "image", "url": "http://127.0.0.1/x.png"}, {"type": "text", "text": "Look 🙂"}],
            tool_calls=[{"name": "huge", "args": {"n": 1}, "id": "h1", "type": "tool_call"}],
        ),
        AIMessage(content="", tool_calls=[{"name": "add", "args": {"a": 1, "b": 2}, "id": "a1", "type": "tool_call"}]),
        AIMessage(content=[]),
    ]
    rb = ReasonBlocks(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider, capture_content=True)
    mw = rb.middleware(agent_name="odd")
    agent = create_agent(ScriptedChatModel(script=script, usage=False), [add, huge], middleware=[mw])
    out = agent.invoke({"messages": [("user", "\ud83d\ude00 right-to-left \u202e text")]})
    assert len(out["messages"]) >= 5
    log = mw.step_log
    assert [e.tokens for e in log] == [0, 0, 0]  # no usage metadata: zero, not a crash
    assert log[1].thought_preview == "Look 🙂"
    tool_span = next(s for s in otel.spans("execute_tool huge"))
    assert len(tool_span.attributes["gen_ai.tool.call.result"]) <= 8192  # bounded content
