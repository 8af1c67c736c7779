"""``rb-otel report`` and ``ab-report``: a page, the fleet summary and an experiment's answer, from any source."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from rb_otel.cli.inputs import INPUT, OUTPUT, VALUE, declare
from rb_otel.cli.output import emit_json, json_option, json_path, outputs, write
from rb_otel.cli.sources import add_source_options, source_filter

__all__ = ["add_reports"]


def _summary(args: argparse.Namespace) -> int:
    """The fleet summary, computed where the runs are (docs/fleet-analysis.md)."""
    from rb_otel.analysis import SourceError, format_summary, open_source

    where = source_filter(args)
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
    if source.skipped:
        print(source.skipped, file=sys.stderr)
    if not rows:  # as the page says: nothing to summarise is an error, not an empty success
        print(f"error: no runs (invoke_agent spans) in {source.shown}{_under(args)}", file=sys.stderr)
        return 2
    if args.json != "-":
        print("\n".join(format_summary(rows)))
    if args.json is not None:
        emit_json(args.json, {"source": source.shown, "runs": [r.as_dict() for r in rows]})
    return 0


def _under(args: argparse.Namespace) -> str:
    """`` under the filters given`` when some were given."""
    given = any(getattr(args, name) is not None for name in ("since", "until", "agent", "service"))
    return " under the filters given" if given else ""


def _summarises(args: argparse.Namespace) -> bool:
    """Whether ``report`` prints the summary (asked for, or the default for a store) rather than the page."""
    store = args.engine != "python" or any("://" in p for p in args.paths)
    return bool(args.summary or (store and not args.page))


def _report(args: argparse.Namespace) -> int:
    from rb_otel.analysis import SourceError, open_source
    from rb_otel.report import render_report

    if _summarises(args):
        return _summary(args)
    # the page: every run under the filters with its steps, read as evaluate and train read them
    try:
        source = open_source(args.paths, engine=args.engine)
        try:
            runs, problems = source.runs(source_filter(args))
        finally:
            source.close()
    except SourceError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if source.skipped:
        print(source.skipped, file=sys.stderr)
    for problem in problems:
        print(f"skipped: {problem}", file=sys.stderr)
    if not runs:
        print(f"error: no runs (invoke_agent spans) in {source.shown}{_under(args)}", file=sys.stderr)
        return 2
    write(Path(args.out), render_report(runs))
    return 0


def _ab_report(args: argparse.Namespace) -> int:
    from rb_otel.ab.prices import load_prices
    from rb_otel.ab.table import format_report
    from rb_otel.analysis import open_source

    # no such experiment, a bad price file, a bad on-fraction, a source that cannot be read: one line
    try:
        prices = load_prices(args.prices) if args.prices else None
        source = open_source(args.paths, engine=args.engine)
        if source.skipped:
            print(source.skipped, file=sys.stderr)
        try:
            where = source_filter(args)
            result = source.experiment_report(args.experiment, where, on_fraction=args.on_fraction, prices=prices)
            if args.explain and hasattr(source, "explain"):
                print(source.explain(where, experiment=args.experiment), file=sys.stderr)
        finally:
            source.close()
    except ValueError as exc:
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
    add_source_options(
        rp,
        files="OTLP/JSON lines files or folders of them (the Collector file exporter's, the demo's out/; other "
        "harnesses' records: rb-otel replay turns them into these)",
        engine="how files are read for the summary: python, or chdb (the embedded engine, the store's SQL)",
    )
    rp.add_argument("--out", default="report.html", help="where to write the page (default: report.html)")
    rp.add_argument(
        "--summary",
        action="store_true",
        help="the fleet summary by agent and day instead of the page (the default for a URL): SKIP rate, outcomes, "
        "steps and tokens per run, steps and time per FSM state",
    )
    rp.add_argument("--page", action="store_true", help="the HTML page for a chdb folder, a ClickHouse server or "
                    "--engine chdb too (the default for files): every run under the filters, with its "
                    "steps")  # fmt: skip
    rp.add_argument("--explain", action="store_true", help="print the store's plan of the query (where the "
                    "filters apply) to standard error")  # fmt: skip
    json_option(rp)
    rp.set_defaults(func=_report)
    declare(rp, out=OUTPUT)
    outputs(rp, lambda args: json_path(args) if _summarises(args) else [Path(args.out)])
    ab = sub.add_parser("ab-report", help="an A/B experiment's report from trace files, a chdb folder or a "
                        "ClickHouse server (computed in the store)")  # fmt: skip
    add_source_options(
        ab,
        files="OTLP/JSON lines files or folders of them, where the experiment's runs were exported",
        engine="how files are read: python, or chdb (the embedded engine, the store's SQL)",
    )
    ab.add_argument("--experiment", required=True, help="the experiment id (rb.experiment.id)")
    ab.add_argument("--on-fraction", type=float, default=None,
                    help="the assignment's on fraction (default: the one the runs recorded)")  # fmt: skip
    ab.add_argument("--prices", default=None, help="JSON: model -> {input, output, cache_read} USD per 1M tokens")
    ab.add_argument("--explain", action="store_true", help="print the store's plan of the experiment's query "
                    "(where the filters apply) to standard error")  # fmt: skip
    json_option(ab)
    ab.set_defaults(func=_ab_report)
    declare(ab, experiment=VALUE, prices=INPUT)
    outputs(ab, json_path)
