"""``make data`` (``python -m rb_otel.datasets fetch``) against a real HTTP server on 127.0.0.1 serving a made-up
repository: a good download, a corrupted file, a missing one, a transfer cut off mid-file and resumed, and a rerun
that continues an earlier run's partial file; and against no server at all (a name under ``.invalid``, which never
resolves, and a port nobody listens on): the run stops at once, in one line, and leaves nothing behind. No network:
the server is the test's own."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote

import pytest
from components import free_port

from rb_otel.datasets import root as data_roots
from rb_otel.datasets.fetch import ATTEMPTS, Unreachable, fetch
from rb_otel.datasets.manifest import ManifestFile, ManifestSource, load_manifest, manifest_text
from rb_otel.datasets.origins import Extract

REPOSITORY, COMMIT = "example-org/agent-runs", "0123456789abcdef0123456789abcdef01234567"

#: The made-up repository at COMMIT: a run file, a JSON-lines file whose second line is a record, a results list
#: whose element 1 is a record, and the licence.
RUN = json.dumps({"run": "r1", "steps": [{"thought": "look at the failing test", "action": "ls"}] * 40}).encode()
LINES = b'{"instance": "a"}\n{"instance": "b", "history": []}\n'
RESULTS = json.dumps([{"task_id": 0, "reward": 1.0}, {"task_id": 1, "reward": 0.0, "traj": []}]).encode()
LICENCE = b"MIT License\n\nCopyright (c) 2026 Example Org\n"
FILES = {"runs/r1.json": RUN, "out/output.jsonl": LINES, "out/results.json": RESULTS, "LICENSE": LICENCE}


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def made_up_source(name: str = "signal/example") -> ManifestSource:
    second_line = LINES.splitlines(keepends=True)[1]
    element = json.dumps(json.loads(RESULTS)[1], indent=1).encode()
    return ManifestSource(
        name=name,
        repository=REPOSITORY,
        commit=COMMIT,
        licence="MIT",
        licence_files=("LICENSE",),
        files=(
            ManifestFile("r1.json", "runs/r1.json", digest(RUN), len(RUN)),
            ManifestFile("b.json", "out/output.jsonl", digest(second_line), len(second_line), Extract(line=2)),
            ManifestFile("task1.json", "out/results.json", digest(element), len(element), Extract(element=1)),
        ),
    )


@dataclass
class Repository:
    """What the server serves and what it saw: ``files`` by path, ``cut`` (path -> bytes sent before the
    connection is dropped, once), and every request's path and Range header."""

    files: dict[str, bytes]
    cut: dict[str, int] = field(default_factory=dict)
    requests: list[tuple[str, str | None]] = field(default_factory=list)
    always_cut: set[str] = field(default_factory=set)  # cut off after a few bytes, every time
    answers: dict[str, list[int]] = field(default_factory=dict)  # path -> statuses to answer first, one a request


class _Handler(BaseHTTPRequestHandler):
    repository: Repository

    def do_GET(self) -> None:
        prefix = f"/{REPOSITORY}/raw/{COMMIT}/"
        path = unquote(self.path[len(prefix) :]) if self.path.startswith(prefix) else None
        self.repository.requests.append((path or self.path, self.headers.get("Range")))
        body = self.repository.files.get(path) if path is not None else None
        if body is None:
            self.send_error(404)
            return
        queued = self.repository.answers.get(path or "")
        if queued:
            self.send_error(queued.pop(0))
            return
        start = 0
        if self.headers.get("Range"):
            start = int(self.headers["Range"].removeprefix("bytes=").split("-")[0])
            if start >= len(body):
                self.send_error(416)
                return
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
        else:
            self.send_response(200)
        self.send_header("Content-Length", str(len(body) - start))
        self.end_headers()
        cut = self.repository.cut.pop(path, None) if path is not None else None
        if path in self.repository.always_cut:
            cut = 10
        if cut is not None:  # send part of the file, then drop the connection
            self.wfile.write(body[start : start + cut])
            self.wfile.flush()
            self.close_connection = True
            return
        self.wfile.write(body[start:])

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def served() -> Iterator[tuple[str, Repository]]:
    repository = Repository(dict(FILES))
    handler = type("Handler", (_Handler,), {"repository": repository})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", repository
    server.shutdown()
    server.server_close()


