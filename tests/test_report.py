"""``rb-otel report`` on real OTLP/JSON files: the demo's runs drawn, drilled into, and rendered by Chromium."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from components import debian_binary

from rb_otel.cli import main
from rb_otel.report import load_runs


@pytest.fixture(scope="module")
def demo_traces(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("demo")
    with pytest.MonkeyPatch.context() as patch:
        for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_TRACES_EXPORTER", "OTEL_METRICS_EXPORTER"):
            patch.delenv(name, raising=False)
        patch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
        argv = ["demo", "--out", str(out), "--quiet", "--scenario", "struggling", "--scenario", "tool-error"]
        assert main(argv) == 0
    return out / "traces.jsonl"


def test_runs_are_read_back_with_steps_tools_monitors_and_errors(demo_traces: Path) -> None:
    runs, problems = load_runs([demo_traces])
    assert problems == [] and [r.agent for r in runs] == ["demo-struggling", "demo-tool-error"]
    struggling, failing = runs
    assert struggling.outcome == "success" and "SLOW" in struggling.states
    assert any(step.monitors and all(0 < score <= 1 for _, score in step.monitors) for step in struggling.steps)
    assert all(step.tools for step in struggling.steps[:-1])  # every call but the answer asked for a tool
    assert failing.outcome.startswith("failure") and any(t.error for s in failing.steps for t in s.tools)


def test_a_malformed_line_is_named_and_the_rest_read(demo_traces: Path, tmp_path: Path) -> None:
    lines = demo_traces.read_text().splitlines()
    broken = tmp_path / "broken.jsonl"
    broken.write_text("\n".join([lines[0], "{not json", *lines[1:]]) + "\n")
    runs, problems = load_runs([broken])
    assert len(runs) == 2 and problems == [
        f"{broken}: line 2: not valid JSON (Expecting property name enclosed in double quotes)"
    ]
    assert main(["report", str(tmp_path / "missing.jsonl"), "--out", str(tmp_path / "r.html")]) == 2


def test_the_page_renders_in_chromium(demo_traces: Path, tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    assert main(["report", str(demo_traces), "--out", str(page)]) == 0
    chromium = debian_binary("chromium", "chromium")
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"]
    dom = subprocess.run(
        [chromium, *flags, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120, check=True
    ).stdout
    assert dom.count("<svg") == 4  # a timeline and a chart per run
    assert "routed to strong-1" in dom and "monitors fired: " in dom and 'class="err">ConnectionError' in dom
    assert "guidance: " in dom and "seconds since the run started" in dom and "tool call" in dom  # legend, axes
    shot = tmp_path / "report.png"
    subprocess.run(
        [chromium, *flags, "--window-size=1100,1400", f"--screenshot={shot}", page.as_uri()],
        capture_output=True, timeout=120, check=True,
    )  # fmt: skip
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000
