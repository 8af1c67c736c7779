"""What every ``rb-otel`` command writes: files written whole or not at all, and one ``--json`` option."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

__all__ = ["JSON_HELP", "emit_json", "json_option", "write"]

JSON_HELP = "also write the report as JSON to PATH (- or no PATH: only the JSON, to standard output)"


def write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file beside it (whole or not at all) and say so."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
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
