"""``ab-report``, ``evaluate`` and ``train`` on every source (docs/fleet-analysis.md): the spans of a real demo
run (its scripted LangChain agents and an A/B experiment through the real pipeline) read from OTLP/JSON files in
Python, from the same files through the embedded engine (chdb) and from a chdb database folder in the exporter's
schema, give the same answers; filters select the same runs everywhere and reach the store's plan.

No ClickHouse server build is installable on this machine (tests/test_fleet_analysis.py says why), so the server
path runs its real client against a real HTTP server on 127.0.0.1 that answers as ClickHouse does to a wrong
password: the one fault here that cannot be caused otherwise.
"""

from __future__ import annotations

import datetime
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rb_otel.analysis import FleetFilter, open_source
from rb_otel.analysis.imported import source_runs
from rb_otel.analysis.runs import TYPED_ATTRIBUTES, runs_sql, typed_value
from rb_otel.analysis.sources import ChdbSource
from rb_otel.report import load_runs

EXPERIMENT = "demo-experiment"


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo's scenarios and a 24-user experiment, exported as OTLP/JSON lines (``traces.jsonl``)."""
    out = tmp_path_factory.mktemp("demo")
    done = subprocess.run([sys.executable, "-m", "rb_otel.cli", "demo", "--out", str(out), "--experiment", "24",
                           "--quiet"], capture_output=True, text=True, timeout=180, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return out


@pytest.fixture(scope="module")
def folder(demo: Path) -> str:
    """The demo's spans in a chdb database folder, loaded with the exporter's schema: the ``chdb://`` URL."""
    store = demo / "store"
    store.mkdir()
    ChdbSource(folder=str(store), files=[demo / "traces.jsonl"], database="otel").close()
    return f"chdb://{store}?database=otel"


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rb_otel.cli", *args], capture_output=True, text=True,
                          timeout=180, check=False)  # fmt: skip


def _json(tmp_path: Path, name: str, *args: str) -> dict[str, object]:
    out = tmp_path / f"{name}.json"
    done = _cli(*args, "--json", str(out))
    assert done.returncode in (0, 1), done.stderr  # train: 1 when the fit is not trusted (nothing written)
    assert "Traceback" not in done.stderr, done.stderr
    loaded: dict[str, object] = json.loads(out.read_text())
    return loaded


def _three(demo: Path, folder: str) -> list[list[str]]:
    files = str(demo / "traces.jsonl")
    return [[files], [files, "--engine", "chdb"], [folder]]


def test_ab_report_is_the_same_answer_from_files_the_embedded_engine_and_a_folder(
    demo: Path, folder: str, tmp_path: Path
) -> None:
    answers = [_json(tmp_path, f"ab{i}", "ab-report", *source, "--experiment", EXPERIMENT)
               for i, source in enumerate(_three(demo, folder))]  # fmt: skip
    assert answers[0] == answers[1] == answers[2]
    arms = answers[0]["arms"]
    assert isinstance(arms, dict) and set(arms) == {"on", "off"}
    assert sum(arm["n_runs"] for arm in arms.values()) == 24  # one run per user of the experiment


def test_a_filter_changes_the_answer_the_same_way_everywhere_and_reaches_the_plan(
    demo: Path, folder: str, tmp_path: Path
) -> None:
    later = datetime.datetime.now(datetime.UTC) + datetime.timedelta(days=1)
    for i, source in enumerate(_three(demo, folder)):
        done = _cli("ab-report", *source, "--experiment", EXPERIMENT, "--since", later.date().isoformat())
        assert done.returncode == 2, done.stdout
        assert done.stderr.count("\n") == 1 and f"no runs of experiment '{EXPERIMENT}'" in done.stderr, (i, done)
    done = _cli("ab-report", folder, "--experiment", EXPERIMENT, "--since", "2026-01-01", "--explain")
    assert done.returncode == 0, done.stderr
    read = done.stderr[done.stderr.index("ReadFromMergeTree") :]
    assert f"SpanAttributes.key_rb.experiment.id = '{EXPERIMENT}'" in read and "Timestamp >= '2026-01-01" in read


def test_a_missing_experiment_lists_the_store_s_experiments(folder: str) -> None:
    done = _cli("ab-report", folder, "--experiment", "nope")
    assert done.returncode == 2
    assert done.stderr.strip() == f"error: no runs of experiment 'nope' in {folder}; experiments found: " \
        f"'{EXPERIMENT}' (24 runs)"  # fmt: skip


_STORED_AS_TEXT = st.one_of(  # a value of each kind, and the string the exporter stores it as
    st.integers(min_value=-(2**63), max_value=2**63 - 1).map(lambda v: (v, str(v))),
    st.floats(allow_nan=False, allow_infinity=False).map(lambda v: (v, repr(v))),
    st.booleans().map(lambda v: (v, "true" if v else "false")),
    st.lists(st.text(max_size=8), max_size=4).map(lambda v: (v, json.dumps(v))),
)


@given(key=st.sampled_from(sorted(TYPED_ATTRIBUTES)), stored=_STORED_AS_TEXT)
def test_a_stored_value_is_typed_as_its_name_promises_or_kept_as_text(key: str, stored: tuple[object, str]) -> None:
    value, text = stored
    kind = TYPED_ATTRIBUTES[key]
    typed = typed_value(key, text)
    promised = {"intValue": int, "doubleValue": float, "boolValue": bool, "arrayValue": list}[kind]
    if isinstance(value, promised) and not (promised is int and isinstance(value, bool)):
        assert typed == value  # what the file's typed value reads back as
    elif promised is float and isinstance(value, int) and not isinstance(value, bool):
        assert typed == float(value)
    else:
        assert isinstance(typed, promised) or typed == text
    assert typed_value("gen_ai.agent.name", text) == text  # a name not promised a type stays text


