"""Outcomes in, the OpenTelemetry way (issue 60, item 1; docs/telemetry.md, "Outcomes").

``rb.record_outcome`` / ``session.record_outcome`` and ``rb-otel label`` emit ``gen_ai.evaluation.result`` log events
that a real OTLP receiver gets parented to the run's ``invoke_agent`` span, live and from another process; ``label``
writes them as OTLP/JSON lines; ``train`` and ``evaluate`` read them back where the runs live (files in Python and
through chdb, and a chdb database folder holding the exporter's ``otel_logs`` table), an explicit ``--labels`` winning
and the latest event of a run winning. The demo's scripted agents give the runs (its real pipeline).
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rb_otel import ReasonBlocks
from rb_otel.cli.main import main
from rb_otel.importers.outcome_events import (
    OTEL_LOGS_DDL,
    OutcomeEvent,
    latest_outcomes,
    read_outcome_events,
    recorded_outcomes,
)
from rb_otel.importers.run_contexts import source_run_contexts
from rb_otel.steering.outcome import MAX_RUN_ID, checked_outcome
from rb_otel.telemetry import names as n
from rb_otel.telemetry.setup import configure

FIXTURES = Path(__file__).parent / "fixtures" / "formats"
THOUGHTS = ("I will read the file first.", "Maybe this is wrong, I am not sure, let me retry.", "Done: the fix is in.")


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``rb-otel ARGS`` in this process (the commands' own ``main``: exit status, standard output and error), with
    ``env`` as the environment while it runs."""
    out, err = io.StringIO(), io.StringIO()
    saved = dict(os.environ)
    try:
        if env is not None:
            os.environ.clear()
            os.environ.update(env)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(list(args))
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return subprocess.CompletedProcess(["rb-otel", *args], code, out.getvalue(), err.getvalue())


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo's scripted agents through the real pipeline, exported as OTLP/JSON lines (``traces.jsonl``)."""
    out = tmp_path_factory.mktemp("demo")
    done = subprocess.run([sys.executable, "-m", "rb_otel.cli", "demo", "--out", str(out), "--quiet"],
                          capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return out


def _received() -> list[tuple[str, str, dict[str, Any]]]:
    """``(trace id, span id, attributes)`` of every run outcome event the receiver got (hex; "" when none)."""
    from components import OtlpSink
    from google.protobuf.json_format import MessageToDict

    found = []
    for request in OtlpSink.received_logs:
        for resource_logs in request.resource_logs:
            for scope_logs in resource_logs.scope_logs:
                for record in scope_logs.log_records:
                    if record.event_name != n.EVENT_EVALUATION_RESULT:
                        continue
                    attributes = {a.key: next(iter(MessageToDict(a.value).values()), None) for a in record.attributes}
                    if attributes.get(n.GEN_AI_EVALUATION_NAME) == n.EVALUATION_RUN_OUTCOME:  # not a monitor's
                        found.append((record.trace_id.hex(), record.span_id.hex(), attributes))
    return found


def _run_spans() -> dict[str, tuple[str, str]]:
    """``rb.run_id -> (trace id, span id)`` of every ``invoke_agent`` span the receiver got."""
    from components import OtlpSink

    return {
        next(a.value.string_value for a in span.attributes if a.key == n.RB_RUN_ID): (span.trace_id.hex(),
                                                                                       span.span_id.hex())
        for request in OtlpSink.received
        for resource_spans in request.resource_spans
        for scope_spans in resource_spans.scope_spans
        for span in scope_spans.spans
        if span.name.startswith(n.OP_INVOKE_AGENT)
    }  # fmt: skip


@pytest.fixture
def otlp_env(monkeypatch: pytest.MonkeyPatch, otlp_sink: tuple[int, list[Any]]) -> dict[str, str]:
    """The ``OTEL_*`` variables that send traces and logs to the real receiver (set here, and for a child)."""
    port, _ = otlp_sink
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}",
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
        "OTEL_TRACES_EXPORTER": "otlp",
        "OTEL_METRICS_EXPORTER": "none",
        "OTEL_LOGS_EXPORTER": "otlp",
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", raising=False)
    return env


def _steered_run(rb: ReasonBlocks, run_id: str, agent: str) -> Any:
    session = rb.session(run_id=run_id, agent_name=agent)
    with session:
        for thought in THOUGHTS:
            decision = session.begin_step(thought=thought, action="bash", observation="ok")
            session.end_step(decision, tokens=12)
    return session


