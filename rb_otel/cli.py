"""The ``rb-otel`` command: ``demo`` (and ``replay`` for imported runs)."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

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
