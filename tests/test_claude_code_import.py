"""Claude Code's stream-json importer (``rb_otel.importers.formats.claude_code``): the JSON-lines file
``claude -p --output-format stream-json`` writes, and a terminal recording of it (Terminal-Bench's
``sessions/agent.cast``), on fixtures we wrote ourselves (``tests/fixtures/formats/claude_code``, README there), and
on the shared development archive (``signal/terminal_bench_claude_code``; skipped with the reason where the data root
is absent, a failure under ``RB_OTEL_REQUIRE_REAL=1``)."""

from __future__ import annotations

import csv
import itertools
import json
import shutil
from collections import Counter
from pathlib import Path

import pytest
from components import signal_source
from conftest import Otel
from format_fixtures import FORMAT_FIXTURES, fixture
from hypothesis import given, settings
from hypothesis import strategies as st
from test_format_fixtures import read as read_with
from test_format_fixtures import steps_of

from rb_otel.importers import detect, replay
from rb_otel.importers.detect import NotRuns, holds_no_runs
from rb_otel.importers.formats import claude_code
from rb_otel.importers.model import ImportedRun
from rb_otel.training.dataset import read_dataset
from rb_otel.training.held_out import agent_kind

STREAM = "claude_code/handwritten_stream.jsonl"
BENCH = FORMAT_FIXTURES / "claude_code" / "handwritten_terminal_bench"
TRIAL = BENCH / "cfg_alpha" / "tidy-logs.hard" / "tidy-logs.hard.1-of-1.2030-01-02__03-04-05"
UNLABELLED_TRIAL = BENCH / "cfg_alpha" / "tidy-logs" / "tidy-logs.1-of-1.2030-01-02__03-04-05"
NEVER_STARTED = BENCH / "cfg_alpha" / "rotate-keys" / "rotate-keys.1-of-1.2030-01-02__03-04-05"
RECORDING_START = 1893553445  # the fixture recordings' header timestamp
META = "rb.metadata."


def read(path: Path) -> tuple[list[ImportedRun], list[str]]:
    """Every run the Claude Code reader reads from ``path``, its steps as lists, and the problems it listed."""
    return read_with(claude_code.read, path)


# -- the JSON-lines file ---------------------------------------------------------------------------------------


def test_a_stream_json_file_is_one_run_per_session_with_its_steps_tools_and_usage() -> None:
    [first, second], problems = read(fixture(STREAM))
    assert problems == [f"{fixture(STREAM)}: line 17: not valid JSON (Expecting value)"]
    assert (first.run_id, first.harness, first.agent_name, first.model) == (
        "5e55-0001-tidewater", "claude_code", "claude-code", "claude-sonnet-4-5-20250929")  # fmt: skip
    assert first.outcome == "unlabelled" and first.synthetic_timing and first.task_id == ""
    steps = steps_of(first)
    # one step per message id: msg_01 arrived as three events (thinking, text, tool_use)
    assert [s.action for s in steps] == ["Bash", "Read", "Task", "Edit", None]
    assert steps[0].thought == ("The tide tables fail to parse; look at the parser first.\n"
                                "I'll run the tidewater tests to see the failure.")  # fmt: skip
    assert steps[0].action_input == "pytest -q tests/test_tables.py"
    assert steps[0].observation is not None and steps[0].observation.startswith("F.\nE   ValueError")
    # usage: input + cache reads + cache writes is the prompt; all zeros (msg_03 on) is not recorded
    assert (steps[0].input_tokens, steps[0].output_tokens, steps[0].cache_read_tokens) == (1170, 40, 1000)
    assert (steps[0].cache_creation_tokens, steps[0].tokens) == (50, 1210)
    assert (steps[2].input_tokens, steps[2].tokens) == (None, 0)
    # two parallel calls in one message: both tools, the inputs one per line, the results in call order
    assert [(t.name, t.error) for t in steps[1].tools] == [("Read", None), ("Grep", "tool_error")]
    assert steps[1].action_input == ('{"file_path": "/work/tidewater/tidewater/tables.py"}\n'
                                     '{"path": "/work/tidewater", "pattern": "def parse_row"}')  # fmt: skip
    assert steps[1].observation == "def parse_row(row):\n    hour, minute = row.split(':')\nripgrep: no such directory"
    assert steps[1].failed and not steps[0].failed
    assert steps[4].thought == "Fixed: rows now keep the time after the HW/LW marker."
    assert steps[4].finish_reason == "end_turn" and steps[4].observation is None
    assert first.attributes == {
        META + "claude_code.version": "2.0.40",
        META + "claude_code.session_id": "5e55-0001-tidewater",
        META + "claude_code.result": "success",
        META + "claude_code.num_turns": 6,
        META + "claude_code.total_cost_usd": 0.0123,
    }
    # the Task call's subagent is a nested run under the step that called it, not steps of the main run
    [(index, child)] = first.children
    assert index == 2 and child.run_id == "5e55-0001-tidewater/toolu_task_1"
    assert (child.model, child.task) == ("claude-haiku-4-5", "Find every caller of parse_row in tidewater.")
    assert [(s.action, s.observation) for s in steps_of(child)] == [
        ("Glob", "tidewater/tables.py\ntidewater/cli.py"), (None, None)]  # fmt: skip
    # a second init starts the next run; it was killed before its result event
    assert (second.run_id, second.model) == ("5e55-0002-tidewater", "claude-opus-4-1-20250805")
    assert second.attributes[META + "claude_code.result"] == "none"
    assert [(s.action, s.action_input) for s in steps_of(second)] == [("Bash", "ls quillmark")]


