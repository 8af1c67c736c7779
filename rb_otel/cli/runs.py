"""``rb-otel demo``, ``replay`` and ``evaluate``: scripted agents and imported runs through the real pipeline."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rb_otel.cli.checks import ArgumentProblem, at_least, checks, free_port, seconds
from rb_otel.cli.inputs import INPUT, OUTPUT, OUTPUT_FOLDER, declare
from rb_otel.cli.output import emit_json, json_option, json_path, outputs, write
from rb_otel.cli.progress import Progress
from rb_otel.cli.sources import add_source_options, source_filter

__all__ = ["add_demo", "add_replay_and_evaluate"]


def _demo(args: argparse.Namespace) -> int:
    from rb_otel.demo.runner import DemoOptions, run_demo
    from rb_otel.demo.scenarios import SCENARIOS

    unknown = [s for s in args.scenario if s not in SCENARIOS]
    if unknown:
        print(f"unknown scenario(s): {', '.join(unknown)}; choose from {', '.join(SCENARIOS)}", file=sys.stderr)
        return 2
    from rb_otel.demo.runner import demo_providers

    out = Path(args.out)
    try:
        providers = demo_providers(out, args.prometheus_port)
    except (OSError, ValueError, RuntimeError) as exc:  # the port taken since the check, the extra not installed
        print(f"error: cannot start the demo's exporters: {exc}", file=sys.stderr)
        return 2
    options = DemoOptions(
        out_dir=out,
        scenarios=args.scenario or list(SCENARIOS),
        prometheus_port=args.prometheus_port,
        hold_seconds=args.hold,
        repeat=args.repeat,
        quiet=args.quiet,
        providers=providers,
        experiment_units=args.experiment or 0,
    )
    try:
        run_demo(options)
    finally:
        providers.shutdown()
    return _report_delivery(providers, quiet=args.quiet)


def _check_demo(args: argparse.Namespace) -> None:
    """The demo's numbers and its metrics port, before anything runs (:mod:`rb_otel.cli.checks`)."""
    import os

    from rb_otel.telemetry.setup import DEFAULT_PROMETHEUS_HOST, DEFAULT_PROMETHEUS_PORT

    at_least("--repeat", args.repeat, 1, "the scenarios run at least once")
    if args.experiment is not None:
        at_least("--experiment", args.experiment, 1, "the experiment needs at least one user")
    seconds("--hold", args.hold)
    host = os.environ.get("OTEL_EXPORTER_PROMETHEUS_HOST", DEFAULT_PROMETHEUS_HOST)
    if args.prometheus_port is not None:
        free_port("--prometheus-port", args.prometheus_port, host)
    elif "prometheus" in os.environ.get("OTEL_METRICS_EXPORTER", "").lower():
        name = "OTEL_EXPORTER_PROMETHEUS_PORT"
        raw = os.environ.get(name, "").strip()
        if raw and not raw.isdigit():
            raise ArgumentProblem(f"{name}={raw!r}: a port is a number between 1 and 65535 (0: any free port)")
        free_port(name, int(raw) if raw else DEFAULT_PROMETHEUS_PORT, host)


def _report_delivery(providers: Any, *, quiet: bool = False) -> int:
    """Print what was and was not delivered; 2 when a file could not be written (that alone is said: its spans
    count as dropped too), 1 when spans were dropped (the command's work is not all out), else 0."""
    unwritten = providers.unwritten()
    for line in unwritten:
        print(f"error: {line}", file=sys.stderr)
    if unwritten:
        return 2
    lines, complete = providers.delivery()
    for line in lines:
        if not quiet or not complete:
            print(f"exported {line}", file=sys.stdout if complete else sys.stderr)
    if not complete:
        print("warning: not everything was delivered; the files or the endpoint above say what", file=sys.stderr)
    return 0 if complete else 1


def _replay_files(args: argparse.Namespace) -> list[Path]:
    out = Path(args.out)
    return [out / "replay-traces.jsonl", out / "replay-metrics.jsonl"]


