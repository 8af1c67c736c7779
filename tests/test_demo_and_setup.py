"""The demo end to end (real agents, real pipeline), provider setup from OTEL_* variables, package hygiene."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from conftest import Otel

from rb_otel.cli import main
from rb_otel.demo.runner import DemoOptions, run_demo
from rb_otel.telemetry.otlp_json import read_spans
from rb_otel.telemetry.setup import Providers, configure


def test_demo_reaches_every_state_and_exports_real_pipeline_output(otel: Otel, tmp_path: Path) -> None:
    providers = Providers(otel.tracer_provider, otel.meter_provider)
    out = io.StringIO()
    results = run_demo(DemoOptions(out_dir=tmp_path, providers=providers), stream=out)
    by_name = {r.name: r for r in results}
    states = {name: {e.fsm_state for e in r.steps} for name, r in by_name.items()}
    assert "FAST" in states["easy"]
    assert "SLOW" in states["struggling"] and "SKIP" not in states["struggling"]
    assert "SKIP" in states["stalled"] and len(by_name["stalled"].steps) >= 40
    assert by_name["tool-error"].outcome == "failure: ConnectionError"
    assert by_name["stalled"].outcome == "failure: gave up"  # a stalled agent gives up: its task failed
    struggling = by_name["struggling"].steps
    assert any(e.model_id == "scripted:strong-1" for e in struggling if e.fsm_state == "SLOW")
    assert any("MonitorSteeringInjection" in e.injection_sources for e in struggling)
    sources = {s for r in results for e in r.steps for s in e.injection_sources}
    assert {"E1Injection", "E2Injection", "E3Injection", "MonitorSteeringInjection"} <= sources
    # what was printed and exported comes from those same runs
    text = out.getvalue()
    for r in results:
        assert r.run_id in text
    run_spans = {dict(s.attributes or {})["rb.run_id"]: s for s in otel.spans("invoke_agent")}
    assert set(run_spans) == {r.run_id for r in results}
    assert dict(run_spans[by_name["stalled"].run_id].attributes or {})["rb.max_state"] == "SKIP"
    assert dict(run_spans[by_name["stalled"].run_id].attributes or {})["rb.outcome"] == "failure: gave up"
    report = (tmp_path / "report.html").read_text()  # rb-otel report's page of the four runs (test_report.py)
    assert report.count('role="img"') == 8 and all(r.run_id in report and r.description in report for r in results)


def test_demo_cli_writes_otlp_json_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_TRACES_EXPORTER", "OTEL_METRICS_EXPORTER"):
        monkeypatch.delenv(var, raising=False)
    assert main(["demo", "--out", str(tmp_path), "--scenario", "easy", "--quiet"]) == 0
    spans = read_spans(tmp_path / "traces.jsonl")
    names = [s["name"] for s in spans]
    assert "invoke_agent demo-easy" in names and sum(n.startswith("chat ") for n in names) == 10
    root = next(s for s in spans if s["name"].startswith("invoke_agent"))
    assert len(root["traceId"]) == 32 and len(root["spanId"]) == 16
    chat = next(s for s in spans if s["name"].startswith("chat "))
    assert chat["parentSpanId"] == root["spanId"]
    metrics_lines = (tmp_path / "metrics.jsonl").read_text().splitlines()
    metric_names = {
        m["name"]
        for line in metrics_lines
        for rm in json.loads(line)["resourceMetrics"]
        for sm in rm["scopeMetrics"]
        for m in sm["metrics"]
    }
    assert {"rb.steps", "rb.runs", "rb.fsm.transitions", "gen_ai.client.token.usage"} <= metric_names


def test_demo_rejects_unknown_scenarios(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["demo", "--out", str(tmp_path), "--scenario", "nope", "--quiet"])
    assert exited.value.code == 2
    error = capsys.readouterr().err
    assert "invalid choice: 'nope'" in error and all(name in error for name in ("easy", "stalled", "tool-error"))


def test_configure_none_exports_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "none")
    monkeypatch.setenv("OTEL_METRICS_EXPORTER", "none")
    providers = configure()
    assert providers.descriptions == []
    providers.shutdown()


def test_configure_warns_on_invalid_exporter(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "zipkin-ish")
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    providers = configure(traces_file=tmp_path / "t.jsonl")
    assert any("zipkin-ish" in r.getMessage() for r in caplog.records)
    assert providers.descriptions[0].endswith("t.jsonl")
    providers.shutdown()


def test_service_name_from_environment_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_SERVICE_NAME", "checkout-agent")
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "none")
    monkeypatch.setenv("OTEL_METRICS_EXPORTER", "none")
    providers = configure(service_name="ignored")
    assert providers.tracer_provider.resource.attributes["service.name"] == "checkout-agent"
    providers.shutdown()


def test_prometheus_pull_endpoint_on_loopback(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "none")
    monkeypatch.setenv("OTEL_METRICS_EXPORTER", "prometheus")
    monkeypatch.setenv("OTEL_EXPORTER_PROMETHEUS_PORT", "0")
    providers = configure()
    assert providers.prometheus_port
    from rb_otel import ReasonBlocks

    rb = ReasonBlocks(tracer_provider=providers.tracer_provider, meter_provider=providers.meter_provider)
    rb.middleware(agent_name="prom")
    body = urllib.request.urlopen(f"http://127.0.0.1:{providers.prometheus_port}/metrics", timeout=5).read()
    assert b'rb_runs_skip_total{gen_ai_agent_name="prom"' in body
    providers.shutdown()


def _python(code: str) -> str:
    return subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout


def test_import_installs_no_provider_and_stays_light() -> None:
    out = _python(
        "import sys, rb_otel\n"
        "from opentelemetry import trace, metrics\n"
        "print(type(trace.get_tracer_provider()).__name__, type(metrics.get_meter_provider()).__name__)\n"
        "print('langchain' in sys.modules, 'opentelemetry.sdk' in sys.modules)\n"
    )
    assert out.split() == ["ProxyTracerProvider", "_ProxyMeterProvider", "False", "False"]


def test_steering_core_imports_neither_langchain_nor_opentelemetry() -> None:
    out = _python(
        "import sys\n"
        "from rb_otel.steering import SteeringSession, create_injections, DifficultyFSM, TraceStateManager\n"
        "from rb_otel.steering import score_step\n"
        "import rb_otel.steering, rb_otel.steering.monitors, rb_otel.steering.etraces\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'langchain', 'langchain_core', 'langgraph',"
        " 'opentelemetry'}))\n"
    )
    assert out.strip() == "[]"
    src = Path(__file__).parents[1] / "rb_otel" / "steering"
    for path in src.rglob("*.py"):
        for line in path.read_text().splitlines():
            assert not line.startswith(
                ("import langchain", "from langchain", "import opentelemetry", "from opentelemetry")
            ), f"{path}: {line}"


def test_framework_sdks_are_extras_and_the_core_never_imports_them() -> None:
    import tomllib

    project = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())["project"]
    sdks = {"anthropic": "anthropic", "openai-agents": "openai-agents", "claude-agent": "claude-agent-sdk"}
    core = " ".join(project["dependencies"])
    for extra, package in sdks.items():
        assert package not in core
        assert any(d.startswith(package) for d in project["optional-dependencies"][extra])
    out = _python(
        "import sys, rb_otel\n"
        "from rb_otel import ReasonBlocks\n"
        "from rb_otel.integrations.anthropic import run_messages_agent_loop\n"
        "rb = ReasonBlocks(); rb.session(agent_name='x'); rb.claude_messages_session(agent_name='y')\n"
        "sdks = {'anthropic', 'agents', 'claude_agent_sdk', 'openai'}\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & sdks))\n"
    )
    assert out.strip() == "[]"  # the Messages loop drives any client that has messages.create
