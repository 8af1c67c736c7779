"""Every development source read natively (issue 52, items 1 and 2): tau2-bench results of each generation,
mini-swe-agent 1.x trajectories with the SWE-bench evaluation's outcome, mini-swe-agent 2.x tool-calling
trajectories joined to their reports, the agent (harness, model) of every run, and directory reading.

Unit tests read the hand-written fixtures in ``tests/fixtures/formats/<format>/`` (invented content, written for
these tests). Integration tests read each shared source through ``signal_source`` (skipped with the reason where
the data root is absent; a failure under ``RB_OTEL_REQUIRE_REAL=1``) and check the counts its README and provenance
give; the curator's ``labels.csv`` is used there to check the importers, never as their input.
"""

from __future__ import annotations

import csv
import json
import re
import shutil
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from components import signal_source
from conftest import Otel
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from rb_otel.evaluation import evaluate
from rb_otel.importers import RecordError, detect, replay
from rb_otel.importers.detect import NotRuns, directory_files, holds_no_runs, input_files
from rb_otel.importers.formats import mini_swe_agent, mini_swe_agent_2, tau2_bench, tau2_indexed
from rb_otel.importers.formats.openai_messages import steps_from_messages
from rb_otel.importers.formats.swebench import evaluation
from rb_otel.importers.formats.tau2_indexed import joined_chunks
from rb_otel.importers.identity import agent_model
from rb_otel.importers.labels import Labels, load_labels
from rb_otel.importers.model import ImportedRun, ImportedStep, ImportProblem
from rb_otel.importers.reading import SeenRuns
from rb_otel.importers.replay import READERS
from rb_otel.training.dataset import failed_of, read_dataset

FIXTURES = Path(__file__).parent / "fixtures" / "formats"
TAU2 = FIXTURES / "tau2_bench"
MSA1 = FIXTURES / "mini_swe_agent"
TREE = FIXTURES / "mini_swe_agent_2" / "handwritten_tree"
META = "rb.metadata."
_SNAPSHOT_DATE = re.compile(r"-\d{4}-\d{2}-\d{2}$")


Read = tuple[list[tuple[ImportedRun, list[ImportedStep]]], list[ImportProblem], list[Path]]


def _read(path: Path, files: dict[int, Path] | None = None) -> Read:
    """Every run under ``path`` as one read takes them (directories recursed, duplicates dropped), with its steps,
    the problems met and the files passed over: what ``read_dataset`` does, keeping each run's harness and model.
    ``files`` receives each run's file, by the run's ``id()``."""
    problems: list[ImportProblem] = []
    passed_over: list[Path] = []
    seen = SeenRuns()
    runs = []
    for file, _ in input_files([path], passed_over):
        try:
            reader = READERS[detect(file)]
        except NotRuns:
            passed_over.append(file)
            continue
        except RecordError as exc:
            problems.append(ImportProblem(exc.path, exc.where, exc.problem))
            continue
        for run in reader(file, problems):
            if not seen.duplicate(run, file, problems):
                runs.append((run, list(run.steps)))
                if files is not None:
                    files[id(run)] = file
    return runs, problems, passed_over


def _by_id(runs: list[tuple[ImportedRun, list[ImportedStep]]]) -> dict[str, tuple[ImportedRun, list[ImportedStep]]]:
    return {run.run_id: (run, steps) for run, steps in runs}


# -- tau2-bench results files ---------------------------------------------------------------------------------


