"""Analysis where the traces live (docs/fleet-analysis.md): the fleet summary from files in Python, from the same
files through the embedded engine's SQL (chdb), and from a chdb database folder in the exporter's schema, on spans
a real rb-otel run wrote; parts of a resumed run joined; filters pushed down; bad sources as one line.

No ClickHouse server build is installable on this machine (Debian's is 18.16, far older than the exporter's
schema; PyPI and npm carry clients only), so the server path is exercised against its real client with an
unreachable address, and the SQL a server would run is exercised by chdb, ClickHouse's own engine, on the
exporter's DDL.
"""

from __future__ import annotations

import datetime
import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from rb_otel.analysis import FleetFilter, SourceError, open_source
from rb_otel.analysis.sources import ChdbSource
from tests.components import free_port

DAY = datetime.datetime(2026, 12, 1, tzinfo=datetime.UTC)


@pytest.fixture(scope="module")
def demo_traces(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Spans of a real run: the demo's scripted LangChain agents through the real pipeline, exported as
    OTLP/JSON lines."""
    out = tmp_path_factory.mktemp("demo")
    done = subprocess.run([sys.executable, "-m", "rb_otel.cli", "demo", "--out", str(out)], capture_output=True,
                          text=True, timeout=120, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return out / "traces.jsonl"


EVERYTHING = FleetFilter()


def _summary(specs: list[str], where: FleetFilter = EVERYTHING, engine: str = "python") -> list[dict[str, Any]]:
    source = open_source(specs, engine=engine)
    try:
        return [r.as_dict() for r in source.fleet_summary(where)]
    finally:
        source.close()


def test_files_and_the_embedded_engine_give_the_same_summary(demo_traces: Path) -> None:
    plain = _summary([str(demo_traces)])
    assert plain == _summary([str(demo_traces)], engine="chdb")
    agents = {r["agent"] for r in plain}
    assert {"demo-easy", "demo-stalled"} <= agents
    stalled = next(r for r in plain if r["agent"] == "demo-stalled")
    assert stalled["skip_runs"] == 1 and stalled["state_steps"].get("SKIP", 0) > 0
    assert sum(stalled["state_steps"].values()) == stalled["steps_per_run"] * stalled["runs"]


def test_a_chdb_folder_in_the_exporters_schema_gives_the_same_summary(demo_traces: Path, tmp_path: Path) -> None:
    folder = tmp_path / "store"
    folder.mkdir()
    ChdbSource(folder=str(folder), files=[demo_traces], database="otel").close()  # loaded once, kept on disk
    assert _summary([f"chdb://{folder}?database=otel"]) == _summary([str(demo_traces)])


def _span(name: str, trace: str, span: str, start_s: float, attributes: dict[str, Any], parent: str = "",
          duration_s: float = 1.0) -> dict[str, Any]:  # fmt: skip
    def value(v: Any) -> dict[str, Any]:
        if isinstance(v, bool):
            return {"boolValue": v}
        if isinstance(v, int):
            return {"intValue": str(v)}
        return {"stringValue": str(v)}

    start = int((DAY.timestamp() + start_s) * 1e9)
    return {"traceId": trace, "spanId": span, "parentSpanId": parent, "name": name, "kind": 1,
            "startTimeUnixNano": str(start), "endTimeUnixNano": str(start + int(duration_s * 1e9)),
            "attributes": [{"key": k, "value": value(v)} for k, v in attributes.items()]}  # fmt: skip


def _write(path: Path, spans: list[dict[str, Any]], service: str = "svc") -> Path:
    resource = {"attributes": [{"key": "service.name", "value": {"stringValue": service}}]}
    request = {
        "resourceSpans": [{"resource": resource, "scopeSpans": [{"scope": {"name": "rb_otel"}, "spans": spans}]}]
    }
    path.write_text(json.dumps(request) + "\n", encoding="utf-8")
    return path


def _run_part(trace: str, start_s: float, *, run_id: str, agent: str, outcome: str, steps: int, tokens: int,
              skip: bool = False, states: tuple[str, ...] = ()) -> list[dict[str, Any]]:  # fmt: skip
    root = _span(f"invoke_agent {agent}", trace, trace[:16], start_s, {
        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": agent, "rb.run_id": run_id,
        "rb.outcome": outcome, "rb.steps": steps, "rb.tokens": tokens, "rb.entered_skip": skip})  # fmt: skip
    chats = [_span("chat m", trace, f"{trace[:12]}{i:04d}", start_s + i, {"rb.fsm_state": s, "rb.step": i},
                   parent=trace[:16], duration_s=0.5) for i, s in enumerate(states)]  # fmt: skip
    return [root, *chats]


def test_the_parts_of_a_resumed_run_are_one_run(tmp_path: Path) -> None:
    first = _run_part("a" * 32, 10, run_id="r1", agent="coder", outcome="interrupted", steps=2, tokens=100,
                      states=("INIT", "NORMAL"))  # fmt: skip
    second = _run_part("b" * 32, 3600, run_id="r1", agent="coder", outcome="success", steps=3, tokens=50,
                       skip=True, states=("SLOW", "SKIP", "SKIP"))  # fmt: skip
    other = _run_part("c" * 32, 20, run_id="r2", agent="coder", outcome="failure: ValueError", steps=1, tokens=7,
                      states=("INIT",))  # fmt: skip
    path = _write(tmp_path / "t.jsonl", [*first, *second, *other])
    for engine in ("python", "chdb"):
        (row,) = _summary([str(path)], engine=engine)
        assert row["runs"] == 2 and row["skip_runs"] == 1
        assert row["outcomes"] == {"failure": 1, "success": 1}  # r1: its last part's outcome
        assert row["steps_per_run"] == 3.0 and row["tokens_per_run"] == 78.5  # (2 + 3 + 1) / 2, (150 + 7) / 2
        assert row["state_steps"] == {"INIT": 2, "NORMAL": 1, "SKIP": 2, "SLOW": 1}
        assert row["state_seconds"]["SKIP"] == 1.0


def test_filters_select_the_same_runs_in_both_engines_and_reach_the_store(tmp_path: Path) -> None:
    spans = []
    for i, (agent, day) in enumerate([("coder", 0), ("coder", 1), ("helper", 1), ("coder", 2)]):
        spans += _run_part(f"{i:032x}", day * 86_400 + 60, run_id=f"r{i}", agent=agent, outcome="success",
                           steps=1, tokens=10, states=("INIT",))  # fmt: skip
    path = _write(tmp_path / "t.jsonl", spans, service="svc-a")
    cases = [
        FleetFilter(),
        FleetFilter(agent="coder"),
        FleetFilter(since=DAY + datetime.timedelta(days=1)),
        FleetFilter(since=DAY + datetime.timedelta(days=1), until=DAY + datetime.timedelta(days=2)),
        FleetFilter(service="svc-b"),
    ]
    counts = []
    for where in cases:
        plain = _summary([str(path)], where)
        assert plain == _summary([str(path)], where, engine="chdb"), where
        counts.append(sum(r["runs"] for r in plain))
    assert counts == [4, 3, 3, 2, 0]
    source = open_source([str(path)], engine="chdb")
    try:
        plan = source.explain(FleetFilter(agent="coder", since=DAY))  # type: ignore[attr-defined]
    finally:
        source.close()
    # the predicates are in the store's plan at the read of the table (a PREWHERE), not on rows sent back
    read = plan[plan.index("ReadFromMergeTree") :]
    assert "gen_ai.agent.name = 'coder'" in read and "Timestamp >= '2026-12-01 00:00:00" in read, plan


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rb_otel.cli", "report", *args], capture_output=True, text=True,
                          timeout=60, check=False)  # fmt: skip


def test_a_bad_source_is_one_line_naming_it_without_its_password(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    wrong = tmp_path / "wrong"
    wrong.mkdir()
    _wrong_schema(wrong)
    port = free_port()
    cases = [
        ([f"clickhouse://reader:s3cret-pw@127.0.0.1:{port}/otel"], "the server did not answer"),
        (["clickhouse://reader:s3cret-pw@127.0.0.1:notaport/otel"], "the port is not a number"),
        ([f"chdb://{empty}"], "no table default.otel_traces"),
        ([f"chdb://{wrong}"], "SpanAttributes is String"),
        ([f"chdb://{tmp_path / 'nowhere'}"], "no chdb database folder"),
        ([str(tmp_path / "missing.jsonl")], "no such trace file"),
        (["redis://127.0.0.1:6379/0"], "not a source rb-otel reads"),
    ]
    with ThreadPoolExecutor(4) as pool:  # each case is its own process: started together, not one after another
        answers = list(pool.map(lambda case: _cli(*case[0], "--summary"), cases))
    for (specs, problem), done in zip(cases, answers, strict=True):
        assert done.returncode == 2, (specs, done.stdout, done.stderr)
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and problem in lines[0], (specs, done.stderr)
        assert "s3cret-pw" not in done.stderr + done.stdout and "Traceback" not in done.stderr
        with pytest.raises(SourceError, match=problem):
            open_source(specs)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"resourceSpans": [{"scopeSpans": [{"spans": [{"name": "x"}]}]}]}\nnot json\n')
    with ThreadPoolExecutor(2) as pool:
        answers = list(pool.map(lambda engine: _cli(str(bad), "--summary", "--engine", engine), ("python", "chdb")))
    for done in answers:
        assert done.returncode == 2 and "bad.jsonl" in done.stderr and "Traceback" not in done.stderr, done.stderr


def _wrong_schema(folder: Path) -> None:
    from chdb import session

    s = session.Session(str(folder))
    try:
        s.query("CREATE TABLE default.otel_traces (Timestamp DateTime64(9), TraceId String, SpanId String, "
                "ParentSpanId String, SpanName String, ServiceName String, SpanAttributes String, Duration UInt64) "
                "ENGINE = MergeTree ORDER BY Timestamp")  # fmt: skip
    finally:
        s.close()


def test_the_summary_command_prints_the_table_and_the_json(demo_traces: Path, tmp_path: Path) -> None:
    done = _cli(str(demo_traces), "--engine", "chdb", "--agent", "demo-stalled", "--json", str(tmp_path / "s.json"))
    assert done.returncode == 0, done.stderr
    assert "demo-stalled" in done.stdout and "demo-easy" not in done.stdout
    data = json.loads((tmp_path / "s.json").read_text())
    assert [r["agent"] for r in data["runs"]] == ["demo-stalled"]
    assert _cli(str(demo_traces), "--since", "yesterday").returncode == 2  # argparse's own one-line error
