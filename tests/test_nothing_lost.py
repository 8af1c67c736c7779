"""Nothing lost, no cross-talk: what runs in flight hold reaches a flush, an exit and a collection; replays never
touch the tracer live runs use; the files rb-otel writes are OTLP/JSON as the spec writes it."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import Otel
from format_fixtures import fixture
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from rb_otel import ReasonBlocks
from rb_otel.importers import replay
from rb_otel.telemetry.derived_ids import DerivedIds
from rb_otel.telemetry.otlp_json import read_spans
from rb_otel.telemetry.setup import configure

THOUGHTS = ["Reading the file.", "Maybe it is the parser, not sure.", "Writing the fix now."]


def _steps(rb: ReasonBlocks, agent: str = "fast") -> object:
    session = rb.session(agent_name=agent)
    for thought in THOUGHTS:
        session.end_step(session.begin_step(thought=thought), tokens=5)
    return session


def test_a_force_flush_during_a_run_exports_its_finished_spans() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=600_000))
    rb = ReasonBlocks(tracer_provider=provider, telemetry_batch_window=60)
    session = _steps(rb)
    assert rb.telemetry.pending > 0  # the chat spans wait in the run's batch
    assert provider.force_flush(5_000)
    chats = [s for s in exporter.get_finished_spans() if s.name.startswith("chat")]
    assert len(chats) == len(THOUGHTS)  # exported by the provider's own flush, the run still going
    assert not [s for s in exporter.get_finished_spans() if s.name.startswith("invoke_agent")]
    session.finish()  # type: ignore[attr-defined]
    provider.force_flush(5_000)
    assert [s for s in exporter.get_finished_spans() if s.name.startswith("invoke_agent")]
    provider.shutdown()


def test_a_metrics_collection_sees_what_runs_in_flight_batched(otel: Otel) -> None:
    rb = ReasonBlocks(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider,
                      telemetry_batch_window=60)  # fmt: skip
    session = _steps(rb)
    assert rb.telemetry.pending > 0
    assert otel.metric_sum("rb.steps") == len(THOUGHTS)  # the collection flushed the batch first
    assert len(otel.spans("chat")) == len(THOUGHTS)
    del session
    assert otel.metric_points("rb.internal.batch_flush") == []  # the flushing instrument reports nothing


EXIT_SCRIPT = """
import sys, threading, weakref
weakref.finalize(threading.Lock(), print)  # any library's finalizer: weakref's exit hook now runs last
from rb_otel import ReasonBlocks
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from rb_otel.telemetry.otlp_json import OtlpJsonSpanExporter

rb = ReasonBlocks(telemetry_batch_window=60)  # first, with the global provider not set yet
provider = TracerProvider()  # made after it: its exit hook was registered after rb-otel's first one
provider.add_span_processor(BatchSpanProcessor(OtlpJsonSpanExporter(sys.argv[1]), schedule_delay_millis=600000))
trace.set_tracer_provider(provider)
session = rb.session(agent_name="in-flight")
for thought in ["Reading the file.", "Maybe it is the parser.", "Writing the fix now."]:
    session.end_step(session.begin_step(thought=thought), tokens=5)