@pytest.mark.parametrize("block_rows", [1, 7, 4096])
def test_a_streamed_answer_is_the_whole_answer_in_order(demo: Path, folder: str, block_rows: int) -> None:
    source = ChdbSource(folder=str(demo / "store"), database="otel")
    try:
        source.STREAM_BLOCK_ROWS = block_rows  # many blocks, or one
        for where in (FleetFilter(), FleetFilter(agent="nobody")):
            sql = runs_sql(source.qualified, where)
            assert list(source._row_stream(sql)) == source._rows(sql)  # the plain definition
    finally:
        source.close()


def test_a_store_s_runs_are_the_files_runs(demo: Path, folder: str) -> None:
    files, _ = load_runs([demo / "traces.jsonl"])
    for spec in ([folder], [str(demo / "traces.jsonl")]):
        source = open_source(spec, engine="chdb")
        try:
            stored, problems = source.runs(FleetFilter())
        finally:
            source.close()
        assert problems == []
        assert sorted(r.run_id for r in stored) == sorted(r.run_id for r in files)
        by_id = {r.run_id: r for r in stored}
        for run in files:  # every step, tool, monitor, time and attribute as the files path reads them
            assert by_id[run.run_id] == run, run.run_id


def test_the_agent_filter_selects_the_same_runs_for_train_and_evaluate(demo: Path, folder: str) -> None:
    where = FleetFilter(agent="demo-stalled")
    picked = [sorted(r.run_id for r in source_runs(spec, where, engine=engine).runs)
              for spec, engine in (([demo / "traces.jsonl"], "python"), ([folder], "python"),
                                   ([demo / "traces.jsonl"], "chdb"))]  # fmt: skip
    assert picked[0] == picked[1] == picked[2] and picked[0]
    everything = source_runs([folder]).runs
    assert len(picked[0]) < len(everything)
    assert {r.agent_name for r in everything if r.run_id in picked[0]} == {"demo-stalled"}


def test_the_report_page_is_the_same_page_from_a_store(demo: Path, folder: str, tmp_path: Path) -> None:
    pages = []
    for i, source in enumerate(_three(demo, folder)):
        out = tmp_path / f"page{i}.html"
        done = _cli("report", *source, "--page", "--agent", "demo-stalled", "--out", str(out))
        assert done.returncode == 0, done.stderr
        pages.append(out.read_text())
    assert pages[0] == pages[1] == pages[2]
    assert "demo-stalled" in pages[0] and "demo-experiment" not in pages[0]  # only that agent's runs
    empty = _cli("report", folder, "--page", "--agent", "nobody", "--out", str(tmp_path / "none.html"))
    message = f"error: no runs (invoke_agent spans) in {folder} under the filters given"
    assert empty.returncode == 2 and empty.stderr.strip() == message
    assert not (tmp_path / "none.html").exists()


def test_evaluate_gives_the_same_figures_from_every_source(demo: Path, folder: str, tmp_path: Path) -> None:
    results = [_json(tmp_path, f"ev{i}", "evaluate", *source, "--quiet")
               for i, source in enumerate(_three(demo, folder))]  # fmt: skip
    assert results[0] == results[1] == results[2]
    assert results[0]["runs"] == 28 and results[0]["failed"] == 7  # every demo run; tool-error, stalled, the off arm


def test_train_fits_the_same_pilot_from_a_store(demo: Path, folder: str, tmp_path: Path) -> None:
    files = _json(tmp_path, "tr0", "train", str(demo / "traces.jsonl"), "--quiet", "--out", str(tmp_path / "a"))
    stored = _json(tmp_path, "tr1", "train", folder, "--quiet", "--out", str(tmp_path / "b"))
    assert files["report"] == stored["report"]


def test_filters_on_another_harness_s_records_are_refused_naming_the_file(demo: Path) -> None:
    done = _cli("evaluate", str(demo / "steplogs.jsonl"), "--agent", "demo-stalled", "--quiet")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"error: {demo / 'steplogs.jsonl'}: format: this is steplog; the filters and the chdb engine read rb-otel's "
        "traces (OTLP/JSON files, a chdb folder or a ClickHouse URL)"
    ]


class _RefusesEveryone(BaseHTTPRequestHandler):
    """What a ClickHouse server's HTTP interface answers to a wrong password (HTTP 403, code 516)."""

    def _refuse(self) -> None:
        body = (b"Code: 516. DB::Exception: reader: Authentication failed: password is incorrect, or there is no "
                b"user with such name. (AUTHENTICATION_FAILED) (version 25.8.1.1)\n")  # fmt: skip
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        self.send_response(403)
        self.send_header("X-ClickHouse-Exception-Code", "516")
        self.send_header("Content-Type", "text/plain; charset=UTF-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _refuse

    def log_message(self, format: str, *args: object) -> None:
        return None


@pytest.fixture
def refusing_server() -> Iterator[int]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _RefusesEveryone)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()


def test_a_wrong_password_is_one_line_on_every_command(refusing_server: int) -> None:
    url = f"clickhouse://reader:wr0ng-pw@127.0.0.1:{refusing_server}/otel"
    for command in (["report", url], ["ab-report", url, "--experiment", EXPERIMENT], ["evaluate", url, "--quiet"],
                    ["train", url, "--quiet"]):  # fmt: skip
        done = _cli(*command)
        assert done.returncode == 2, (command, done.stderr)
        expected = (
            f"error: clickhouse://reader:***@127.0.0.1:{refusing_server}/otel: the server refused the user or password"
        )
        assert done.stderr.strip().splitlines() == [expected], (command, done.stderr)
        assert "wr0ng-pw" not in done.stdout + done.stderr