# -- live, and from another process --------------------------------------------------------------------------------


def test_a_live_outcome_reaches_the_receiver_parented_to_its_run(otlp_env: dict[str, str]) -> None:
    providers = configure(export_timeout_s=2.0, handle_sigterm=False)
    rb = ReasonBlocks(tracer_provider=providers.tracer_provider, meter_provider=providers.meter_provider,
                      logger_provider=providers.logger_provider)  # fmt: skip
    session = rb.session(run_id="live-1", agent_name="fixer")
    with session:
        decision = session.begin_step(thought=THOUGHTS[0], action="bash", observation="ok")
        session.end_step(decision, tokens=12)
        session.record_outcome("success", score=0.75)  # during the run
    _steered_run(rb, "live-2", "fixer")
    rb.record_outcome("live-2", False, reason="test_widget failed")  # after it ended, by id
    providers.force_flush(5000)
    providers.shutdown()
    spans = _run_spans()
    events = {attributes[n.RB_RUN_ID]: (trace, span, attributes) for trace, span, attributes in _received()}
    assert set(events) == {"live-1", "live-2"}
    for run_id, (trace, span, attributes) in events.items():
        assert (trace, span) == spans[run_id]  # the run's invoke_agent span, not a chat span
        assert attributes[n.GEN_AI_EVALUATION_NAME] == n.EVALUATION_RUN_OUTCOME
        assert attributes[n.GEN_AI_AGENT_NAME] == "fixer"
    assert events["live-1"][2][n.GEN_AI_EVALUATION_SCORE_LABEL] == "success"
    assert events["live-1"][2][n.GEN_AI_EVALUATION_SCORE_VALUE] == 0.75
    assert events["live-2"][2][n.GEN_AI_EVALUATION_SCORE_LABEL] == "failure"
    assert n.GEN_AI_EVALUATION_SCORE_VALUE not in events["live-2"][2]
    assert n.GEN_AI_EVALUATION_EXPLANATION not in events["live-2"][2]  # capture is off: the reason stays home


_LATER = textwrap.dedent(
    """
    import sys
    from rb_otel import ReasonBlocks
    from rb_otel.telemetry.setup import configure

    run_id, traceparent = sys.argv[1], sys.argv[2] or None
    providers = configure(export_timeout_s=2.0, handle_sigterm=False)
    rb = ReasonBlocks(logger_provider=providers.logger_provider, tracer_provider=providers.tracer_provider)
    rb.record_outcome(run_id, "failure", score=0.25, traceparent=traceparent)
    providers.shutdown()
    """
)