def test_tau2_results_file_steps_outcomes_and_agent() -> None:
    path = TAU2 / "handwritten_experiment" / "results.json"
    data = json.loads(path.read_text())
    assert detect(path) == "tau2_bench"
    problems: list[ImportProblem] = []
    runs = {run.run_id: (run, list(run.steps)) for run in tau2_bench.read(path, problems)}
    assert problems == [] and list(runs) == ["sim-a", "sim-b"]
    (a, a_steps), (b, b_steps) = runs["sim-a"], runs["sim-b"]
    assert (a.outcome, b.outcome) == ("success", "failure: reward 0")
    # the agent: tau2's own agent is the harness; the model without its provider path and its snapshot date
    assert (a.harness, a.model, a.agent_name) == ("tau2 llm_agent", "orbit-2", "llm_agent:travel")
    assert a.attributes[META + "reasoning_effort"] == "high"
    assert a.attributes[META + "tau2.user_simulator"] == "user_simulator invented-user-1"
    assert a.unique_id == "tau2:sim-a" and a.task_id == "travel/7" and a.group_id.startswith("scenario/")
    assistant = [m for m in data["simulations"][0]["messages"] if m["role"] == "assistant"]
    assert len(a_steps) == len(assistant) == 5
    lookup = a_steps[1]  # a thought, a tool call and its observation
    assert lookup.thought == "Let me find the booking first." and lookup.action == "find_booking"
    assert json.loads(lookup.action_input or "") == {"user_id": "ada_park_1"}
    assert lookup.observation == '{"booking": "BK1", "day": "friday"}' and not lookup.failed
    assert lookup.model == "acme/orbit-2-2025-01-31" and (lookup.input_tokens, lookup.output_tokens) == (101, 11)
    assert a_steps[2].observation == "Yes please."  # a turn without a tool call sees the customer's reply
    assert b_steps[1].tools[0].error == "tool_error" and b_steps[1].failed
    assert a.start is not None and a_steps[0].timestamp is not None and not a.synthetic_timing


def test_a_simulation_saved_twice_is_read_once_and_the_curators_table_is_not_an_outcome(otel: Otel) -> None:
    folder = TAU2 / "handwritten_experiment"
    data = read_dataset([folder])
    assert sorted(r.run_id for r in data.runs) == ["sim-a", "sim-b", "sim-c"]
    # the files' own rewards, not labels.csv (which says the opposite for sim-a and sim-b)
    assert {r.run_id: r.failed for r in data.runs} == {"sim-a": False, "sim-b": True, "sim-c": False}
    duplicate = [p for p in data.problems if "duplicate" in p.problem]
    assert [(Path(p.path).name, p.where) for p in duplicate] == [("results_resumed.json", "run sim-a")]
    assert "results.json" in duplicate[0].problem  # where the first copy was read
    assert data.not_runs == 1 and any("labels.csv" in p.problem for p in data.problems)
    results = replay(folder, tracer_provider=otel.tracer_provider)
    assert [r.run_id for r in results] == ["sim-a", "sim-b", "sim-c"]
    assert [r.outcome for r in results] == ["success", "failure: reward 0", "success"]
    assert any("duplicate" in p.problem for p in results[0].problems)
    roots = otel.spans("invoke_agent")
    assert {s.attributes["rb.metadata.harness"] for s in roots} == {"tau2 llm_agent"}  # type: ignore[index]
    report = evaluate([folder], scorer="heuristic")
    assert len(report.runs) == 3 and any("duplicate" in p.problem for p in report.problems)


def test_a_custom_submissions_export_is_the_submissions_agent(tmp_path: Path) -> None:
    folder = TAU2 / "handwritten_submission"
    runs, problems, passed_over = _read(folder)
    [(run, steps)] = runs
    assert problems == [] and sorted(p.name for p in passed_over) == ["LICENSE", "submission.json"]
    assert (run.harness, run.model, run.outcome) == ("Invented-Router-1B", "invented-router-1b", "success")
    assert run.attributes[META + "tau2.header_agent"] == "llm_agent tiny-default-2025-04-14"
    # what the export lacks is absent, not an error: no usage, no message timestamps, no tool `error`
    assert all(s.tokens == 0 and s.input_tokens is None and s.timestamp is None and s.model == "" for s in steps)
    assert steps[1].observation == '{"booking": "BK1", "day": "friday"}' and not steps[1].failed
    # the same file in a submission that is not custom (or with no submission.json) keeps its header's agent
    copy = tmp_path / "sub"
    shutil.copytree(folder, copy)
    (copy / "submission.json").write_text(
        json.dumps({"model_name": "Invented-Router-1B", "submission_type": "standard"})
    )
    [(plain, _)] = _read(copy)[0]
    assert (plain.harness, plain.model) == ("tau2 llm_agent", "tiny-default")
    (copy / "submission.json").write_text("{not json")
    plain_runs, plain_problems, _ = _read(copy)
    assert plain_runs[0][0].harness == "tau2 llm_agent"
    assert [p.where for p in plain_problems] == ["line 1 column 2"]  # said, and the runs still read


