"""``rb-otel report`` and ``ab-report``: pages and an experiment's answer from OTLP/JSON trace files."""

from __future__ import annotations

import argparse
import datetime
import sys
from pathlib import Path
from typing import Any

from rb_otel.cli.output import emit_json, json_option, write

__all__ = ["add_reports"]


def _moment(text: str) -> datetime.datetime:
    """``--since``/``--until``: an ISO date or date and time, UTC unless it says otherwise."""
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        message = f"not an ISO date or time: {text!r} (e.g. 2026-12-01 or 2026-12-01T08:00)"
        raise argparse.ArgumentTypeError(message) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=datetime.UTC)


def _summary(args: argparse.Namespace) -> int:
    """The fleet summary, computed where the runs are (docs/fleet-analysis.md)."""
    from rb_otel.analysis import FleetFilter, SourceError, format_summary, open_source

    where = FleetFilter(since=args.since, until=args.until, agent=args.agent, service=args.service)
    try:
        source = open_source(args.paths, engine=args.engine)
        try:
            rows = source.fleet_summary(where)
            plan = source.explain(where) if args.explain and hasattr(source, "explain") else None
        finally:
            source.close()
    except SourceError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if plan is not None:
        print(plan, file=sys.stderr)
    if args.json != "-":
        print("\n".join(format_summary(rows)))
    if args.json is not None:
        emit_json(args.json, {"source": source.shown, "runs": [r.as_dict() for r in rows]})
    return 0


def _report(args: argparse.Namespace) -> int:
    from rb_otel.report import load_runs, render_report

    if args.summary or args.engine != "python" or any("://" in p for p in args.paths):
        return _summary(args)
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
    rp = sub.add_parser("report", help="an HTML page for the runs in OTLP/JSON trace files, or the fleet summary "
                        "(--summary) of files, a chdb folder or a ClickHouse server")  # fmt: skip
    rp.add_argument("paths", nargs="+", metavar="SOURCE",
                    help="OTLP/JSON lines files (the Collector file exporter's, the demo's), or one URL: "
                    "clickhouse://user@host:8123/db?table=otel_traces, clickhouses://..., chdb:///folder")  # fmt: skip
    rp.add_argument("--out", default="report.html", help="where to write the page (default: report.html)")
    rp.add_argument(
        "--summary",
        action="store_true",
        help="the fleet summary by agent and day instead of the page (always, for a URL): SKIP rate, outcomes, "
        "steps and tokens per run, steps and time per FSM state",
    )
    from rb_otel.analysis.sources import ENGINES

    rp.add_argument(
        "--engine",
        default="python",
        choices=ENGINES,
        help="how files are read for the summary: python, or chdb (the embedded engine, the store's SQL)",
    )
    rp.add_argument("--since", type=_moment, default=None, help="runs starting at or after (ISO date/time, UTC)")
    rp.add_argument("--until", type=_moment, default=None, help="runs starting before (ISO date/time, UTC)")
    rp.add_argument("--agent", default=None, help="only this agent (gen_ai.agent.name)")
    rp.add_argument("--service", default=None, help="only this service (service.name)")
    rp.add_argument("--explain", action="store_true", help="print the store's plan of the query (where the "
                    "filters apply) to standard error")  # fmt: skip
    json_option(rp)
    rp.set_defaults(func=_report)
    ab = sub.add_parser("ab-report", help="an A/B experiment's report from OTLP/JSON trace files")
    ab.add_argument("paths", nargs="+", help="OTLP/JSON lines files the experiment's runs were exported to")
    ab.add_argument("--experiment", required=True, help="the experiment id (rb.experiment.id)")
    ab.add_argument("--on-fraction", type=float, default=None,
                    help="the assignment's on fraction (default: the one the runs recorded)")  # fmt: skip
    ab.add_argument("--prices", default=None, help="JSON: model -> {input, output, cache_read} USD per 1M tokens")
    json_option(ab)
    ab.set_defaults(func=_ab_report)
