"""The README's first example runs as pasted and prints what the README says it prints; its links resolve."""

from __future__ import annotations

import contextlib
import io
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_the_first_example_prints_what_the_readme_shows() -> None:
    code = re.findall(r"```python\n(.*?)```", README, re.S)[0]
    shown = re.findall(r"```text\n(.*?)```", README, re.S)[0]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, "README.md", "exec"), {"__name__": "readme_example"})
    assert printed.getvalue() == shown


def test_the_readme_is_short_and_its_local_links_exist() -> None:
    assert len(README.splitlines()) <= 200
    targets = re.findall(r"\]\(((?!https?:)[^)#]+)(?:#[^)]*)?\)", README)
    assert targets and all((ROOT / t).exists() for t in targets), [t for t in targets if not (ROOT / t).exists()]


def test_the_experiment_report_shown_is_what_the_demo_experiment_gives(tmp_path: Path) -> None:
    # the README's ab-report block, line by line, against a real run of the demo's experiment
    from rb_otel.ab.experiment_report import report
    from rb_otel.ab.table import format_report
    from rb_otel.demo.runner import DemoOptions, run_demo

    shown = re.findall(r"```text\n\$ rb-otel ab-report .*?\n(.*?)```", README, re.S)[0].splitlines()
    run_demo(DemoOptions(out_dir=tmp_path, scenarios=["easy"], quiet=True, experiment_units=24))
    printed = [
        line.rstrip() for line in format_report(report([tmp_path / "traces.jsonl"], "demo-experiment")).splitlines()
    ]
    assert shown and all(line.rstrip() in printed for line in shown), [s for s in shown if s.rstrip() not in printed]


# -- the shell commands, typed as a newcomer types them --------------------------------------------------------

#: README commands this test does not run, each with the reason; anything else the README shows is run.
NOT_RUN = {
    "make test": "this is the suite make test runs",
    "docker compose up -d": "needs Docker; the OTLP command after it runs against a receiver of this test's own",
}
#: The address the README's Collector (docker compose) listens on: here a gRPC receiver on a free port stands in.
COLLECTOR = "http://127.0.0.1:4317"


def readme_commands() -> list[str]:
    """What the README shows to type: every line of a ```` ```sh ```` block and every ``$ `` line of a
    ```` ```text ```` block (comments cut), and inline `rb-otel ...` commands on the demo's output (``out/``)."""
    commands = []
    for kind, body in re.findall(r"```(sh|text)\n(.*?)```", README, re.S):
        for line in body.splitlines():
            if kind == "text" and not line.startswith("$ "):
                continue
            command = re.sub(r"\s+#.*$", "", line.removeprefix("$ ")).strip()
            if command:
                commands.append(command)
    inline = re.findall(r"`(rb-otel [^`]*\bout/[^`]*)`", README)
    return commands + [c for c in inline if c not in commands]


def _setup_lines(commands: list[str]) -> list[str]:
    return [c for c in commands if c.startswith((". ", "source ")) and "activate" in c]


@pytest.fixture
def collector() -> Iterator[tuple[str, list[str]]]:
    """An OTLP/gRPC receiver (traces and metrics) on 127.0.0.1: its endpoint and the kinds of what it received."""
    from concurrent import futures

    import grpc
    from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2, metrics_service_pb2_grpc
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

    received: list[str] = []

    class Traces(trace_service_pb2_grpc.TraceServiceServicer):
        def Export(self, request: Any, context: Any) -> Any:
            received.append("traces")
            return trace_service_pb2.ExportTraceServiceResponse()

    class Metrics(metrics_service_pb2_grpc.MetricsServiceServicer):
        def Export(self, request: Any, context: Any) -> Any:
            received.append("metrics")
            return metrics_service_pb2.ExportMetricsServiceResponse()

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Traces(), server)
    metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(Metrics(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield f"http://127.0.0.1:{port}", received
    server.stop(grace=None)


def test_the_readme_says_how_rb_otel_gets_on_the_path() -> None:
    commands = readme_commands()
    assert _setup_lines(commands) == [". .venv/bin/activate"], commands
    assert ".venv/bin/rb-otel" in README  # the other way, without activating
    assert (
        commands.index("make demo")
        < commands.index(". .venv/bin/activate")
        < min(i for i, c in enumerate(commands) if c.startswith(("rb-otel", "OTEL_")))
    )


def test_every_command_the_readme_shows_runs_as_typed_after_its_set_up(
    tmp_path: Path, collector: tuple[str, list[str]]
) -> None:
    """In a fresh folder whose ``.venv`` is this suite's virtualenv (what ``make demo`` makes), with a PATH that
    does not hold it: ``make demo``'s own recipe, then each command after the README's set-up line, in bash."""
    if sys.prefix == sys.base_prefix:
        pytest.skip("the tests run outside a virtualenv: there is no .venv/bin/activate to source")
    endpoint, received = collector
    (tmp_path / ".venv").symlink_to(sys.prefix, target_is_directory=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "VIRTUAL_ENV", "RB_OTEL_PILOT"))}
    env.update(PATH="/usr/local/bin:/usr/bin:/bin", HOME=str(tmp_path))
    commands = readme_commands()
    setup = "; ".join(_setup_lines(commands))
    recipe = re.search(r"^demo:.*\n\t(.+)$", (ROOT / "Makefile").read_text(), re.M)
    assert recipe, "the Makefile has no demo recipe"
    runs = {"make demo": recipe[1].replace("$(BIN)/", ".venv/bin/")}  # what `make demo` runs, once .venv is made
    assert COLLECTOR in next(c for c in commands if "OTEL_EXPORTER_OTLP_ENDPOINT" in c)
    for command in commands:
        if command in NOT_RUN or command.startswith("pip install") or command in _setup_lines(commands):
            continue
        runs.setdefault(command, f"{setup}; {command.replace(COLLECTOR, endpoint)}")
    assert len(runs) >= 4, runs  # make demo, the OTLP demo, ab-report, report
    where = subprocess.run(["bash", "-c", f"{setup}; command -v rb-otel"], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert Path(where.stdout.strip()).resolve() == (Path(sys.prefix) / "bin" / "rb-otel").resolve(), where
    for command, script in runs.items():
        done = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=300, check=False)  # fmt: skip
        assert done.returncode == 0, f"README: `{command}` exited {done.returncode}:\n{done.stderr[-2000:]}"
    assert {"traces", "metrics"} <= set(received)  # the OTLP command's runs reached the Collector
    assert (tmp_path / "out" / "report.html").is_file() and (tmp_path / "runs.html").is_file()


def test_every_extra_a_pip_install_line_names_exists() -> None:
    import tomllib

    extras = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])
    named = {e for c in readme_commands() if c.startswith("pip install") for e in re.findall(r"\.\[([\w-]+)\]", c)}
    named |= set(re.findall(r"\[([\w-]+)\] (?:adds|for)", README)) | set(re.findall(r"or \[([\w-]+)\]", README))
    assert named and named <= extras, named - extras
    assert set(NOT_RUN) <= set(readme_commands())  # no reason kept for a command the README no longer shows
