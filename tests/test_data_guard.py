"""The data rule, enforced: no file the repository tracks is a copy of a record under the data root (other
projects' published runs live beside the project, never in its history).

The data root is whichever holds a complete source (:mod:`rb_otel.datasets.root`): the shared data with its
archives, or the folders `make data` writes. With none, the test skips, naming what to run."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

import pytest
from components import data_path

from rb_otel.datasets import source_folder

ROOT = Path(__file__).resolve().parents[1]
#: Files this small are not records (an empty ``__init__.py`` and an empty patch match by chance).
SMALLEST_RECORD = 257


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_no_tracked_file_is_a_copy_of_a_record_under_the_data_root() -> None:
    root = data_path()
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: the tracked files cannot be listed")
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    tracked = {}
    for name in filter(None, listed.decode().split("\0")):
        path = ROOT / name
        if path.is_file() and path.stat().st_size >= SMALLEST_RECORD:
            tracked.setdefault(_sha256(path), []).append(name)
    archives = sorted(root.rglob("*.tar.xz"))
    folders = [root] + [
        source_folder(archive.relative_to(root).as_posix().removesuffix(".tar.xz"), root) for archive in archives
    ]
    copies, records, unpacked = [], 0, 0
    for folder in folders:
        for path in folder.rglob("*"):
            if path.is_file() and path.stat().st_size >= SMALLEST_RECORD:
                records += 1
                unpacked += folder != root
                copies += [f"{name} is {path}" for name in tracked.get(_sha256(path), [])]
    assert not copies, "records from other repositories are tracked: " + "; ".join(copies)
    assert records > 0, f"no record under {root} was compared"  # the data root holds sources, so this looked
    assert unpacked > 0 or not archives  # the archives were unpacked and looked into, not only loose files


def test_the_guard_reads_a_data_root_of_folders_as_make_data_writes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `make data` writes each source as a folder, never an archive: the guard holds there too (it failed `1 > 1`)
    run = tmp_path / "tau_bench" / "made_up_run.json"
    run.parent.mkdir()
    run.write_text('{"task_id": 7, "traj": [' + ", ".join(['{"role": "user"}'] * 30) + "]}\n")
    monkeypatch.setenv("RB_OTEL_DATA", str(tmp_path))
    test_no_tracked_file_is_a_copy_of_a_record_under_the_data_root()
