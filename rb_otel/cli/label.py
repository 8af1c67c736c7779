"""``rb-otel label SOURCE --labels FILE``: a labels file's outcomes as outcome events, for the runs of SOURCE.

Each run of SOURCE the labels file gives an outcome becomes one ``gen_ai.evaluation.result`` log event
(docs/telemetry.md, "Outcomes"), parented to the run's ``invoke_agent`` span (read from rb-otel's traces, or the one
``rb-otel replay`` gives another harness's records). They
go to ``--out FILE`` (OTLP/JSON lines, written whole) or to the OTLP endpoint the ``OTEL_*`` variables name; ``train``
and ``evaluate`` then read them where the runs live, beside ``--labels``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from rb_otel.cli.inputs import INPUT, OUTPUT, declare
from rb_otel.cli.output import outputs

__all__ = ["add_label"]


def _label(args: argparse.Namespace) -> int:
    """0 every event delivered; 1 some were not (the lines say how many); 2 bad input or nowhere to send them."""
    from rb_otel.analysis.sources import SourceError
    from rb_otel.importers import RecordError
    from rb_otel.importers.labels import load_labels
    from rb_otel.importers.model import ImportProblem
    from rb_otel.importers.run_contexts import source_run_contexts
    from rb_otel.steering.outcome import RunOutcome
    from rb_otel.telemetry.hub import global_instruments
    from rb_otel.telemetry.otlp_json_logs import event_export
    from rb_otel.telemetry.outcomes import RunContext, emit_outcome

    counted = global_instruments()  # rb.outcomes.recorded, where a meter provider was set up (else a no-op)

    problems: list[ImportProblem] = []
    try:
        labels = load_labels(args.labels)
        runs = source_run_contexts(args.paths, format=args.format, problems=problems)
    except (RecordError, SourceError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for problem in problems:
        print(f"skipped: {problem}", file=sys.stderr)
    labelled = [(run, ok) for run in runs if (ok := labels.outcome_of(run.run_id)) is not None]
    if not labelled:
        shown = ", ".join(map(str, args.paths))
        ours = ", ".join(r.run_id for r in runs[:3]) or "none found"
        print(f"error: {labels.path}: the labels match no run of {shown} (runs look like: {ours}; labels look "
              f"like: {', '.join(list(labels)[:3])})", file=sys.stderr)  # fmt: skip
        return 2
    export = event_export(Path(args.out) if args.out else None)
    if export is None:
        print("error: nowhere to send the events: pass --out FILE, or set OTEL_EXPORTER_OTLP_ENDPOINT", file=sys.stderr)
        return 2
    try:
        for run, succeeded in labelled:
            spans = (int(run.trace_id, 16), int(run.span_id, 16)) if run.trace_id and run.span_id else (0, 0)
            outcome = RunOutcome(run.run_id, "success" if succeeded else "failure")
            if emit_outcome(export.logger, outcome, RunContext(*spans, agent_name=run.agent)):
                counted.outcome_recorded(outcome.outcome, run.agent)
    finally:
        export.shutdown()
    return _summary(args, export, labelled, len(runs))


def _summary(args: argparse.Namespace, export: Any, labelled: list[Any], runs: int) -> int:
    failed = sum(1 for _, ok in labelled if not ok)
    if export.file is not None and export.file.error is not None:
        print(f"error: {export.file.error} ({len(labelled)} events lost)", file=sys.stderr)
        return 2
    counting = export.counting
    if not args.quiet or counting.dropped:
        print(f"{len(labelled)} of {runs} runs labelled ({len(labelled) - failed} success, {failed} failure)")
    if counting.dropped:
        print(f"events -> {export.target}: {counting.exported} of {len(labelled)} delivered, {counting.dropped} "
              "dropped (the exporter failed; is the endpoint up?)", file=sys.stderr)  # fmt: skip
        return 1
    if not args.quiet:
        print(f"events -> {export.target}: {counting.exported} delivered")
    return 0


def add_label(sub: Any, formats: list[str]) -> None:
    """The ``label`` subcommand, on the ``add_subparsers`` object ``sub``."""
    lb = sub.add_parser("label", help="record a labels file's outcomes as outcome events for the runs of SOURCE")
    lb.add_argument(
        "paths", nargs="+", metavar="SOURCE", help="files or folders of runs (rb-otel's traces or any importer "
        "format), or one URL: chdb:///folder, clickhouse://user@host:8123/db"
    )  # fmt: skip
    lb.add_argument(
        "--labels",
        required=True,
        metavar="FILE",
        help="outcomes file (SWE-bench results.json, mini-swe-agent results_summary.json, or {run_id: true|false})",
    )
    lb.add_argument("--out", default=None, metavar="FILE", help="write the events here as OTLP/JSON lines "
                    "(default: the OTLP endpoint of OTEL_EXPORTER_OTLP_ENDPOINT)")  # fmt: skip
    lb.add_argument("--format", default="auto", choices=formats, help="input format (default: detected)")
    lb.add_argument("--quiet", action="store_true", help="print only problems")
    lb.set_defaults(func=_label)
    declare(lb, paths=INPUT, labels=INPUT, out=OUTPUT)
    outputs(lb, lambda args: [Path(args.out)] if args.out else [])