def test_a_good_download_writes_the_checked_folder_the_licence_and_the_sources_list(
    served: tuple[str, Repository], tmp_path: Path
) -> None:
    mirror, _ = served
    lines: list[str] = []
    [result] = fetch([made_up_source()], tmp_path, mirror=mirror, progress=lines.append)
    assert result.ok, result.line
    folder = tmp_path / "signal" / "example"
    assert (folder / "r1.json").read_bytes() == RUN
    assert json.loads((folder / "b.json").read_text()) == {"instance": "b", "history": []}
    assert json.loads((folder / "task1.json").read_text())["task_id"] == 1
    assert (tmp_path / "LICENSES" / "signal" / "example" / "LICENSE").read_bytes() == LICENCE
    assert f"github.com/{REPOSITORY} @ {COMMIT}" in (tmp_path / "SOURCES.md").read_text()
    assert not (tmp_path / ".partial" / "signal" / "example").exists()
    assert len(lines) == 2 and "3 files" in lines[0] and "fetched and checked" in lines[1]
    [again] = fetch([made_up_source()], tmp_path, mirror=mirror)
    assert again.ok and "already there, checked" in again.line


def test_a_corrupted_file_is_one_line_and_no_folder_then_a_rerun_fetches_it_anew(
    served: tuple[str, Repository], tmp_path: Path
) -> None:
    mirror, repository = served
    repository.files["runs/r1.json"] = RUN.replace(b"failing", b"passing")
    [result] = fetch([made_up_source()], tmp_path, mirror=mirror)
    assert not result.ok
    assert "r1.json: SHA-256 mismatch" in result.line and "\n" not in result.line
    assert not (tmp_path / "signal" / "example").exists()
    assert not (tmp_path / ".partial" / "signal" / "example" / "origins" / "runs" / "r1.json").exists()
    repository.files["runs/r1.json"] = RUN
    [fixed] = fetch([made_up_source()], tmp_path, mirror=mirror)
    assert fixed.ok and (tmp_path / "signal" / "example" / "r1.json").read_bytes() == RUN


def test_a_missing_file_is_one_line_naming_it(served: tuple[str, Repository], tmp_path: Path) -> None:
    mirror, repository = served
    del repository.files["out/results.json"]
    [result] = fetch([made_up_source()], tmp_path, mirror=mirror)
    assert not result.ok and "out/results.json: HTTP 404" in result.line and "\n" not in result.line
    assert not (tmp_path / "signal" / "example").exists()


def test_a_transfer_cut_off_mid_file_is_resumed_with_a_range_request(
    served: tuple[str, Repository], tmp_path: Path
) -> None:
    mirror, repository = served
    repository.cut["runs/r1.json"] = len(RUN) // 3
    [result] = fetch([made_up_source()], tmp_path, mirror=mirror)
    assert result.ok, result.line
    assert (tmp_path / "signal" / "example" / "r1.json").read_bytes() == RUN
    asked = [rng for path, rng in repository.requests if path == "runs/r1.json"]
    assert asked == [None, f"bytes={len(RUN) // 3}-"]


def test_a_rerun_continues_the_partial_file_an_interrupted_run_left(
    served: tuple[str, Repository], tmp_path: Path
) -> None:
    mirror, repository = served
    partial = tmp_path / ".partial" / "signal" / "example" / "origins" / "runs" / "r1.json.part"
    partial.parent.mkdir(parents=True)
    partial.write_bytes(RUN[:100])  # what a run stopped by Ctrl-C left
    [result] = fetch([made_up_source()], tmp_path, mirror=mirror)
    assert result.ok and (tmp_path / "signal" / "example" / "r1.json").read_bytes() == RUN
    assert ("runs/r1.json", "bytes=100-") in repository.requests


