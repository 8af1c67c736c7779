"""The export spool (issue 61, item 4, the worker side): a process stopped by SIGTERM while its OTLP endpoint is away
keeps what it could not hand over in ``RB_OTEL_EXPORT_SPOOL`` as OTLP/JSON, bounded, atomically, mode 0600, with
no exporter header in it; the next start with the same spool sends it to the endpoint and empties the spool; a file
that does not read is named in one line and kept aside.

Real processes throughout: ``tests/sigterm_worker.py`` (a LangChain agent under ``rb_otel.configure()``, stopped
with SIGTERM mid-run) and ``benchmarks/otlp_receiver.py`` (a real OTLP/HTTP receiver in its own process, started on
the port the worker was given only once the worker is gone: "the endpoint away"). Over gRPC, "away" is also a real
TCP server that accepts and never answers: a try then lasts its whole timeout, and the SIGTERM comes during it.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from components import free_port, http_json, wait_until
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from rb_otel import ReasonBlocks
from rb_otel.telemetry.export import CountingSpanExporter
from rb_otel.telemetry.otlp_json import json_line, read_spans
from rb_otel.telemetry.otlp_json_spans import MalformedSpans, spans_of_lines
from rb_otel.telemetry.spool import Spool

ROOT = Path(__file__).resolve().parents[1]
WORKER = ROOT / "tests" / "sigterm_worker.py"
RECEIVER = ROOT / "benchmarks" / "otlp_receiver.py"
#: The spans sigterm_worker.py has ended by its SIGTERM, in the order they end.
ENDED = ["chat", "execute_tool add", "chat", "execute_tool add", "chat", "execute_tool block", "invoke_agent"]
SECRET = "spool-secret-7f3a9c"  # in the exporter's headers: must never reach the disk
NEXT_START = """
import json, sys, rb_otel
providers = rb_otel.configure(handle_sigterm=False)
done = providers.spool.sender.wait(60)
print(json.dumps({"done": done, "sent": providers.spool.sender.sent, "set_aside": providers.spool.sender.set_aside}))
providers.shutdown()
"""


def _env(port: int, spool: Path, **more: str) -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONUNBUFFERED": "1",
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}",
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
        "OTEL_EXPORTER_OTLP_HEADERS": f"authorization=Bearer%20{SECRET}",
        "OTEL_EXPORTER_OTLP_TIMEOUT": "1",
        "OTEL_METRICS_EXPORTER": "none",
        "OTEL_LOGS_EXPORTER": "none",
        "RB_OTEL_EXPORT_SPOOL": str(spool),
        **more,
    }


def _short(name: str) -> str:
    """A span's name as :data:`ENDED` gives it (without the model and the agent's name)."""
    return name if name.startswith("execute_tool") else name.split(" ", maxsplit=1)[0]


def _sigterm_worker(
    tmp_path: Path, env: dict[str, str], *, refused: bool, also: Callable[[], bool] = lambda: True
) -> str:
    """Run the worker until its run blocks (and, when ``refused``, until its exporter has been refused and is
    retrying) and ``also()`` holds, SIGTERM it; its log."""
    log = tmp_path / f"worker-{len(list(tmp_path.glob('worker-*.log')))}.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, str(WORKER), str(tmp_path / "unused.jsonl"), "--handler",
                                 "configure"], stdout=out, stderr=subprocess.STDOUT, env=env)  # fmt: skip
        try:
            wanted = "span export refused" if refused else "ready"
            wait_until(lambda: wanted in log.read_text(errors="replace"), timeout=60, what=f"'{wanted}' in {log}")
            wait_until(also, timeout=60, what="the worker's state before its SIGTERM")
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=30) == -signal.SIGTERM, log.read_text()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)
    return log.read_text(errors="replace")


class _Receiver:
    """benchmarks/otlp_receiver.py on ``port``: every span it wrote, as (trace id, span id, name)."""

    def __init__(self, out: Path, port: int) -> None:
        self.out = out
        self.proc = subprocess.Popen([sys.executable, str(RECEIVER), str(out), "--port", str(port)],
                                     stdout=subprocess.PIPE, text=True)  # fmt: skip
        assert self.proc.stdout is not None
        assert json.loads(self.proc.stdout.readline())["port"] == port
        self.url = f"http://127.0.0.1:{port}"

    def spans(self) -> list[tuple[str, str, str]]:
        path = self.out / "spans.jsonl"
        lines = path.read_text().splitlines() if path.exists() else []
        return [(s[0], s[1], s[2]) for line in lines for s in json.loads(line)["spans"]]

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


@pytest.fixture
def receiver_later(tmp_path: Path) -> Iterator[tuple[int, list[_Receiver]]]:
    """A free port with nothing on it; ``started.append(_Receiver(...))`` brings the endpoint back."""
    started: list[_Receiver] = []
    yield free_port(), started
    for receiver in started:
        receiver.stop()


def _spooled(spool: Path) -> list[dict[str, Any]]:
    return [span for path in sorted(spool.glob("spans-*.json")) for span in read_spans(path)]


def _next_start(env: dict[str, str]) -> dict[str, Any]:
    command = [sys.executable, "-c", NEXT_START]
    done = subprocess.run(command, check=False, env=env, capture_output=True, text=True, timeout=90)
    assert done.returncode == 0, done.stderr
    return {**json.loads(done.stdout.splitlines()[-1]), "stderr": done.stderr}


def test_sigterm_while_the_endpoint_is_away_spools_and_the_next_start_sends_them(
    tmp_path: Path, receiver_later: tuple[int, list[_Receiver]]
) -> None:
    port, started = receiver_later
    spool = tmp_path / "spool"
    env = _env(port, spool)
    log = _sigterm_worker(tmp_path, env, refused=True)

    kept = _spooled(spool)
    assert [_short(s["name"]) for s in kept] == ENDED, log  # every span that ended, in the order it ended
    assert "7 spans kept" in log and "dropped" not in log
    (run,) = [s for s in kept if s["name"].startswith("invoke_agent")]
    assert {a["key"]: a["value"] for a in run["attributes"]}["rb.outcome"] == {"stringValue": "failure: SIGTERM"}
    assert stat.S_IMODE(spool.stat().st_mode) == 0o700
    for path in spool.iterdir():
        assert path.name.startswith("spans-") and path.suffix == ".json", path  # no temporary file left
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert SECRET not in path.read_text() and "authorization" not in path.read_text().lower()

    started.append(_Receiver(tmp_path / "received", port))  # the endpoint is back
    sent = _next_start(env)
    assert sent["done"] and sent["sent"] == len(ENDED), sent
    expected = sorted((s["traceId"], s["spanId"], s["name"]) for s in kept)
    assert sorted(started[0].spans()) == expected  # each span arrived, once
    assert list(spool.iterdir()) == []  # the spool is emptied


class _Unanswering:
    """An endpoint that is down the way a hung Collector is: a real TCP server on 127.0.0.1 that accepts every
    connection and reads what comes, and never answers. A gRPC export try against it lasts its whole timeout."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.received = 0  # bytes read, all connections
        self.connections: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self.server.accept()
            except OSError:  # closed
                return
            self.connections.append(connection)
            threading.Thread(target=self._read, args=(connection,), daemon=True).start()

    def _read(self, connection: socket.socket) -> None:
        while True:
            try:
                data = connection.recv(65536)
            except OSError:
                return
            if not data:
                return
            self.received += len(data)

    def close(self) -> None:
        self.server.close()
        for connection in self.connections:
            connection.close()