@pytest.mark.parametrize("kept_traceparent", [True, False], ids=["traceparent-kept", "run-id-only"])
def test_an_outcome_from_another_process_later_names_the_run(otlp_env: dict[str, str], kept_traceparent: bool) -> None:
    providers = configure(export_timeout_s=2.0, handle_sigterm=False)
    rb = ReasonBlocks(tracer_provider=providers.tracer_provider, meter_provider=providers.meter_provider,
                      logger_provider=providers.logger_provider)  # fmt: skip
    _steered_run(rb, "ran-here", "fixer")
    traceparent = rb.traceparent("ran-here")
    providers.shutdown()
    assert traceparent is not None
    env = {**os.environ, **otlp_env}
    done = subprocess.run([sys.executable, "-c", _LATER, "ran-here", traceparent if kept_traceparent else ""],
                          capture_output=True, text=True, timeout=60, check=False, env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr
    [(trace, span, attributes)] = _received()
    assert attributes[n.RB_RUN_ID] == "ran-here" and attributes[n.GEN_AI_EVALUATION_SCORE_LABEL] == "failure"
    assert attributes[n.GEN_AI_EVALUATION_SCORE_VALUE] == 0.25
    if kept_traceparent:
        assert (trace, span) == _run_spans()["ran-here"]
        assert traceparent == f"00-{trace}-{span}-{traceparent[-2:]}"
    else:  # a live trace id is random: another process knows the run by its id alone, never a guessed trace
        assert (trace, span) == ("", "")


def test_the_reason_is_content_recorded_only_when_capture_is_on(otel: Any) -> None:
    secret = "sk-ant-api03-" + "x" * 40
    reason = f"test_login failed: expected token {secret}"
    for capture in (False, True):
        rb = ReasonBlocks(tracer_provider=otel.tracer_provider, logger_provider=otel.logger_provider,
                          capture_content=capture, evaluation_events="logs")  # fmt: skip
        _steered_run(rb, f"run-{capture}", "fixer")
        rb.record_outcome(f"run-{capture}", "failure", reason=reason)
    by_run = {r.attributes[n.RB_RUN_ID]: dict(r.attributes) for r in otel.logs(n.EVENT_EVALUATION_RESULT)
              if r.attributes.get(n.GEN_AI_EVALUATION_NAME) == n.EVALUATION_RUN_OUTCOME}  # fmt: skip
    assert reason not in json.dumps(by_run["run-False"]) and n.GEN_AI_EVALUATION_EXPLANATION not in by_run["run-False"]
    captured = by_run["run-True"][n.GEN_AI_EVALUATION_EXPLANATION]
    assert captured.startswith("test_login failed: expected token") and secret not in captured  # redacted


def test_an_outcome_never_takes_the_callers_current_span(otel: Any) -> None:
    rb = ReasonBlocks(tracer_provider=otel.tracer_provider, logger_provider=otel.logger_provider)
    with otel.tracer_provider.get_tracer("host").start_as_current_span("host request"):
        rb.record_outcome("never-ran-here", "success")
    [record] = [r for r in otel.logs(n.EVENT_EVALUATION_RESULT) if r.attributes.get(n.RB_RUN_ID) == "never-ran-here"]
    assert record.trace_id == 0 and record.span_id == 0


# -- the boundary, and never breaking the host ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("arguments", "error", "names"),
    [
        (("", "success"), ValueError, "run_id"),
        (("   ", "success"), ValueError, "run_id"),
        ((42, "success"), TypeError, "run_id"),
        (("a\nb", "success"), ValueError, "run_id"),
        (("x" * (MAX_RUN_ID + 1), "success"), ValueError, "run_id"),
        (("r", "passed"), ValueError, "outcome"),
        (("r", "Success"), ValueError, "outcome"),
        (("r", 1), ValueError, "outcome"),
        (("r", "success", "0.5"), TypeError, "score"),
        (("r", "success", float("nan")), ValueError, "score"),
        (("r", "success", True), TypeError, "score"),
        (("r", "success", None, 7), TypeError, "reason"),
    ],
)
def test_bad_arguments_are_one_clear_error_naming_the_parameter(
    arguments: tuple[Any, ...], error: type[Exception], names: str
) -> None:
    with pytest.raises(error, match=names):
        checked_outcome(*arguments)
    rb = ReasonBlocks(telemetry_enabled=False)
    run_id, outcome, *rest = arguments
    with pytest.raises(error, match=names):
        rb.record_outcome(run_id, outcome, score=rest[0] if rest else None, reason=rest[1] if len(rest) > 1 else None)


@given(st.text(max_size=80))
@settings(max_examples=200, deadline=None)
def test_any_run_id_is_accepted_as_it_is_or_refused_naming_run_id(run_id: str) -> None:
    refused = not run_id.strip() or any(ord(c) < 32 or ord(c) == 127 for c in run_id)
    if refused:
        with pytest.raises(ValueError, match="run_id"):
            checked_outcome(run_id, True)
    else:
        checked = checked_outcome(run_id, True)
        assert checked.run_id == run_id and checked.outcome == "success"


def test_a_bad_traceparent_is_refused_naming_it() -> None:
    rb = ReasonBlocks(telemetry_enabled=False)
    for bad in (
        "",
        "00-abc-def-01",
        "00-" + "0" * 32 + "-" + "1" * 16 + "-01",
        "ff-" + "1" * 32 + "-" + "1" * 16 + "-01",
    ):
        with pytest.raises(ValueError, match="traceparent"):
            rb.record_outcome("r", "success", traceparent=bad)


