"""rb-otel's runs in Jaeger v2, the way a user sees them: Jaeger (``make jaeger``, collector/jaeger.yaml, in-memory
storage) on free ports, ``rb-otel demo`` exporting to it over OTLP gRPC and HTTP, directly and through otelcol-rb
running the compose stack's config (collector/otelcol-contrib.yaml, tail sampling), read back through the query API
the UI uses (/api/services, /api/traces, /api/traces/{id}, the tag search) and checked against the demo's step logs.
"""

from __future__ import annotations

import json
import os
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from collectors import (
    COLLECTOR_DIR,
    Run,
    built_binary,
    collector,
    demo,
    load,
    local,
    move_ports,
    validate,
    write,
)
from components import free_port, http_json, process, wait_until

pytestmark = pytest.mark.heavy

SERVICE = "rb-otel-demo"  # the demo's service name
#: path -> (protocol, through otelcol-rb, demo scenarios)
PATHS = {
    "grpc-direct": ("grpc", False, ("easy", "struggling", "stalled", "tool-error")),
    "http-direct": ("http/protobuf", False, ("stalled", "tool-error")),
    "grpc-otelcol": ("grpc", True, ("stalled", "tool-error")),
    "http-otelcol": ("http/protobuf", True, ("stalled",)),
}


@dataclass
class Stack:
    query: int
    runs: dict[str, list[Run]]

    def api(self, path: str, **params: str) -> Any:
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        return http_json(f"http://127.0.0.1:{self.query}/api/{path}{query}", timeout=10)

    def trace(self, trace_id: str) -> dict[str, Any]:
        data = self.api(f"traces/{trace_id}")["data"]
        assert len(data) == 1, f"{trace_id}: {len(data)} traces"
        return dict(data[0])


def jaeger_config(tmp_path: Path) -> tuple[Path, dict[str, int]]:
    """collector/jaeger.yaml with every listener on a free port."""
    config = load(COLLECTOR_DIR / "jaeger.yaml")
    ports = {name: free_port() for name in ("grpc", "http", "query", "query_grpc", "health", "telemetry")}
    config["receivers"]["otlp"]["protocols"] = {
        "grpc": {"endpoint": local(ports["grpc"])},
        "http": {"endpoint": local(ports["http"])},
    }
    query = config["extensions"]["jaeger_query"]
    query["http"]["endpoint"], query["grpc"]["endpoint"] = local(ports["query"]), local(ports["query_grpc"])
    config["extensions"]["healthcheckv2"]["http"]["endpoint"] = local(ports["health"])
    reader = config["service"]["telemetry"]["metrics"]["readers"][0]["pull"]["exporter"]["prometheus"]
    reader["port"] = ports["telemetry"]
    return write(config, tmp_path / "jaeger.yaml"), ports


def otelcol_config(tmp_path: Path, jaeger_grpc: int) -> tuple[Path, dict[str, int]]:
    """The compose stack's Collector config sending to this Jaeger (no Tempo here: that exporter is left out of the
    pipeline); the tail-sampling wait shortened, since the demo's runs end in seconds."""
    config = load(COLLECTOR_DIR / "otelcol-contrib.yaml")
    ports = move_ports(config)
    config["exporters"]["otlp/jaeger"]["endpoint"] = local(jaeger_grpc)
    del config["exporters"]["otlp/tempo"]
    config["service"]["pipelines"]["traces"]["exporters"] = ["otlp/jaeger"]
    config["processors"]["tail_sampling"]["decision_wait"] = "5s"
    return write(config, tmp_path / "otelcol-contrib.yaml"), ports


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Any:
    jaeger = built_binary("jaeger")
    otelcol = built_binary("otelcol-rb")
    tmp = tmp_path_factory.mktemp("jaeger")
    jaeger_path, jports = jaeger_config(tmp)
    validate(jaeger, jaeger_path)
    otelcol_path, oports = otelcol_config(tmp, jports["grpc"])
    validate(otelcol, otelcol_path)
    # Jaeger's own tracer sends to OTEL_EXPORTER_OTLP_ENDPOINT (localhost:4317 unless set): pointed at its own OTLP
    # port, as in the default layout, so that a config that lets it trace itself shows in the service list
    env = {**os.environ, "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://{local(jports['grpc'])}"}
    with process([jaeger, f"--config={jaeger_path}"], tmp / "jaeger.log", env=env) as proc:
        stack = Stack(jports["query"], {})

        def up() -> bool:
            assert proc.poll() is None, (tmp / "jaeger.log").read_text()[-3000:]
            return "data" in stack.api("services")

        wait_until(up, timeout=60, what="Jaeger's query API")
        with collector(otelcol, otelcol_path, oports["health"], tmp / "otelcol.log"):
            for path, (protocol, through, scenarios) in PATHS.items():
                port = (oports if through else jports)["grpc" if protocol == "grpc" else "http"]
                stack.runs[path] = demo(
                    tmp / path,
                    f"http://{local(port)}",
                    protocol=protocol,
                    scenarios=scenarios,
                    resource=f"rb.test.path={path},deployment.environment.name=test",
                    metrics=through,  # Jaeger takes traces only; the Collector's config has a metrics pipeline
                )
            every = [r for runs in stack.runs.values() for r in runs if kept(r)]

            def arrived() -> bool:
                return all(stack.api(f"traces/{r.trace_id}").get("data") for r in every)

            wait_until(arrived, timeout=120, what="every run's trace in Jaeger")
        yield stack


