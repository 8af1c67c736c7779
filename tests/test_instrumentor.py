"""rb-otel with no code change: ``opentelemetry-instrument python app.py`` (the real command, with
``opentelemetry-distro``) gives every agent of an application that knows nothing of rb-otel its middleware,
exporting to a real OTLP receiver; in process, ``instrument()`` / ``uninstrument()`` wrap and restore
``create_agent``, an agent with rb-otel of its own keeps it, and the ``RB_OTEL_*`` settings are checked."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from components import OtlpSink, wait_until
from conftest import Otel, add, calc_script

from rb_otel import ReasonBlocks
from rb_otel.instrumentation import ReasonBlocksInstrumentor
from rb_otel.instrumentation.settings import InstrumentSettings, read_settings
from rb_otel.testing import ScriptedChatModel

#: An application that knows nothing of rb-otel (its chat model aside: a scripted one, no network): two agents, one
#: named and imported as scripts do, one unnamed and built through the factory module.
_APP = """
from langchain.agents import create_agent
import langchain.agents.factory
from langchain_core.messages import AIMessage
from langchain_core.tools import tool

from rb_otel.testing import ScriptedChatModel, tool_call


@tool
def add(a: int, b: int) -> int:
    \"\"\"Add two integers.\"\"\"
    return a + b


def model():
    return ScriptedChatModel(script=[tool_call("add", {"a": 1, "b": 2}, "c1", content="Adding."), AIMessage("3")])


calc = create_agent(model(), [add], name="calc")
helper = langchain.agents.factory.create_agent(model(), [add])
for agent in (calc, helper):
    print(agent.invoke({"messages": [("user", "1 + 2?")]})["messages"][-1].content)