def test_an_endpoint_that_is_down_never_reaches_the_caller(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")  # nothing listens on the discard port
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
    monkeypatch.setenv("OTEL_LOGS_EXPORTER", "otlp")
    providers = configure(export_timeout_s=0.5, handle_sigterm=False)
    rb = ReasonBlocks(tracer_provider=providers.tracer_provider, meter_provider=providers.meter_provider,
                      logger_provider=providers.logger_provider)  # fmt: skip
    _steered_run(rb, "down-1", "fixer")
    rb.record_outcome("down-1", "success")
    with caplog.at_level(logging.WARNING):
        providers.force_flush(3000)
        providers.shutdown()
    assert any("log" in r.getMessage().lower() or "export" in r.getMessage().lower() for r in caplog.records)


def test_a_logger_that_fails_is_logged_and_the_caller_carries_on(
    otel: Any, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    rb = ReasonBlocks(tracer_provider=otel.tracer_provider, logger_provider=otel.logger_provider)
    session = _steered_run(rb, "broken-logger", "fixer")

    def refuse(*_args: Any, **_kwargs: Any) -> None:  # a fault no real provider can be made to raise on demand
        raise RuntimeError("the logger is broken")

    monkeypatch.setattr(rb.telemetry.events.logger, "emit", refuse)
    with caplog.at_level(logging.WARNING, logger="rb_otel"):
        rb.record_outcome("broken-logger", "failure")
        session.record_outcome("failure")
    assert sum("emitting the outcome of run broken-logger failed" in r.getMessage() for r in caplog.records) == 2


# -- reading them back: latest wins -------------------------------------------------------------------------------


@given(st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.booleans(), st.integers(0, 5)), max_size=30))
def test_the_latest_event_of_a_run_wins(events: list[tuple[str, bool, int]]) -> None:
    read = [OutcomeEvent(run, "success" if ok else "failure", None, "", time) for run, ok, time in events]
    latest = latest_outcomes(read)
    for run in {r for r, _, _ in events}:
        newest = max(t for r, _, t in events if r == run)
        last_read = [e for e in read if e.run_id == run and e.time_ns == newest][-1]
        assert latest[run] == last_read


# -- rb-otel label, then train and evaluate -----------------------------------------------------------------------


def _labels(tmp_path: Path, demo: Path, name: str, outcome: Any) -> Path:
    runs = source_run_contexts([demo / "traces.jsonl"])
    path = tmp_path / name
    path.write_text(json.dumps({r.run_id: outcome(i, r) for i, r in enumerate(runs)}))
    return path


def _evaluated(tmp_path: Path, *source: str) -> dict[str, Any]:
    out = tmp_path / "evaluation.json"
    done = _cli("evaluate", *source, "--quiet", "--json", str(out))
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    loaded: dict[str, Any] = json.loads(out.read_text())
    return loaded


