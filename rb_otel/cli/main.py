"""The ``rb-otel`` command's entry point: the parser of every command group, rb-otel's logging, ``main``."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence

from rb_otel.cli.checks import ArgumentProblem, check_arguments
from rb_otel.cli.label import add_label
from rb_otel.cli.output import check_outputs
from rb_otel.cli.pilot import add_baselines, add_train
from rb_otel.cli.reports import add_reports
from rb_otel.cli.runs import add_demo, add_replay_and_evaluate
from rb_otel.files import OutputError

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    from rb_otel._version import __version__
    from rb_otel.importers.detect import FORMATS

    parser = argparse.ArgumentParser(prog="rb-otel", description="ReasonBlocks-style steering, as OpenTelemetry.")
    parser.add_argument("--version", action="version", version=f"rb-otel {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log rb-otel's own warnings and debug output")
    sub = parser.add_subparsers(dest="command", required=True)
    formats = ["auto", *FORMATS]
    add_demo(sub)
    add_replay_and_evaluate(sub, formats)
    add_train(sub, formats)
    add_reports(sub)
    add_baselines(sub)
    add_label(sub, formats)
    for command in sub.choices.values():
        command.set_defaults(command_parser=command)  # an unknown flag is answered with the command's own usage
    return parser


def _configure_logging(verbose: bool) -> None:
    """rb-otel's loggers to standard error: errors, and with ``-v`` warnings and debug output too. Only rb-otel's
    loggers: the root logger and other libraries' are left as they are, and a process that configured logging
    itself (an application calling :func:`main`) keeps its handlers."""
    logger = logging.getLogger("rb_otel")
    if verbose:
        logger.setLevel(logging.DEBUG)
    if logging.getLogger().handlers or logger.handlers:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    logger.addHandler(handler)
    if not verbose:
        logger.setLevel(logging.ERROR)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; its exit status: 0 done, 1 done but not all of it delivered (or not trusted: ``train``),
    2 bad input or an output it cannot write (one line on standard error, never a traceback), 130 interrupted."""
    args, unknown = build_parser().parse_known_args(argv)
    if unknown:
        args.command_parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    _configure_logging(args.verbose)
    try:
        check_arguments(args)  # before any work, and before the outputs: a bad flag touches no file
        check_outputs(args)  # before any work: nothing is done that cannot be saved, nor over an input
        code: int = args.func(args)
    except (ArgumentProblem, OutputError) as exc:  # from the checks, or a write that failed all the same
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C, also while waiting on an export: a line, not a traceback
        print("interrupted; what was not exported yet is lost", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `rb-otel evaluate ... | head`: the reader left; nothing more to say, and no traceback
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # Python's flush at exit would raise again
        return 141
    return code
