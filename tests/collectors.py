"""Real Collectors for tests: otelcol-rb and Jaeger v2, built from source by ``make collector jaeger`` into the cache
(collector/build.sh), run on free ports on 127.0.0.1 with the shipped configs, fed by real ``rb-otel demo`` runs.

A binary that is not built makes the test skip with the reason and the command that builds it; under
RB_OTEL_REQUIRE_REAL=1 (CI, which builds both first) the skip is a failure (conftest.py).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from components import free_port, process, wait_until

ROOT = Path(__file__).resolve().parents[1]
COLLECTOR_DIR = ROOT / "collector"
#: The make target that builds each binary.
TARGETS = {"otelcol-rb": "collector", "jaeger": "jaeger"}


def cache_bin() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "rb-otel" / "bin"


def built_binary(name: str) -> str:
    """The path of ``name`` as ``make collector`` / ``make jaeger`` left it; skip with the command when absent."""
    path = cache_bin() / name
    if path.is_file() and os.access(path, os.X_OK):
        return str(path)
    why = "" if shutil.which("go") else " (no `go` on PATH here: it needs Go >= 1.26)"
    pytest.skip(f"{name} is not built at {path}: run `make {TARGETS[name]}`{why}")


def validate(binary: str, config: Path) -> None:
    """``<binary> validate``: a key or component that does not exist at the pinned release fails here."""
    done = subprocess.run(
        [binary, "validate", f"--config={config}"], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, f"{config.name} does not validate:\n{done.stdout[-3000:]}{done.stderr[-3000:]}"


def load(path: Path) -> dict[str, Any]:
    return dict(yaml.safe_load(path.read_text()))


def write(config: dict[str, Any], path: Path) -> Path:
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def local(port: int) -> str:
    return f"127.0.0.1:{port}"


def move_ports(config: dict[str, Any]) -> dict[str, int]:
    """Rewrite, in place, every listener of a shipped config onto a free port on 127.0.0.1; returns the ports by
    role (``grpc``, ``http``, ``health``, ``prometheus``, ``telemetry``). The Collector's own metrics get a free
    port too (it listens on 8888 unless told), so two Collectors can run side by side."""
    ports: dict[str, int] = {}
    protocols = config.get("receivers", {}).get("otlp", {}).get("protocols", {})
    for protocol in ("grpc", "http"):
        if protocol in protocols:
            ports[protocol] = free_port()
            protocols[protocol] = {**(protocols[protocol] or {}), "endpoint": local(ports[protocol])}
    extensions = config.get("extensions", {})
    if "health_check" in extensions:
        ports["health"] = free_port()
        extensions["health_check"]["endpoint"] = local(ports["health"])
    if "prometheus" in config.get("exporters", {}):
        ports["prometheus"] = free_port()
        config["exporters"]["prometheus"]["endpoint"] = local(ports["prometheus"])
    ports["telemetry"] = free_port()
    metrics = config.setdefault("service", {}).setdefault("telemetry", {}).setdefault("metrics", {})
    metrics["readers"] = [{"pull": {"exporter": {"prometheus": {"host": "127.0.0.1", "port": ports["telemetry"]}}}}]
    return ports


def healthy(port: int) -> bool:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2) as response:
        return response.status == 200


@contextlib.contextmanager
def collector(binary: str, config: Path, health_port: int, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """Run ``binary --config config`` until the block ends; wait for its health check first."""
    with process([binary, f"--config={config}"], log) as proc:

        def up() -> bool:
            if proc.poll() is not None:
                raise AssertionError(f"{binary} exited {proc.returncode}: {log.read_text()[-3000:]}")
            return healthy(health_port)

        wait_until(up, timeout=60, what=f"{Path(binary).name} to report healthy ({log})")
        yield proc


def file_sink_config(sinks: dict[str, tuple[int, Path]], health_port: int) -> dict[str, Any]:
    """An otelcol-rb that takes OTLP/gRPC on each ``sinks`` port and writes every request to that sink's file as a
    line of OTLP/JSON: the backends the shipped configs' OTLP exporters are pointed at in the tests."""
    receivers = {
        f"otlp/{name}": {"protocols": {"grpc": {"endpoint": local(port)}}} for name, (port, _) in sinks.items()
    }
    exporters = {f"file/{name}": {"path": str(out), "flush_interval": "100ms"} for name, (_, out) in sinks.items()}
    pipelines = {f"traces/{name}": {"receivers": [f"otlp/{name}"], "exporters": [f"file/{name}"]} for name in sinks}
    return {
        "extensions": {"health_check": {"endpoint": local(health_port)}},
        "receivers": receivers,
        "exporters": exporters,
        "service": {
            "extensions": ["health_check"],
            "telemetry": {"metrics": {"level": "none"}},
            "pipelines": pipelines,
        },
    }


# -- the traffic: real rb-otel demo runs -------------------------------------------------------------------------


@dataclass
class Run:
    """One demo run as its step log records it."""

    run_id: str
    agent: str
    outcome: str
    trace_id: str
    steps: list[dict[str, Any]] = field(default_factory=list)

    @property
    def entered_skip(self) -> bool:
        return any(s["fsm_state"] == "SKIP" for s in self.steps)