def test_stream_json_lines_are_detected_and_not_taken_for_agy_steps(tmp_path: Path) -> None:
    assert detect(fixture(STREAM)) == "claude_code"
    assert detect(TRIAL / "sessions" / "agent.cast") == "claude_code"
    # a stream that starts with an assistant event (the init line cut off) is still Claude Code's
    lines = fixture(STREAM).read_text().splitlines()
    cut = tmp_path / "cut.jsonl"
    cut.write_text("\n".join(lines[1:]) + "\n")
    assert detect(cut) == "claude_code"
    assert holds_no_runs(BENCH / "cfg_alpha" / "run_metadata.json")


def test_a_replay_records_the_run_its_tool_calls_and_the_subagent_under_its_step(otel: Otel) -> None:
    [first, second] = replay(fixture(STREAM), tracer_provider=otel.tracer_provider,
                             meter_provider=otel.meter_provider)  # fmt: skip
    assert (first.step_count, first.harness, first.model) == (5, "claude_code", "claude-sonnet-4-5-20250929")
    assert [c.run_id for c in first.children] == ["5e55-0001-tidewater/toolu_task_1"]
    roots = {dict(s.attributes or {})["rb.run_id"]: s for s in otel.spans("invoke_agent")}
    assert set(roots) == {"5e55-0001-tidewater", "5e55-0002-tidewater", "5e55-0001-tidewater/toolu_task_1"}
    child = roots["5e55-0001-tidewater/toolu_task_1"]
    assert child.parent is not None and child.context.trace_id == roots["5e55-0001-tidewater"].context.trace_id
    tools = [dict(s.attributes or {}).get("gen_ai.tool.name") for s in otel.spans("execute_tool")]
    assert Counter(tools) == Counter({"Bash": 2, "Read": 1, "Grep": 1, "Task": 1, "Edit": 1, "Glob": 1})
    assert second.step_count == 1


# -- the terminal recording ------------------------------------------------------------------------------------


