"""The Makefile's own logic, run by ``make`` itself: what each target installs (``make -n``, nothing executed) and
how ``make unit`` joins its two phases (with a stand-in ``python`` that records its arguments and exits as told,
so the recipe's shell runs as written without running the suite inside the suite)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="no `make` here (Debian: apt-get install make)")


def _make(*args: str, venv: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["make", "--no-print-directory", "-C", str(ROOT), *args, f"VENV={venv}"],
        capture_output=True, text=True, timeout=60, check=False, env={**os.environ, **(env or {})},
    )  # fmt: skip


def _installs(target: str, venv: Path) -> list[str]:
    done = _make("-n", target, venv=venv)
    assert done.returncode == 0, done.stderr
    return [line for line in done.stdout.splitlines() if "pip install" in line and "-e " in line]


def test_make_demo_installs_what_the_demo_needs_and_make_test_the_test_extras(tmp_path: Path) -> None:
    venv = tmp_path / "fresh-venv"  # not there: every step shows
    assert _installs("demo", venv) == [f'{venv}/bin/python -m pip install --quiet -e ".[demo]"']
    for target in ("unit", "test", "lint", "docs"):
        assert _installs(target, venv) == [f'{venv}/bin/python -m pip install --quiet -e ".[dev]"'], target
    assert not venv.exists()  # -n ran nothing


def test_the_demo_extra_holds_no_test_tool() -> None:
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    tools = ("pytest", "hypothesis", "mypy", "ruff", "mkdocs", "scipy", "matplotlib", "qdrant", "chdb", "psycopg")
    assert extras["demo"] and not [d for d in extras["demo"] if d.startswith(tools)]
    assert {"pytest>=8", "pytest-xdist>=3.5", "hypothesis>=6.100"} <= set(extras["dev"])


def _fake_venv(tmp_path: Path) -> Path:
    """A venv whose ``python`` logs its arguments and exits with $PARALLEL_RC (the ``-n 4`` phase) or $ALONE_RC,
    with its stamps newer than pyproject.toml, so nothing is installed."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    python = venv / "bin" / "python"
    python.write_text(
        '#!/bin/sh\necho "$*" >> "$CALLS"\ncase "$*" in *"-n 4"*) exit "$PARALLEL_RC";; *) exit "$ALONE_RC";; esac\n'
    )
    python.chmod(0o755)
    later = (ROOT / "pyproject.toml").stat().st_mtime + 10**6
    for stamp in (".rb-otel-installed", ".rb-otel-demo-installed"):
        (venv / stamp).touch()
        os.utime(venv / stamp, (later, later))
    return venv


@pytest.mark.parametrize(
    ("parallel", "alone", "said"),
    [
        (0, 0, []),
        (1, 0, []),  # a failure in the parallel phase: the serial phase still runs, the run still fails
        (0, 1, []),
        (2, 3, []),
        (5, 0, ["pytest collected no tests"]),  # reported, never a pass
        (0, 5, ["pytest collected no serial or heavy tests"]),
    ],
)
def test_make_unit_runs_both_phases_and_fails_at_the_end_if_either_failed(
    tmp_path: Path, parallel: int, alone: int, said: list[str]
) -> None:
    venv = _fake_venv(tmp_path)
    calls = tmp_path / "calls"
    env = {"CALLS": str(calls), "PARALLEL_RC": str(parallel), "ALONE_RC": str(alone)}
    done = _make("unit", venv=venv, env=env)
    assert calls.read_text().splitlines() == [
        "-m pytest -n 4 -m not serial and not heavy",
        "-m pytest -m serial or heavy",
    ]
    assert f"unit: parallel phase exit {parallel}, serial and heavy phase exit {alone}" in done.stdout
    assert all(line in done.stdout for line in said), done.stdout
    assert (done.returncode == 0) == (parallel == alone == 0), (done.returncode, done.stdout, done.stderr)
