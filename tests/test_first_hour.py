"""A user's first hour with the command line (issue 53), each complaint pinned as the user met it: a real
``rb-otel`` process, its exit status, exactly one line on standard error where the input or an output is bad,
never a traceback, and the files it should not touch byte for byte as they were.

Every input is a small file written here in its format (steplog, tau-bench results, SWE-agent trajectories,
OTLP/JSON traces made by ``rb-otel replay``).
"""

from __future__ import annotations

import io
import json
import os
import pty
import random
import resource
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import termios
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from fcntl import ioctl
from pathlib import Path
from typing import Any

import pytest
from components import free_port
from hypothesis import given
from hypothesis import strategies as st

from rb_otel.cli.progress import DELAY_S, Progress
from rb_otel.steering.pilot.fingerprint import FitFingerprint, task_keys
from rb_otel.telemetry.otlp_json import JsonLinesFile

Done = subprocess.CompletedProcess[str]


# -- running the command --------------------------------------------------------------------------------------


def _env(**extra: str) -> dict[str, str]:
    """The environment without the caller's OTEL_* settings (spans go to files unless a test says otherwise)."""
    return {**{k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}, **extra}


def _cli(*args: str, cwd: Path, env: dict[str, str] | None = None, prefix: Sequence[str] = (), timeout: float = 120,
         preexec: Any = None) -> Done:  # fmt: skip
    command = [*prefix, sys.executable, "-m", "rb_otel.cli", *args]
    return subprocess.run(command, cwd=cwd, env=env or _env(), capture_output=True, text=True, timeout=timeout,
                          check=False, preexec_fn=preexec)  # fmt: skip


def _refused(done: Done, *words: str) -> str:
    """Exit 2, one line on standard error naming ``words``, no traceback; the line."""
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert all(w in lines[0] for w in words), (words, lines[0])
    return lines[0]


