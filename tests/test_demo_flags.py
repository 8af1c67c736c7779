"""``rb-otel demo``'s flags are checked before any work: a bad one is one line on standard error and exit 2, and
the out folder of an earlier demo is left byte for byte as it was (``--repeat 0`` once emptied its page and step
logs)."""

from __future__ import annotations

import math
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rb_otel.cli import main
from rb_otel.cli.checks import ArgumentProblem, free_port
from rb_otel.demo.runner import DemoOptions

#: An earlier demo's files (what a bad run must not touch).
EARLIER = {
    "traces.jsonl": b'{"resourceSpans": []}\n',
    "metrics.jsonl": b'{"resourceMetrics": []}\n',
    "report.html": b"<!doctype html><p>the last demo's page</p>\n",
    "steplogs.jsonl": b'{"run_id": "r1"}\n',
}


@pytest.fixture
def earlier(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_TRACES_EXPORTER", "OTEL_METRICS_EXPORTER",
                 "OTEL_EXPORTER_PROMETHEUS_HOST", "OTEL_EXPORTER_PROMETHEUS_PORT"):  # fmt: skip
        monkeypatch.delenv(name, raising=False)
    out = tmp_path / "out"
    out.mkdir()
    for name, content in EARLIER.items():
        (out / name).write_bytes(content)
    return out


@pytest.fixture
def busy_port() -> Iterator[int]:
    """A port a real server is listening on at 127.0.0.1 (where the demo serves its metrics)."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        yield int(server.getsockname()[1])


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.iterdir()}


BAD = [
    (["--repeat", "0"], "--repeat 0"),
    (["--repeat", "-1"], "--repeat -1"),
    (["--experiment", "0"], "--experiment 0"),
    (["--experiment", "-3"], "--experiment -3"),
    (["--prometheus-port", "70000"], "between 1 and 65535"),
    (["--prometheus-port", "-1"], "between 1 and 65535"),
    (["--hold", "-1"], "--hold -1"),
    (["--hold", "nan"], "--hold nan"),
]


@pytest.mark.parametrize(("flags", "named"), BAD, ids=[" ".join(flags) for flags, _ in BAD])
def test_a_bad_flag_is_one_line_exit_2_and_the_out_folder_untouched(
    flags: list[str], named: str, earlier: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["demo", "--out", str(earlier), "--quiet", *flags]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and named in lines[0], lines
    assert captured.out == ""
    assert _files(earlier) == EARLIER


def test_a_port_in_use_is_one_line_naming_it(busy_port: int, earlier: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--out", str(earlier), "--quiet", "--prometheus-port", str(busy_port)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines == [f"error: --prometheus-port {busy_port}: 127.0.0.1:{busy_port} is already in use"]
    assert _files(earlier) == EARLIER


@pytest.mark.parametrize("raw", ["abc", "70000"])
def test_the_prometheus_port_variable_is_checked_too(
    raw: str, earlier: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OTEL_METRICS_EXPORTER", "prometheus")
    monkeypatch.setenv("OTEL_EXPORTER_PROMETHEUS_PORT", raw)
    assert main(["demo", "--out", str(earlier), "--quiet"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "OTEL_EXPORTER_PROMETHEUS_PORT" in lines[0] and "between 1 and 65535" in lines[0]
    assert _files(earlier) == EARLIER


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc (a folder that takes no files)")
def test_an_out_folder_that_cannot_be_made_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    """``/proc`` answers access(2) as writable for root, yet takes no new folder: the check tries it."""
    assert main(["demo", "--out", "/proc/nope", "--quiet"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: cannot write /proc/nope/"), lines


def test_an_out_that_is_a_file_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    taken = tmp_path / "taken"
    taken.write_bytes(b"mine")
    assert main(["demo", "--out", str(taken), "--quiet"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and f"{taken} is a file, not a folder" in lines[0], lines
    assert taken.read_bytes() == b"mine"


@pytest.mark.parametrize(
    "options",
    [{"repeat": 0}, {"repeat": -2}, {"experiment_units": -3}, {"hold_seconds": -1.0}, {"hold_seconds": math.nan}],
    ids=str,
)
def test_the_library_refuses_a_run_that_would_do_nothing(options: dict[str, float]) -> None:
    """From Python too: a demo that runs nothing must not write an empty page over the last one."""
    with pytest.raises(ValueError, match=next(iter(options))):
        DemoOptions(**options)  # type: ignore[arg-type]


def test_good_flags_still_run_and_port_0_is_any_free_port(earlier: Path) -> None:
    """The checks refuse only what cannot work: port 0 (any free port, as the help says), one user, no hold."""
    argv = ["demo", "--out", str(earlier), "--quiet", "--scenario", "easy", "--prometheus-port", "0"]
    assert main([*argv, "--repeat", "1", "--experiment", "1", "--hold", "0"]) == 0
    assert b"demo-easy" in (earlier / "report.html").read_bytes()


@given(st.integers().filter(lambda port: not 0 <= port <= 65535))
def test_any_port_out_of_range_is_refused_naming_the_range(port: int) -> None:
    with pytest.raises(ArgumentProblem, match=f"^--prometheus-port {port}: a port is a number between 1 and 65535"):
        free_port("--prometheus-port", port, "127.0.0.1")