"""


def _attributes(raw: Any) -> dict[str, Any]:
    values = {}
    for kv in raw:
        value = kv.value
        kind = value.WhichOneof("value")
        values[kv.key] = list(getattr(value, kind).values) if kind == "array_value" else getattr(value, kind)
    return values


def _spans(requests: list[Any]) -> list[tuple[str, str, str, dict[str, Any]]]:
    """``(service.name, scope, span name, attributes)`` of every span received."""
    found = []
    for request in requests:
        for resource_spans in request.resource_spans:
            service = _attributes(resource_spans.resource.attributes).get("service.name", "")
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    found.append((service, scope_spans.scope.name, span.name, _attributes(span.attributes)))
    return found


def _metric_names(requests: list[Any], service: str) -> set[str]:
    return {
        metric.name
        for request in requests
        for rm in request.resource_metrics
        if _attributes(rm.resource.attributes).get("service.name") == service
        for sm in rm.scope_metrics
        for metric in sm.metrics
    }


def test_opentelemetry_instrument_steers_and_records_an_unchanged_app(
    otlp_sink: tuple[int, list[Any]], tmp_path: Path
) -> None:
    command = shutil.which("opentelemetry-instrument", path=str(Path(sys.executable).parent))
    assert command, "opentelemetry-instrument (opentelemetry-distro, the dev extra) is not installed"
    port, received = otlp_sink
    app = tmp_path / "app.py"
    app.write_text(_APP)
    base = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "RB_OTEL_"))}
    otel = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}",
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
        "OTEL_TRACES_EXPORTER": "otlp",
        "OTEL_METRICS_EXPORTER": "otlp",
        "OTEL_LOGS_EXPORTER": "none",
        # the official LangChain instrumentation is installed too (the dev extra): this app runs rb-otel's alone
        "OTEL_PYTHON_DISABLED_INSTRUMENTATIONS": "langchain",
        "RB_OTEL_AGENT_NAME": "helper",
    }
    runs = {
        "app-steered": {},
        "app-observed": {"RB_OTEL_STEERING": "observe"},
    }
    procs = {
        service: subprocess.Popen(
            [command, sys.executable, str(app)],
            cwd=tmp_path,
            env={**base, **otel, "OTEL_SERVICE_NAME": service, **extra},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for service, extra in runs.items()
    }
    for proc in procs.values():
        try:
            out, err = proc.communicate(timeout=180)
        finally:
            proc.kill()
        assert proc.returncode == 0 and out.split() == ["3", "3"], err
        assert err.strip() == "", err  # no traceback, and nothing from rb-otel (a warning would print here)
    # the SDK's exit flush sent everything before the processes ended; wait for the receiver's threads to file it
    wait_until(lambda: {s[0] for s in _spans(received) if s[2].startswith("invoke_agent")} == set(runs),
               timeout=30, what="both applications' runs at the OTLP receiver")  # fmt: skip
    spans = _spans(received)
    for service in runs:
        ours = [(name, attrs) for svc, scope, name, attrs in spans if svc == service and scope == "rb_otel"]
        names = sorted(name for name, _ in ours)
        # one run per agent (the middleware appended once), each with its two model calls and its tool
        assert names == sorted(["invoke_agent calc", "invoke_agent helper"] + ["chat scripted-1"] * 4
                               + ["execute_tool add"] * 2), names  # fmt: skip
        runs_ = [attrs for name, attrs in ours if name.startswith("invoke_agent")]
        assert all(a["rb.outcome"] == "success" and a["rb.framework"] == "langchain" for a in runs_)
        chats = [attrs for name, attrs in ours if name.startswith("chat")]
        assert {a["rb.fsm_state"] for a in chats} == {"INIT", "NORMAL"}
        assert all(a["rb.scorer"] == "heuristic" and 0 <= a["rb.difficulty"] <= 1 for a in chats if a["rb.step"])
        guided = [a for a in chats if a.get("rb.injection_sources")]
        assert bool(guided) is (service == "app-steered")  # observe-only: scored and recorded, nothing injected
        assert {"rb.steps", "rb.runs", "gen_ai.client.token.usage"} <= _metric_names(OtlpSink.received_metrics, service)


# -- in process --------------------------------------------------------------------------------------------------


@pytest.fixture
def instrumentor(otel: Otel) -> Iterator[ReasonBlocksInstrumentor]:
    """rb-otel instrumented, recording to ``otel``'s providers; uninstrumented afterwards."""
    instrumentor = ReasonBlocksInstrumentor()
    instrumentor.instrument(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    try:
        yield instrumentor
    finally:
        instrumentor.uninstrument()


def _run(create_agent: Any, **kwargs: Any) -> None:
    model = kwargs.pop("model", None) or ScriptedChatModel(script=calc_script(1))
    create_agent(model, [add], **kwargs).invoke({"messages": [("user", "add")]})


def test_instrument_wraps_create_agent_where_it_is_exported_and_uninstrument_restores_it(otel: Otel) -> None:
    import langchain.agents
    import langchain.agents.factory

    original = langchain.agents.factory.create_agent
    assert langchain.agents.create_agent is original
    instrumentor = ReasonBlocksInstrumentor()
    instrumentor.instrument(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    try:
        from langchain.agents import create_agent  # bound after instrument(), as a script run by the command does

        assert create_agent is not original and langchain.agents.factory.create_agent is create_agent
        _run(create_agent, name="wrapped")
        _run(langchain.agents.factory.create_agent)
        assert sorted(s.name for s in otel.spans("invoke_agent")) == ["invoke_agent", "invoke_agent wrapped"]
    finally:
        instrumentor.uninstrument()
    assert langchain.agents.create_agent is original and langchain.agents.factory.create_agent is original
    _run(create_agent, name="after")  # a name bound while instrumented no longer adds the middleware either
    _run(langchain.agents.create_agent, name="after")
    assert len(otel.spans("invoke_agent")) == 2


def test_an_agent_with_its_own_rb_otel_keeps_it_and_gets_no_second(
    instrumentor: ReasonBlocksInstrumentor, otel: Otel
) -> None:
    from langchain.agents import create_agent
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    mine = InMemorySpanExporter()  # the user's own ReasonBlocks, recording to a provider of its own
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(mine))
    rb = ReasonBlocks(tracer_provider=provider, meter_provider=otel.meter_provider)
    _run(create_agent, middleware=[rb.middleware(agent_name="mine")])
    _run(create_agent, model=rb.chat_model(ScriptedChatModel(script=calc_script(1)), agent_name="wrapped"))
    assert otel.spans("invoke_agent") == []  # the instrumentor added nothing to either
    assert sorted(s.name for s in mine.get_finished_spans() if s.name.startswith("invoke_agent")) == [
        "invoke_agent mine",
        "invoke_agent wrapped",
    ]
    _run(create_agent, name="plain")  # without one of its own, an agent gets the instrumentor's, once
    assert [s.name for s in otel.spans("invoke_agent")] == ["invoke_agent plain"]


def test_the_agents_share_one_reasonblocks(instrumentor: ReasonBlocksInstrumentor) -> None:
    from langchain.agents import create_agent

    _run(create_agent, name="a")
    shared = instrumentor.reasonblocks
    _run(create_agent, name="b")
    assert shared is not None and instrumentor.reasonblocks is shared and shared.scorer_name == "heuristic"


def test_observe_only_sends_requests_as_they_came(otel: Otel, monkeypatch: pytest.MonkeyPatch) -> None:
    import langchain.agents

    seen: dict[str, list[str]] = {}
    for steering in ("on", "observe"):
        monkeypatch.setenv("RB_OTEL_STEERING", steering)
        instrumentor = ReasonBlocksInstrumentor()
        instrumentor.instrument(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
        try:
            model = _SystemRecorder(script=calc_script(3, thought="Hmm, maybe the error failed again; not sure."))
            _run(langchain.agents.create_agent, model=model, name=steering, system_prompt="Be careful.")
        finally:
            instrumentor.uninstrument()
        seen[steering] = model.systems
    assert any("[REASONBLOCKS]" in s for s in seen["on"]), seen
    assert seen["observe"] == ["Be careful."] * 4  # every request exactly as the agent made it (no cache marks)
    (observed,) = otel.spans("invoke_agent observe")
    chats = [s for s in otel.spans("chat") if s.parent and s.parent.span_id == observed.context.span_id]
    assert len(chats) == 4 and all(dict(s.attributes or {}).get("rb.fsm_state") for s in chats)
    assert all(dict(s.attributes or {}).get("rb.difficulty") is not None for s in chats[1:])  # scored all the same


class _SystemRecorder(ScriptedChatModel):
    """A scripted model that keeps the system message of every request it is sent."""

    systems: list[str] = []  # noqa: RUF012  (a pydantic field: each instance gets its own list)

    def _generate(self, messages: list[Any], stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
        self.systems.append(next((str(m.content) for m in messages if m.type == "system"), ""))
        return super()._generate(messages, stop, run_manager, **kwargs)


def test_a_configuration_rb_otel_refuses_is_one_error_and_agents_run_without_it(
    otel: Otel, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    broken = tmp_path / "pilot.json"
    broken.write_text("{not json")
    monkeypatch.setenv("RB_OTEL_PILOT_MODEL", str(broken))
    instrumentor = ReasonBlocksInstrumentor()
    instrumentor.instrument(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    try:
        from langchain.agents import create_agent  # bound after instrument(), as the command's scripts do

        with caplog.at_level(logging.WARNING, logger="rb_otel"):
            _run(create_agent, name="one")
            _run(create_agent, name="two")
    finally:
        instrumentor.uninstrument()
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1 and "rb-otel instrumentation is off" in errors[0].getMessage()
    assert str(broken) in errors[0].getMessage() and errors[0].exc_info is None  # one line, the file named
    assert otel.spans("invoke_agent") == []  # both agents ran, uninstrumented


def test_a_failure_while_adding_the_middleware_leaves_the_agent_as_asked(
    instrumentor: ReasonBlocksInstrumentor,
    otel: Otel,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    from langchain.agents import create_agent

    def refuse(kwargs: Any) -> Any:
        raise RuntimeError("no middleware today")

    assert instrumentor._patch is not None
    monkeypatch.setattr(instrumentor._patch, "_middleware_for", refuse)  # a fault no input causes
    with caplog.at_level(logging.WARNING, logger="rb_otel"):
        _run(create_agent, name="x")
    assert otel.spans("invoke_agent") == [] and "built without it" in caplog.text


@pytest.mark.parametrize(
    ("environ", "expected", "warned"),
    [
        ({}, InstrumentSettings(), ""),
        (
            {"RB_OTEL_AGENT_NAME": " coder ", "RB_OTEL_STEERING": "Observe"},
            InstrumentSettings("coder", steer=False),
            "",
        ),
        ({"RB_OTEL_SCORER": "pilot"}, InstrumentSettings(scorer="pilot"), ""),
        ({"RB_OTEL_PILOT_MODEL": "m.json"}, InstrumentSettings(scorer="pilot", pilot_model=Path("m.json")), ""),
        ({"RB_OTEL_SCORER": "heuristic", "RB_OTEL_PILOT_MODEL": "m.json"}, InstrumentSettings(), "is not used"),
        ({"RB_OTEL_SCORER": "magic"}, InstrumentSettings(), "RB_OTEL_SCORER='magic' is not one of heuristic, pilot"),
        ({"RB_OTEL_STEERING": "off"}, InstrumentSettings(), "RB_OTEL_STEERING='off' is not one of on, observe"),
        ({"RB_OTEL_AGENT_KIND": "coding"}, InstrumentSettings(agent_kind="coding"), ""),
        (
            {"RB_OTEL_AGENT_KIND": "chat"},
            InstrumentSettings(),
            "RB_OTEL_AGENT_KIND='chat' is not one of coding, customer_service",
        ),
    ],
)
def test_settings_from_the_environment(
    environ: dict[str, str], expected: InstrumentSettings, warned: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="rb_otel"):
        assert read_settings(environ) == expected
    assert (warned in caplog.text) if warned else not caplog.records


def test_the_entry_point_is_the_instrumentor() -> None:
    from importlib.metadata import entry_points

    (entry,) = [e for e in entry_points(group="opentelemetry_instrumentor") if e.name == "rb_otel"]
    assert entry.load() is ReasonBlocksInstrumentor
    assert ReasonBlocksInstrumentor().instrumentation_dependencies() == ("langchain >= 1.3.16, < 2",)
