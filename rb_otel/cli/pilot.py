"""The pilot's commands: ``train`` (fit it to an agent's labelled runs) and ``baselines`` (a shared store)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rb_otel.cli.inputs import INPUT, OUTPUT, VALUE, declare
from rb_otel.cli.output import emit_json, json_option, json_path, outputs
from rb_otel.cli.sources import add_source_options, source_filter

__all__ = ["add_baselines", "add_train"]


def _train(args: argparse.Namespace) -> int:
    from rb_otel.analysis import SourceError
    from rb_otel.cli.progress import Progress
    from rb_otel.importers import RecordError
    from rb_otel.training import TrainingError, train

    if args.watch or args.store is not None:
        return _watch(args)
    progress = Progress(enabled=not args.quiet)
    try:
        result = train(
            args.paths,
            labels=args.labels,
            out=args.out,
            max_false_stops=args.max_false_stops,
            force=args.force,
            format=args.format,
            progress=progress,
            held_out_agents=args.held_out_agents,
            where=source_filter(args),
            engine=args.engine,
        )
    except (TrainingError, RecordError, SourceError, OSError) as exc:
        progress.close()
        print(f"error: {exc}", file=sys.stderr)
        return 2
    progress.close()
    if args.json != "-":
        for line in result.report.table():
            print(line)
    if args.json is not None:
        emit_json(args.json, {"report": result.report.as_dict(), "written": str(result.written or "")})
    if result.written is None:
        print(f"not written: {args.out} (the report above says why; --force writes it anyway)", file=sys.stderr)
        return 1
    fsm = result.model.fsm
    forced = "" if result.report.trusted else " (not trusted: written because of --force)"
    held_out = result.report.held_out
    if "skip_quantile" in fsm:
        skip = (f"SKIP when the risk stays above the {fsm['skip_quantile']:.3g} quantile of what the agent's own "
                f"runs sustained for {int(fsm['skip_window'])} steps")  # fmt: skip
    elif result.report.skip_on:
        skip = f"SKIP when the risk stays above {fsm['skip_threshold']:.3f} for {int(fsm['skip_window'])} steps"
    elif held_out is not None:
        skip = f"SKIP off ({held_out.why_skip_off()}); SLOW on"
    else:
        skip = "SKIP off (no threshold kept the false-stop budget on runs it never saw); SLOW on"
    print(f"wrote {result.written}{forced}: {result.model.version}, {skip}", file=sys.stderr)
    return 0


def _watch(args: argparse.Namespace) -> int:
    """``--watch --store URL`` (``--store`` defaults to ``RB_OTEL_STORE``): :func:`rb_otel.training.watch.
    watch_command`."""
    from rb_otel.backends.baselines.environment import STORE_ENV, model_store_problem, store_from_environment

    found = store_from_environment(STORE_ENV) if args.watch and args.store is None else None
    if found is not None:  # the fleet's store, named once for the workers and the watcher
        if (problem := model_store_problem(*found)) is not None:
            print(f"error: {problem}", file=sys.stderr)
            return 2
        args.store = found[1]
    if not (args.watch and args.store):
        print(f"error: --watch and --store go together (train --watch --store URL, or {STORE_ENV}=URL, refits "
              "into that store)", file=sys.stderr)  # fmt: skip
        return 2
    from rb_otel.training.watch import watch_command

    options = {"format": args.format, "where": source_filter(args), "engine": args.engine}
    return watch_command(args.paths, args.store, interval=args.interval, polls=args.polls, labels=args.labels,
                         read_options=options, max_false_stops=args.max_false_stops)  # fmt: skip


def _baselines(args: argparse.Namespace) -> int:
    """List or forget; every message shows the store's URL through ``display_url`` (the password elided), and a
    store that does not exist is an error, never created."""
    from rb_otel.backends.baselines.errors import SummaryStoreError
    from rb_otel.backends.baselines.opening import open_summary_store
    from rb_otel.urls import display_url, scrub

    shown = display_url(args.url)
    try:
        store = open_summary_store(args.url, create=False)
    except SummaryStoreError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        if args.forget is not None:
            if not store.forget(args.forget):
                print(
                    f"error: {shown}: no agent {args.forget!r} (rb-otel baselines {shown} lists them)", file=sys.stderr
                )
                return 2
            print(f"forgot {args.forget} in {shown}")
            return 0
        agents = store.agents()
    except OSError as exc:
        problem = scrub(f"{type(exc).__name__}: {exc}", args.url)
        print(f"error: {shown}: the store did not answer ({problem})", file=sys.stderr)
        return 2
    finally:
        store.close()
    if args.json is not None:
        emit_json(args.json, {"store": shown, "agents": [a.as_dict() for a in agents]})
        return 0
    for line in _baseline_table(shown, agents):
        print(line)
    return 0


def _baseline_table(url: str, agents: Sequence[Any]) -> list[str]:
    import time

    from rb_otel.steering.pilot.baselines import RELATIVE_AFTER

    lines = [f"{url}: {len(agents)} agent(s)"]
    if not agents:
        return lines
    width = max(24, *(len(a.agent) for a in agents))
    lines.append(f"{'agent':<{width}} {'runs':>7} {'kept':>5}  {'newest run (UTC)':<20}  thresholds")
    for a in agents:
        newest = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(a.newest)) if a.newest else "-"
        own = "its own" if a.relative else f"the model's (needs {RELATIVE_AFTER - a.kept} more runs)"
        lines.append(f"{a.agent:<{width}} {a.runs:>7} {a.kept:>5}  {newest:<20}  {own}")
    return lines


def add_train(sub: Any, formats: list[str]) -> None:
    """The ``train`` subcommand, on the ``add_subparsers`` object ``sub``."""
    tr = sub.add_parser("train", help="fit the pilot to your agent's labelled runs; writes a pilot/2 model file")
    add_source_options(
        tr,
        files="files or directories of runs (any importer format, or OTLP/JSON)",
        engine="how OTLP/JSON files are read: python, or chdb (the embedded engine, the store's SQL)",
    )
    tr.add_argument("--labels", default=None, help="outcomes file, when the runs do not carry their own")
    tr.add_argument("--out", default="pilot.json", help="the model file to write (default: pilot.json)")
    tr.add_argument(
        "--max-false-stops",
        type=float,
        default=0.02,
        metavar="SHARE",
        help="SKIP's budget: at most this share of successful runs stopped, as an upper bound on runs the "
        "thresholds never saw (default 0.02)",
    )
    tr.add_argument(
        "--no-held-out-agents",
        dest="held_out_agents",
        action="store_false",
        help="with runs of several agents, skip holding each out in turn (SKIP is then judged on the "
        "cross-fitted folds only)",
    )
    tr.add_argument("--force", action="store_true", help="write the model even when the report does not trust it")
    tr.add_argument("--watch", action="store_true", help="keep polling SOURCE and refit each agent into --store "
                    "whenever its labelled runs have grown by half (from 50): one process per fleet")  # fmt: skip
    tr.add_argument("--store", default=None, metavar="URL", help="with --watch: the baseline store the workers use "
                    "(sqlite:///path.db, redis://host:port/db; default: RB_OTEL_STORE); trusted models are written "
                    "there")  # fmt: skip
    tr.add_argument("--interval", type=float, default=60.0, metavar="SECONDS", help="with --watch: seconds between "
                    "polls (1 to 86400; default 60)")  # fmt: skip
    tr.add_argument("--polls", type=int, default=None, metavar="N", help="with --watch: stop after N polls "
                    "(default: until interrupted)")  # fmt: skip
    tr.add_argument("--format", default="auto", choices=formats, help="input format (default: detected)")
    json_option(tr)
    tr.add_argument("--quiet", action="store_true", help="no progress (a bar on a terminal, plain lines in a log)")
    tr.set_defaults(func=_train)
    declare(tr, labels=INPUT, out=OUTPUT, store=OUTPUT)  # the store --watch writes its models in
    outputs(tr, lambda args: [Path(args.out), *json_path(args)])


def add_baselines(sub: Any) -> None:
    """The ``baselines`` subcommand, on the ``add_subparsers`` object ``sub``."""
    bl = sub.add_parser("baselines", help="the pilot's per-agent baselines in a store: list them, or forget one")
    bl.add_argument("url", help="the store: sqlite:///path.db (or a path), redis://host:port/db")
    json_option(bl)
    bl.add_argument("--forget", default=None, metavar="AGENT", help="drop this agent's baseline (its key, as listed)")
    bl.set_defaults(func=_baselines)
    declare(bl, url=INPUT, forget=VALUE)
    outputs(bl, json_path)