def _replay(args: argparse.Namespace) -> int:
    """Every path replayed into one set of files (written whole when the providers shut down); 2 when a path
    could not be read or held no run (the others are still replayed: nothing read is lost), else 1 when the
    export was not complete."""
    from rb_otel.importers import RecordError, replay
    from rb_otel.telemetry.setup import configure

    missing = [path for path in args.paths if not Path(path).exists()]
    if missing:
        print(f"error: {missing[0]}: no such file or folder", file=sys.stderr)
        return 2
    traces, metrics = _replay_files(args)
    providers = configure(service_name="rb-otel-replay", traces_file=traces, metrics_file=metrics, fresh_files=True)
    failed = replayed = 0
    progress, done = _files_progress(args, "replaying")
    try:
        for path in args.paths:
            try:
                results = replay(
                    path,
                    format=args.format,
                    rescore=args.rescore or args.scorer is not None,
                    scorer=args.scorer,
                    labels=args.labels,
                    tracer_provider=providers.tracer_provider,
                    meter_provider=providers.meter_provider,
                    logger_provider=providers.logger_provider,
                    keep_steps=False,
                    progress=done,
                )
            except (RecordError, OSError) as exc:
                progress.echo(f"error: {exc}", sys.stderr)
                failed += 1
                continue
            if not results:
                progress.echo(f"error: {path}: {_no_runs(path, args.format)}", sys.stderr)
                failed += 1
            replayed += len(results)
            for result in results:
                for line in _describe(result, args.rescore or args.scorer is not None):
                    progress.echo(line)
            for problem in results[0].problems if results else []:
                progress.echo(f"skipped: {problem}", sys.stderr)
    finally:
        progress.close()
        providers.shutdown()
    delivered = _report_delivery(providers) if replayed else 0
    return 2 if failed else delivered


def _no_runs(path: str, format: str) -> str:
    """Why a path gave no run, and what to try."""
    if Path(path).is_dir() and not any(p.is_file() for p in Path(path).iterdir()):
        return "an empty folder, no runs"
    if format == "auto":
        return "no runs found (pass --format if the format detected is not the right one)"
    return f"no runs found (is --format {format} right for it?)"


def _describe(result: Any, rescore: bool, indent: str = "") -> list[str]:
    lines = [
        f"{indent}{result.source:<15} {result.run_id:<40} {result.step_count:>6} steps  {result.outcome:<24} "
        f"trace {result.trace_id}"
    ]
    if rescore:
        where = ", ".join(f"{state} at step {step}" for state, step in result.entered.items())
        lines.append(f"{indent}    rescored: {'would have entered ' + where if where else 'never SLOW or SKIP'}")
    for child in result.children:
        lines += _describe(child, rescore, indent + "  ")
    return lines


def _files_progress(args: argparse.Namespace, name: str) -> tuple[Progress, Callable[[Any, int], None]]:
    """A progress stage over the files ``args.paths`` name (folders expanded; a store's URL: one step), and the
    ``(file, runs so far)`` callback that advances it."""
    from rb_otel.importers.detect import input_files

    progress = Progress(enabled=not args.quiet)
    stored = any("://" in str(p) for p in args.paths)
    progress.stage(name, None if stored else len(input_files(args.paths)), "file")

    def done(_file: Any, runs: int) -> None:
        progress.note(f"{runs:,} runs so far")
        progress.advance()

    return progress, done


def _evaluate(args: argparse.Namespace) -> int:
    if args.online:
        from rb_otel.evaluation.online import online_command

        options = {"format": args.format, "where": source_filter(args), "engine": args.engine}
        return online_command(args.paths, labels=args.labels, out=args.json, seed=args.seed, read_options=options,
                              quiet=args.quiet)  # fmt: skip
    from rb_otel.evaluation import EvaluationError, evaluate
    from rb_otel.importers import RecordError

    progress, done = _files_progress(args, "replaying and scoring")
    try:
        result = evaluate(
            args.paths,
            labels=args.labels,
            scorer=args.scorer or "pilot",
            pilot_model=args.pilot_model,
            format=args.format,
            progress=done,
            where=source_filter(args),
            engine=args.engine,
        )
    except (EvaluationError, RecordError, OSError, ValueError) as exc:
        progress.close()
        print(f"error: {exc}", file=sys.stderr)
        return 2
    progress.close()
    for problem in result.problems:
        print(f"skipped: {problem}", file=sys.stderr)
    if result.unlabelled:
        print(f"skipped: {result.unlabelled} run(s) without an outcome", file=sys.stderr)
    if args.json != "-":
        for line in result.table():
            print(line)
    if args.json is not None:
        emit_json(args.json, result.as_dict())
    if args.html:
        from rb_otel.evaluation.html import render_html

        try:
            page = render_html(result)
        except RuntimeError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        write(Path(args.html), page)
    return 0