def test_a_folder_changed_after_the_fetch_is_reported_not_overwritten(
    served: tuple[str, Repository], tmp_path: Path
) -> None:
    mirror, _ = served
    assert fetch([made_up_source()], tmp_path, mirror=mirror)[0].ok
    (tmp_path / "signal" / "example" / "r1.json").write_text("edited")
    [result] = fetch([made_up_source()], tmp_path, mirror=mirror)
    assert not result.ok and "r1.json: changed since it was fetched" in result.line
    assert (tmp_path / "signal" / "example" / "r1.json").read_text() == "edited"


def test_the_command_exits_1_with_one_line_per_failed_source_and_no_traceback(
    served: tuple[str, Repository], tmp_path: Path
) -> None:
    mirror, repository = served
    del repository.files["out/output.jsonl"]
    manifest = tmp_path / "manifest.json"
    manifest.write_text(manifest_text([made_up_source("signal/broken"), made_up_source("other")]))
    assert [s.name for s in load_manifest(manifest)] == ["signal/broken", "other"]
    command = [sys.executable, "-m", "rb_otel.datasets", "fetch", "--manifest", str(manifest), "--mirror", mirror]
    done = subprocess.run(
        [*command, "--into", str(tmp_path / "data")], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    failures = [line for line in done.stderr.splitlines() if "HTTP 404" in line]
    assert len(failures) == 2 and all("out/output.jsonl" in line for line in failures)
    unknown = subprocess.run([*command, "--source", "nope"], capture_output=True, text=True, timeout=60, check=False)
    assert unknown.returncode == 2 and unknown.stderr.count("\n") == 1 and "unknown source nope" in unknown.stderr


def test_the_shipped_manifest_describes_every_source_of_the_shared_data_readme() -> None:
    sources = {s.name: s for s in load_manifest()}
    assert set(sources) == {
        "io_harness", "openhands", "swe_agent", "tau_bench", "signal/tau2_grok", "signal/tau2_gpt41_sierra",
        "signal/tau2_gpt41sft_sierra", "signal/tau2_sonnet45_aide", "signal/tau2_ironshell",
        "signal/tau2_toolorchestra", "signal/tau2_whissle", "signal/mini_swe_agent_gemini3pro",
        "signal/msa_gpt5fam_cam", "signal/msa2_deepseek_verified", "signal/terminal_bench_claude_code",
    }  # fmt: skip
    for source in sources.values():
        assert source.files and all(len(f.sha256) == 64 for f in source.files)
        assert not any(f.path == "labels.csv" for f in source.files)  # the curator's, not the origin's
    assert sum(f.path.endswith(".traj.json") for f in sources["signal/mini_swe_agent_gemini3pro"].files) == 500


# -- failing fast, leaving nothing behind --------------------------------------------------------------------------


def _empty_folders(root: Path) -> list[str]:
    return [str(Path(d).relative_to(root)) for d, dirs, files in os.walk(root) if not dirs and not files]


def many_files_source(name: str, count: int) -> ManifestSource:
    """A source of ``count`` one-line files under folders of their own (as the 500 trajectories of a real one)."""
    files = tuple(ManifestFile(f"t{i:03}/t.json", f"trajs/t{i:03}/t.json", digest(b"x"), 1) for i in range(count))
    return ManifestSource(name, REPOSITORY, COMMIT, "MIT", ("LICENSE",), files)


@pytest.mark.parametrize("cause", ["no such name", "refused"])
def test_an_unreachable_mirror_stops_the_whole_run_in_one_line_and_leaves_nothing(tmp_path: Path, cause: str) -> None:
    # a name under .invalid never resolves (RFC 6761); a port just freed has nobody listening on it
    mirror = "http://rb-otel-fetch-test.invalid" if cause == "no such name" else f"http://127.0.0.1:{free_port()}"
    lines: list[str] = []
    into = tmp_path / "data"
    sources = [many_files_source("signal/first", 40), made_up_source("signal/second"), made_up_source("third")]
    with pytest.raises(Unreachable) as stopped:
        fetch(sources, into, mirror=mirror, progress=lines.append)
    message = str(stopped.value)
    assert "\n" not in message and message.startswith(f"cannot reach {mirror.removeprefix('http://')}: ")
    assert ("does not resolve" if cause == "no such name" else "connection was refused") in message
    assert len(lines) == 1 and lines[0].startswith("[1/3] signal/first")  # no other source was tried
    assert not into.exists()  # made by this run, and nothing in it: gone again


def test_a_run_that_fails_leaves_no_empty_folder_and_keeps_what_an_earlier_run_downloaded(tmp_path: Path) -> None:
    into = tmp_path / "data"
    kept = into / ".partial" / "signal" / "example" / "origins" / "runs" / "r1.json.part"
    kept.parent.mkdir(parents=True)
    kept.write_bytes(RUN[:100])  # an earlier run's download, to continue
    for i in range(30):  # what the offline run of the issue left: 1,129 empty folders
        (into / ".partial" / "signal" / "other" / "origins" / f"t{i}").mkdir(parents=True)
    with pytest.raises(Unreachable):
        fetch([many_files_source("signal/other", 30)], into, mirror=f"http://127.0.0.1:{free_port()}")
    assert kept.read_bytes() == RUN[:100]
    assert _empty_folders(into) == [] and not (into / ".partial" / "signal" / "other").exists()
    assert not (into / "SOURCES.md").exists() and not (into / "LICENSES").exists()


def _all_served_but_the_first(repository: Repository, count: int) -> ManifestSource:
    """A source of ``count`` files that ``repository`` serves, except its first (a 404)."""
    source = many_files_source("signal/broken", count)
    repository.files.update({f.origin: b"x" for f in source.files[1:]})
    return source


def test_a_source_stops_at_its_first_file_that_fails_for_good_and_the_next_source_is_tried(
    served: tuple[str, Repository], tmp_path: Path
) -> None:
    mirror, repository = served
    broken = _all_served_but_the_first(repository, 30)
    first, second = fetch([broken, made_up_source()], tmp_path, mirror=mirror, jobs=1)
    assert not first.ok and "trajs/t000/t.json: HTTP 404" in first.line and "\n" not in first.line
    asked = [path for path, _ in repository.requests if path.startswith("trajs/")]
    assert asked == ["trajs/t000/t.json"]  # once, not 4 times, and none of the 29 after it
    assert second.ok, second.line
    assert _empty_folders(tmp_path) == [] and not (tmp_path / "signal" / "broken").exists()


def test_with_parallel_downloads_a_failure_for_good_stops_the_rest_of_its_source(
    served: tuple[str, Repository], tmp_path: Path
) -> None:
    mirror, repository = served
    [result] = fetch([_all_served_but_the_first(repository, 200)], tmp_path, mirror=mirror, jobs=4)
    assert not result.ok and "trajs/t000/t.json: HTTP 404" in result.line
    asked = [path for path, _ in repository.requests if path.startswith("trajs/")]
    assert asked.count("trajs/t000/t.json") == 1 and len(asked) < 100, len(asked)  # the queue was dropped


def test_a_transfer_that_keeps_breaking_off_is_tried_a_bounded_number_of_times(
    served: tuple[str, Repository], tmp_path: Path
) -> None:
    mirror, repository = served
    repository.always_cut.add("runs/r1.json")
    repository.answers["out/results.json"] = [503]  # once: the second try gets the file
    [result] = fetch([made_up_source()], tmp_path, mirror=mirror, jobs=1)
    assert not result.ok and f"runs/r1.json: gave up after {ATTEMPTS} tries" in result.line
    asked = [rng for path, rng in repository.requests if path == "runs/r1.json"]
    assert len(asked) == ATTEMPTS and asked[1:] == [f"bytes={10 * n}-" for n in range(1, ATTEMPTS)]  # each resumes
    assert [p for p, _ in repository.requests].count("out/results.json") == 2


def _timed(*args: str) -> tuple[float, subprocess.CompletedProcess[str]]:
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "rb_otel.datasets", *args], capture_output=True, text=True,
                          timeout=300, check=False)  # fmt: skip
    return time.monotonic() - started, done