def test_a_terminal_bench_recording_reads_its_stream_outcome_task_and_times() -> None:
    [run], problems = read(TRIAL / "sessions" / "agent.cast")
    cast = TRIAL / "sessions" / "agent.cast"
    assert problems == [
        f"{cast}: line 11: not an asciicast event; passed over",
        f"{cast}: output line 10: a damaged stream-json event (cut by the terminal); passed over",
    ]
    assert (run.run_id, run.task_id, run.group_id) == ("tidy-logs.hard.1-of-1.2030-01-02__03-04-05",
                                                       "tidy-logs.hard", "tidy-logs")  # fmt: skip
    assert run.outcome == "success" and run.task == "Invented task tidy-logs.hard: tidy the ledgerd log files."
    # the init event's model (split across two output events), normalised; the configured one is the same proxy
    assert (run.harness, run.model) == ("claude_code", "app-demo-7")
    steps = steps_of(run)
    # the tool call the terminal wrapped onto two lines is joined back; the escape codes before an event are gone
    assert [(s.action, s.action_input) for s in steps] == [
        ("Bash", "ls -la /app/logs"),
        ("Write", '{"content": "ledgerd.1.log\\nledgerd.2.log\\n", "file_path": "/app/logs/INDEX"}'),
        (None, None),
    ]
    assert steps[0].thought == "Listing the ledgerd logs before tidying them."
    assert steps[0].observation == "ledgerd.1.log\nledgerd.2.log"
    # times from the recording: each step when its first event was printed, until its tool result
    assert [s.timestamp for s in steps] == [RECORDING_START + 2.0, RECORDING_START + 4.0, RECORDING_START + 6.0]
    assert [s.duration_s for s in steps] == [1.0, 1.25, None]
    assert not run.synthetic_timing and (run.start, run.end) == (RECORDING_START + 2.0, RECORDING_START + 6.0)
    assert run.attributes[META + "claude_code.configuration"] == "cfg_alpha"
    assert run.attributes[META + "terminal_bench.tests_passed"] == 2
    assert run.attributes[META + "claude_code.result"] == "success"


def test_a_trial_without_an_outcome_is_unlabelled_and_one_never_started_holds_no_run() -> None:
    [run], _ = read(UNLABELLED_TRIAL / "sessions" / "agent.cast")
    assert run.outcome == "unlabelled" and run.attributes[META + "claude_code.result"] == "none"
    with pytest.raises(NotRuns, match="no Claude Code stream-json events"):
        read(NEVER_STARTED / "sessions" / "agent.cast")


def test_a_terminal_bench_tree_is_a_training_source(tmp_path: Path) -> None:
    data = read_dataset([BENCH])
    assert [(r.run_id, r.harness, r.model, r.failed, r.group) for r in data.runs] == [
        ("tidy-logs.hard.1-of-1.2030-01-02__03-04-05", "claude_code", "app-demo-7", False, "tidy-logs")]  # fmt: skip
    assert data.runs[0].kind == "coding"
    assert data.unlabelled == 1
    # results.json files, run_metadata.json and the recording Claude Code never wrote to are passed over
    assert data.not_runs == 5


def test_a_results_file_of_another_tool_is_not_an_outcome(tmp_path: Path) -> None:
    (tmp_path / "sessions").mkdir()
    shutil.copy(TRIAL / "sessions" / "agent.cast", tmp_path / "sessions" / "agent.cast")
    (tmp_path / "results.json").write_text(json.dumps({"resolved": ["tidy-logs.hard"]}))
    [run], _ = read(tmp_path / "sessions" / "agent.cast")
    assert run.outcome == "unlabelled" and run.run_id == "5e55-tb-1" and run.task_id == ""


def test_asciicast_v3_times_are_intervals(tmp_path: Path) -> None:
    events = [json.loads(line) for line in fixture(STREAM).read_text().splitlines()[:7]]
    rows = [json.dumps({"version": 3, "term": {"cols": 80, "rows": 24}, "timestamp": 100})]
    rows += [json.dumps([0.5, "o", json.dumps(e) + "\r\n"]) for e in events]
    path = tmp_path / "session.cast"
    path.write_text("\n".join(rows) + "\n")
    [run], problems = read(path)
    # one event each half second: the first message's three events from 101.0, its result at 102.5
    assert problems == [] and [s.timestamp for s in steps_of(run)] == [101.0, 103.0]
    assert [s.duration_s for s in steps_of(run)] == [1.5, None]


def _as_recording(lines: list[str], cuts: list[int], noise: list[str]) -> str:
    """``lines`` printed by a terminal: CRLF line ends, terminal noise before some lines, the output cut into
    events at ``cuts`` (offsets into the text)."""
    text = "".join(noise[i % len(noise)] + line + "\r\n" for i, line in enumerate(lines))
    bounds = sorted({0, len(text), *(c % (len(text) + 1) for c in cuts)})
    events = [[i * 0.1, "o", text[a:b]] for i, (a, b) in enumerate(itertools.pairwise(bounds))]
    header = {"version": 2, "width": 120, "height": 30, "timestamp": 0}
    return "\n".join(json.dumps(row) for row in [header, *events]) + "\n"


