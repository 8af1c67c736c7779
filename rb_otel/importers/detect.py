"""``--format auto``: tell a file's format from its name and its first bytes (never the whole file)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rb_otel.importers.model import RecordError

__all__ = ["FORMATS", "detect", "directory_files", "input_files", "no_runs"]

FORMATS = (
    "steplog",
    "io_harness",
    "agy",
    "swe_agent",
    "openhands",
    "openai_messages",
    "tau_bench",
    "tau2_bench",
    "mini_swe_agent",
    "otlp_json",
)
_SNIFF_BYTES = 1 << 20


def _document(obj: Any) -> str | None:
    """The format of a whole JSON document."""
    if isinstance(obj, list):
        if not obj or not isinstance(obj[0], dict):
            return None
        if "traj" in obj[0] and "reward" in obj[0]:
            return "tau_bench"  # a results list; one element alone is an openai_messages run
        return _line(obj[0])
    if not isinstance(obj, dict):
        return None
    if obj.get("trajectory_format") == "mini-swe-agent-1":
        return "mini_swe_agent"
    if isinstance(obj.get("simulations"), list):
        return "tau2_bench"
    if "trajectory" in obj:
        return "swe_agent"
    if "history" in obj:
        return "openhands"
    if "traj" in obj or "messages" in obj:
        return "openai_messages"
    if isinstance(obj.get("steps"), list):
        return "steplog"
    return _line(obj)


def _line(obj: dict[str, Any]) -> str | None:
    """The format of one record (a JSONL line or a list element)."""
    if isinstance(obj.get("resourceSpans"), list):
        return "otlp_json"
    if "fsm_state" in obj or "thought_preview" in obj or ("run_id" in obj and "step" not in obj):
        return "steplog"
    if "role" in obj:
        return "openai_messages"
    if "source" in obj and "timestamp" in obj and ("action" in obj or "observation" in obj):
        return "openhands"
    if {"type", "cascade_id", "trajectory_id", "step_index", "content_delta"} & obj.keys() or set(obj) == {"id"}:
        return "agy"
    return None


def detect(path: Path) -> str:
    """The format of ``path``; raises :class:`RecordError` when it cannot tell: a binary file, JSON that does not
    parse (the JSON error named: a truncated file, say), or records of no format rb-otel reads."""
    with path.open("rb") as handle:
        head = handle.read(_SNIFF_BYTES)
    if head.startswith(b"SQLite format 3\x00"):
        return "io_harness"
    if path.suffix == ".traj":
        return "swe_agent"
    if b"\x00" in head:
        raise RecordError(str(path), "format", "a binary file, not JSON or JSON lines records")
    lines = [line for line in head.splitlines() if line.strip()]
    found: str | None = None
    if len(lines) > 1:  # JSON lines: the first record tells (a pretty-printed document's first line won't parse)
        try:
            first = json.loads(lines[0])
        except ValueError:
            first = None
        if isinstance(first, dict):
            found = _line(first)
    if found is None:
        try:
            found = _document(json.loads(path.read_text(encoding="utf-8")))
        except UnicodeDecodeError as exc:
            raise RecordError(str(path), f"byte {exc.start}", "not UTF-8 text, so not JSON records") from None
        except json.JSONDecodeError as exc:
            if len(lines) > 1 and _lines_parse(lines[:-1]):
                found = None  # JSON lines of no format rb-otel knows (the last line may be cut by the sniff)
            else:
                where = f"line {exc.lineno} column {exc.colno}"
                raise RecordError(str(path), where, f"not valid JSON ({exc.msg}){_cut_short(exc)}") from None
    if found is None:
        raise RecordError(
            str(path), "format", f"cannot tell the format; pass --format with one of {', '.join(FORMATS)}"
        )
    return found


def _cut_short(exc: json.JSONDecodeError) -> str:
    """``; is the file complete?`` when the JSON breaks off at its end (a file cut short), else ``""``."""
    ends_early = exc.pos >= len(exc.doc.rstrip()) or exc.msg.startswith("Unterminated string")
    return "; it ends early: is the file complete?" if ends_early and exc.pos > 0 else ""


def _lines_parse(lines: Sequence[bytes]) -> bool:
    """Whether every line is a JSON value (a JSON lines file, not one document)."""
    try:
        for line in lines:
            json.loads(line)
    except ValueError:
        return False
    return True


def directory_files(directory: Path) -> list[Path]:
    """The files of ``directory`` in name order, hidden ones (``.name``) left out: the runs a directory holds."""
    return sorted(p for p in directory.iterdir() if p.is_file() and not p.name.startswith("."))


def no_runs(paths: Sequence[str | Path], problems: Sequence[object] = ()) -> str:
    """Why ``paths`` gave no run, in one line: empty folders, the files skipped (the first one's problem), or
    files that hold none."""
    shown = ", ".join(map(str, paths))
    files = input_files(paths)
    if not files:
        return f"{shown}: an empty folder, no runs to read"
    if problems:
        first = str(next(iter(problems)))
        return f"{shown}: no runs found; {len(problems)} file(s) or record(s) skipped, the first: {first}"
    return f"{shown}: no runs found in {len(files)} file(s) (pass --format if the one detected is wrong)"


def input_files(paths: Sequence[str | Path]) -> list[tuple[Path, bool]]:
    """``(file, found in a directory)`` for command-line inputs: directories expanded by :func:`directory_files`,
    so progress is per file; a path that does not exist is kept, for the reader to report."""
    out: list[tuple[Path, bool]] = []
    for path in map(Path, paths):
        if path.is_dir():
            out += [(p, True) for p in directory_files(path)]
        else:
            out.append((path, False))
    return out
