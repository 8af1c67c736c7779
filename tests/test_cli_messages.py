"""The smaller messages a newcomer met (issue 59): each names what is wrong and what to change.

- a gRPC exporter pointed at OTLP/HTTP's port 4318 (or HTTP at gRPC's 4317) names ``OTEL_EXPORTER_OTLP_PROTOCOL``;
- ``metrics -> otlp`` says how many data points were delivered, and how many dropped when the export failed;
- ``/dev/null`` given as an input is a device, not a missing file;
- a binary ``--prices`` or ``--pilot-model`` file is one line naming the file, not a codec error;
- ``baselines`` says one port range (1 to 65535) for every bad port.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from components import OtlpSink, free_port

from rb_otel.cli import main
from rb_otel.telemetry.setup import configure

FIXTURES = Path(__file__).parent / "fixtures" / "formats"
TRACES = FIXTURES / "otlp_json" / "handwritten_two_runs.jsonl"
#: Bytes no UTF-8 decoder takes (a model file truncated by a bad copy, an image).
BINARY = bytes(range(0x80, 0x100)) * 4


def _export_one(monkeypatch: pytest.MonkeyPatch, endpoint: str, protocol: str | None) -> tuple[list[str], bool]:
    """Export one span and one counter point to ``endpoint`` over ``protocol``; the delivery summary."""
    for name in ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "OTEL_SERVICE_NAME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "otlp")
    monkeypatch.setenv("OTEL_METRICS_EXPORTER", "otlp")
    monkeypatch.setenv("OTEL_LOGS_EXPORTER", "none")
    if protocol is None:
        monkeypatch.delenv("OTEL_EXPORTER_OTLP_PROTOCOL", raising=False)
    else:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
    providers = configure(service_name="messages", export_timeout_s=1.0, export_retry_s=0, handle_sigterm=False)
    providers.tracer_provider.get_tracer("t").start_span("one").end()
    providers.meter_provider.get_meter("m").create_counter("rb.test.count").add(1)
    providers.shutdown()
    return providers.delivery()


@pytest.mark.parametrize(
    ("port", "protocol", "fix"),
    [
        (4318, None, "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf"),
        (4317, "http/protobuf", "OTEL_EXPORTER_OTLP_PROTOCOL=grpc"),
    ],
    ids=["grpc-at-4318", "http-at-4317"],
)
def test_a_protocol_at_the_other_protocols_port_names_the_variable(
    port: int, protocol: str | None, fix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing that speaks this protocol answers there (a gRPC client cannot talk to OTLP/HTTP, nor the reverse,
    and most often nothing listens at all): the summary says which variable to set."""
    lines, complete = _export_one(monkeypatch, f"http://127.0.0.1:{port}", protocol)
    traces = next(line for line in lines if line.startswith("traces -> otlp"))
    assert "1 of 1 spans delivered" not in traces and fix in traces and "is the endpoint up" not in traces, lines
    assert not complete


def test_another_dead_port_still_asks_whether_the_endpoint_is_up(monkeypatch: pytest.MonkeyPatch) -> None:
    lines, _ = _export_one(monkeypatch, f"http://127.0.0.1:{free_port()}", None)
    assert any("is the endpoint up?" in line for line in lines) and not any("PROTOCOL" in line for line in lines)


def test_metrics_to_otlp_are_counted_when_delivered(
    monkeypatch: pytest.MonkeyPatch,
    otlp_sink: tuple[int, list[Any]],
) -> None:
    port, _ = otlp_sink
    lines, complete = _export_one(monkeypatch, f"http://127.0.0.1:{port}", "http/protobuf")
    metrics = next(line for line in lines if line.startswith("metrics -> otlp"))
    points = sum(
        len(metric.sum.data_points)
        for request in OtlpSink.received_metrics
        for resource in request.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
    )
    assert points >= 1 and metrics == f"metrics -> otlp: {points} data points delivered", lines
    assert complete


def test_metrics_to_otlp_are_counted_when_they_fail(monkeypatch: pytest.MonkeyPatch) -> None:
    lines, complete = _export_one(monkeypatch, f"http://127.0.0.1:{free_port()}", "http/protobuf")
    metrics = next(line for line in lines if line.startswith("metrics -> otlp"))
    assert metrics.startswith("metrics -> otlp: 0 of ") and " data points delivered, " in metrics, lines
    assert "dropped (the exporter failed" in metrics and not complete


@pytest.mark.skipif(not Path("/dev/null").exists(), reason="needs /dev/null")
@pytest.mark.parametrize("command", ["report", "evaluate", "replay", "train"])
def test_dev_null_is_a_device_not_a_missing_file(
    command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main([command, "/dev/null", "--quiet"] if command != "report" else [command, "/dev/null"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "/dev/null" in lines[0] and "a device, not a regular file" in lines[0], lines
    assert "no such" not in lines[0] and "not exist" not in lines[0]


@pytest.mark.parametrize(
    "argv",
    [
        ["ab-report", str(TRACES), "--experiment", "e", "--prices", "{binary}"],
        ["evaluate", str(TRACES), "--pilot-model", "{binary}", "--quiet"],
    ],
    ids=["prices", "pilot-model"],
)
def test_a_binary_file_is_one_line_naming_it(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    binary = tmp_path / "copied-badly.json"
    binary.write_bytes(BINARY)
    assert main([part.format(binary=binary) for part in argv]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {binary}: ") and "codec" not in lines[0], lines


@pytest.mark.parametrize("port", ["abc", "70000", "-1", "0"])
def test_baselines_says_one_port_range(port: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["baselines", f"redis://127.0.0.1:{port}/0"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].endswith("the port is not a number between 1 and 65535"), lines