@settings(max_examples=40, deadline=None)
@given(
    cuts=st.lists(st.integers(min_value=0, max_value=20_000), max_size=40),
    noise=st.lists(st.sampled_from(["", "\x1b[?2004l\r", "\x1b[1G\x1b[0K", "\x1b]0;title\x07", "\r"]), min_size=1),
)
def test_a_recording_reads_the_same_run_as_the_stream_it_printed(cuts: list[int], noise: list[str]) -> None:
    """However the terminal cut the output into events and whatever escape codes it put before a line, the
    recording holds the steps the JSON-lines file holds."""
    import tempfile

    lines = [line for line in fixture(STREAM).read_text().splitlines() if line.startswith("{")]
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "agent.cast"
        path.write_text(_as_recording(lines, cuts, noise), encoding="utf-8")
        recorded, problems = read(path)
    expected, _ = read(fixture(STREAM))
    assert problems == []
    summary = [[(s.thought, s.action, s.action_input, s.observation, s.tokens) for s in steps_of(r)] for r in recorded]
    assert summary == [[(s.thought, s.action, s.action_input, s.observation, s.tokens) for s in steps_of(r)]
                       for r in expected]  # fmt: skip
    assert [r.run_id for r in recorded] == [r.run_id for r in expected]


# -- the shared archive (integration) --------------------------------------------------------------------------


@pytest.mark.heavy
def test_the_shared_claude_code_archive_matches_the_curators_table_run_by_run() -> None:
    """Provenance (``signal/provenance/terminal_bench_claude_code.md``): 320 runs, 316 recordings, four configurations
    of one proxy model each, outcomes from ``results.json`` (null for 6: unlabelled). Every recording Claude Code
    wrote a stream into is one run with the curator's outcome and model; ``read_dataset`` leaves the 6 out."""
    folder = signal_source("terminal_bench_claude_code")
    with (folder / "labels.csv").open(newline="") as handle:
        rows = {row["trial"]: row for row in csv.DictReader(handle)}
    recorded = {t for t, row in rows.items() if (folder / row["file"]).is_file()}
    assert (len(rows), len(recorded)) == (320, 316)
    data = read_dataset([folder])
    problems = [p for p in data.problems if p.where != "not runs"]
    assert problems == []
    by_id = {r.run_id: r for r in data.runs}
    expected = {"resolved": False, "unresolved": True}
    # the model of a configuration (the curator's column names a side call's "-small-model" for a few runs)
    configured = {
        row["config"]: json.loads((Path(folder / row["file"]).parents[3] / "run_metadata.json").read_text())[
            "model_name"
        ]
        for row in rows.values()
        if row["file"]
    }
    assert len(set(configured.values())) == 4
    for run_id, run in by_id.items():
        row = rows[run_id]
        assert run.failed is expected[row["outcome"]], row
        assert run.model == configured[row["config"]].rsplit("/", 1)[-1] and run.harness == "claude_code"
    labelled = [t for t in recorded if rows[t]["outcome"] != "none"]
    # the runs not read are the recordings with no stream in them (Claude Code never started) or no steps
    missing = sorted(set(labelled) - set(by_id))
    assert all(rows[t]["task_id"] == "extract-safely" for t in missing) and len(missing) == 4
    assert data.unlabelled == sum(rows[t]["outcome"] == "none" for t in recorded) == 6
    assert len({r.model for r in data.runs}) == 4
    # each configuration is a coding agent by its tools; so is every run that called one of Claude Code's code tools
    assert {agent_kind([r for r in data.runs if r.model == m]) for m in {r.model for r in data.runs}} == {"coding"}
    code_tools = {"Bash", "Read", "Edit", "Write", "Glob", "Grep"}
    assert all(r.kind == "coding" for r in data.runs if code_tools & {s.action for s in r.steps})
    assert len({r.group for r in data.runs}) < len({rows[t]["task_id"] for t in by_id})  # variants joined
