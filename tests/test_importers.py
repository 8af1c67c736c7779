"""Importers: every format on real files (the development records' data root: ``tests/components.py``
``data_path``) and on fixtures we wrote ourselves in each format."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from components import data_path
from conftest import Otel
from format_fixtures import io_harness_store
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry import trace
from opentelemetry.trace import StatusCode

from rb_otel.cli import main
from rb_otel.importers import RecordError, detect, replay
from rb_otel.importers.formats.agy import AgyStep, merge
from rb_otel.importers.formats.io_harness import parse_tool_calls
from rb_otel.types import StepLogEntry

HARD = "Hmm, maybe the error is in src/a.py, not sure; the traceback failed with KeyError again and again."


def spans_by_run(otel: Otel) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    roots = {s.context.span_id: dict(s.attributes or {})["rb.run_id"] for s in otel.spans("invoke_agent")}
    for span in otel.exporter.get_finished_spans():
        if span.parent and span.parent.span_id in roots:
            out.setdefault(roots[span.parent.span_id], []).append(span)
    return out


# -- real files ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("relative", "fmt"),
    [
        ("io_harness/store-0.22.0_populated.sqlite3", "io_harness"),
        ("io_harness/store-0.29.0_aggregates.sqlite3", "io_harness"),
        ("openhands/ponylang__ponyc-4595.json", "openhands"),
        ("openhands/tests_runtime_trajs_basic_interactions.json", "openhands"),
        ("swe_agent/pydicom__pydicom-1458.traj", "swe_agent"),
        ("swe_agent/marshmallow-code__marshmallow-1867.function_calling_replace_from_source.traj", "swe_agent"),
        ("tau_bench/gpt-4o-airline_task13_trial0_reward0.json", "openai_messages"),
    ],
)
def test_format_detection_on_real_files(relative: str, fmt: str) -> None:
    assert detect(data_path(relative)) == fmt


def test_io_harness_022_matches_the_crates_read_back(otel: Otel) -> None:
    expected = json.loads(data_path("io_harness/store-0.22.0_populated.json").read_text())
    [result] = replay(
        data_path("io_harness/store-0.22.0_populated.sqlite3"),
        tracer_provider=otel.tracer_provider,
        meter_provider=otel.meter_provider,
    )
    summary = result.summary
    for key in ("run_id", "goal", "outcome", "last_step", "step_count", "spent_tokens", "status", "steps"):
        assert summary[key] == expected[key], key
    assert summary["workspace"] == expected["workspace"]
    assert result.step_count == expected["step_count"]
    root = otel.spans("invoke_agent")[0]
    attrs = dict(root.attributes or {})
    assert attrs["rb.source"] == "io_harness" and attrs["rb.synthetic_timing"] is True
    assert attrs["rb.tokens"] == expected["spent_tokens"] and attrs["rb.steps"] == expected["step_count"]
    chats = sorted(otel.spans("chat "), key=lambda s: s.attributes["rb.step"])
    calls = expected["provider_calls"]
    for span, call in zip(chats, calls, strict=True):
        a = dict(span.attributes or {})
        assert a["gen_ai.request.model"] == call["model"] and a["gen_ai.provider.name"] == call["provider"]
        assert a["gen_ai.usage.input_tokens"] == call["usage"]["prompt_tokens"]
        assert a["gen_ai.usage.output_tokens"] == call["usage"]["completion_tokens"]
        assert list(a["gen_ai.response.finish_reasons"]) == [call["finish_reason"]]
    tools = [dict(s.attributes or {})["gen_ai.tool.name"] for s in otel.spans("execute_tool")]
    assert tools == ["read_file", "write_file", "grep", "write_file"]


def test_io_harness_029_matches_the_crates_read_back(otel: Otel) -> None:
    expected = json.loads(data_path("io_harness/store-0.29.0_aggregates.json").read_text())["read_back"]["runs"]
    results = replay(data_path("io_harness/store-0.29.0_aggregates.sqlite3"), tracer_provider=otel.tracer_provider)
    assert [r.summary["run_id"] for r in results] == [e["run_id"] for e in expected]
    for result, want in zip(results, expected, strict=True):
        assert result.summary["outcome"] == want["outcome"] == result.outcome
        assert result.summary["success"] is want["success"]
        assert result.summary["tokens"] == want["tokens"]
    outcomes = {dict(s.attributes or {})["rb.run_id"]: s for s in otel.spans("invoke_agent")}
    assert outcomes["io_harness-5"].status.status_code is StatusCode.ERROR  # "stalled" is not success
    assert outcomes["io_harness-1"].status.status_code is StatusCode.UNSET


@pytest.mark.parametrize(
    "name",
    ["pydicom__pydicom-1458.traj", "marshmallow-code__marshmallow-1867.function_calling_replace_from_source.traj"],
)
def test_swe_agent_trajectories(otel: Otel, name: str) -> None:
    raw = json.loads(data_path(f"swe_agent/{name}").read_text())
    [result] = replay(data_path(f"swe_agent/{name}"), tracer_provider=otel.tracer_provider)
    assert result.step_count == len(raw["trajectory"]) and result.outcome == "unlabelled"  # a submitted patch
    thoughts = [e.thought_preview for e in result.steps]
    assert thoughts == [s["thought"][:120] for s in raw["trajectory"]]
    assert [e.tool_calls[0] for e in result.steps] == [s["action"].strip().split()[0] for s in raw["trajectory"]]
    assert len(otel.spans("execute_tool")) == result.step_count


def test_openhands_history(otel: Otel) -> None:
    [result] = replay(data_path("openhands/ponylang__ponyc-4595.json"), tracer_provider=otel.tracer_provider)
    assert result.step_count > 10
    assert sum(e.tokens for e in result.steps) > 0
    run = spans_by_run(otel)[result.run_id]
    assert {s.name.split()[0] for s in run} == {"chat", "execute_tool"}
    root = otel.spans("invoke_agent")[0]
    assert "rb.synthetic_timing" not in (root.attributes or {})  # real timestamps
    assert root.end_time > root.start_time


def test_tau_bench_failed_and_solved(otel: Otel) -> None:
    [failed] = replay(
        data_path("tau_bench/gpt-4o-airline_task13_trial0_reward0.json"), tracer_provider=otel.tracer_provider
    )
    [solved] = replay(
        data_path("tau_bench/gpt-4o-airline_task13_trial2_reward1.json"), tracer_provider=otel.tracer_provider
    )
    assert failed.outcome == "failure: reward 0" and solved.outcome == "success"
    tools = list(otel.spans("execute_tool"))
    assert tools and all(dict(s.attributes or {})["gen_ai.tool.call.id"].startswith("call_") for s in tools)


def test_reimport_gives_the_same_trace_and_span_ids(otel: Otel) -> None:
    path = data_path("swe_agent/pydicom__pydicom-1458.traj")
    first = replay(path, tracer_provider=otel.tracer_provider)
    ids_first = sorted((s.context.trace_id, s.context.span_id) for s in otel.exporter.get_finished_spans())
    otel.exporter.clear()
    second = replay(path, tracer_provider=otel.tracer_provider)
    ids_second = sorted((s.context.trace_id, s.context.span_id) for s in otel.exporter.get_finished_spans())
    assert first[0].trace_id == second[0].trace_id and ids_first == ids_second
    assert len(set(ids_first)) == len(ids_first)


# -- ReasonBlocks step logs ------------------------------------------------------------------------------------


def entries(thoughts: list[str]) -> list[dict[str, Any]]:
    return [
        StepLogEntry(
            step=i,
            fsm_state="NORMAL" if i else "INIT",
            thought_preview=t or "(first call)",
            timestamp=1_700_000_000 + i,
            difficulty=None if i == 0 else 0.5,
            tokens=10 * i,
            tool_calls=["read_file"],
        ).as_dict()
        for i, t in enumerate(thoughts)
    ]


def test_steplog_jsonl_with_headers_bad_lines_and_rescore(otel: Otel, tmp_path: Path) -> None:
    path = tmp_path / "runs.jsonl"
    lines = [json.dumps({"run_id": "r1", "agent_name": "coder", "task": "fix", "outcome": "success"})]
    lines += [json.dumps(e) for e in entries([""] + [HARD] * 8)]
    lines.insert(4, "{not json")
    lines.insert(6, json.dumps({"step": "three", "fsm_state": "NORMAL"}))
    lines.append(json.dumps({"run_id": "r2", "outcome": "failure: ValueError"}))
    lines += [json.dumps(e) for e in entries(["", "Reading the file."])]
    path.write_text("\n".join(lines) + "\n")
    assert detect(path) == "steplog"
    results = replay(path, rescore=True, tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    assert [r.run_id for r in results] == ["r1", "r2"]
    assert results[0].step_count == 9 and results[1].step_count == 2
    assert results[0].entered == {"SLOW": 5}
    problems = [str(p) for p in results[0].problems]
    assert any("line 5" in p and "not valid JSON" in p for p in problems)
    assert any("line 7" in p and "step must be an integer" in p for p in problems)
    root = {dict(s.attributes or {})["rb.run_id"]: s for s in otel.spans("invoke_agent")}
    assert dict(root["r1"].attributes or {})["gen_ai.agent.name"] == "coder"
    assert root["r2"].status.status_code is StatusCode.ERROR


def test_steplog_json_replays_recorded_states_as_is(otel: Otel, tmp_path: Path) -> None:
    path = tmp_path / "log.json"
    recorded = entries(["", HARD, HARD])
    path.write_text(json.dumps({"run": {"run_id": "x", "agent_name": "a"}, "steps": recorded}))
    [result] = replay(path, tracer_provider=otel.tracer_provider)
    assert [e.as_dict() for e in result.steps] == recorded
    chats = sorted(otel.spans("chat"), key=lambda s: s.attributes["rb.step"])
    assert [dict(s.attributes or {})["rb.fsm_state"] for s in chats] == ["INIT", "NORMAL", "NORMAL"]
    assert chats[1].start_time == 1_700_000_001 * 10**9


def test_malformed_files_give_clear_errors(tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text('{"trajectory": [1, 2')
    with pytest.raises(RecordError, match=r"broken\.json: line 1 column \d+: not valid JSON"):
        replay(broken, format="swe_agent")
    unknown = tmp_path / "mystery.json"
    unknown.write_text('{"hello": "world"}')
    with pytest.raises(RecordError, match="cannot tell the format"):
        replay(unknown)
    with pytest.raises(RecordError, match="no such file"):
        replay(tmp_path / "absent.json")
    notdb = tmp_path / "x.sqlite3"
    notdb.write_bytes(b"SQLite format 3\x00" + b"\x00" * 200)
    with pytest.raises(RecordError, match="not an io_harness store"):
        replay(notdb)


def test_large_jsonl_is_streamed_with_bounded_memory(tmp_path: Path) -> None:
    path = tmp_path / "big.jsonl"
    entry = StepLogEntry(step=0, fsm_state="NORMAL", thought_preview="x" * 100, tool_calls=["t"]).as_dict()
    with path.open("w") as handle:
        handle.write(json.dumps({"run_id": "big"}) + "\n")
        for i in range(40_000):
            entry["step"] = i
            handle.write(json.dumps(entry) + "\n")
    tracemalloc.start()
    [result] = replay(path, tracer_provider=trace.NoOpTracerProvider(), keep_steps=False)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert result.step_count == 40_000 and result.steps == []
    # the file is ~13.5 MB; streamed, the peak is ~2.3 MB whatever the file's size (100,000 steps: the same)
    assert peak < 5 * 1024 * 1024, f"peak {peak / 1e6:.1f} MB"


# -- io_harness fixtures: retries, children, tool-call shapes ----------------------------------------------------


def make_store(path: Path) -> None:
    """The hand-written 0.22 store (tests/fixtures/formats/io_harness/handwritten_store_0_22.sql) at ``path``."""
    io_harness_store("handwritten_store_0_22.sql", path)


def test_io_harness_retries_children_and_summary(otel: Otel, tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite3"
    make_store(path)
    [parent] = replay(path, tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider)
    assert parent.summary["step_count"] == 4  # MAX(step), not the 5 rows
    assert parent.summary["tokens"] == 1300  # every row, retries included
    assert parent.step_count == 3  # distinct step numbers 1, 2, 4
    [child] = parent.children
    assert child.outcome == "verification_failed" and child.step_count == 1
    roots = {dict(s.attributes or {})["rb.run_id"]: s for s in otel.spans("invoke_agent")}
    assert roots["io_harness-2"].parent.span_id == roots["io_harness-1"].context.span_id
    assert roots["io_harness-2"].context.trace_id == roots["io_harness-1"].context.trace_id
    step2 = next(s for s in otel.spans("chat") if s.attributes["rb.step"] == 1)
    attempts = [dict(e.attributes or {}) for e in step2.events if e.name == "rb.attempt"]
    assert [a["rb.step.retry"] for a in attempts] == [True, True, False]
    assert dict(step2.attributes or {})["rb.tokens"] == 780
    root = roots["io_harness-1"]
    assert (root.end_time - root.start_time) == 4 * 10**9  # spread over the recorded duration
    assert otel.metric_sum("rb.steps") == 4  # 3 parent steps + 1 child step: spans, never rows


def test_tool_call_shapes() -> None:
    named = parse_tool_calls('{"name":"write_file","arguments":{"path":"a"}}')
    assert [(t.name, t.arguments) for t in named] == [("write_file", {"path": "a"})]
    bare = parse_tool_calls('{"content":"x","path":"a.txt"}')
    assert [(t.name, t.arguments) for t in bare] == [("write_file", {"content": "x", "path": "a.txt"})]
    joined = parse_tool_calls('write_file:{"content":"A | B","path":"a"} | grep:{"pattern":"x"}')
    assert [(t.name, t.arguments) for t in joined] == [
        ("write_file", {"content": "A | B", "path": "a"}),
        ("grep", {"pattern": "x"}),
    ]
    assert parse_tool_calls("free text")[0].arguments == "free text"
    assert parse_tool_calls("") == []


# -- agy_bridge Step streams -----------------------------------------------------------------------------------


def agy_lines() -> list[dict[str, Any]]:
    return [
        {
            "id": "c:0",
            "step_index": 0,
            "trajectory_id": "c",
            "cascade_id": "c",
            "type": "THINKING",
            "source": "MODEL",
            "status": "ACTIVE",
            "thinking_delta": "Let me ",
        },
        {"id": "c:0", "thinking_delta": "look.", "status": "DONE"},
        {
            "id": "c:1",
            "step_index": 1,
            "trajectory_id": "c",
            "cascade_id": "c",
            "type": "TOOL_CALL",
            "source": "MODEL",
            "status": "DONE",
            "tool_calls": [{"name": "read", "args": {"p": "a"}, "id": "t1", "canonical_path": "/a"}],
            "usage_metadata": {
                "prompt_token_count": 100,
                "cached_content_token_count": 40,
                "candidates_token_count": 20,
                "thoughts_token_count": 5,
                "total_token_count": 125,
            },
        },
        {
            "id": "s:0",
            "step_index": 0,
            "trajectory_id": "sub",
            "cascade_id": "c",
            "type": "TEXT_RESPONSE",
            "source": "MODEL",
            "status": "ERROR",
            "error": "rate limited",
            "http_code": 429,
            "content": "partial",
        },
        {
            "id": "c:2",
            "step_index": 2,
            "trajectory_id": "c",
            "cascade_id": "c",
            "type": "TELEPORT",
            "source": "MODEL",
            "status": "CANCELED",
        },
        {
            "id": "c:3",
            "step_index": 3,
            "trajectory_id": "c",
            "cascade_id": "c",
            "type": "TEXT_RESPONSE",
            "content": "Done.",
            "status": "DONE",
            "is_complete_response": True,
        },
        {
            "id": "c:4",
            "step_index": 4,
            "cascade_id": "c",
            "trajectory_id": "c",
            "type": "FINISH",
            "structured_output": {"ok": True},
            "status": "DONE",
        },
        {"id": "only-id"},
    ]


def test_agy_stream(otel: Otel, tmp_path: Path) -> None:
    path = tmp_path / "session.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in agy_lines()) + "\nnot json\n")
    assert detect(path) == "agy"
    results = replay(path, tracer_provider=otel.tracer_provider)
    by_id = {r.run_id: r for r in results}
    main_run = by_id["c"]
    assert main_run.step_count == 3  # THINKING, TOOL_CALL, TEXT_RESPONSE; TELEPORT is UNKNOWN, FINISH an event
    assert main_run.steps[0].thought_preview == "Let me look."
    [sub] = main_run.children
    assert sub.run_id == "c/sub" and sub.step_count == 1
    chats = {(dict(s.attributes or {}).get("rb.step.index"), s.parent.span_id): s for s in otel.spans("chat")}
    roots = {dict(s.attributes or {})["rb.run_id"]: s for s in otel.spans("invoke_agent")}
    assert dict(roots["c/sub"].attributes or {})["rb.subagent"] is True
    assert roots["c/sub"].parent.span_id == roots["c"].context.span_id
    error_span = chats[(0, roots["c/sub"].context.span_id)]
    assert error_span.status.status_code is StatusCode.ERROR and error_span.attributes["error.type"] == "429"
    tool_chat = chats[(1, roots["c"].context.span_id)]
    a = dict(tool_chat.attributes or {})
    assert a["gen_ai.usage.input_tokens"] == 100 and a["gen_ai.usage.output_tokens"] == 25
    assert a["gen_ai.usage.cache_read.input_tokens"] == 40 and a["rb.tokens"] == 125
    events = [e.name for e in roots["c"].events]
    assert "rb.finish" in events
    assert any("line 9" in str(p) for p in main_run.problems)
    assert by_id["session"].step_count == 0  # {"id": ...} alone parses (every field defaulted): no cascade


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["full", "delta"]),
            st.text(min_size=1, max_size=5),
            st.sampled_from(["ACTIVE", "DONE", "ERROR", "BOGUS", ""]),
        ),
        min_size=1,
        max_size=12,
    )
)
def test_agy_merge_rules(updates: list[tuple[str, str, str]]) -> None:
    step = AgyStep(id="x", first_seen=0)
    expected_content, expected_status = "", "UNKNOWN"
    for kind, value, status in updates:
        merge(step, {"content": value} if kind == "full" else {"content_delta": value, "status": status})
        expected_content = value if kind == "full" else expected_content + value
        if kind == "delta" and status:
            expected_status = status if status != "BOGUS" else "UNKNOWN"
    assert step.content == expected_content
    assert step.status == expected_status
    if any(kind == "delta" and s == "BOGUS" for kind, _, s in updates):
        assert step.raw_enums["status"] == "BOGUS"


def test_cli_replay(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    path = tmp_path / "runs.jsonl"
    path.write_text("\n".join(json.dumps(e) for e in entries([""] + [HARD] * 7)) + "\n")
    assert main(["replay", str(path), "--rescore", "--out", str(tmp_path / "o")]) == 0
    out = capsys.readouterr().out
    assert "would have entered SLOW at step 5" in out
    assert (tmp_path / "o" / "replay-traces.jsonl").stat().st_size > 0
    written = (tmp_path / "o" / "replay-traces.jsonl").read_bytes()
    assert main(["replay", str(tmp_path / "nope.json"), "--out", str(tmp_path / "o")]) == 2  # bad input
    assert (tmp_path / "o" / "replay-traces.jsonl").read_bytes() == written  # the last set is left as it was