def kept(run: Run) -> bool:
    """The runs every path delivers: the tail-sampling Collector keeps SKIP and failed runs (test_otelcol.py checks
    its sampling of the others)."""
    return run.entered_skip or run.outcome != "success"


def tags(tag_list: list[dict[str, Any]]) -> dict[str, Any]:
    return {t["key"]: t["value"] for t in tag_list}


def as_list(value: Any) -> list[Any]:
    """An array attribute as Jaeger shows it: a JSON string (Jaeger's model has no array type)."""
    return list(json.loads(value)) if isinstance(value, str) else list(value)


def test_service_is_listed(stack: Stack) -> None:
    services = stack.api("services")["data"]
    assert SERVICE in services
    assert "jaeger" not in services  # collector/jaeger.yaml keeps Jaeger's own query traces out (enable_tracing)
    operations = stack.api(f"services/{SERVICE}/operations")["data"]
    assert "invoke_agent demo-stalled" in operations and "chat agent-1" in operations


@pytest.mark.parametrize("path", PATHS)
def test_every_run_is_one_trace_with_its_steps(stack: Stack, path: str) -> None:
    runs = [r for r in stack.runs[path] if kept(r) or not PATHS[path][1]]
    assert runs
    for run in runs:
        trace = stack.trace(run.trace_id)
        spans = {s["spanID"]: s for s in trace["spans"]}
        parent = {
            s["spanID"]: next((r["spanID"] for r in s["references"] if r["refType"] == "CHILD_OF"), "")
            for s in spans.values()
        }
        roots = [s for s in spans.values() if s["operationName"].startswith("invoke_agent")]
        assert len(roots) == 1
        root = roots[0]
        assert spans[parent[root["spanID"]]]["operationName"].startswith("demo ")  # the caller's span
        children = sorted(
            (s for s in spans.values() if parent[s["spanID"]] == root["spanID"]), key=lambda s: s["startTime"]
        )
        chats = [s for s in children if s["operationName"].startswith("chat ")]
        tools = [s for s in children if s["operationName"].startswith("execute_tool ")]
        assert len(chats) == len(run.steps) and len(tools) == sum(len(e["tool_calls"]) for e in run.steps)
        for span, entry in zip(chats, run.steps, strict=True):
            check_step_attributes(span, entry)
        for tool in tools:  # each tool call after the model call that asked for it
            step = tags(tool["tags"])["rb.step"]
            assert tool["startTime"] >= next(c["startTime"] for c in chats if tags(c["tags"])["rb.step"] == step)
        root_tags = tags(root["tags"])
        assert root_tags["rb.run_id"] == run.run_id and root_tags["rb.steps"] == len(run.steps)
        assert root_tags["rb.tokens"] == sum(e["tokens"] for e in run.steps)
        assert root_tags["rb.entered_skip"] is run.entered_skip
        process_tags = tags(trace["processes"][root["processID"]]["tags"])
        assert trace["processes"][root["processID"]]["serviceName"] == SERVICE
        assert process_tags["rb.test.path"] == path and process_tags["deployment.environment.name"] == "test"
        assert process_tags["telemetry.sdk.language"] == "python"


def check_step_attributes(span: dict[str, Any], entry: dict[str, Any]) -> None:
    """The StepLogEntry on its chat span, with the types Jaeger shows (docs/telemetry.md)."""
    typed = {t["key"]: (t["type"], t["value"]) for t in span["tags"]}
    assert typed["rb.step"] == ("int64", entry["step"])
    assert typed["rb.fsm_state"] == ("string", entry["fsm_state"])
    assert typed["rb.tokens"] == ("int64", entry["tokens"])
    assert typed["rb.latency_ms"][0] == "float64"
    if "difficulty" in entry:
        assert typed["rb.difficulty"][0] == "float64"
        assert typed["rb.difficulty"][1] == pytest.approx(entry["difficulty"], abs=1e-4)
    assert typed.get("rb.model_id", ("string", ""))[1] == entry.get("model_id", "")
    assert as_list(typed.get("rb.monitors_fired", ("string", "[]"))[1]) == entry["monitors_fired"]
    assert as_list(typed["rb.tool_calls"][1]) == entry["tool_calls"]
    assert typed["gen_ai.operation.name"] == ("string", "chat")


def test_tag_search_finds_the_skip_runs_and_only_them(stack: Stack) -> None:
    found = stack.api(
        "traces", service=SERVICE, tags=json.dumps({"rb.fsm_state": "SKIP"}), lookback="1h", limit="1000"
    )["data"]
    found_ids = {t["traceID"] for t in found}
    runs = [r for rs in stack.runs.values() for r in rs]
    skip_runs = {r.trace_id for r in runs if r.entered_skip}
    assert skip_runs and skip_runs <= found_ids
    assert not found_ids & {r.trace_id for r in runs if not r.entered_skip}


def test_failed_run_is_an_error_in_jaeger(stack: Stack) -> None:
    failed = [r for rs in stack.runs.values() for r in rs if r.outcome != "success"]
    assert failed
    for run in failed:
        root = next(s for s in stack.trace(run.trace_id)["spans"] if s["operationName"].startswith("invoke_agent"))
        root_tags = tags(root["tags"])
        assert root_tags["error"] is True and root_tags["otel.status_code"] == "ERROR"
        assert root_tags["rb.outcome"] == run.outcome