def test_tau2_indexed_joins_chunks_reads_audio_text_and_reused_call_ids() -> None:
    path = FIXTURES / "tau2_indexed" / "handwritten_voice_run.json"
    assert detect(path) == "tau2_indexed"
    problems: list[ImportProblem] = []
    runs = {run.run_id: (run, list(run.steps)) for run in tau2_indexed.read(path, problems)}
    assert list(runs) == ["voice-1", "voice-2"]
    [problem] = problems
    assert problem.where == "simulations[2]" and "full_duplex" in problem.problem and "ticks" in problem.problem
    run, steps = runs["voice-1"]
    assert (run.harness, run.model, run.source, run.outcome) == ("voicebot", "voicebot", "tau2_indexed", "success")
    assert len(steps) == 5  # two streamed chunks are one turn
    assert steps[0].thought == "Hi! How can I help?" and steps[0].observation == "Move my trip BK1 to Sunday."
    # the agent reuses a call id in a later turn: each call gets the result that follows it
    assert steps[1].observation == '{"booking": "BK1", "day": "friday"}'
    assert steps[3].action == "move_booking" and steps[3].observation == '{"booking": "BK1", "day": "sunday"}'
    assert runs["voice-2"][0].outcome == "failure: reward 0" and runs["voice-2"][1][1].failed


@settings(max_examples=60, deadline=None)
@given(
    turns=st.lists(
        st.tuples(
            st.sampled_from(["assistant", "user"]), st.lists(st.text(min_size=1, max_size=6), min_size=1, max_size=4)
        ),
        max_size=6,
    )
)
def test_streamed_chunks_join_back_to_their_messages(turns: list[tuple[str, list[str]]]) -> None:
    messages, whole = [], []
    for role, chunks in turns:
        if whole and whole[-1]["role"] == role:
            continue  # two turns of one speaker in a row are one stream here
        for i, chunk in enumerate(chunks):
            messages.append({"role": role, "content": chunk, "is_final_chunk": i == len(chunks) - 1})
        whole.append({"role": role, "content": "".join(chunks)})
    joined = joined_chunks(messages)
    assert [(m["role"], m["content"]) for m in joined] == [(m["role"], m["content"]) for m in whole]


@settings(max_examples=60, deadline=None)
@given(ids=st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=8))
def test_a_reused_call_id_gets_the_result_that_follows_its_call(ids: list[str]) -> None:
    messages: list[Any] = [{"role": "user", "content": "go"}]
    for turn, call_id in enumerate(ids):
        messages.append(
            {"role": "assistant", "content": "", "tool_calls": [{"id": call_id, "name": "t", "arguments": {}}]}
        )
        messages.append({"role": "tool", "id": call_id, "content": f"result {turn}"})
    steps, _ = steps_from_messages(messages, "x", "messages", [])
    assert [s.observation for s in steps] == [f"result {turn}" for turn in range(len(ids))]


# -- mini-swe-agent 1.x ---------------------------------------------------------------------------------------


def test_mini_swe_agent_flat_folder_outcomes_from_results_summary() -> None:
    runs, problems, passed_over = _read(MSA1 / "handwritten_flat")
    assert problems == [] and [p.name for p in passed_over] == ["results_summary.json"]
    by_id = _by_id(runs)
    assert {k: r.outcome for k, (r, _) in by_id.items()} == {
        "pkg__widget-1": "success",
        "pkg__widget-2": "failure: unresolved",
        "pkg__widget-3": "unlabelled",
    }
    run, steps = by_id["pkg__widget-1"]
    assert (run.harness, run.model, run.source) == ("mini-swe-agent 1", "coder-3", "mini_swe_agent")
    assert run.attributes[META + "swebench.status"] == "resolved"
    assert run.attributes[META + "swebench.report"] == "results_summary.json"
    assert run.attributes[META + "prompt_variant"] == "stock" and META + "reasoning_effort" not in run.attributes
    look, twice, timeout, failing, submit = steps
    assert look.thought == "Start by locating the code.\nFind where size() is defined."  # reasoning, then text
    assert look.action_input == "grep -rn 'def size' ." and not look.failed and look.tokens == 1050
    assert twice.error_type == "format_error" and not twice.tools  # the harness refused the turn
    assert timeout.tools[0].error == "timeout" and timeout.action_input == "pytest -q"
    assert failing.tools[0].error == "exit code 1"
    assert submit.tools[0].error is None and (submit.observation or "").startswith("diff --git")
    # training leaves the run no report names out, and counts it; --labels overrides the report either way
    data = read_dataset([MSA1 / "handwritten_flat"])
    assert (len(data.runs), data.unlabelled) == (2, 1)
    labels = Labels("test labels", {"pkg__widget-1": False, "pkg__widget-3": True})
    relabelled = read_dataset([MSA1 / "handwritten_flat"], labels=labels)
    assert {r.run_id: r.failed for r in relabelled.runs} == {
        "pkg__widget-1": True,
        "pkg__widget-2": True,
        "pkg__widget-3": False,
    }
    [replayed] = replay(MSA1 / "handwritten_flat" / "pkg__widget-3.traj.json", labels=labels)
    assert replayed.outcome == "success" and replayed.harness == "mini-swe-agent 1"