def test_label_writes_events_parented_to_each_run(demo: Path, tmp_path: Path) -> None:
    labels = _labels(tmp_path, demo, "labels.json", lambda i, _r: i % 2 == 0)
    out = tmp_path / "outcomes.jsonl"
    done = _cli("label", str(demo / "traces.jsonl"), "--labels", str(labels), "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert "4 of 4 runs labelled (2 success, 2 failure)" in done.stdout
    runs = {r.run_id: r for r in source_run_contexts([demo / "traces.jsonl"])}
    given_labels = json.loads(labels.read_text())
    events = read_outcome_events([out])
    assert {e.run_id for e in events} == set(runs) == set(given_labels)
    for event in events:
        run = runs[event.run_id]
        assert (event.trace_id, event.span_id, event.agent) == (run.trace_id, run.span_id, run.agent)
        assert event.outcome == ("success" if given_labels[event.run_id] else "failure")
    spans = [json.loads(line) for line in (demo / "traces.jsonl").read_text().splitlines() if line.strip()]
    invoke = {s["spanId"] for d in spans for rs in d["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]
              if s["name"].startswith("invoke_agent")}  # fmt: skip
    assert {e.span_id for e in events} <= invoke  # each event on its run's invoke_agent span


def test_label_sends_to_the_otlp_endpoint_and_says_what_was_lost(
    demo: Path, tmp_path: Path, otlp_env: dict[str, str]
) -> None:
    labels = _labels(tmp_path, demo, "labels.json", lambda _i, _r: True)
    done = _cli("label", str(demo / "traces.jsonl"), "--labels", str(labels), env={**os.environ, **otlp_env})
    assert done.returncode == 0, done.stderr
    assert len(_received()) == 4 and "4 delivered" in done.stdout
    down = {**os.environ, **otlp_env, "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"}
    lost = _cli("label", str(demo / "traces.jsonl"), "--labels", str(labels), env=down)
    assert lost.returncode == 1 and "Traceback" not in lost.stderr
    assert "0 of 4 delivered, 4 dropped" in lost.stderr


def test_label_refuses_bad_input_in_one_line(demo: Path, tmp_path: Path) -> None:
    unrelated = tmp_path / "other.json"
    unrelated.write_text(json.dumps({"someone-else": True}))
    cases = [
        (["--labels", str(unrelated), "--out", str(tmp_path / "o.jsonl")], "the labels match no run"),
        (["--labels", str(tmp_path / "missing.json"), "--out", str(tmp_path / "o.jsonl")], "no such labels file"),
        (["--labels", str(unrelated)], None),  # nowhere to send them (no --out, no endpoint)
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_EXPORTER_OTLP")}
    for extra, message in cases:
        done = _cli("label", str(demo / "traces.jsonl"), *extra, env=env)
        assert done.returncode == 2, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
        if message is not None:
            assert message in done.stderr
    assert not (tmp_path / "o.jsonl").exists()


def test_train_and_evaluate_read_the_events_from_files(demo: Path, tmp_path: Path) -> None:
    own = _evaluated(tmp_path, str(demo / "traces.jsonl"))
    assert own["failed"] < own["runs"]  # the demo's own outcomes: some runs succeed
    every_failed = _labels(tmp_path, demo, "failed.json", lambda _i, _r: False)
    events = tmp_path / "events" / "outcomes.jsonl"
    assert _cli("label", str(demo / "traces.jsonl"), "--labels", str(every_failed), "--out", str(events),
                "--quiet").returncode == 0  # fmt: skip
    for source in ([str(demo / "traces.jsonl"), str(events)], [str(demo / "traces.jsonl"), str(events), "--engine",
                                                               "chdb"]):  # fmt: skip
        evaluated = _evaluated(tmp_path, *source)
        assert (evaluated["runs"], evaluated["failed"]) == (own["runs"], own["runs"])
    # an explicit --labels wins over the events, run by run
    half = _labels(tmp_path, demo, "half.json", lambda i, _r: i % 2 == 0)
    explicit = _evaluated(tmp_path, str(demo / "traces.jsonl"), str(events), "--labels", str(half))
    assert explicit["failed"] == sum(1 for ok in json.loads(half.read_text()).values() if not ok)
    # a later event replaces an earlier one: label again, every run a success, into the same folder
    every_ok = _labels(tmp_path, demo, "ok.json", lambda _i, _r: True)
    later = tmp_path / "events" / "outcomes-later.jsonl"
    assert _cli("label", str(demo / "traces.jsonl"), "--labels", str(every_ok), "--out", str(later),
                "--quiet").returncode == 0  # fmt: skip
    folder = tmp_path / "runs"
    folder.mkdir()
    shutil.copy(demo / "traces.jsonl", folder / "traces.jsonl")
    shutil.copy(events, folder / "a-outcomes.jsonl")
    shutil.copy(later, folder / "b-outcomes.jsonl")
    assert _evaluated(tmp_path, str(folder))["failed"] == 0
    from rb_otel.training.dataset import read_dataset

    assert [r.failed for r in read_dataset([folder]).runs] == [False] * own["runs"]
    assert {r.failed for r in read_dataset([demo / "traces.jsonl", events]).runs} == {True}


def _chdb_store(folder: Path, traces: Path, events: Path) -> str:
    """A chdb database folder holding the traces (the exporter's ``otel_traces``) and the events loaded into the
    exporter's ``otel_logs`` table by SQL from the OTLP/JSON lines, as the Collector's exporter stores them."""
    pytest.importorskip("chdb", reason="the chdb extra is not installed")
    from chdb import session

    from rb_otel.analysis.schema import ATTRIBUTE_STRING
    from rb_otel.analysis.sources import ChdbSource

    folder.mkdir()
    ChdbSource(folder=str(folder), files=[traces], database="otel").close()
    value = ATTRIBUTE_STRING.replace("v,", "JSONExtractRaw(a, 'value'),").replace("(v)", "(JSONExtractRaw(a, 'value'))")
    attributes = (
        f"CAST(mapFromArrays(arrayMap(a -> JSONExtractString(a, 'key'), JSONExtractArrayRaw(lr, 'attributes')), "
        f"arrayMap(a -> {value}, JSONExtractArrayRaw(lr, 'attributes'))), 'Map(LowCardinality(String), String)')"
    )
    store: Any = session.Session(str(folder))
    try:
        store.query(OTEL_LOGS_DDL.format(table="otel.otel_logs"))
        store.query(f"""
            INSERT INTO otel.otel_logs (Timestamp, TraceId, SpanId, TraceFlags, SeverityNumber, ServiceName, EventName,
                                        LogAttributes)
            SELECT fromUnixTimestamp64Nano(toInt64(JSONExtractString(lr, 'timeUnixNano'))),
                   JSONExtractString(lr, 'traceId'), JSONExtractString(lr, 'spanId'),
                   JSONExtractUInt(lr, 'flags'), JSONExtractUInt(lr, 'severityNumber'), 'rb-otel-label',
                   JSONExtractString(lr, 'eventName'), {attributes}
            FROM file('{events}', 'JSONAsString', 'json String')
            ARRAY JOIN JSONExtractArrayRaw(json, 'resourceLogs') AS rl
            ARRAY JOIN JSONExtractArrayRaw(rl, 'scopeLogs') AS sl
            ARRAY JOIN JSONExtractArrayRaw(sl, 'logRecords') AS lr""")  # fmt: skip
    finally:
        store.close()
    return f"chdb://{folder}?database=otel"


def test_train_and_evaluate_read_the_events_from_a_chdb_store(demo: Path, tmp_path: Path) -> None:
    every_failed = _labels(tmp_path, demo, "failed.json", lambda _i, _r: False)
    events = tmp_path / "outcomes.jsonl"
    assert _cli("label", str(demo / "traces.jsonl"), "--labels", str(every_failed), "--out", str(events),
                "--quiet").returncode == 0  # fmt: skip
    url = _chdb_store(tmp_path / "store", demo / "traces.jsonl", events)
    stored = read_outcome_events([url])
    assert sorted(stored, key=lambda e: e.run_id) == sorted(read_outcome_events([events]), key=lambda e: e.run_id)
    evaluated = _evaluated(tmp_path, url)
    assert evaluated["failed"] == evaluated["runs"] == len(stored)
    _, recorded = recorded_outcomes([url])
    assert recorded is not None and all(recorded.outcome_of(e.run_id) is False for e in stored)
    # label reads the store too, and parents each event to the same spans as from the file
    relabelled = tmp_path / "from-store.jsonl"
    done = _cli("label", url, "--labels", str(every_failed), "--out", str(relabelled), "--quiet")
    assert done.returncode == 0, done.stderr
    key = lambda e: (e.run_id, e.trace_id, e.span_id, e.outcome)
    assert sorted(map(key, read_outcome_events([relabelled]))) == sorted(map(key, stored))


def test_a_store_without_a_logs_table_has_no_outcomes(demo: Path, tmp_path: Path) -> None:
    pytest.importorskip("chdb", reason="the chdb extra is not installed")
    from rb_otel.analysis.sources import ChdbSource

    (tmp_path / "store").mkdir()
    ChdbSource(folder=str(tmp_path / "store"), files=[demo / "traces.jsonl"], database="otel").close()
    assert read_outcome_events([f"chdb://{tmp_path / 'store'}?database=otel"]) == []


def test_label_of_another_harness_s_records_feeds_train(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    shutil.copytree(FIXTURES / "mini_swe_agent" / "handwritten_runs", runs)
    found = source_run_contexts([runs])
    assert len(found) == 5
    labels = tmp_path / "labels.json"
    labels.write_text(json.dumps({r.run_id: i % 2 == 1 for i, r in enumerate(found)}))
    out = tmp_path / "outcomes.jsonl"
    done = _cli("label", str(runs), "--labels", str(labels), "--out", str(out), "--quiet")
    assert done.returncode == 0, done.stderr
    events = read_outcome_events([out])
    assert {(e.run_id, e.outcome == "success") for e in events} == set(json.loads(labels.read_text()).items())
    assert all(e.agent == "mini-swe-agent" for e in events)
    # each event is parented to the span `rb-otel replay` gives the run (ids derived from the file and the run id)
    assert _cli("replay", str(runs), "--out", str(tmp_path / "replayed"), "--quiet").returncode == 0
    replayed = {r.run_id: (r.trace_id, r.span_id) for r in source_run_contexts([tmp_path / "replayed"])}
    assert {e.run_id: (e.trace_id, e.span_id) for e in events} == replayed
    from rb_otel.training.dataset import read_dataset

    read = {r.run_id: not r.failed for r in read_dataset([runs, out]).runs}
    assert read and all(read[k] == v for k, v in json.loads(labels.read_text()).items() if k in read)