print("pending", rb.telemetry.pending, flush=True)
# the run never finishes: the interpreter exits normally with it in flight
"""


def test_exit_with_a_run_in_flight_exports_every_span_that_ended(tmp_path: Path) -> None:
    out = tmp_path / "traces.jsonl"
    done = subprocess.run(
        [sys.executable, "-c", EXIT_SCRIPT, str(out)], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "pending 0" not in done.stdout  # the spans were waiting in the batch at exit
    names = [s["name"] for s in read_spans(out)]
    assert names.count("chat") == 3  # every span that had ended is out
    assert not [n for n in names if n.startswith("invoke_agent")]  # the run span had not ended


def test_a_replay_never_touches_the_tracer_live_runs_use(otel: Otel) -> None:
    rb = ReasonBlocks(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    live_tracer = rb.telemetry.tracer
    generator = live_tracer.id_generator  # type: ignore[attr-defined]
    stop = threading.Event()
    live_traces: list[int] = []

    def live() -> None:
        while not stop.is_set():
            session = _steps(rb, agent="live")
            session.finish()  # type: ignore[attr-defined]
            live_traces.append(len(live_traces))

    thread = threading.Thread(target=live)
    thread.start()
    record = fixture("tau_bench/handwritten_single_run_loopy.json")
    try:
        first = [r.trace_id for r in replay(record, tracer_provider=otel.tracer_provider)]
        second = [r.trace_id for r in replay(record, tracer_provider=otel.tracer_provider)]
    finally:
        deadline = time.monotonic() + 30
        while len(live_traces) < 2 and thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.01)  # at least two live runs, however fast the replays were
        stop.set()
        thread.join(timeout=30)
    assert first == second  # the replay's ids are derived from the input, race or not
    assert live_tracer.id_generator is generator and not isinstance(generator, DerivedIds)  # type: ignore[attr-defined]
    live_ids = {format(s.context.trace_id, "032x") for s in otel.spans("invoke_agent live")}
    assert len(live_ids) == len(otel.spans("invoke_agent live")) >= 2  # random and unique
    assert not live_ids & set(first)
    replayed = [s for s in otel.spans() if format(s.context.trace_id, "032x") in set(first)]
    assert replayed and {dict(s.instrumentation_scope.attributes or {}).get("rb.replay") for s in replayed} == {True}


def test_otlp_json_files_carry_integer_enums_and_readers_take_both(tmp_path: Path) -> None:
    from rb_otel.report import load_runs

    traces = tmp_path / "t.jsonl"
    providers = configure(traces_file=traces, metrics_file=tmp_path / "m.jsonl")
    rb = ReasonBlocks(tracer_provider=providers.tracer_provider, meter_provider=providers.meter_provider)
    _steps(rb).finish()  # type: ignore[attr-defined]
    providers.shutdown()
    spans = read_spans(traces)
    assert {type(s["kind"]) for s in spans} == {int} and {s["kind"] for s in spans} <= {1, 3}  # INTERNAL, CLIENT
    assert "SPAN_KIND" not in traces.read_text()
    named = traces.read_text().replace('"kind":1', '"kind":"SPAN_KIND_INTERNAL"')
    named = named.replace('"kind":3', '"kind":"SPAN_KIND_CLIENT"')
    (tmp_path / "named.jsonl").write_text(named)
    for path in (traces, tmp_path / "named.jsonl"):
        runs, problems = load_runs([path])
        assert problems == [] and len(runs) == 1 and len(runs[0].steps) == len(THOUGHTS)


def test_every_exporter_of_a_list_is_used(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "console,otlp,bogus")
    monkeypatch.setenv("OTEL_METRICS_EXPORTER", "otlp,console")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
    providers = configure(export_timeout_s=0.2)
    try:
        kinds = [d.split(" -> ")[1] for d in providers.descriptions]
        assert kinds == ["console", "otlp", "otlp", "console", "otlp"]  # traces, metrics, logs (an endpoint is set)
        assert any("'bogus' not one of" in r.getMessage() for r in caplog.records)
    finally:
        providers.tracer_provider.shutdown()
        providers.meter_provider.shutdown()
        providers.logger_provider.shutdown()
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "none,console")
    none = configure()
    assert not [d for d in none.descriptions if d.startswith("traces")]
    none.shutdown()


def test_the_cli_verbose_flag_changes_only_rb_otels_loggers() -> None:
    script = (
        "import logging; from rb_otel.cli import main; import sys;"
        "main(['-v', 'baselines', 'memory://']);"
        "print(logging.getLogger().level, logging.getLogger('rb_otel').level, logging.getLogger('httpx').level)"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False)
    root, ours, other = done.stdout.split()[-3:]
    assert (int(root), int(ours), int(other)) == (30, 10, 0)  # root stays WARNING, rb_otel DEBUG, others untouched


def test_configure_exports_the_log_based_events_over_otlp(
    monkeypatch: pytest.MonkeyPatch, otlp_sink: tuple[int, list[Any]]
) -> None:
    from components import OtlpSink

    port, _ = otlp_sink
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "otlp")
    monkeypatch.setenv("OTEL_METRICS_EXPORTER", "none")
    monkeypatch.delenv("OTEL_LOGS_EXPORTER", raising=False)
    providers = configure(export_timeout_s=2.0)
    assert providers.logger_provider is not None
    rb = ReasonBlocks(
        tracer_provider=providers.tracer_provider,
        meter_provider=providers.meter_provider,
        logger_provider=providers.logger_provider,
        evaluation_events="logs",
    )
    session = rb.session(agent_name="events")
    for thought in ("I think maybe this might be wrong, not sure.",) * 4:
        decision = session.begin_step(thought=thought, action="run", observation="Error: failed again")
        session.end_step(decision, tokens=10)
    session.finish()
    providers.force_flush(5000)
    providers.shutdown()
    records = [
        record
        for request in OtlpSink.received_logs
        for resource_logs in request.resource_logs
        for scope_logs in resource_logs.scope_logs
        for record in scope_logs.log_records
    ]
    assert records, "no log records reached the receiver"
    assert {r.event_name for r in records} == {"gen_ai.evaluation.result"}
    spans = {
        span.span_id
        for request in OtlpSink.received
        for resource_spans in request.resource_spans
        for scope_spans in resource_spans.scope_spans
        for span in scope_spans.spans
        if span.name.startswith("chat")
    }
    assert all(r.span_id in spans for r in records)  # each event is parented to its chat span