def test_mini_swe_agent_run_folders_eval_reports_effort_and_a_forks_action_syntax() -> None:
    runs, problems, _ = _read(MSA1 / "handwritten_runs")
    assert problems == []
    found = {(r.attributes[META + "reasoning_effort"], r.task_id): (r, s) for r, s in runs}
    outcomes = {key: r.outcome for key, (r, _) in found.items()}
    assert outcomes == {
        ("high", "pkg__widget-1"): "failure: unresolved",  # a report beside it evaluated another patch: not used
        ("high", "pkg__widget-2"): "failure: empty patch",
        ("low", "pkg__widget-1"): "success",
        ("low", "pkg__widget-2"): "failure: evaluation error",
        ("low", "pkg__widget-3"): "success",  # the harness's report.json beside it, its patch.diff this submission
    }
    assert found["low", "pkg__widget-3"][0].attributes[META + "swebench.report"] == "report.json"
    assert found["low", "pkg__widget-2"][0].attributes[META + "swebench.status"] == "error"
    # reasoning effort and prompt variants of one model in one harness are one agent
    assert {(r.harness, r.model) for r, _ in runs} == {("mini-swe-agent 1", "acme-coder-3-mini")}
    variants = {r.attributes[META + "reasoning_effort"]: r.attributes[META + "prompt_variant"] for r, _ in runs}
    assert variants == {"low": "stock", "high": "swebench_terse"}
    cam, cam_steps = found["high", "pkg__widget-1"]
    reproduce, refused, patch, submit = cam_steps
    assert reproduce.thought == "Reproduce the off-by-one."  # the comment lines
    assert reproduce.action_input == 'python -c "import widget; print(widget.size(2))"'  # exec_bash_cmd's argument
    assert refused.error_type == "format_error" and (refused.observation or "").startswith("Could not extract")
    assert patch.action_input == "sed -i 's/n + 2/n/' widget.py" and patch.tools[0].error == "exit code 2"
    assert submit.action_input == "submit()" and submit.tools[0].error is None
    assert cam.attributes[META + "prompt_digest"] != found["low", "pkg__widget-1"][0].attributes[META + "prompt_digest"]


def test_the_report_search_stops_two_folders_above_the_trajectory(tmp_path: Path) -> None:
    source = MSA1 / "handwritten_flat" / "pkg__widget-1.traj.json"
    summary = MSA1 / "handwritten_flat" / "results_summary.json"
    for depth, expected in ((2, "success"), (3, "unlabelled")):
        top = tmp_path / f"depth{depth}"
        folder = top.joinpath(*[f"level{i}" for i in range(depth)])
        folder.mkdir(parents=True)
        shutil.copy(summary, top / "results_summary.json")
        shutil.copy(source, folder / source.name)
        [run] = list(mini_swe_agent.read(folder / source.name, []))
        assert run.outcome == expected, depth
    # a report that cannot be read is a problem once per read, and the run goes on without it
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "x_eval.json").write_text("{")
    problems: list[ImportProblem] = []
    for name in ("a.traj.json", "b.traj.json"):
        shutil.copy(source, bad / name)
        assert next(mini_swe_agent.read(bad / name, problems)).outcome == "unlabelled"
    assert len(problems) == 1 and "not used as an evaluation report" in problems[0].problem
    assert evaluation(bad / "a.traj.json", "", "x", []) is None


def test_the_harness_run_report_is_a_labels_file(tmp_path: Path) -> None:
    labels = load_labels(MSA1 / "handwritten_runs" / "stock-low" / "acme-coder-3-mini.stock_low_eval.json")
    assert [labels.outcome_of(i) for i in ("pkg__widget-1", "pkg__widget-2", "pkg__widget-9")] == [True, False, None]


