"""``rb-otel report`` and ``ab-report``: pages and an experiment's answer from OTLP/JSON trace files."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from rb_otel.cli.output import emit_json, json_option, write

__all__ = ["add_reports"]


def _report(args: argparse.Namespace) -> int:
    from rb_otel.report import load_runs, render_report

    runs, problems = load_runs(args.paths)
    for problem in problems:
        print(f"skipped: {problem}", file=sys.stderr)
    if not runs:
        print(f"error: no runs (invoke_agent spans) in {', '.join(args.paths)}", file=sys.stderr)
        return 2
    write(Path(args.out), render_report(runs))
    return 0


def _ab_report(args: argparse.Namespace) -> int:
    from rb_otel.ab.experiment_report import report
    from rb_otel.ab.prices import load_prices
    from rb_otel.ab.table import format_report

    try:
        prices = load_prices(args.prices) if args.prices else None
        result = report(args.paths, args.experiment, on_fraction=args.on_fraction, prices=prices)
    except ValueError as exc:  # no such experiment, a bad price file, a bad on-fraction: one line
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for problem in result["problems"]:
        print(f"skipped {problem}", file=sys.stderr)
    if args.json is None or args.json != "-":
        print(format_report(result))
    if args.json is not None:
        emit_json(args.json, result)
    return 0


def add_reports(sub: Any) -> None:
    rp = sub.add_parser("report", help="an HTML page for the runs in OTLP/JSON trace files")
    rp.add_argument("paths", nargs="+", help="OTLP/JSON lines files (the Collector file exporter's, the demo's)")
    rp.add_argument("--out", default="report.html", help="where to write the page (default: report.html)")
    rp.set_defaults(func=_report)
    ab = sub.add_parser("ab-report", help="an A/B experiment's report from OTLP/JSON trace files")
    ab.add_argument("paths", nargs="+", help="OTLP/JSON lines files the experiment's runs were exported to")
    ab.add_argument("--experiment", required=True, help="the experiment id (rb.experiment.id)")
    ab.add_argument("--on-fraction", type=float, default=None,
                    help="the assignment's on fraction (default: the one the runs recorded)")  # fmt: skip
    ab.add_argument("--prices", default=None, help="JSON: model -> {input, output, cache_read} USD per 1M tokens")
    json_option(ab)
    ab.set_defaults(func=_ab_report)
