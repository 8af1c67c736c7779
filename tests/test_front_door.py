"""What a new user hit first, each pinned: --version and --help, an OTLP endpoint that is not there (a bounded
wait, an honest summary, a non-zero exit, Ctrl-C without a traceback), lone surrogates in captured content, a long
first JSONL line, an empty input, a read-only io_harness store, and output files rewritten per command."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from components import free_port
from conftest import Otel
from format_fixtures import io_harness_store
from langchain.agents import create_agent
from langchain_core.messages import AIMessage
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

from rb_otel import ReasonBlocks, __version__
from rb_otel.cli import main
from rb_otel.importers import replay
from rb_otel.telemetry.setup import DEFAULT_EXPORT_TIMEOUT_S
from rb_otel.testing import ScriptedChatModel, tool_call

EXPORTERS = ("OTEL_TRACES_EXPORTER", "OTEL_METRICS_EXPORTER", "OTEL_LOGS_EXPORTER")
ENTRY = {"step": 0, "fsm_state": "NORMAL", "thought_preview": "look", "tokens": 3}


def _steplog(path: Path, entries: int = 3, thought: str = "look") -> Path:
    path.write_text(
        "".join(json.dumps({**ENTRY, "step": i, "thought_preview": thought}) + "\n" for i in range(entries))
    )
    return path


def _cli(*args: str, env: dict[str, str], cwd: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "rb_otel.cli", *args]
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False)


def _dead_endpoint_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    return {**env, "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{free_port()}", **extra}


def test_version_and_help_name_the_choices(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0 and capsys.readouterr().out.strip() == f"rb-otel {__version__}"
    for command, names in (("demo", ["easy", "struggling", "stalled", "tool-error"]), ("replay", ["tau2_bench"])):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        text = capsys.readouterr().out
        assert all(name in text for name in names), text


def _replay(source: Path, out: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return _cli("replay", str(source), "--out", str(out), env=env, cwd=out.parent, timeout=300)  # a hang guard


def test_a_dead_otlp_endpoint_is_a_bounded_wait_an_honest_summary_and_exit_1(tmp_path: Path) -> None:
    source = _steplog(tmp_path / "run.jsonl")
    nowhere = {**_dead_endpoint_env(), **dict.fromkeys(EXPORTERS, "none")}  # the same command, nothing to wait on
    started = time.monotonic()
    _replay(source, tmp_path / "none", nowhere)
    before, started = time.monotonic() - started, time.monotonic()
    done = _replay(source, tmp_path / "out", _dead_endpoint_env())
    took, started = time.monotonic() - started, time.monotonic()
    _replay(source, tmp_path / "none", nowhere)
    after = time.monotonic() - started
    assert done.returncode == 1, done.stderr
    assert "0 of 4 spans delivered, 4 dropped" in done.stderr  # a run span and three chat spans
    assert "warning: not everything was delivered" in done.stderr and "Traceback" not in done.stderr
    # A bounded wait: the export timeout (4 s) for each of traces, metrics and logs at most, on top of the command's
    # own work, which the reference runs just before and after measure (3 times the slower: a loaded machine slows
    # the command, not the timeouts; at load 40 one run of the same command took 2.2 times another). A ratio
    # measured in turn, so it may run beside other workers; waiting out the exporters' retries (a minute), or
    # hanging, fails it.
    assert took < 3 * DEFAULT_EXPORT_TIMEOUT_S + 3 * max(before, after), (took, before, after)
    again = _replay(source, tmp_path / "out", _dead_endpoint_env(OTEL_EXPORTER_OTLP_TIMEOUT="1"))
    assert again.returncode == 1 and "dropped" in again.stderr  # the timeout can be set


@pytest.mark.serial  # signals: a pytest-xdist worker can hand its child a signal mask with SIGINT blocked
def test_ctrl_c_while_waiting_on_the_export_is_one_line(tmp_path: Path) -> None:
    source = _steplog(tmp_path / "run.jsonl")
    env = _dead_endpoint_env(OTEL_EXPORTER_OTLP_TIMEOUT="20")
    command = [sys.executable, "-m", "rb_otel.cli", "replay", str(source), "--out", str(tmp_path / "out")]
    # A runner that ignores SIGINT (mutmut's does) passes that on to the child, and Python keeps an inherited
    # SIG_IGN; a handled signal is reset to the default in the child.
    ignored = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        proc = subprocess.Popen(
            command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
    finally:
        signal.signal(signal.SIGINT, ignored)
    first: list[str] = []
    reader = threading.Thread(target=lambda: first.append(proc.stdout.readline() if proc.stdout else ""), daemon=True)
    reader.start()
    reader.join(timeout=120)  # a hang guard: the run's line is printed before the export wait begins
    assert first and "steplog" in first[0]
    proc.send_signal(signal.SIGINT)
    try:
        _, stderr = proc.communicate(timeout=120)  # a hang guard
    finally:
        proc.kill()
    assert proc.returncode == 130, stderr
    assert "interrupted" in stderr and "Traceback" not in stderr


def test_lone_surrogates_in_captured_content_are_sanitised(otel: Otel, caplog: pytest.LogCaptureFixture) -> None:
    broken = b"caf\xe9 au lait".decode("utf-8", "surrogateescape")
    rb = ReasonBlocks(tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider, capture_content=True)
    from conftest import add

    script = [tool_call("add", {"a": 1, "b": 2}, "c", content=broken), AIMessage(broken)]
    agent = create_agent(ScriptedChatModel(script=script), [add], middleware=[rb.middleware(agent_name="u")])
    agent.invoke({"messages": [("user", broken)]})
    spans = otel.exporter.get_finished_spans()
    with caplog.at_level(logging.ERROR):
        encoded = encode_spans(spans)  # what the OTLP exporters send
    assert encoded.ByteSize() > 0 and not caplog.records
    texts = " ".join(str(dict(s.attributes or {})) for s in spans)
    assert "caf\ufffd au lait" in texts and "\udce9" not in texts


def test_a_first_jsonl_line_over_any_sniff_is_read(tmp_path: Path) -> None:
    path = _steplog(tmp_path / "long.jsonl", entries=2, thought="x" * 20_000)
    [run] = replay(path, format="steplog")
    assert run.step_count == 2


def test_an_empty_input_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    assert main(["replay", str(empty), "--format", "agy", "--out", str(tmp_path / "out")]) == 2  # bad input
    assert "no runs found" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()  # no empty output files, not even their folder


def test_an_io_harness_store_is_read_without_leaving_files(tmp_path: Path) -> None:
    store = io_harness_store("handwritten_store_0_22.sql", tmp_path / "store.sqlite3")
    store.chmod(0o444)
    before = sorted(p.name for p in tmp_path.iterdir())
    results = replay(store)
    assert results and sorted(p.name for p in tmp_path.iterdir()) == before


def test_output_files_are_rewritten_per_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [k for k in os.environ if k.startswith("OTEL_")]:
        monkeypatch.delenv(name)
    source = _steplog(tmp_path / "run.jsonl")
    out = tmp_path / "out"
    sizes = []
    for _ in range(2):
        assert main(["replay", str(source), "--out", str(out)]) == 0
        sizes.append(len((out / "replay-traces.jsonl").read_text().splitlines()))
    assert sizes[0] == sizes[1] > 0


def test_a_thinking_block_is_the_thought_of_a_turn_without_text() -> None:
    from langchain_core.messages import HumanMessage, ToolMessage

    from rb_otel.integrations.langchain._messages import last_turn

    thinking = AIMessage(
        content=[
            {"type": "thinking", "thinking": "The test fails on a KeyError; check the session.", "signature": "s"}
        ],
        tool_calls=[{"name": "read", "args": {"path": "a.py"}, "id": "t1", "type": "tool_call"}],
    )
    turn = last_turn(
        [HumanMessage("fix it"), AIMessage("Looking around."), thinking, ToolMessage("ok", tool_call_id="t1")]
    )
    assert turn.thought == "The test fails on a KeyError; check the session." and turn.action == "read"
    both = AIMessage(content=[{"type": "thinking", "thinking": "hidden"}, {"type": "text", "text": "Visible."}])
    assert last_turn([both]).thought == "Visible." and last_turn([both]).reasoning == "hidden"


def test_the_demo_report_says_which_states_a_run_reached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [k for k in os.environ if k.startswith("OTEL_")]:
        monkeypatch.delenv(name)
    assert main(["demo", "--out", str(tmp_path), "--quiet", "--scenario", "easy"]) == 0
    page = (tmp_path / "report.html").read_text()
    assert "states reached: INIT, NORMAL, FAST" in page and "max state" not in page


@pytest.mark.parametrize("mode", ["NO_CONTENT", "SPAN_ONLY", "EVENT_ONLY", "SPAN_AND_EVENT", "true", "false"])
def test_capture_modes_put_content_on_spans_events_or_nowhere(
    otel: Otel, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    from conftest import add

    from rb_otel.telemetry.content import CONTENT_ATTRIBUTES

    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", mode)
    rb = ReasonBlocks(
        tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider, logger_provider=otel.logger_provider
    )
    script = [tool_call("add", {"a": 1, "b": 2}, "c", content="my secret sk-abcdefghijklmnopqrstuv plan"),
              AIMessage("The answer is 3.")]  # fmt: skip
    agent = create_agent(ScriptedChatModel(script=script), [add], middleware=[rb.middleware(agent_name="m")])
    agent.invoke({"messages": [("user", "what is 1 + 2?")]})
    on_spans, on_events = set(), set()
    for span in otel.exporter.get_finished_spans():
        on_spans |= set(span.attributes or {}) & CONTENT_ATTRIBUTES
        for event in span.events:
            if event.name in ("gen_ai.client.inference.operation.details", "rb.tool.call.details"):
                on_events |= set(event.attributes or {}) & CONTENT_ATTRIBUTES
        exported = str(dict(span.attributes or {})) + str([dict(e.attributes or {}) for e in span.events])
        assert "sk-abcdefghijklmnopqrstuv" not in exported
    everything = {"rb.thought_preview", "gen_ai.input.messages", "gen_ai.output.messages",
                  "gen_ai.tool.call.arguments", "gen_ai.tool.call.result"}  # fmt: skip
    spans_expected = mode in ("SPAN_ONLY", "SPAN_AND_EVENT", "true")
    events_expected = mode in ("EVENT_ONLY", "SPAN_AND_EVENT")
    assert (everything <= on_spans) is spans_expected and (bool(on_spans) is spans_expected)
    assert (everything <= on_events) is events_expected and (bool(on_events) is events_expected)
    logged = otel.logs("gen_ai.client.inference.operation.details")  # the conventions' log-based event, too
    assert bool(logged) is events_expected
    assert all(r.span_id and "sk-abcdefghijklmnopqrstuv" not in str(dict(r.attributes or {})) for r in logged)


def test_capture_mode_edges(caplog: pytest.LogCaptureFixture) -> None:
    from rb_otel.telemetry.content import ContentPolicy, redact, resolve_capture_mode

    assert (
        resolve_capture_mode("event_only") == "EVENT_ONLY"
        and resolve_capture_mode(" Span_And_Event ") == "SPAN_AND_EVENT"
    )
    with caplog.at_level(logging.WARNING, logger="rb_otel.telemetry"):
        assert resolve_capture_mode("sometimes") == "NO_CONTENT"
    assert [r.getMessage() for r in caplog.records] == [
        "capture_content='sometimes' is not true/false; content capture stays off"
    ]
    assert ContentPolicy("EVENT_ONLY").split({"rb.thought_preview": "t", "rb.step": 1}) == {"rb.thought_preview": "t"}
    # both ends of the surrogate range are replaced; a valid astral character is kept
    assert redact("a\ud800b\udfffc\U0001f600") == "a\ufffdb\ufffdc\U0001f600"
