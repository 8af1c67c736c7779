"""The shipped Collector configs run for real on otelcol-rb (rb-otel's Collector distribution, ``make collector``),
with their listeners moved to free ports on 127.0.0.1, fed by real ``rb-otel demo`` runs:

- every shipped config validates at the pinned release (a key that release no longer knows fails here);
- collector/otelcol-contrib.yaml (the compose stack's): tail sampling keeps the SKIP and the failed runs, whole, and
  samples the calm ones exactly as its probabilistic policy says; its Prometheus exporter serves every series the
  Grafana dashboards query;
- collector/otelcol-persistent-queue.yaml: killed with -9 while its backend refuses, restarted, and what it had
  accepted arrives;
- the spanmetrics connector turns the demo's spans into request/duration metrics.
"""

from __future__ import annotations

import re
import signal
import threading
import time
import urllib.request
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest
from collectors import (
    COLLECTOR_DIR,
    ROOT,
    Span,
    built_binary,
    check_run_tree,
    collector,
    demo,
    file_sink_config,
    file_spans,
    load,
    local,
    move_ports,
    spans_of,
    validate,
    write,
)
from components import OtlpSink, free_port, wait_until

from rb_otel.telemetry.names import PROMETHEUS_SERIES

pytestmark = pytest.mark.heavy

#: Every Collector config the project ships for otelcol-rb's components. collector/gateway/agent-tier.yaml is not
#: here: its loadbalancing exporter is not part of otelcol-rb (docs/operators.md).
SHIPPED = ("otelcol-contrib.yaml", "otelcol-persistent-queue.yaml", "clickhouse.yaml", "gateway/sampling-tier.yaml")
SCENARIOS = ("easy", "struggling", "stalled", "tool-error")
#: The demo's runs end within seconds; the shipped 30 s wait would only make the test wait.
DECISION_WAIT_S = 5


@pytest.fixture(scope="module")
def otelcol() -> str:
    return built_binary("otelcol-rb")


def validate_and_write(otelcol: str, config: dict[str, Any], path: Path) -> Path:
    validate(otelcol, write(config, path))
    return path