def demo(
    out: Path,
    endpoint: str,
    *,
    protocol: str = "grpc",
    scenarios: tuple[str, ...] = (),
    repeat: int = 1,
    resource: str = "",
    metrics: bool = True,
) -> list[Run]:
    """Run ``rb-otel demo`` exporting traces (and ``metrics``) over OTLP to ``endpoint`` (``resource``: its
    OTEL_RESOURCE_ATTRIBUTES); the runs from its step log. Its log records (evaluation events) are not exported: no
    shipped Collector config has a logs pipeline, and the demo exits 1 when something it sent was refused."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "PYTEST", "RB_OTEL_EXPORT"))}
    env["OTEL_EXPORTER_OTLP_ENDPOINT"] = endpoint
    env["OTEL_LOGS_EXPORTER"] = "none"
    if not metrics:
        env["OTEL_METRICS_EXPORTER"] = "none"
    if resource:
        env["OTEL_RESOURCE_ATTRIBUTES"] = resource
    if protocol != "grpc":
        env["OTEL_EXPORTER_OTLP_PROTOCOL"] = protocol
    args = [sys.executable, "-m", "rb_otel.cli", "demo", "--quiet", "--out", str(out), "--repeat", str(repeat)]
    for scenario in scenarios:
        args += ["--scenario", scenario]
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return read_runs(out / "steplogs.jsonl")


def read_runs(path: Path) -> list[Run]:
    runs: list[Run] = []
    for line in path.read_text().splitlines():
        record = json.loads(line)
        if "step" in record:
            runs[-1].steps.append(record)
        else:
            runs.append(Run(record["run_id"], record["agent_name"], record["outcome"], record["trace_id"]))
    return runs


# -- what arrived ------------------------------------------------------------------------------------------------


def _value(any_value: Any) -> Any:
    kind = any_value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in any_value.array_value.values]
    return getattr(any_value, kind) if kind else None


@dataclass
class Span:
    trace_id: str
    span_id: str
    parent_id: str
    name: str
    attributes: dict[str, Any]
    resource: dict[str, Any]
    status_code: int
    start_ns: int


def spans_of(requests: list[Any]) -> list[Span]:
    """The spans of OTLP ``ExportTraceServiceRequest`` messages, attributes as Python values."""
    spans: list[Span] = []
    for request in requests:
        for resource_spans in request.resource_spans:
            resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for s in scope_spans.spans:
                    spans.append(
                        Span(
                            s.trace_id.hex(),
                            s.span_id.hex(),
                            s.parent_span_id.hex(),
                            s.name,
                            {a.key: _value(a.value) for a in s.attributes},
                            resource,
                            s.status.code,
                            s.start_time_unix_nano,
                        )
                    )
    return spans


def _json_value(value: dict[str, Any]) -> Any:
    """An OTLP/JSON ``AnyValue`` as a Python value (64-bit integers are strings in OTLP/JSON)."""
    if "arrayValue" in value:
        return [_json_value(v) for v in value["arrayValue"].get("values", [])]
    if "intValue" in value:
        return int(value["intValue"])
    return next(iter(value.values()), None)


def _json_attributes(attributes: list[dict[str, Any]]) -> dict[str, Any]:
    return {a["key"]: _json_value(a.get("value", {})) for a in attributes}


def file_spans(path: Path) -> list[Span]:
    """The spans the file exporter wrote (one OTLP/JSON request a line; ids in hex, as OTLP/JSON has them)."""
    spans: list[Span] = []
    if not path.exists():
        return spans
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        for resource_spans in json.loads(line).get("resourceSpans", []):
            resource = _json_attributes(resource_spans.get("resource", {}).get("attributes", []))
            for scope_spans in resource_spans.get("scopeSpans", []):
                for s in scope_spans.get("spans", []):
                    spans.append(
                        Span(
                            s["traceId"],
                            s["spanId"],
                            s.get("parentSpanId", ""),
                            s["name"],
                            _json_attributes(s.get("attributes", [])),
                            resource,
                            int(s.get("status", {}).get("code", 0)),
                            int(s.get("startTimeUnixNano", 0)),
                        )
                    )
    return spans


def check_run_tree(run: Run, spans: list[Span]) -> None:
    """The run's trace holds its ``invoke_agent`` span, one ``chat`` child per step in order with the step's
    attributes, and one ``execute_tool`` child per tool call."""
    mine = [s for s in spans if s.trace_id == run.trace_id]
    roots = {s.span_id: s for s in mine if s.name.startswith("invoke_agent")}
    assert len(roots) == 1, f"{run.agent}: {len(roots)} invoke_agent spans"
    root = next(iter(roots.values()))
    children = sorted((s for s in mine if s.parent_id == root.span_id), key=lambda s: s.start_ns)
    chats = [s for s in children if s.name.startswith("chat ")]
    tools = [s for s in children if s.name.startswith("execute_tool ")]
    assert [c.attributes["rb.step"] for c in chats] == [e["step"] for e in run.steps], run.agent
    assert [c.attributes["rb.fsm_state"] for c in chats] == [e["fsm_state"] for e in run.steps], run.agent
    assert len(tools) == sum(len(e["tool_calls"]) for e in run.steps), run.agent
    assert root.attributes["rb.run_id"] == run.run_id
