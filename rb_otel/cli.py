"""The ``rb-otel`` command: ``demo`` (and ``replay`` for imported runs)."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["main"]


def _demo(args: argparse.Namespace) -> int:
    from rb_otel.demo.runner import DemoOptions, run_demo
    from rb_otel.demo.scenarios import SCENARIOS

    unknown = [s for s in args.scenario if s not in SCENARIOS]
    if unknown:
        print(f"unknown scenario(s): {', '.join(unknown)}; choose from {', '.join(SCENARIOS)}", file=sys.stderr)
        return 2
    options = DemoOptions(
        out_dir=Path(args.out),
        scenarios=args.scenario or list(SCENARIOS),
        prometheus_port=args.prometheus_port,
        hold_seconds=args.hold,
        repeat=args.repeat,
        quiet=args.quiet,
    )
    run_demo(options)
    return 0


def _replay(args: argparse.Namespace) -> int:
    from rb_otel.importers import RecordError, replay
    from rb_otel.telemetry.setup import configure

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    providers = configure(
        service_name="rb-otel-replay",
        traces_file=out / "replay-traces.jsonl",
        metrics_file=out / "replay-metrics.jsonl",
    )
    failed = 0
    try:
        for path in args.paths:
            try:
                results = replay(
                    path,
                    format=args.format,
                    rescore=args.rescore,
                    tracer_provider=providers.tracer_provider,
                    meter_provider=providers.meter_provider,
                    keep_steps=False,
                )
            except (RecordError, OSError) as exc:
                print(f"error: {exc}", file=sys.stderr)
                failed += 1
                continue
            for result in results:
                for line in _describe(result, args.rescore):
                    print(line)
            for problem in results[0].problems if results else []:
                print(f"skipped: {problem}", file=sys.stderr)
    finally:
        providers.shutdown()
    for line in providers.descriptions:
        print(f"exported {line}")
    return 1 if failed else 0


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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rb-otel", description="ReasonBlocks-style steering, as OpenTelemetry.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log rb_otel warnings and debug output")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run scripted agents through the real pipeline and export them")
    demo.add_argument("--out", default="out", help="directory for traces.jsonl, metrics.jsonl, report.html")
    demo.add_argument("--scenario", action="append", default=[], help="run only this scenario (repeatable)")
    demo.add_argument(
        "--prometheus-port",
        type=int,
        default=None,
        help="serve metrics for a Prometheus scrape on 127.0.0.1:PORT (0: any free port)",
    )
    demo.add_argument("--hold", type=float, default=0.0, help="keep serving metrics this many seconds after")
    demo.add_argument("--repeat", type=int, default=1, help="run the scenarios this many times")
    demo.add_argument("--quiet", action="store_true", help="print nothing")
    demo.set_defaults(func=_demo)
    rep = sub.add_parser("replay", help="replay other harnesses' records as rb-otel traces and metrics")
    rep.add_argument("paths", nargs="+", help="files to import")
    rep.add_argument(
        "--format", default="auto", help="auto, steplog, io_harness, agy, swe_agent, openhands, openai_messages"
    )
    rep.add_argument("--rescore", action="store_true", help="run the steering pipeline over each trajectory")
    rep.add_argument("--out", default="out", help="directory for the OTLP-JSON files (when not exporting OTLP)")
    rep.set_defaults(func=_replay)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.ERROR, format="%(levelname)s %(name)s: %(message)s"
    )
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