@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_config_validates_at_the_pinned_release(
    otelcol: str, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLICKHOUSE_PASSWORD", "validate-only")  # clickhouse.yaml reads it from the environment
    validate(otelcol, COLLECTOR_DIR / name)


def test_validate_rejects_a_key_the_release_does_not_know(otelcol: str, tmp_path: Path) -> None:
    """The check above can fail: a tail-sampling key that does not exist is refused."""
    config = load(COLLECTOR_DIR / "otelcol-contrib.yaml")
    config["processors"]["tail_sampling"]["decision_wait_seconds"] = 30
    path = write(config, tmp_path / "bad.yaml")
    with pytest.raises(AssertionError, match="decision_wait_seconds"):
        validate(otelcol, path)


# -- tail sampling: collector/otelcol-contrib.yaml -----------------------------------------------------------------


def fnv1a_64(data: bytes) -> int:
    value = 0xCBF29CE484222325
    for byte in data:
        value = ((value ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return value


def probabilistic_keeps(trace_id: str, percentage: float, salt: str = "") -> bool:
    """The tail-sampling probabilistic policy's decision (v0.161.0, internal/sampling/probabilistic.go): FNV-1a of
    the salt (default ``default-hash-seed``) then the trace id's bytes, kept when at most ``percentage`` of 2^64."""
    digest = fnv1a_64((salt or "default-hash-seed").encode() + bytes.fromhex(trace_id))
    return digest <= int((2**64 - 1) * percentage / 100)


def kept_by_policy(trace: list[Span], policies: list[dict[str, Any]]) -> bool:
    """Whether otelcol-contrib.yaml's policies keep the trace made of ``trace``'s spans (any policy that matches
    keeps it). The policies are read from the file, so a policy added there that this function does not model fails
    the test instead of passing it by luck."""
    keep = False
    for policy in policies:
        kind, settings = policy["type"], policy.get(policy["type"], {})
        if kind == "status_code":
            codes = {"UNSET": 0, "OK": 1, "ERROR": 2}
            keep |= any(s.status_code in {codes[c] for c in settings["status_codes"]} for s in trace)
        elif kind == "string_attribute":
            keep |= any(s.attributes.get(settings["key"]) in settings["values"] for s in trace)
        elif kind == "boolean_attribute":
            keep |= any(s.attributes.get(settings["key"]) is settings["value"] for s in trace)
        elif kind == "probabilistic":
            trace_id = trace[0].trace_id
            keep |= probabilistic_keeps(trace_id, settings["sampling_percentage"], settings.get("hash_salt", ""))
        else:
            raise AssertionError(f"otelcol-contrib.yaml has a policy this test does not model: {policy}")
    return keep


def by_trace(spans: list[Span]) -> dict[str, list[Span]]:
    traces: dict[str, list[Span]] = {}
    for span in spans:
        traces.setdefault(span.trace_id, []).append(span)
    return traces


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        return str(response.read().decode())


def dashboard_series() -> set[str]:
    """The rb-otel series the Grafana dashboards and the alert rules query."""
    text = "".join(p.read_text() for p in (ROOT / "grafana" / "dashboards").glob("*.json"))
    text += (ROOT / "prometheus" / "rb-otel.rules.yml").read_text()
    known = {series for names in PROMETHEUS_SERIES.values() for series in names}
    return {word for word in re.findall(r"[a-z_:]+", text) if word in known}


#: Series a dashboard queries that the demo's runs cannot produce: they need the TokenSavingMiddleware.
NOT_FROM_THE_DEMO = {"rb_token_saving_chars_saved_total"}


def test_compose_collector_tail_samples_runs_and_serves_the_dashboards_series(otelcol: str, tmp_path: Path) -> None:
    config = load(COLLECTOR_DIR / "otelcol-contrib.yaml")
    ports = move_ports(config)
    sampling = config["processors"]["tail_sampling"]
    sampling["decision_wait"] = f"{DECISION_WAIT_S}s"
    sinks = {"jaeger": (free_port(), tmp_path / "jaeger.jsonl"), "tempo": (free_port(), tmp_path / "tempo.jsonl")}
    for name, (port, _) in sinks.items():
        config["exporters"][f"otlp/{name}"]["endpoint"] = local(port)
    # a tap beside the shipped pipeline: every span as received, before sampling, so the test knows what was sent
    config["exporters"]["file/all"] = {"path": str(tmp_path / "all.jsonl"), "flush_interval": "100ms"}
    config["service"]["pipelines"]["traces/all"] = {"receivers": ["otlp"], "exporters": ["file/all"]}
    path = validate_and_write(otelcol, config, tmp_path / "otelcol-contrib.yaml")
    sink_health = free_port()
    write(file_sink_config(sinks, sink_health), tmp_path / "sink.yaml")

    with (
        collector(otelcol, tmp_path / "sink.yaml", sink_health, tmp_path / "sink.log"),
        collector(otelcol, path, ports["health"], tmp_path / "otelcol.log"),
    ):
        runs = demo(tmp_path / "demo", f"http://{local(ports['grpc'])}", scenarios=SCENARIOS, repeat=3)
        wait_until(
            lambda: len({s.trace_id for s in file_spans(tmp_path / "all.jsonl")}) >= 3 * len(SCENARIOS),
            timeout=60,
            what="every run at the tap",
        )
        sent = by_trace(file_spans(tmp_path / "all.jsonl"))
        kept = {trace_id for trace_id, spans in sent.items() if kept_by_policy(spans, sampling["policies"])}
        calm = {t for t, spans in sent.items() if not any(s.status_code == 2 for s in spans)} - {
            t for t, spans in sent.items() if any(s.attributes.get("rb.entered_skip") for s in spans)
        }
        assert calm - kept, "no calm run to sample away; run again (each is kept with probability 0.1)"

        def arrived() -> bool:
            return all(kept <= {s.trace_id for s in file_spans(out)} for _, out in sinks.values())

        wait_until(arrived, timeout=120, what="the kept traces at both backends")
        metrics = wait_until(lambda: scrape(ports["prometheus"]), timeout=30, what="the Prometheus exporter")
        # a trace sampled away would have been sent with the kept ones, after the same decision wait
        time.sleep(DECISION_WAIT_S + 3)

    for name, (_, out) in sinks.items():
        spans = file_spans(out)
        assert {s.trace_id for s in spans} == kept, name
        assert {s.span_id for s in spans} == {s.span_id for t in kept for s in sent[t]}, name  # whole traces
        for run in runs:  # the first round, as the step log has it
            if run.trace_id in kept:
                check_run_tree(run, spans)
    by_agent = {r.agent: r.trace_id for r in runs}
    assert {by_agent["demo-stalled"], by_agent["demo-tool-error"]} <= kept  # the SKIP run, the failed run

    missing = {s for s in dashboard_series() - NOT_FROM_THE_DEMO if not re.search(rf"^{s}[{{ ]", metrics, re.M)}
    assert not missing, f"the dashboards query series the Collector does not serve: {sorted(missing)}"


# -- persistent queue: collector/otelcol-persistent-queue.yaml -----------------------------------------------------


class RefusingBackend(OtlpSink):
    """A real OTLP/HTTP backend that answers 503 to everything while ``refusing`` is set, then takes requests."""

    received: ClassVar[list[Any]] = []
    refused: ClassVar[int] = 0
    refusing: ClassVar[bool] = True

    def do_POST(self) -> None:
        if not RefusingBackend.refusing:
            super().do_POST()
            return
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        RefusingBackend.refused += 1
        self.send_response(503)
        self.send_header("Content-Length", "0")
        self.end_headers()


@pytest.fixture
def refusing_backend() -> Iterator[int]:
    RefusingBackend.received, RefusingBackend.refused, RefusingBackend.refusing = [], 0, True
    server = ThreadingHTTPServer(("127.0.0.1", 0), RefusingBackend)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()


def test_persistent_queue_survives_kill_9_while_the_backend_refuses(
    otelcol: str, tmp_path: Path, refusing_backend: int
) -> None:
    config = load(COLLECTOR_DIR / "otelcol-persistent-queue.yaml")
    ports = move_ports(config)
    storage = config["extensions"]["file_storage/queue"]
    storage["directory"] = storage["compaction"]["directory"] = str(tmp_path / "queue")
    config["exporters"]["otlphttp/backend"]["endpoint"] = f"http://{local(refusing_backend)}"
    path = validate_and_write(otelcol, config, tmp_path / "otelcol-persistent-queue.yaml")

    with collector(otelcol, path, ports["health"], tmp_path / "first.log") as first:
        runs = demo(
            tmp_path / "demo",
            f"http://{local(ports['http'])}",
            protocol="http/protobuf",
            scenarios=SCENARIOS,
            metrics=False,  # this config carries traces only
        )
        wait_until(lambda: RefusingBackend.refused > 0, timeout=30, what="the Collector to try its backend")
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=10)
    assert RefusingBackend.received == []  # nothing left the Collector: all it held was on disk

    RefusingBackend.refusing = False
    with collector(otelcol, path, ports["health"], tmp_path / "second.log"):

        def everything() -> bool:
            spans = spans_of(RefusingBackend.received)
            return all(any(s.trace_id == r.trace_id and s.name.startswith("invoke_agent") for s in spans) for r in runs)

        wait_until(everything, timeout=120, what="the queued runs at the backend after the restart")
    spans = spans_of(RefusingBackend.received)
    for run in runs:
        check_run_tree(run, spans)


# -- spanmetrics ---------------------------------------------------------------------------------------------------


def test_spanmetrics_connector_counts_the_demo_spans(otelcol: str, tmp_path: Path) -> None:
    grpc, health, prometheus = free_port(), free_port(), free_port()
    config = {
        "extensions": {"health_check": {"endpoint": local(health)}},
        "receivers": {"otlp": {"protocols": {"grpc": {"endpoint": local(grpc)}}}},
        "connectors": {  # span_metrics: the name at this release (spanmetrics is its deprecated alias)
            "span_metrics": {
                "metrics_flush_interval": "1s",  # 60 s unless told
                "histogram": {"explicit": {"buckets": ["10ms", "100ms", "1s", "10s"]}},
            }
        },
        "exporters": {"prometheus": {"endpoint": local(prometheus)}},
        "service": {
            "extensions": ["health_check"],
            "telemetry": {"metrics": {"level": "none"}},
            "pipelines": {
                "traces": {"receivers": ["otlp"], "exporters": ["span_metrics"]},
                "metrics": {"receivers": ["span_metrics"], "exporters": ["prometheus"]},
            },
        },
    }
    path = validate_and_write(otelcol, config, tmp_path / "spanmetrics.yaml")
    with collector(otelcol, path, health, tmp_path / "otelcol.log"):
        runs = demo(tmp_path / "demo", f"http://{local(grpc)}", scenarios=("stalled", "tool-error"), metrics=False)
        steps = sum(len(r.steps) for r in runs)

        def counted() -> dict[str, float]:
            calls: dict[str, float] = {}
            for line in scrape(prometheus).splitlines():
                found = re.match(r'traces_span_metrics_calls_total\{.*span_name="([^"]+)".*\} (\S+)', line)
                if found:
                    calls[found[1]] = calls.get(found[1], 0) + float(found[2])
            chats = sum(v for k, v in calls.items() if k.startswith("chat "))
            roots = sum(v for k, v in calls.items() if k.startswith("invoke_agent "))
            return calls if chats >= steps and roots >= len(runs) else {}

        calls = wait_until(counted, timeout=60, what="spanmetrics to count every chat and invoke_agent span")
        time.sleep(2)  # one more flush: a count past the expected one would show now
        calls = counted()
    assert sum(v for k, v in calls.items() if k.startswith("chat ")) == steps
    assert sum(v for k, v in calls.items() if k.startswith("invoke_agent ")) == len(runs)