# -- mini-swe-agent 2.x ---------------------------------------------------------------------------------------


def test_mini_swe_agent_2_steps_parallel_calls_interrupts_and_the_exit_message() -> None:
    path = TREE / "results_full" / "instance_0.json"
    assert detect(path) == "mini_swe_agent_2"
    [run] = list(mini_swe_agent_2.read(path, []))
    assert (run.run_id, run.harness, run.model, run.source) == (
        "results_full/pkg__widget-1",
        "mini-swe-agent 2",
        "acme-coder",
        "mini_swe_agent_2",
    )
    look, refused, fix, submit = run.steps
    assert look.thought == "Read first.\nLet me look at the code and the tests together."
    assert look.action == "bash" and look.action_input == "cat widget.py\npytest -q"  # two parallel calls
    assert [(t.call_id, t.error) for t in look.tools] == [("call_1", None), ("call_2", "exit code 1")]
    assert look.tools[1].arguments == {"command": "pytest -q"} and "1 failed" in (look.observation or "")
    assert (look.input_tokens, look.output_tokens, look.cache_read_tokens) == (2000, 60, 1500)
    assert look.model == "acme-coder-v4"
    # the harness refused an answer without a tool call and kept only its message: a step with that error
    assert (refused.error_type, refused.thought, refused.tools) == ("format_error", "", [])
    assert not fix.failed and fix.thought == ""
    assert [t.error for t in submit.tools] == [None, "not executed"]  # the exit message ended the run
    assert run.attributes[META + "mini_swe_agent.exit_status"] == "Submitted"
    assert run.attributes[META + "prompt_variant"] == "stock"


def test_mini_swe_agent_2_joins_each_run_to_the_report_of_its_own_patch() -> None:
    runs, problems, passed_over = _read(TREE)
    found = {(str(r.attributes.get(META + "mini_swe_agent.controller", "main")), r.task_id): r for r, _ in runs}
    assert {key: r.outcome for key, r in found.items()} == {
        ("main", "pkg__widget-1"): "success",
        ("main", "pkg__widget-2"): "failure: unresolved",
        ("main", "pkg__widget-5"): "unlabelled",  # the same patch evaluated twice with different outcomes
        ("arm_a", "pkg__widget-1"): "failure: unresolved",  # a re-run of the instance with another patch
        ("arm_a", "pkg__widget-4"): "unlabelled",  # no report evaluated its patch
        ("arm_b", "pkg__widget-1"): "success",  # the main run's patch again: the reports agree
        ("arm_b", "pkg__widget-5"): "unlabelled",
    }
    assert found["arm_a", "pkg__widget-1"].attributes[META + "swebench.report"] == (
        "../../logs/run_evaluation/tp_arm_a/ds-arm_a/pkg__widget-1/report.json"
    )
    assert found["arm_a", "pkg__widget-1"].attributes[META + "mini_swe_agent.stopped_by_controller"] is False
    by_problem = Counter(p.where for p in problems)
    assert by_problem == {"pkg__widget-5": 1, "file": 1}  # the disagreement said once; the empty file
    empty = next(p for p in problems if p.where == "file")
    assert Path(empty.path).name == "instance_2.json" and empty.problem == "empty file"
    assert "handwritten_assignments.json" in {p.name for p in passed_over}  # JSON of no format: not runs
    assert {p.name for p in passed_over} >= {"report.json", "patch.diff", "baseline.yaml"}
    data = read_dataset([TREE])
    assert (len(data.runs), data.unlabelled) == (4, 3)
    assert any(p.problem == "empty file" for p in data.problems)


# -- directories, detection, identity -------------------------------------------------------------------------