def test_a_sigterm_during_a_grpc_try_that_hangs_spools_the_batch_and_the_queue(
    tmp_path: Path, receiver_later: tuple[int, list[_Receiver]]
) -> None:
    """The chaos run's gap: over gRPC, one try against a Collector that does not answer lasts the export timeout
    (10 s here), longer than the SIGTERM exit's 2 s. The batch being tried and what ended behind it are kept."""
    port, started = receiver_later
    spool = tmp_path / "spool"
    hung = _Unanswering()
    try:
        env = _env(hung.port, spool, OTEL_EXPORTER_OTLP_PROTOCOL="grpc", OTEL_EXPORTER_OTLP_TIMEOUT="10")
        # SIGTERM once the first try has connected (gRPC connects at its first call: the HTTP/2 preface) and waits
        log = _sigterm_worker(tmp_path, env, refused=False, also=lambda: hung.received > 0)
        assert "span export refused" not in log  # the try was still under way: nothing had failed yet
    finally:
        hung.close()

    kept = _spooled(spool)
    assert sorted(_short(s["name"]) for s in kept) == sorted(ENDED), log  # every span that ended, none lost
    assert len({s["spanId"] for s in kept}) == len(ENDED)  # each once
    assert "7 spans kept" in log and "dropped" not in log and "gave up" not in log.split("spans kept")[0], log
    (run,) = [s for s in kept if s["name"].startswith("invoke_agent")]
    assert {a["key"]: a["value"] for a in run["attributes"]}["rb.outcome"] == {"stringValue": "failure: SIGTERM"}
    for path in spool.iterdir():
        assert SECRET not in path.read_text()

    started.append(_Receiver(tmp_path / "received", port))  # the next start, with a real OTLP receiver up
    sent = _next_start(_env(port, spool))
    assert sent["done"] and sent["sent"] == len(ENDED), sent
    assert sorted(started[0].spans()) == sorted((s["traceId"], s["spanId"], s["name"]) for s in kept)
    assert list(spool.iterdir()) == []


