"""What every ``rb-otel`` command writes: files written whole or not at all, and one ``--json`` option."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from rb_otel.files import write_atomically

__all__ = ["JSON_HELP", "emit_json", "json_option", "write"]

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