def _files(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` (its relative path) and its bytes: what "untouched" is checked against."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


# -- inputs, written here in each format ------------------------------------------------------------------------


def _steplog(path: Path, runs: Sequence[tuple[str, str]], steps: int = 4) -> Path:
    """A steplog JSONL file: per ``(run id, outcome)`` a header line, then ``steps`` entries."""
    lines = []
    for run_id, outcome in runs:
        lines.append({"run_id": run_id, "agent_name": "first-hour", "outcome": outcome})
        lines += [{"step": i, "fsm_state": "NORMAL", "thought_preview": f"look at step {i}", "tokens": 10 + i}
                  for i in range(steps)]  # fmt: skip
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def _tau_result(task: int, trial: int, failed: bool, rng: random.Random) -> dict[str, Any]:
    """One tau-bench result ``{task_id, trial, reward, traj, info}``: a failing run goes round the same lookup."""
    traj: list[dict[str, Any]] = [{"role": "system", "content": "You are an airline agent."},
                                  {"role": "user", "content": f"Please change my flight (case {task})."}]  # fmt: skip
    for i in range(rng.randint(3, 7) + (5 if failed else 0)):
        call = f"call_{task}_{trial}_{i}"
        tool = "get_reservation" if failed and i % 2 else "search_flights"
        thought = "Let me look at the reservation again." if failed and i > 2 else f"Checking option {i}."
        traj.append(
            {
                "role": "assistant",
                "content": thought,
                "tool_calls": [
                    {
                        "id": call,
                        "type": "function",
                        "function": {"name": tool, "arguments": json.dumps({"id": f"R{i}"})},
                    }
                ],
            }
        )
        traj.append(
            {
                "role": "tool",
                "tool_call_id": call,
                "name": tool,
                "content": "Error: reservation not found" if failed and i > 1 else "3 flights found",
            }
        )
    traj.append({"role": "assistant", "content": "I could not change it." if failed else "Done: your flight changed."})
    return {"task_id": task, "trial": trial, "reward": 0.0 if failed else 1.0, "traj": traj, "info": {}}


def _tau_bench(folder: Path, tasks: range, trials: int, seed: int) -> Path:
    """A tau-bench results file (one JSON list) of ``tasks`` x ``trials`` runs, about 40% failing."""
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    results = [_tau_result(t, n, rng.random() < 0.4, rng) for t in tasks for n in range(trials)]
    (folder / "results.json").write_text(json.dumps(results), encoding="utf-8")
    return folder


def _swe_agent(folder: Path, exit_status: str, names: Sequence[str]) -> Path:
    """SWE-agent trajectories (``.traj``), each ending with ``exit_status``."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        steps = [{"thought": f"Find the bug ({i}).", "action": "grep -n session src/auth.py", "observation": "12: x"}
                 for i in range(4)]  # fmt: skip
        record = {"trajectory": steps, "info": {"exit_status": exit_status, "model_stats": {"api_calls": 4}},
                  "history": [{"role": "user", "content": f"Fix issue {name}."}]}  # fmt: skip
        (folder / f"{name}.traj").write_text(json.dumps(record), encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding what ``rb-otel replay`` exports for three steplog runs (OTLP/JSON traces and metrics)."""
    root = tmp_path_factory.mktemp("traces")
    source = _steplog(root / "runs.jsonl", [("r1", "success"), ("r2", "failure: tests"), ("r3", "success")])
    done = _cli("replay", str(source), "--out", str(root / "out"), cwd=root)
    assert done.returncode == 0, done.stderr
    return root / "out"


# -- 1. nothing overwritten or lost -----------------------------------------------------------------------------


def test_a_demo_exporting_over_otlp_leaves_the_last_demos_files_as_they_were(tmp_path: Path) -> None:
    assert _cli("demo", "--scenario", "easy", "--quiet", "--out", "out", cwd=tmp_path).returncode == 0
    before = {name: (tmp_path / "out" / name).read_bytes() for name in ("traces.jsonl", "metrics.jsonl")}
    assert all(before.values())
    dead = _env(OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{free_port()}", OTEL_EXPORTER_OTLP_TIMEOUT="1")
    again = _cli("demo", "--scenario", "easy", "--quiet", "--out", "out", cwd=tmp_path, env=dead)
    assert again.returncode == 1 and "dropped" in again.stderr  # the endpoint is not there: said, not hidden
    assert {name: (tmp_path / "out" / name).read_bytes() for name in before} == before
    page = _cli("report", "out/traces.jsonl", "--out", "page.html", cwd=tmp_path)  # the README's next step
    assert page.returncode == 0 and "demo-easy" in (tmp_path / "page.html").read_text()
    assert not list((tmp_path / "out").glob("*.tmp"))


def test_a_replay_of_no_runs_writes_no_files_and_keeps_the_last_set(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    _refused(_cli("replay", str(empty), "--format", "steplog", "--out", "fresh", cwd=tmp_path), "empty: no records")
    _refused(_cli("replay", str(empty), "--format", "agy", "--out", "fresh", cwd=tmp_path), "no runs found")
    assert not (tmp_path / "fresh").exists()
    source = _steplog(tmp_path / "runs.jsonl", [("r1", "success")])
    assert _cli("replay", str(source), "--out", "out", cwd=tmp_path).returncode == 0
    kept = _files(tmp_path / "out")
    assert set(kept) == {"replay-traces.jsonl", "replay-metrics.jsonl"}
    _refused(_cli("replay", str(empty), "--format", "agy", "--out", "out", cwd=tmp_path), "no runs found")
    assert _files(tmp_path / "out") == kept


def test_a_file_written_whole_is_replaced_only_when_complete(tmp_path: Path) -> None:
    path = tmp_path / "traces.jsonl"
    path.write_text("the last set\n")
    file = JsonLinesFile(path, whole=True)
    assert file.so_far is None and not file.wrote
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    assert file.write(ExportTraceServiceRequest()) and file.wrote
    assert path.read_text() == "the last set\n"  # still the old set while the new one is written
    assert file.so_far is not None and file.so_far.read_text() == "{}\n"
    file.close()
    assert path.read_text() == "{}\n" and list(tmp_path.iterdir()) == [path]
    nothing = JsonLinesFile(tmp_path / "metrics.jsonl", whole=True)
    nothing.close()
    assert not (tmp_path / "metrics.jsonl").exists() and list(tmp_path.iterdir()) == [path]


# -- 2. an output that cannot be written: one line, exit 2 ------------------------------------------------------


@dataclass
class Sandbox:
    """A folder any user may read, with a read-only folder in it holding an earlier page, and the prefix that runs
    a command as a user the read-only folder refuses (root ignores permission bits: as root, ``nobody``)."""

    root: Path
    readonly: Path
    prefix: list[str]


@pytest.fixture
def sandbox(traces: Path) -> Iterator[Sandbox]:
    root = Path(tempfile.mkdtemp(prefix="rb-otel-first-hour-"))
    root.chmod(0o755)
    shutil.copy(traces / "replay-traces.jsonl", root / "traces.jsonl")
    _steplog(root / "runs.jsonl", [("a", "success"), ("b", "failure: x"), ("c", "success")])
    readonly = root / "readonly"
    readonly.mkdir()
    (readonly / "report.html").write_text("an earlier page\n")
    readonly.chmod(0o555)
    prefix: list[str] = []
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("running as root, where a read-only folder needs another user: setpriv is not installed")
        prefix = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]
        probe = subprocess.run([*prefix, sys.executable, "-c", "import rb_otel"], capture_output=True, check=False)
        if probe.returncode != 0:
            pytest.skip(f"the user nobody cannot run this Python: {probe.stderr.decode()[-200:]}")
    try:
        yield Sandbox(root, readonly, prefix)
    finally:
        readonly.chmod(0o755)
        shutil.rmtree(root)


UNWRITABLE = [
    ("report", "traces.jsonl", "--out", "{ro}/report.html"),
    ("report", "traces.jsonl", "--summary", "--json", "{ro}/summary.json"),
    ("demo", "--scenario", "easy", "--quiet", "--out", "{ro}"),
    ("replay", "runs.jsonl", "--out", "{ro}"),
    ("evaluate", "runs.jsonl", "--quiet", "--html", "{ro}/evaluation.html"),
    ("evaluate", "runs.jsonl", "--quiet", "--json", "{ro}/evaluation.json"),
    ("train", "runs.jsonl", "--quiet", "--out", "{ro}/pilot.json"),
    ("ab-report", "traces.jsonl", "--experiment", "e", "--json", "{ro}/ab.json"),
]


def test_no_output_into_a_read_only_folder_is_more_than_one_line(sandbox: Sandbox) -> None:
    kept = _files(sandbox.readonly)
    cases = [[a.format(ro=sandbox.readonly) for a in case] for case in UNWRITABLE]
    with ThreadPoolExecutor(4) as pool:  # each its own process: started together
        answers = list(pool.map(lambda args: _cli(*args, cwd=sandbox.root, prefix=sandbox.prefix), cases))
    for case, done in zip(cases, answers, strict=True):
        line = _refused(done, "cannot write", str(sandbox.readonly))
        assert "read-only" in line or "not writable" in line, (case, line)
    assert _files(sandbox.readonly) == kept


def test_an_output_that_is_a_folder_or_under_a_file_is_one_line(tmp_path: Path, traces: Path) -> None:
    (tmp_path / "existing").mkdir()
    (tmp_path / "a-file").write_text("x")
    source = str(traces / "replay-traces.jsonl")
    _refused(_cli("report", source, "--out", "existing", cwd=tmp_path), "cannot write existing", "is a folder")
    _refused(_cli("report", source, "--summary", "--json", "existing", cwd=tmp_path), "is a folder")
    _refused(_cli("demo", "--quiet", "--out", "a-file", cwd=tmp_path), "a-file is a file, not a folder")
    _refused(_cli("replay", source, "--out", "a-file/out", cwd=tmp_path), "a-file is a file, not a folder")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file", "existing"]
    assert not any((tmp_path / "existing").iterdir()) and (tmp_path / "a-file").read_text() == "x"


def _small_files() -> None:
    """In the child: no file may grow past 2 kB (a full disk, met after the check that a path can be written)."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write fails with EFBIG instead of the signal ending it
    resource.setrlimit(resource.RLIMIT_FSIZE, (2_000, 2_000))


def test_a_write_that_fails_midway_is_one_line_and_leaves_the_old_file(tmp_path: Path, traces: Path) -> None:
    page = tmp_path / "page.html"
    page.write_text("an earlier page\n")
    source = str(traces / "replay-traces.jsonl")
    done = _cli("report", source, "--out", str(page), cwd=tmp_path, preexec=_small_files)
    _refused(done, f"cannot write {page}", "larger than this process may write")
    assert page.read_text() == "an earlier page\n" and sorted(p.name for p in tmp_path.iterdir()) == ["page.html"]
    demo = _cli("demo", "--scenario", "stalled", "--quiet", "--out", "out", cwd=tmp_path, preexec=_small_files)
    _refused(demo, "cannot write out/", "larger than this process may write")
    assert not list((tmp_path / "out").glob("*.tmp"))


# -- 3. small, empty and unlabelled data ----------------------------------------------------------------------


def test_train_on_runs_of_one_task_says_it_needs_two(tmp_path: Path) -> None:
    rng = random.Random(3)
    one_task = [_tau_result(13, 0, True, rng), _tau_result(13, 2, False, rng)]
    (tmp_path / "two.json").write_text(json.dumps(one_task))
    _refused(_cli("train", "two.json", "--out", "pilot.json", cwd=tmp_path), "all 2 labelled runs are of one task",
             "two tasks or more")  # fmt: skip
    (tmp_path / "empty").mkdir()
    _refused(_cli("train", "empty", cwd=tmp_path), "empty: no runs found", "an empty folder")
    _refused(_cli("evaluate", "empty", cwd=tmp_path), "empty: an empty folder")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty", "two.json"]


def test_submitted_swe_agent_runs_need_labels_and_say_which_flag(tmp_path: Path) -> None:
    runs = _swe_agent(tmp_path / "trajectories", "submitted", ["repo__a-1", "repo__b-2", "repo__c-3"])
    line = _refused(_cli("evaluate", str(runs), "--quiet", cwd=tmp_path), "none of the 3 runs carries an outcome")
    assert "pass --labels FILE" in line and "'submitted'" in line
    _refused(_cli("train", str(runs), "--quiet", cwd=tmp_path), "carries an outcome", "--labels FILE")
    labels = tmp_path / "labels.json"
    labels.write_text(json.dumps({"repo__a-1": True, "repo__b-2": False, "repo__c-3": False}))
    done = _cli("evaluate", str(runs), "--labels", str(labels), "--quiet", "--json", "-", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["failed"] == 2


def test_few_runs_and_one_outcome_are_said_not_printed_as_nan(tmp_path: Path) -> None:
    two = _steplog(tmp_path / "two.jsonl", [("ok", "success"), ("bad", "failure: tests")])
    done = _cli("evaluate", str(two), "--quiet", cwd=tmp_path)
    assert done.returncode == 0 and "few runs: 2 runs, 1 failed" in done.stdout, done.stdout
    failing = _steplog(tmp_path / "failing.jsonl", [("x", "failure: a"), ("y", "failure: b"), ("z", "unfinished")])
    done = _cli("evaluate", str(failing), "--quiet", "--json", str(tmp_path / "e.json"), cwd=tmp_path)
    assert done.returncode == 0 and "nan" not in done.stdout.lower(), done.stdout
    assert "one outcome only: all 2 runs failed" in done.stdout and "add runs that succeeded" in done.stdout
    assert "pass --labels FILE" in done.stdout  # the unfinished run: the flag that would give it an outcome
    assert "stops n/a of failing" not in done.stdout and "n/a" in done.stdout
    report = json.loads((tmp_path / "e.json").read_text())  # valid JSON: no NaN in it
    assert report["signals"][0]["auroc"] is None and report["caveats"]


# -- 4. in-sample figures say so (and 9. progress of a long train, in a log) -------------------------------------


@pytest.mark.heavy  # rb-otel train: its test against chance fits in worker processes of its own
def test_figures_on_the_runs_a_model_was_fitted_on_are_labelled_in_sample(tmp_path: Path) -> None:
    _tau_bench(tmp_path / "fitted", range(12), 4, seed=0)
    every = _env(RB_OTEL_PROGRESS_DELAY="0")  # every stage shows, however quick on this machine
    trained = _cli("train", "fitted", "--format", "tau_bench", "--out", "pilot.json", "--force", cwd=tmp_path,
                   env=every, timeout=600)  # fmt: skip
    assert trained.returncode == 0, trained.stderr
    # progress in a log: plain lines with counts, the rate and the time left, stage by stage
    lines = trained.stderr.splitlines()
    folds = [line for line in lines if line.startswith("5-fold cross-validation by task (")]
    assert [line.split(": ", 1)[1].split(" (")[0] for line in folds[:-1]] == [f"{n}/5 folds done" for n in range(1, 5)]
    assert all(" left" in line and ("s/fold" in line or "fold/s" in line) for line in folds[:-1]), folds
    assert folds[-1].split(": ", 1)[1].startswith("5 folds done in ")
    assert any(line.startswith("the test against chance (fits on shuffled outcomes): 39 fits done") for line in lines)
    assert "\r" not in trained.stderr
    model = json.loads((tmp_path / "pilot.json").read_text())
    fingerprint = model["trained"]["fingerprint"]
    assert len(fingerprint["runs"]) == 48 and len(fingerprint["task_groups"]) == 12
    assert "task-0-trial-0" not in (tmp_path / "pilot.json").read_text()  # hashed, not the ids themselves
    same = _cli("evaluate", "fitted", "--format", "tau_bench", "--pilot-model", "pilot.json", "--quiet", "--json",
                "fitted.json", cwd=tmp_path)  # fmt: skip
    assert same.returncode == 0, same.stderr
    assert same.stdout.startswith("48 runs (") and ", in-sample, scorer pilot/2" in same.stdout.splitlines()[0]
    assert "in-sample: all 48 runs were in the model's fit" in same.stdout and "out-of-fold AUROC" in same.stdout
    assert json.loads((tmp_path / "fitted.json").read_text())["sample"] == "in-sample"
    _tau_bench(tmp_path / "new", range(8, 16), 2, seed=1)  # tasks 8-11 the fit saw (other runs of them), 12-15 not
    mixed = _cli("evaluate", "new", "--format", "tau_bench", "--pilot-model", "pilot.json", "--quiet", "--json",
                 "new.json", cwd=tmp_path)  # fmt: skip
    assert mixed.returncode == 0, mixed.stderr
    report = json.loads((tmp_path / "new.json").read_text())
    assert (report["sample"], report["runs"]) == ("not in the fit", 8)
    assert (report["in_sample"]["sample"], report["in_sample"]["runs"]) == ("in-sample", 8)
    assert "8 of the 16 runs were in the model's fit" in mixed.stdout and "in-sample: the 8 runs" in mixed.stdout


@given(st.sets(st.text(min_size=1, max_size=12), min_size=1, max_size=30), st.text(min_size=1, max_size=12))
def test_a_fingerprint_knows_its_runs_and_their_tasks(ids: set[str], other: str) -> None:
    fit = FitFingerprint.of((i, task_keys(i, task_id=f"airline/{i}")) for i in ids)
    again = FitFingerprint.from_dict(json.loads(json.dumps(fit.as_dict())))
    assert again == fit and all(fit.saw_run(i) for i in ids)
    assert fit.saw_run(other) == (other in ids)
    assert all(fit.saw_task(task_keys("a new run", task_id=f"airline-relaxed/{i}")) for i in ids)  # a variant
    assert FitFingerprint.from_dict({"hash": "md5", "runs": [], "task_groups": []}) is None


# -- 9. progress: a bar on a terminal, plain lines elsewhere, nothing for quick work -----------------------------


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_plain_progress_lines_come_after_the_delay_and_every_tenth() -> None:
    clock, out = _Clock(), io.StringIO()
    progress = Progress(stream=out, bar=False, clock=clock)
    progress.stage("quick", 3, "file")
    progress.advance(3)
    progress.stage("long", 20, "fold")  # the quick stage ended before the delay: nothing of it shows
    for _ in range(20):
        clock.now += DELAY_S / 2
        progress.advance()
    progress.note("the last fold")
    progress.close()
    lines = out.getvalue().splitlines()
    assert not any(line.startswith("quick") for line in lines)
    assert lines[0].startswith("long: 2/20 folds done (10%), ") and lines[0].endswith("left")
    assert [line.split(" folds done")[0] for line in lines[1:-1]] == [f"long: {n}/20" for n in range(4, 20, 2)]
    assert lines[-1] == "long: 20 folds done in 00:10, the last fold"


def test_quiet_progress_prints_nothing() -> None:
    clock, out = _Clock(), io.StringIO()
    progress = Progress(enabled=False, stream=out, bar=False, clock=clock)
    progress.stage("long", 4, "fold")
    for _ in range(4):
        clock.now += DELAY_S
        progress.advance()
    progress.close()
    assert out.getvalue() == ""


def test_a_terminal_gets_a_bar(tmp_path: Path) -> None:
    folder = tmp_path / "runs"
    folder.mkdir()
    for i in range(60):
        _steplog(folder / f"run-{i:02}.jsonl", [(f"r{i}", "failure: x" if i % 3 else "success")], steps=3)
    main, child = pty.openpty()
    ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))
    command = [sys.executable, "-m", "rb_otel.cli", "evaluate", str(folder), "--json", str(tmp_path / "e.json")]
    every = _env(RB_OTEL_PROGRESS_DELAY="0")  # the bar shows at once, however quick the work on this machine
    proc = subprocess.Popen(command, cwd=tmp_path, env=every, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=child)  # fmt: skip
    os.close(child)
    seen = b""
    while True:
        try:
            chunk = os.read(main, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        seen += chunk
    assert proc.wait(timeout=300) == 0, seen[-2000:]
    text = seen.decode("utf-8", "replace")
    assert "replaying and scoring:" in text and "\r" in text and "60/60" in text and "%|" in text, text[-1000:]


def test_importing_rb_otel_or_its_command_line_does_not_import_tqdm() -> None:
    code = "import sys, rb_otel, rb_otel.cli; rb_otel.ReasonBlocks; print('tqdm' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert done.stdout.strip() == "False"


# -- 10. one convention ---------------------------------------------------------------------------------------


def test_report_takes_a_folder_and_names_the_files_it_left_out(tmp_path: Path, traces: Path) -> None:
    folder = tmp_path / "out"
    shutil.copytree(traces, folder)
    (folder / "page.html").write_text("<html></html>")
    _steplog(folder / "steplogs.jsonl", [("r", "success")])
    done = _cli("report", "out", "--out", "page.html", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    [line] = done.stderr.strip().splitlines()
    # page.html is passed over by its name, as every directory read does (importers.detect.holds_no_runs)
    assert line.startswith("skipped 2 file(s) holding no OTLP/JSON traces: replay-metrics.jsonl") and "steplog" in line
    assert (tmp_path / "page.html").stat().st_size > 1000
    summary = _cli("report", "out", "--summary", cwd=tmp_path)
    assert summary.returncode == 0 and "first-hour" in summary.stdout
    _refused(_cli("report", "out/steplogs.jsonl", cwd=tmp_path), "steplog records", "rb-otel replay")
    (tmp_path / "records").mkdir()
    _steplog(tmp_path / "records" / "a.jsonl", [("r", "success")])
    _refused(_cli("report", "records", cwd=tmp_path), "no OTLP/JSON trace files", "rb-otel replay")


def test_bad_input_exits_2_with_one_line_everywhere(tmp_path: Path) -> None:
    (tmp_path / "empty.jsonl").write_text("")
    (tmp_path / "binary.jsonl").write_bytes(bytes(range(256)) * 40)
    (tmp_path / "cut.json").write_text(json.dumps([_tau_result(1, 0, False, random.Random(1))], indent=1)[:900])
    cases = [
        (("report", "empty.jsonl"), ["no runs (invoke_agent spans) in empty.jsonl"]),
        (("report", "empty.jsonl", "--summary"), ["no runs (invoke_agent spans) in empty.jsonl"]),
        (("report", "binary.jsonl"), ["binary.jsonl: a binary file"]),
        (("report", "binary.jsonl", "--summary"), ["binary.jsonl: a binary file"]),
        (("replay", "binary.jsonl"), ["binary.jsonl", "a binary file"]),
        (("replay", "binary.jsonl", "--format", "steplog"), ["binary.jsonl"]),
        (("evaluate", "binary.jsonl"), ["binary.jsonl", "a binary file"]),
        (("train", "binary.jsonl"), ["binary.jsonl", "a binary file"]),
        (("replay", "cut.json"), ["cut.json: line", "not valid JSON (", "ends early"]),
        (("evaluate", "cut.json"), ["cut.json: line", "not valid JSON (", "ends early"]),
        (("replay", "missing.json"), ["missing.json: no such file or folder"]),
        (("report", "missing.json"), ["missing.json: no such trace file"]),
    ]
    with ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(lambda case: _cli(*case[0], cwd=tmp_path), cases))
    for (args, words), done in zip(cases, answers, strict=True):
        assert done.returncode == 2, (args, done.stderr)
        _refused(done, *words)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["binary.jsonl", "cut.json", "empty.jsonl"]


UNKNOWN_FLAG = [
    ("demo", ()),
    ("replay", ("x",)),
    ("evaluate", ("x",)),
    ("train", ("x",)),
    ("report", ("x",)),
    ("ab-report", ("x", "--experiment", "e")),
    ("baselines", ("x",)),
]


@pytest.mark.parametrize(("command", "given"), UNKNOWN_FLAG)
def test_an_unknown_flag_shows_the_commands_own_usage(tmp_path: Path, command: str, given: tuple[str, ...]) -> None:
    done = _cli(command, *given, "--no-such-flag", cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert f"usage: rb-otel {command} " in done.stderr
    assert done.stderr.strip().splitlines()[-1] == f"rb-otel {command}: error: unrecognized arguments: --no-such-flag"


def test_format_tau_bench_reads_one_result_as_well_as_a_list(tmp_path: Path) -> None:
    rng = random.Random(7)
    (tmp_path / "one.json").write_text(json.dumps(_tau_result(7, 1, True, rng), indent=1))
    (tmp_path / "list.json").write_text(json.dumps([_tau_result(8, 0, False, rng)]))
    done = _cli("replay", "one.json", "list.json", "--format", "tau_bench", "--out", "out", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    rows = [line.split() for line in done.stdout.splitlines() if line.startswith("tau_bench")]
    assert [(r[1], r[4]) for r in rows] == [("task-7-trial-1", "failure:"), ("task-8-trial-0", "success")]


def test_a_reader_that_stops_reading_ends_the_command_without_a_traceback(tmp_path: Path) -> None:
    runs = _steplog(tmp_path / "runs.jsonl", [(f"r{i}", "success" if i % 2 else "failure: x") for i in range(40)])
    command = [sys.executable, "-m", "rb_otel.cli", "evaluate", str(runs), "--quiet"]
    proc = subprocess.Popen(command, cwd=tmp_path, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # `| head -0`: the reader is gone before the first line
    stderr = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141 and "Traceback" not in stderr, stderr


def test_a_bad_progress_delay_is_warned_about_and_the_default_kept(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from rb_otel.cli.progress import DELAY_ENV, delay_from_env

    for value, expected in (("0", 0.0), ("2.5", 2.5), ("", DELAY_S)):
        monkeypatch.setenv(DELAY_ENV, value)
        assert delay_from_env() == expected
    assert capsys.readouterr().err == ""
    for bad in ("soon", "-1", "nan"):
        monkeypatch.setenv(DELAY_ENV, bad)
        assert delay_from_env() == DELAY_S
        assert capsys.readouterr().err == f"warning: {DELAY_ENV}={bad!r} is not a number of seconds (0 or more); " \
                                          f"using {DELAY_S:g}\n"  # fmt: skip