class _HeldAnswer(BaseHTTPRequestHandler):
    """A real OTLP/HTTP endpoint that reads each request and answers ``status`` only once ``release`` is set."""

    release = threading.Event()
    status = 200
    requests = 0

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        type(self).requests += 1
        self.release.wait(30)
        self.send_response(self.status)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.mark.parametrize("status", [200, 400])
def test_a_hand_over_keeps_the_try_under_way_and_counts_its_late_answer_once(tmp_path: Path, status: int) -> None:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    _HeldAnswer.release, _HeldAnswer.status, _HeldAnswer.requests = threading.Event(), status, 0
    server = ThreadingHTTPServer(("127.0.0.1", 0), _HeldAnswer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        endpoint = f"http://127.0.0.1:{server.server_address[1]}/v1/traces"
        counting = CountingSpanExporter(OTLPSpanExporter(endpoint=endpoint, timeout=20))
        spool = Spool(tmp_path / "spool")
        tried, queued, late = SPANS[:3], SPANS[3:7], SPANS[7:9]
        results: list[SpanExportResult] = []
        worker = threading.Thread(target=lambda: results.append(counting.export(tried)))
        worker.start()
        wait_until(lambda: _HeldAnswer.requests == 1, timeout=30, what="the try under way")
        counting.closing(spool)
        assert counting.hand_over(lambda: list(queued)) == len(tried) + len(queued)  # without waiting for the try
        assert counting.export(late) is SpanExportResult.FAILURE  # after the hand-over: kept, untried
        assert _HeldAnswer.requests == 1
        _HeldAnswer.release.set()
        worker.join(30)
    finally:
        _HeldAnswer.release.set()
        server.shutdown()
    ids = [s.context.span_id for s in [*tried, *queued, *late]]
    assert [int(s["spanId"], 16) for s in _spooled(tmp_path / "spool")] == ids  # oldest first, each once
    delivered = len(tried) if status == 200 else 0
    assert results == [SpanExportResult.SUCCESS if status == 200 else SpanExportResult.FAILURE]
    assert (counting.spooled, counting.dropped) == (len(ids), 0)  # the late answer is not counted again
    assert (counting.exported, counting.duplicated) == (delivered, delivered)  # delivered and kept: duplicates


def test_a_sigterm_with_the_endpoint_up_spools_nothing(
    tmp_path: Path, receiver_later: tuple[int, list[_Receiver]]
) -> None:
    port, started = receiver_later
    spool = tmp_path / "spool"
    started.append(_Receiver(tmp_path / "received", port))
    log = _sigterm_worker(tmp_path, _env(port, spool), refused=False)
    wait_until(lambda: len(started[0].spans()) == len(ENDED), timeout=30, what="the worker's spans")
    assert not list(spool.glob("*")) and "spans kept" not in log


def test_the_spool_is_capped_and_drops_the_newest(tmp_path: Path, receiver_later: tuple[int, list[_Receiver]]) -> None:
    port, _ = receiver_later
    spool = tmp_path / "spool"
    cap = 5000  # room for about three of the worker's seven spans
    log = _sigterm_worker(tmp_path, _env(port, spool, RB_OTEL_EXPORT_SPOOL_MAX_BYTES=str(cap)), refused=True)
    kept = [_short(s["name"]) for s in _spooled(spool)]
    assert 0 < len(kept) < len(ENDED), log
    assert kept == ENDED[: len(kept)]  # the oldest are kept, the newest dropped
    assert sum(p.stat().st_size for p in spool.iterdir()) <= cap
    full = [line for line in log.splitlines() if "is full" in line]
    assert full and f"its cap: {cap} bytes" in full[-1] and "RB_OTEL_EXPORT_SPOOL_MAX_BYTES" in full[-1], log
    assert f"{len(ENDED) - len(kept)} in all so far" in full[-1]  # every span not kept is counted


def test_a_corrupt_spool_file_is_named_in_one_line_and_kept_aside(
    tmp_path: Path, receiver_later: tuple[int, list[_Receiver]]
) -> None:
    port, started = receiver_later
    spool = tmp_path / "spool"
    good = _real_spans()
    assert Spool(spool).keep(good) == len(good)
    broken = {
        "spans-00000000000000000001-1-0.json": b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "ab',
        "spans-00000000000000000002-1-0.json": b"\x89PNG\r\n\x1a\n\x00\x00binary",
        "spans-00000000000000000003-1-0.json": b'{"resourceMetrics": []}\n',
    }
    for name, content in broken.items():
        (spool / name).write_bytes(content)
    started.append(_Receiver(tmp_path / "received", port))
    sent = _next_start(_env(port, spool))

    assert sent["sent"] == len(good) and sent["set_aside"] == len(broken), sent
    assert len(started[0].spans()) == len(good)
    for name, content in broken.items():
        lines = [line for line in sent["stderr"].splitlines() if name in line]
        assert len(lines) == 1 and "kept aside" in lines[0], sent["stderr"]  # one line each, naming the file
        assert (spool / f"{name}.corrupt").read_bytes() == content  # not lost, not changed
    assert "Traceback" not in sent["stderr"]
    assert sorted(p.name for p in spool.iterdir()) == sorted(f"{name}.corrupt" for name in broken)


# -- in process: the encoding round trip and the cap, over many inputs -------------------------------------------


def _real_spans(runs: int = 1) -> list[ReadableSpan]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    rb = ReasonBlocks(tracer_provider=provider, telemetry_batch_window=0)
    for run in range(runs):
        session = rb.session(agent_name=f"spool-{run}")
        for thought in ["Reading the file.", "Maybe it is the parser, not sure.", "Writing the fix now."]:
            session.end_step(session.begin_step(thought=thought), tokens=5)
        session.finish()
    provider.shutdown()
    return list(exporter.get_finished_spans())


def test_spans_read_back_encode_as_the_spans_written() -> None:
    spans = _real_spans(runs=2)
    line = json_line(encode_spans(spans))
    assert encode_spans(spans_of_lines(line)) == encode_spans(spans)  # resource, scope, ids, attributes, events


@pytest.mark.parametrize(
    ("text", "problem"),
    [("", "empty"), ("{", "line 1: not JSON"), ('\n{"resourceSpans": [{"scopeSpans": [{"spans": [{}]}]}]}', "line 2")],
)
def test_text_that_is_not_trace_lines_is_one_clear_error(text: str, problem: str) -> None:
    with pytest.raises(MalformedSpans, match=problem) as raised:
        spans_of_lines(text)
    assert "\n" not in str(raised.value)


SPANS = _real_spans(runs=3)


@settings(max_examples=40, deadline=None)
@given(st.integers(min_value=0, max_value=40_000), st.lists(st.integers(1, len(SPANS)), min_size=1, max_size=4))
def test_the_spool_never_holds_more_than_its_cap_and_keeps_the_oldest(cap: int, batches: list[int]) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        spool = Spool(folder, max_bytes=cap)
        offered: list[ReadableSpan] = []
        for size in batches:
            batch = SPANS[:size]
            written = spool.keep(batch)
            offered += batch[:written]
            assert 0 <= written <= size
        assert sum(p.stat().st_size for p in Path(folder).iterdir()) <= cap
        assert spool.kept + spool.dropped == sum(batches)
        read = [s for p in sorted(Path(folder).glob("spans-*.json")) for s in spans_of_lines(p.read_text())]
        assert [s.context.span_id for s in read] == [s.context.span_id for s in offered]


def test_two_senders_at_once_send_each_file_once(tmp_path: Path, receiver_later: tuple[int, list[_Receiver]]) -> None:
    port, started = receiver_later
    spool = tmp_path / "spool"
    for _ in range(12):
        Spool(spool).keep(_real_spans())
    started.append(_Receiver(tmp_path / "received", port))
    env = _env(port, spool)
    procs = [subprocess.Popen([sys.executable, "-c", NEXT_START], env=env, stdout=subprocess.PIPE, text=True)
             for _ in range(2)]  # fmt: skip
    results = [json.loads(proc.communicate(timeout=90)[0].splitlines()[-1]) for proc in procs]
    received = started[0].spans()
    assert sum(r["sent"] for r in results) == len(received) == 12 * len(_real_spans())
    assert len(set(received)) == len(received)  # no span sent twice
    assert list(spool.iterdir()) == []
    assert http_json(f"{started[0].url}/stats")["spans"] == len(received)