@pytest.mark.serial  # a bound with a reference measured in turn: steadier alone than beside other workers
@pytest.mark.parametrize("cause", ["no such name", "refused"])
def test_make_data_offline_ends_within_seconds_with_one_line_and_no_data_folder(tmp_path: Path, cause: str) -> None:
    # the shipped manifest: 14 sources, over 1,000 files (the offline run took more than 15 minutes)
    mirror = "http://rb-otel-fetch-test.invalid" if cause == "no such name" else f"http://127.0.0.1:{free_port()}"
    into = tmp_path / "data"
    before, _ = _timed("fetch", "--help")  # the command's own start, just before and after: what load costs it
    took, done = _timed("fetch", "--mirror", mirror, "--into", str(into))
    after, _ = _timed("fetch", "--help")
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "cannot reach" in errors[0], done.stderr
    assert len(done.stderr.splitlines()) == 2, done.stderr  # the first source's line, then why the run stopped
    assert not into.exists()
    # within seconds: 10 s of failing connections at most, on top of 5 times the command's start (the issue's
    # 15 minutes, or a file tried 4 times with backoff, fail it however loaded the machine is)
    assert took < 10 + 5 * max(before, after), (took, before, after)


def test_a_half_made_data_folder_is_not_a_data_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a checkout with no shared data beside it, whose data/ an offline `make data` left half made
    checkout = tmp_path / "checkout"
    data = checkout / "data"
    for i in range(20):
        (data / ".partial" / "signal" / "msa" / "origins" / f"t{i}").mkdir(parents=True)
    (data / "signal").mkdir()  # a source's parent folder, made just before the source failed to land
    monkeypatch.setattr(data_roots, "repository_root", lambda: checkout)
    assert not data_roots.holds_records(data)
    assert data_roots.find_data_root({}) is None
    with pytest.raises(data_roots.DataNotFound, match="no complete source in it"):
        data_roots.data_root({})
    with pytest.raises(data_roots.DataNotFound, match="holds no development source"):
        data_roots.find_data_root({data_roots.DATA_ENV: str(data)})
    (data / "signal" / "tau2_example.tar.xz").write_bytes(b"")  # a source, as the shared data keeps it
    assert data_roots.find_data_root({}) == data
    (data / "signal" / "tau2_example.tar.xz").unlink()
    (data / "tau_bench").mkdir()  # a source folder, which appears only whole
    assert data_roots.find_data_root({}) == data == data_roots.data_root({data_roots.DATA_ENV: ""})


