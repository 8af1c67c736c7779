"""What every ``rb-otel`` command writes: files written whole or not at all, checked before the work starts, and one
``--json`` option.

A command declares the files it may write (``outputs``, a function of its arguments, set as a parser default) and
the role of each argument (:mod:`rb_otel.cli.inputs`); :func:`rb_otel.cli.main.main` checks, before the command
runs, that no output is one of its inputs and that each can be written, and turns
:class:`~rb_otel.files.OutputError`, wherever it is raised, into one line and exit 2. So no command does its work
and then fails to save it, none writes over what it reads, and none leaves a traceback, a half-written file or a
truncated old one.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from rb_otel.cli.inputs import OUTPUT, check_not_inputs, declare, output_paths
from rb_otel.files import check_writable, write_atomically

__all__ = ["JSON_HELP", "check_outputs", "emit_json", "json_option", "json_path", "outputs", "write"]

JSON_HELP = "also write the report as JSON to PATH (- or no PATH: only the JSON, to standard output)"


def write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` whole or not at all (:func:`~rb_otel.files.write_atomically`) and say so."""
    write_atomically(path, text)
    print(f"wrote {path}")


def emit_json(where: str, data: Any) -> None:
    """``--json PATH`` writes the file (whole or not at all); ``--json -`` (or a bare ``--json``) prints it."""
    text = json.dumps(data, indent=1)
    if where == "-":
        print(text)
    else:
        write(Path(where), text)


def json_option(parser: argparse.ArgumentParser) -> None:
    """``--json PATH`` (a file, written whole or not at all), ``--json -`` or a bare ``--json`` (stdout): one
    meaning in every command."""
    parser.add_argument("--json", nargs="?", const="-", default=None, metavar="PATH", help=JSON_HELP)
    declare(parser, json=OUTPUT)


def json_path(args: argparse.Namespace) -> list[Path]:
    """The ``--json`` file, when the command writes one (not standard output)."""
    return [Path(args.json)] if args.json not in (None, "-") else []


def outputs(parser: argparse.ArgumentParser, files: Callable[[argparse.Namespace], Iterable[Path]]) -> None:
    """Declare the files a command may write: ``files(args)``, checked before it runs."""
    parser.set_defaults(outputs=files)


def check_outputs(args: argparse.Namespace) -> None:
    """Raise :class:`~rb_otel.files.OutputError` for the first output that is one of the command's inputs (the
    files it declared, and every file an output argument names, written in this mode or not), then for the first
    file it declared that cannot be written."""
    declared: Callable[[argparse.Namespace], Iterable[Path]] | None = getattr(args, "outputs", None)
    written = list(declared(args)) if declared is not None else []
    check_not_inputs(args, [*written, *output_paths(args)])
    for path in written:
        check_writable(path, probe=True)