def test_directory_reading_recurses_in_path_order_and_passes_over_what_holds_no_runs(tmp_path: Path) -> None:
    run = json.dumps({"trajectory_format": "mini-swe-agent-1", "messages": [{"role": "user", "content": "go"}]})
    files = {
        "b/z.traj.json": run,
        "b/a/y.traj.json": run,
        "a.traj.json": run,
        "c/deep/er/x.traj.json": run,
        ".hidden.traj.json": run,
        ".cache/w.traj.json": run,  # hidden: never read
        "README.md": "# notes",
        "c/config.yaml": "a: 1",
        "c/labels.csv": "x,y",
        "LICENSE": "text",  # by name
        "c/unknown.json": json.dumps({"some": "thing"}),  # JSON of no format: passed over when met
        "c/broken.json": "{",
        "c/empty.json": "",  # unreadable: problems
    }
    for name, content in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(content)
    passed: list[Path] = []
    listed = [p.relative_to(tmp_path).as_posix() for p in directory_files(tmp_path, passed)]
    assert listed == [
        "a.traj.json",
        "b/a/y.traj.json",
        "b/z.traj.json",
        "c/broken.json",
        "c/deep/er/x.traj.json",
        "c/empty.json",
        "c/unknown.json",
    ]
    assert sorted(p.name for p in passed) == ["LICENSE", "README.md", "config.yaml", "labels.csv"]
    assert [p for p, _ in input_files([tmp_path])] == [tmp_path / name for name in listed]
    data = read_dataset([tmp_path])
    assert data.unlabelled == 4 and data.not_runs == 5
    assert sorted((Path(p.path).name, p.problem) for p in data.problems if p.where != "not runs") == [
        (
            "broken.json",
            "not valid JSON (Expecting property name enclosed in double quotes); it ends early: is the file complete?",
        ),
        ("empty.json", "empty file"),
    ]
    [summary] = [p for p in data.problems if p.where == "not runs"]
    assert summary.problem.startswith("5 files hold no runs")
    # a file given by name is still read or refused by name, whatever it is called
    with pytest.raises(RecordError, match="cannot tell the format"):
        read_dataset([tmp_path / "c" / "unknown.json"])
    with pytest.raises(RecordError, match="empty file"):
        replay(tmp_path / "c" / "empty.json")


@pytest.mark.parametrize(
    "name",
    [
        "report.json",
        "preds.json",
        "results_summary.json",
        "openai__gpt-5.run_eval.json",
        "submission.json",
        "exit_statuses_1768.yaml",
        "patch.diff",
        "LICENSE.md",
        "README",
        "labels.csv",
        "simulation_notes.csv",
        "store.sqlite3-wal",
        "pred_arm.json",
    ],
)
def test_companion_files_hold_no_runs_by_name(name: str) -> None:
    assert holds_no_runs(Path(name))


@pytest.mark.parametrize("name", ["instance_0.json", "x.traj.json", "run.traj", "steps.jsonl", "store.sqlite3"])
def test_run_files_are_read(name: str) -> None:
    assert not holds_no_runs(Path(name))


@pytest.mark.parametrize(
    ("raw", "model"),
    [
        ("xai/grok-4", "grok-4"),
        ("grok-4", "grok-4"),
        ("openai/gpt-5-mini", "gpt-5-mini"),
        ("@google/gemini-3-pro-preview", "gemini-3-pro-preview"),
        ("gpt-4.1-mini-2025-04-14", "gpt-4.1-mini"),
        ("ft:gpt-4.1-2025-04-14:sierra:tau2-full-sft:BzrYdMNm", "ft:gpt-4.1-2025-04-14:sierra:tau2-full-sft:bzrydmnm"),
        ("claude-3-5-sonnet-20241022", "claude-3-5-sonnet-20241022"),
        ("", ""),
    ],
)
def test_agent_model_folds_spellings_not_models(raw: str, model: str) -> None:
    assert agent_model(raw) == model


@settings(max_examples=100, deadline=None)
@given(
    base=st.from_regex(r"[a-z][a-z0-9.\-]{0,12}[a-z0-9]", fullmatch=True),
    provider=st.sampled_from(["", "openai/", "xai/", "@google/", "openai:"]),
    date=st.sampled_from(["", "-2025-04-14"]),
)
def test_agent_model_is_one_name_per_model(base: str, provider: str, date: str) -> None:
    assume(not _SNAPSHOT_DATE.search(base))
    assert agent_model(provider + base + date) == agent_model(base) == agent_model(agent_model(base))
    assert agent_model(f"ft:{base}{date}:org:tuned:abc") != agent_model(base)  # a fine-tune is its own model


def test_each_fixture_is_detected_as_its_format() -> None:
    expected = {
        TAU2 / "handwritten_experiment" / "results.json": "tau2_bench",
        TAU2 / "handwritten_submission" / "trajectories" / "handwritten_export.json": "tau2_bench",
        FIXTURES / "tau2_indexed" / "handwritten_voice_run.json": "tau2_indexed",
        MSA1 / "handwritten_flat" / "pkg__widget-1.traj.json": "mini_swe_agent",
        TREE / "arms" / "arm_a" / "pkg__widget-1.json": "mini_swe_agent_2",
    }
    assert {path: detect(path) for path in expected} == expected
    with pytest.raises(NotRuns):
        detect(TREE / "arms" / "handwritten_assignments.json")