def add_demo(sub: Any) -> None:
    from rb_otel.demo.runner import demo_outputs
    from rb_otel.demo.scenarios import SCENARIOS

    demo = sub.add_parser("demo", help="run scripted agents through the real pipeline and export them")
    demo.add_argument("--out", default="out", help="directory for traces.jsonl, metrics.jsonl, report.html")
    demo.add_argument(
        "--scenario",
        action="append",
        default=[],
        choices=list(SCENARIOS),
        help=f"run only this scenario (repeatable): {', '.join(SCENARIOS)}",
    )
    demo.add_argument(
        "--prometheus-port",
        type=int,
        default=None,
        help="serve metrics for a Prometheus scrape on 127.0.0.1:PORT (0: any free port)",
    )
    demo.add_argument("--hold", type=float, default=0.0, help="keep serving metrics this many seconds after")
    demo.add_argument("--repeat", type=int, default=1, help="run the scenarios this many times (1 or more)")
    demo.add_argument("--quiet", action="store_true", help="print nothing")
    demo.add_argument("--experiment", type=int, default=None, metavar="USERS",
                      help="also run an A/B experiment with USERS users (1 or more) and print its report")  # fmt: skip
    demo.set_defaults(func=_demo)
    checks(demo, _check_demo)
    declare(demo, out=OUTPUT_FOLDER)
    outputs(demo, lambda args: demo_outputs(Path(args.out)))


def add_replay_and_evaluate(sub: Any, formats: list[str]) -> None:
    rep = sub.add_parser("replay", help="replay other harnesses' records as rb-otel traces and metrics")
    rep.add_argument("paths", nargs="+", help="files or directories to import")
    rep.add_argument("--format", default="auto", choices=formats, help="input format (default: detected)")
    rep.add_argument("--rescore", action="store_true", help="run the steering pipeline over each trajectory")
    rep.add_argument("--scorer", choices=["heuristic", "pilot"], default=None, help="rescore with this scorer")
    rep.add_argument("--labels", default=None, help="outcomes file (SWE-bench results.json, results_summary.json)")
    rep.add_argument("--out", default="out", help="directory for the OTLP-JSON files (when not exporting OTLP)")
    rep.add_argument("--quiet", action="store_true", help="no progress (a bar on a terminal, plain lines in a log)")
    rep.set_defaults(func=_replay)
    declare(rep, paths=INPUT, labels=INPUT, out=OUTPUT_FOLDER)
    outputs(rep, _replay_files)
    ev = sub.add_parser("evaluate", help="replay labelled runs and measure how well steering flags failures")
    add_source_options(
        ev,
        files="files or directories of runs (any importer format, or OTLP/JSON)",
        engine="how OTLP/JSON files are read: python, or chdb (the embedded engine, the store's SQL)",
    )
    ev.add_argument("--labels", default=None, help="outcomes file, when the runs do not carry their own")
    ev.add_argument("--scorer", choices=["heuristic", "pilot"], default="pilot", help="scorer (default: pilot)")
    ev.add_argument("--pilot-model", default=None, metavar="FILE", help="score with this pilot (rb-otel train's)")
    ev.add_argument("--format", default="auto", choices=formats, help="input format (default: detected)")
    json_option(ev)
    ev.add_argument("--html", default=None, help="write an HTML report with plots (calibration, stopping) here")
    ev.add_argument(
        "--online",
        action="store_true",
        help="replay prequentially: each run scored by the model its "
        "agent had when it started, refitted on train --watch's schedule (--json: one object per run)",
    )
    ev.add_argument(
        "--seed",
        type=int,
        default=None,
        help="with --online: replay each agent's runs in a fixed "
        "shuffled order (for data with no time order; default: file order)",
    )
    ev.add_argument("--quiet", action="store_true", help="no progress (a bar on a terminal, plain lines in a log)")
    ev.set_defaults(func=_evaluate)
    declare(ev, labels=INPUT, pilot_model=INPUT, html=OUTPUT)
    outputs(ev, lambda args: [*json_path(args), *([Path(args.html)] if args.html else [])])
