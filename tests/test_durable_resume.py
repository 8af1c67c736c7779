"""A run is the graph's, not the process's: a human-in-the-loop agent interrupted in one process and resumed by
another (a fresh interpreter with a new ``ReasonBlocks``) from a real checkpointer, SQLite on a temp file and
PostgreSQL started by the test (``initdb`` / ``pg_ctl``), against the same run without the interrupt."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from components import PostgresServer

from rb_otel.report.traces import load_runs
from rb_otel.telemetry.otlp_json import read_spans

WORKER = Path(__file__).resolve().parent / "resume_worker.py"


def _part(checkpointer: str, traces: Path, part: str, *threads: str) -> list[dict[str, Any]]:
    args = [sys.executable, str(WORKER), checkpointer, str(traces), "--part", part]
    for thread in threads:
        args += ["--thread", thread]
    done = subprocess.run(args, capture_output=True, text=True, timeout=180, check=False)
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert rows[-1] == {"active_runs": rows[-1]["active_runs"], "runs_in_flight": 0, "pending": 0}, rows[-1]
    return rows[:-1]


def _attributes(span: dict[str, Any]) -> dict[str, Any]:
    return {a["key"]: next(iter(a["value"].values())) for a in span.get("attributes", [])}


def _shape(log: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [
        (e["step"], e["fsm_state"], tuple(e["injection_sources"]), e["tokens"], tuple(e["tool_calls"])) for e in log
    ]


def _runs(traces: Path) -> list[dict[str, Any]]:
    return sorted(
        (s for s in read_spans(traces) if s["name"].startswith("invoke_agent")), key=lambda s: s["startTimeUnixNano"]
    )


def _check_resume(checkpointer: str, tmp_path: Path) -> None:
    (whole,) = _part(f"sqlite:{tmp_path / 'whole.db'}", tmp_path / "whole.jsonl", "whole", "t1")
    (first,) = _part(checkpointer, tmp_path / "a.jsonl", "first", "t1")
    assert first["interrupted"] and [e["step"] for e in first["rb_step_log"]] == [0]
    (resumed,) = _part(checkpointer, tmp_path / "b.jsonl", "resume", "t1")
    assert not resumed["interrupted"]
    assert resumed["rb_run_id"] == first["rb_run_id"]  # one run across the two processes
    assert _shape(resumed["rb_step_log"]) == _shape(whole["rb_step_log"])  # steps, states, guidance, tokens
    (part_a,) = _runs(tmp_path / "a.jsonl")
    parts_b = _runs(tmp_path / "b.jsonl")  # the resume process approves the second tool call too: two parts
    assert _attributes(part_a)["rb.outcome"] == "interrupted"
    assert [_attributes(p)["rb.outcome"] for p in parts_b] == ["interrupted", "success"]
    chain = [part_a, *parts_b]
    for before, after in itertools.pairwise(chain):
        assert after["traceId"] != before["traceId"]  # a trace per request
        assert [(link["traceId"], link["spanId"]) for link in after["links"]] == [(before["traceId"], before["spanId"])]
    for part in chain:
        attributes = _attributes(part)
        assert attributes["rb.run_id"] == first["rb_run_id"] and attributes["gen_ai.conversation.id"] == "t1"
    spans_b = read_spans(tmp_path / "b.jsonl")
    tools = [s for s in spans_b if s["name"] == "execute_tool add"]
    assert [t["parentSpanId"] for t in tools] == [p["spanId"] for p in parts_b]  # each approved tool, its part
    steps = sorted(int(_attributes(s)["rb.step"]) for s in spans_b if s["name"].startswith("chat"))
    assert steps == [1, 2]  # the resumed part's steps go on from the first part's
    # each entry of the step log names the part that made it (the part a resume links to is the last one's)
    chats = [s for s in [*read_spans(tmp_path / "a.jsonl"), *spans_b] if s["name"].startswith("chat")]
    made_by = {int(_attributes(s)["rb.step"]): f"{s['traceId']}-{s['parentSpanId']}".lower() for s in chats}
    assert [e["part"] for e in resumed["rb_step_log"]] == [made_by[e["step"]] for e in resumed["rb_step_log"]]
    assert len({e["part"] for e in resumed["rb_step_log"]}) == 3  # a step in each of the three parts
    # rb-otel report and ab-report see one run: its last part's outcome, every part's steps and tokens
    (joined,) = load_runs([tmp_path / "a.jsonl", tmp_path / "b.jsonl"])[0]
    assert (joined.run_id, joined.outcome, joined.parts, len(joined.steps)) == (first["rb_run_id"], "success", 3, 3)
    assert joined.attributes["rb.tokens"] == sum(e["tokens"] for e in whole["rb_step_log"])


def test_a_run_resumed_by_another_process_from_sqlite_is_the_same_run(tmp_path: Path) -> None:
    _check_resume(f"sqlite:{tmp_path / 'checkpoints.db'}", tmp_path)


@pytest.fixture(scope="module")
def postgres() -> Iterator[PostgresServer]:
    server = PostgresServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.mark.real
def test_a_run_resumed_by_another_process_from_postgres_is_the_same_run(
    postgres: PostgresServer, tmp_path: Path
) -> None:
    _check_resume(f"postgres:{postgres.dsn}", tmp_path)


@pytest.mark.real
def test_two_threads_resumed_in_reverse_order_by_a_third_process(postgres: PostgresServer, tmp_path: Path) -> None:
    checkpointer = f"postgres:{postgres.dsn}"
    (whole,) = _part(f"sqlite:{tmp_path / 'whole.db'}", tmp_path / "whole.jsonl", "whole", "w")
    (first_x,) = _part(checkpointer, tmp_path / "x.jsonl", "first", "x")
    (first_y,) = _part(checkpointer, tmp_path / "y.jsonl", "first", "y")
    resumed = _part(checkpointer, tmp_path / "z.jsonl", "resume", "y", "x")
    by_thread = {row["thread"]: row for row in resumed}
    assert by_thread["x"]["rb_run_id"] == first_x["rb_run_id"] and by_thread["y"]["rb_run_id"] == first_y["rb_run_id"]
    for row in resumed:
        assert _shape(row["rb_step_log"]) == _shape(whole["rb_step_log"])
    runs = _runs(tmp_path / "z.jsonl")
    assert {_attributes(r)["rb.run_id"] for r in runs} == {first_x["rb_run_id"], first_y["rb_run_id"]}


def test_a_second_agent_object_in_the_same_process_continues_the_run(tmp_path: Path) -> None:
    from conftest import add, calc_script
    from langchain.agents import create_agent
    from langchain.agents.middleware import HumanInTheLoopMiddleware
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.types import Command
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from rb_otel import ReasonBlocks
    from rb_otel.testing import ScriptedChatModel

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    saver = InMemorySaver()
    config = {"configurable": {"thread_id": "t"}}

    def build() -> Any:  # a server that builds the agent per request
        rb = ReasonBlocks(tracer_provider=provider)
        middleware = [HumanInTheLoopMiddleware(interrupt_on={"add": True}), rb.middleware(agent_name="calc")]
        return rb, create_agent(
            ScriptedChatModel(script=calc_script(1)), [add], middleware=middleware, checkpointer=saver
        )

    rb_a, agent_a = build()
    assert "__interrupt__" in agent_a.invoke({"messages": [("user", "x")]}, config)
    rb_b, agent_b = build()  # the first object is still alive
    out = agent_b.invoke(Command(resume={"decisions": [{"type": "approve"}]}), config)
    assert "__interrupt__" not in out and [e["step"] for e in out["rb_step_log"]] == [0, 1]
    assert rb_a.telemetry.runs_in_flight == 0 and rb_b.telemetry.runs_in_flight == 0  # nothing left open
    runs = [s for s in exporter.get_finished_spans() if s.name.startswith("invoke_agent")]
    assert len(runs) == 2 and len({s.attributes["rb.run_id"] for s in runs}) == 1
    tool = next(s for s in exporter.get_finished_spans() if s.name == "execute_tool add")
    assert tool.parent is not None and tool.parent.span_id == runs[1].context.span_id