# -- the shared sources (integration) -------------------------------------------------------------------------

#: README / provenance figures: (runs, solved, failed, without an outcome, {(harness, model): runs}).
SOURCES: dict[str, tuple[int, int, int, int, dict[tuple[str, str], int]]] = {
    "tau2_grok": (
        586,
        265,
        321,
        0,
        {
            ("tau2 llm_agent", "grok-3"): 358,
            ("tau2 llm_agent", "grok-3-mini"): 61,
            ("tau2 llm_agent", "grok-4"): 97,
            ("tau2 llm_agent", "grok-4-fast-reasoning"): 70,
        },
    ),
    "tau2_gpt41_sierra": (140, 82, 58, 0, {("tau2 llm_agent", "gpt-4.1"): 100, ("tau2 llm_agent_solo", "gpt-4.1"): 40}),
    "tau2_gpt41sft_sierra": (
        140,
        111,
        29,
        0,
        {
            ("tau2 llm_agent", "ft:gpt-4.1-2025-04-14:sierra:tau2-full-sft:bzrydmnm"): 100,
            ("tau2 llm_agent_solo", "ft:gpt-4.1-2025-04-14:sierra:tau2-full-sft:bzrydmnm"): 40,
        },
    ),
    "tau2_sonnet45_aide": (50, 36, 14, 0, {("tau2 llm_agent", "claude-sonnet-4-5"): 50}),
    "tau2_ironshell": (
        85,
        38,
        47,
        0,
        {
            ("tau2 llm_agent", "gpt-5.4"): 50,
            ("ironforge", "grok-3"): 8,
            ("ironforge", "o3"): 9,
            ("ironforge", "gpt-5.4"): 7,
            ("ironforge", "claude-sonnet-4-6"): 7,
            ("ironforge", "deepseek-chat"): 4,
        },
    ),
    "tau2_toolorchestra": (164, 124, 40, 0, {("Nemotron-Orchestrator-8B", "nemotron-orchestrator-8b"): 164}),
    "tau2_whissle": (50, 28, 22, 0, {("whissle", "whissle"): 50}),
    "mini_swe_agent_gemini3pro": (500, 371, 129, 0, {("mini-swe-agent 1", "gemini-3-pro-preview"): 500}),
    "msa_gpt5fam_cam": (
        1198,
        627,
        571,
        0,
        {
            ("mini-swe-agent 1", "gpt-5"): 100,
            ("mini-swe-agent 1", "gpt-5-mini"): 998,
            ("mini-swe-agent 1", "gpt-5-nano"): 100,
        },
    ),
    "msa2_deepseek_verified": (523, 364, 129, 30, {("mini-swe-agent 2", "deepseek-chat"): 523}),
}


#: The sources whose two whole reads take more than ~15 s on two busy cores: run alone, after the parallel workers.
_BIG = ("msa_gpt5fam_cam", "msa2_deepseek_verified")


@pytest.mark.parametrize(
    "name", [pytest.param(name, marks=[pytest.mark.heavy] if name in _BIG else []) for name in SOURCES]
)
def test_each_shared_source_is_read_whole_with_its_outcomes_and_agents(name: str) -> None:
    runs, solved, failed, unlabelled, agents = SOURCES[name]
    folder = signal_source(name)
    found, problems, _ = _read(folder)
    outcomes = Counter(failed_of(run.outcome) for run, _ in found)
    assert (len(found), outcomes[False], outcomes[True], outcomes[None]) == (runs, solved, failed, unlabelled)
    assert Counter((run.harness, run.model) for run, _ in found) == agents
    assert all(steps for _, steps in found)
    assert len({run.run_id for run, _ in found}) == len(found)  # a run id names one run (traces join by it)
    expected_problems = 1 if name == "msa2_deepseek_verified" else 0  # results_full/instance_263.json, empty
    assert len(problems) == expected_problems, problems[:3]
    # what `rb-otel train DIR` reads: every run, the ones without an outcome counted, the rest passed over
    data = read_dataset([folder])
    assert (len(data.runs), data.unlabelled, sum(r.failed for r in data.runs)) == (solved + failed, unlabelled, failed)
    assert [p.where for p in data.problems if p.where != "not runs"] == ["file"] * expected_problems


