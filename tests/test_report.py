"""``rb-otel report`` on real OTLP/JSON files: the demo's runs drawn, drilled into, and rendered by Chromium; the
demo's own page is that page, and what Chromium draws of it has values on its axes, no mark over a label and a
legend entry for every mark."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from components import debian_binary

from rb_otel.cli import main
from rb_otel.demo.scenarios import SCENARIOS
from rb_otel.report import ReportRun, ReportStep, load_runs, render_report

#: Chromium's flags for a headless run that touches nothing outside it (a fresh profile is added per run).
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--hide-scrollbars",
]


@pytest.fixture(scope="module")
def demo_traces(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("demo")
    with pytest.MonkeyPatch.context() as patch:
        for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_TRACES_EXPORTER", "OTEL_METRICS_EXPORTER"):
            patch.delenv(name, raising=False)
        patch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
        scenarios = ("struggling", "stalled", "tool-error")
        argv = ["demo", "--out", str(out), "--quiet", *(a for name in scenarios for a in ("--scenario", name))]
        assert main(argv) == 0
    return out / "traces.jsonl"


def test_runs_are_read_back_with_steps_tools_monitors_and_errors(demo_traces: Path) -> None:
    runs, problems = load_runs([demo_traces])
    assert problems == [] and [r.agent for r in runs] == ["demo-struggling", "demo-stalled", "demo-tool-error"]
    struggling, stalled, failing = runs
    assert struggling.outcome == "success" and "SLOW" in struggling.states
    assert stalled.outcome == "failure: gave up" and "SKIP" in stalled.states  # a stalled run is no success
    assert any(step.monitors and all(0 < score <= 1 for _, score in step.monitors) for step in struggling.steps)
    assert all(step.tools for step in struggling.steps[:-1])  # every call but the answer asked for a tool
    assert failing.outcome.startswith("failure") and any(t.error for s in failing.steps for t in s.tools)


def test_a_malformed_line_is_named_and_the_rest_read(demo_traces: Path, tmp_path: Path) -> None:
    lines = demo_traces.read_text().splitlines()
    broken = tmp_path / "broken.jsonl"
    broken.write_text("\n".join([lines[0], "{not json", *lines[1:]]) + "\n")
    runs, problems = load_runs([broken])
    assert len(runs) == 3 and problems == [
        f"{broken}: line 2: not valid JSON (Expecting property name enclosed in double quotes)"
    ]
    assert main(["report", str(tmp_path / "missing.jsonl"), "--out", str(tmp_path / "r.html")]) == 2


def _chromium(tmp_path: Path, *args: str) -> str:
    """Run headless Chromium with a fresh profile; its stdout."""
    chromium = debian_binary("chromium", "chromium")
    profile = tmp_path / f"chromium-profile-{len(list(tmp_path.glob('chromium-profile-*')))}"
    return subprocess.run(
        [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args],
        capture_output=True, text=True, timeout=120, check=True,
    ).stdout  # fmt: skip


def test_the_page_renders_in_chromium(demo_traces: Path, tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    assert main(["report", str(demo_traces), "--out", str(page)]) == 0
    dom = _chromium(tmp_path, "--dump-dom", page.as_uri())
    assert dom.count('role="img"') == 6  # a timeline and a chart per run
    assert "routed to strong-1" in dom and "monitors fired: " in dom and 'class="err">ConnectionError' in dom
    assert "guidance: " in dom and "seconds since the run started" in dom and "tool call" in dom  # legend, axes
    shot = tmp_path / "report.png"
    _chromium(tmp_path, "--window-size=1100,1400", f"--screenshot={shot}", page.as_uri())
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000


def test_the_demo_writes_the_report_page(demo_traces: Path) -> None:
    # the page `make demo` writes is the page `rb-otel report` draws of the same runs (plus what each scenario is)
    runs, _ = load_runs([demo_traces])
    descriptions = {run.run_id: SCENARIOS[run.agent.removeprefix("demo-")]().description for run in runs}
    expected = render_report(runs, title="rb-otel demo", descriptions=descriptions)
    assert (demo_traces.parent / "report.html").read_text(encoding="utf-8") == expected


#: Measures the page as Chromium laid it out, and writes what it found into the DOM (``#rb-check``, JSON): every
#: chart's labels crossed by a mark or the score line, the fill of every mark, the legend's fills, and per chart
#: the numeric labels left of its marks (the y axis) and under them (the x axis).
_MEASURE = """
<script>
(() => {
  const box = (e) => { const b = e.getBBox(); return {x0: b.x, y0: b.y, x1: b.x + b.width, y1: b.y + b.height}; };
  const meets = (a, b) => a.x0 < b.x1 && b.x0 < a.x1 && a.y0 < b.y1 && b.y0 < a.y1;
  const found = {crossed: [], fills: [], legend: [], charts: []};
  document.querySelectorAll('.legend svg [fill]').forEach((e) => found.legend.push(e.getAttribute('fill')));
  document.querySelectorAll('svg[role=img]').forEach((chart) => {
    const labels = [...chart.querySelectorAll('text')].map((t) => ({text: t.textContent, box: box(t)}));
    const marks = [...chart.querySelectorAll('circle, rect, path')];
    marks.forEach((m) => {
      found.fills.push(m.getAttribute('fill'));
      labels.filter((l) => meets(box(m), l.box)).forEach((l) => found.crossed.push([m.outerHTML, l.text]));
    });
    chart.querySelectorAll('polyline').forEach((line) => {
      const points = line.getAttribute('points').trim().split(/\\s+/).map((p) => p.split(',').map(Number));
      for (let i = 1; i < points.length; i++) {
        const [[ax, ay], [bx, by]] = [points[i - 1], points[i]];
        for (let k = 0; k <= 100; k++) {
          const [x, y] = [ax + (bx - ax) * k / 100, ay + (by - ay) * k / 100];
          labels.filter((l) => meets({x0: x, y0: y, x1: x + 0.5, y1: y + 0.5}, l.box))
            .forEach((l) => found.crossed.push(['the score line', l.text]));
        }
      }
    });
    const left = Math.min(...marks.map((m) => box(m).x0));
    const bottom = Math.max(...marks.map((m) => box(m).y1));
    const numbers = labels.filter((l) => /^[0-9.]+$/.test(l.text));
    found.charts.push({
      name: chart.getAttribute('aria-label'),
      y: numbers.filter((l) => l.box.x1 <= left).map((l) => l.text),
      x: numbers.filter((l) => l.box.y0 >= bottom).map((l) => l.text),
    });
  });
  const out = document.createElement('pre');
  out.id = 'rb-check';
  out.textContent = JSON.stringify(found);
  document.body.appendChild(out);
})();
</script>
"""


def test_the_demo_page_as_chromium_draws_it(demo_traces: Path, tmp_path: Path) -> None:
    page = tmp_path / "measured.html"
    page.write_text((demo_traces.parent / "report.html").read_text().replace("</body>", _MEASURE + "</body>"))
    dom = _chromium(tmp_path, "--window-size=1100,1400", "--dump-dom", page.as_uri())
    found = json.loads(re.search(r'<pre id="rb-check">(.*?)</pre>', dom, re.S).group(1).replace("&quot;", '"'))
    assert found["crossed"] == []  # no mark, and not the score line, over any label
    assert set(found["fills"]) <= set(found["legend"]), set(found["fills"]) - set(found["legend"])
    assert len(set(found["fills"])) >= 9  # states, tools, an error, monitors, guidance, routing: all were drawn
    charts = found["charts"]
    scores = [c for c in charts if c["name"].startswith("score")]
    timelines = [c for c in charts if c["name"].startswith("timeline")]
    assert len(scores) == len(timelines) == 3
    assert all(c["y"] == ["0", "0.25", "0.5", "0.75", "1"] for c in scores), scores  # values on the score axis
    assert all(len(c["x"]) >= 3 for c in scores + timelines), charts  # steps, and seconds, under the marks
    legend = dom.split('<div class="legend">', 1)[1].split("</p>", 1)[0]
    shown = {code.strip() for text in re.findall(r"guidance injected: ([^<(]+)", dom) for code in text.split(",")}
    assert shown and all(code in legend for code in shown), shown  # every guidance source is explained


def test_the_readme_image_is_made_from_the_demo_page(tmp_path: Path) -> None:
    # `make readme-image` (as the README's picture is made), written here instead of docs/images
    root = Path(__file__).resolve().parents[1]
    chromium = debian_binary("chromium", "chromium")
    stamp = ".venv/.rb-otel-installed"  # -o: the package is installed; make must not reinstall it
    done = subprocess.run(
        ["make", "--no-print-directory", "-o", stamp, "readme-image", f"IMAGES={tmp_path}",
         f"PAGE_DIR={tmp_path / 'page'}", f"CHROMIUM={chromium}"],
        check=False, cwd=root, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    for name in ("demo-report.png", "run-report.png"):
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and (tmp_path / name).stat().st_size > 50_000
    page = (tmp_path / "page" / "report.html").read_text()
    assert "demo-struggling" in page and "demo-stalled" in page and "failure: gave up" in page
    readme = (root / "README.md").read_text()
    assert "](docs/images/demo-report.png)" in readme and "make readme-image" in readme


def _step_tokens(steplogs: Path) -> dict[str, list[int]]:
    """Each run's tokens per step, as the demo's step logs (and its console table) have them, by agent."""
    runs: dict[str, list[int]] = {}
    agent = ""
    for line in steplogs.read_text().splitlines():
        record = json.loads(line)
        if "agent_name" in record:
            agent = record["agent_name"]
            runs[agent] = []
        else:
            runs[agent].append(int(record["tokens"]))
    return runs


def test_the_page_shows_tokens_per_step_per_run_and_in_all(demo_traces: Path, tmp_path: Path) -> None:
    """The page's tokens are the numbers the other views give: each step's as the demo's table and step log have
    it, each run's (in its header) as ``report --summary`` counts it, and the page's sum of them."""
    page = tmp_path / "tokens.html"
    summary = tmp_path / "summary.json"
    assert main(["report", str(demo_traces), "--out", str(page)]) == 0
    assert main(["report", str(demo_traces), "--summary", "--json", str(summary)]) == 0
    per_run = {row["agent"]: row["tokens_per_run"] for row in json.loads(summary.read_text())["runs"]}
    per_step = _step_tokens(demo_traces.parent / "steplogs.jsonl")
    assert set(per_run) == set(per_step) and all(per_run.values())  # one run per demo agent, each with usage
    text = page.read_text()
    sections = text.split("<h2>")[1:]
    assert len(sections) == len(per_run)
    for section in sections:
        agent = section.split(" <small", 1)[0]
        header = re.search(r'<p class="meta">(.*?)</p>', section)
        assert header is not None and f" · {int(per_run[agent]):,} tokens · " in header.group(1), header
        shown = [int(n.replace(",", "")) for n in re.findall(r"<summary>step \d+ · .*? · ([\d,]+) tokens", section)]
        assert shown == per_step[agent], agent
    assert f"<p>{len(per_run)} runs, {int(sum(per_run.values())):,} tokens.</p>" in text


def test_a_run_whose_calls_reported_no_usage_shows_unknown_not_0() -> None:
    step = ReportStep(index=0, start=0.0, end=1.0, state="NORMAL", difficulty=0.5, model="m", routed_model="")
    run = ReportRun(run_id="r1", agent="quiet", outcome="success", start=0.0, end=1.0, trace_id="t",
                    steps=[step], attributes={"rb.usage.unreported": 1})  # fmt: skip
    text = render_report([run])
    header = re.search(r'<p class="meta">(.*?)</p>', text)
    assert header is not None and " · tokens not reported · " in header.group(1)
    assert "<summary>step 0 · NORMAL · 0.500 · 1000 ms · tokens not reported</summary>" in text
    assert "<p>1 runs, 0 tokens (1 run(s) reported no usage).</p>" in text