# -- make data reproduces what the shared data gives -------------------------------------------------------------


class _Origins(BaseHTTPRequestHandler):
    """Serves each file of real sources at its origin path (what the manifest says GitHub serves)."""

    table: dict[str, Path]

    def do_GET(self) -> None:
        path = self.table.get(unquote(self.path))
        if path is None:
            self.send_error(404)
            return
        body = path.read_bytes()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def test_a_data_root_make_data_wrote_gives_the_same_runs_as_the_shared_data(tmp_path: Path) -> None:
    """Two small development sources fetched from origins serving the shared data's own files: every file checks,
    and the runs read from the new data root are the runs read from the shared one (so `make held-out` and
    `make half-split` read the same from either)."""
    from components import signal_source

    from rb_otel.datasets import source_folder
    from rb_otel.training.development import read_kind

    names = ("tau2_whissle", "tau2_sonnet45_aide")
    sources = [s for s in load_manifest() if s.name in {f"signal/{n}" for n in names}]
    table = {}
    for source in sources:
        folder = signal_source(source.name.removeprefix("signal/"))
        for f in source.files:
            table[f"/{source.repository}/raw/{source.commit}/{f.origin}"] = folder / f.path
    handler = type("Handler", (_Origins,), {"table": table})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        results = fetch(sources, tmp_path / "data", mirror=f"http://127.0.0.1:{server.server_address[1]}")
    finally:
        server.shutdown()
        server.server_close()
    assert all(r.ok for r in results), [r.line for r in results]
    fetched = read_kind("customer_service", tmp_path / "data", sources=names)
    shared = read_kind("customer_service", sources=names)

    def key(run: object) -> tuple[object, ...]:
        return (run.run_id, run.failed, run.harness, run.model, len(run.steps), run.group)  # type: ignore[attr-defined]

    assert [key(r) for r in fetched.runs] == [key(r) for r in shared.runs] and len(fetched.runs) == 100
    assert source_folder("signal/tau2_whissle", tmp_path / "data").is_dir()  # a folder, not an archive
