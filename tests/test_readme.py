"""The README's first example runs as pasted and prints what the README says it prints; its links resolve."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

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