def _curated(folder: Path) -> Iterator[dict[str, str]]:
    with (folder / "labels.csv").open(newline="") as handle:
        yield from csv.DictReader(handle)


@pytest.mark.parametrize("name", [n for n in SOURCES if n.startswith("tau2_") and n != "tau2_grok"])
def test_tau2_outcomes_match_the_curators_table_simulation_by_simulation(name: str) -> None:
    folder = signal_source(name)
    found = {run.run_id: run for run, _ in _read(folder)[0]}
    expected = {row["sim_id"]: float(row["reward"]) >= 1 for row in _curated(folder)}
    assert {k: r.outcome == "success" for k, r in found.items()} == expected


def test_mini_swe_agent_outcomes_match_the_curators_table_run_by_run() -> None:
    folder = signal_source("msa_gpt5fam_cam")
    found = {(r.attributes[META + "swebench.report"], r.task_id): r for r, _ in _read(folder)[0]}
    by_run = {(Path(k[0]).name, k[1]): r for k, r in found.items()}
    rows = [row for row in _curated(folder) if row["has_trajectory"] == "True"]
    assert len(rows) == len(found) == 1198
    for row in rows:
        run = by_run[Path(row["eval_report"]).name, row["instance_id"]]
        assert (run.outcome == "success") == (row["resolved"] == "True"), row
        assert run.attributes[META + "swebench.status"] == row["eval_status"]
        assert (
            run.attributes[META + "prompt_variant"]
            == {"mini_default_prompt": "stock", "cam_apr_prompt": "swebench_cam"}[row["prompt_variant"]]
        )
        effort = json.loads(row["model_kwargs"]).get("reasoning", {}).get("effort")
        assert run.attributes.get(META + "reasoning_effort") == effort
        assert run.model == row["model"].rsplit("/", 1)[-1]


def test_mini_swe_agent_2_join_matches_the_curators_table_on_every_row() -> None:
    """The join by patch (``formats.swebench``'s docstring) against the curator's 524 rows: the same outcome on each,
    and the same report, or another that evaluated the identical patch with the same result."""
    folder = signal_source("msa2_deepseek_verified")
    files: dict[int, Path] = {}
    runs, problems, _ = _read(folder, files)
    by_file = {files[id(run)].relative_to(folder).as_posix(): run for run, _ in runs}
    rows = list(_curated(folder))
    assert len(rows) == 524 and len(by_file) == 523
    same_report = 0
    for row in rows:
        if row["eval_status"] == "empty_trajectory_file":
            [empty] = [p for p in problems if p.problem == "empty file"]
            assert Path(empty.path).relative_to(folder).as_posix() == row["trajectory_path"]
            continue
        run = by_file[row["trajectory_path"]]
        assert run.task_id == row["instance_id"] and run.run_id.endswith("/" + row["instance_id"])
        if row["eval_status"] == "no_report":
            assert run.outcome == "unlabelled", row
            continue
        assert (run.outcome == "success") == (row["resolved"] == "True"), row
        ours = (folder / row["trajectory_path"]).parent / str(run.attributes[META + "swebench.report"])
        theirs = folder / row["report_path"]
        if ours.resolve() == theirs.resolve():
            same_report += 1
        else:  # another harness run evaluated the very same patch, with the same result
            assert (theirs.parent / "patch.diff").read_bytes() == (ours.parent / "patch.diff").read_bytes()
            assert json.loads(ours.read_text())[run.task_id]["resolved"] is (row["resolved"] == "True")
    assert same_report >= 433  # at least every run whose patch one report alone evaluated


def test_the_harness_survives_a_replay_into_rb_otels_own_traces(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from rb_otel.cli import main

    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)  # the files, not an endpoint
    assert main(["replay", str(MSA1 / "handwritten_runs"), "--out", str(tmp_path)]) == 0
    out = capsys.readouterr()
    assert "6 files hold no runs" in out.err  # the reports beside the runs: one line, no problem per file
    runs = list(READERS["otlp_json"](tmp_path / "replay-traces.jsonl", []))
    assert len(runs) == 5 and {r.harness for r in runs} == {"mini-swe-agent 1"}
    assert {r.attributes[META + "reasoning_effort"] for r in runs} == {"low", "high"}
