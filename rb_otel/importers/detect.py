"""``--format auto``: tell a file's format from its name and its first bytes (a JSON document: its parse); and which
files of a directory are runs at all."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rb_otel.importers.formats.records import remember_document
from rb_otel.importers.model import RecordError

__all__ = [
    "FORMATS",
    "STREAM_TYPES",
    "NotRuns",
    "detect",
    "directory_files",
    "holds_no_runs",
    "input_files",
    "is_recording_header",
    "no_runs",
]

FORMATS = (
    "steplog",
    "io_harness",
    "agy",
    "swe_agent",
    "openhands",
    "openai_messages",
    "tau_bench",
    "tau2_bench",
    "tau2_indexed",
    "mini_swe_agent",
    "mini_swe_agent_2",
    "otlp_json",
    "claude_code",
)
_SNIFF_BYTES = 1 << 20

# Files a directory read passes over unopened: what travels with runs but never holds one (documentation, configs,
# tables, diffs, archives, images, SQLite's side files), and the evaluation's and leaderboard's own JSON files.
_NOT_RUN_SUFFIXES = frozenset(
    ".yaml .yml .toml .cfg .ini .csv .tsv .md .rst .txt .html .diff .patch .sh .py .lock .xz .gz .bz2 .zip .tar "
    ".png .jpg .jpeg .svg .pdf".split()
)
_NOT_RUN_NAME = re.compile(
    r"^(?:license|licence|copying|notice|readme|changelog|authors)(?:\..*)?$"  # documentation
    r"|.*-(?:wal|shm|journal)$"  # SQLite's side files
    # SWE-bench's reports and predictions, mini-swe-agent's summary, a leaderboard submission's metadata
    r"|^(?:report|results_summary|submission|preds|all_preds)\.jsonl?$|^pred_.*\.json$|.*_eval\.json$"
    r"|^run_metadata\.json$",  # Terminal-Bench's configuration of a run of the harness
    re.IGNORECASE,
)


#: The ``type`` of Claude Code's stream-json events (``claude -p --output-format stream-json``).
STREAM_TYPES = frozenset({"system", "assistant", "user", "result", "stream_event"})


def is_recording_header(obj: Any) -> bool:
    """Whether ``obj`` is the header line of an asciicast v2 or v3 terminal recording (read as the recording of a
    Claude Code run's stream-json: :mod:`rb_otel.importers.formats.claude_code`)."""
    return isinstance(obj, dict) and obj.get("version") in (2, 3) and ("width" in obj or "term" in obj)


class NotRuns(RecordError):
    """A readable JSON file that is none of the formats: in a directory it holds no runs and is passed over (one
    count for the read); given by name it is an error like any file whose format cannot be told."""


def holds_no_runs(path: Path) -> bool:
    """Whether a file in a directory is passed over by its name alone (module comment): never opened."""
    return path.suffix.lower() in _NOT_RUN_SUFFIXES or bool(_NOT_RUN_NAME.match(path.name))


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
    trajectory_format = str(obj.get("trajectory_format") or "")
    if trajectory_format == "mini-swe-agent-1":
        return "mini_swe_agent"
    if trajectory_format.startswith("mini-swe-agent-"):  # 1.1 and later: mini-swe-agent 2.x
        return "mini_swe_agent_2"
    if isinstance(obj.get("simulations"), list):
        return "tau2_indexed" if "simulation_index" in obj else "tau2_bench"
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
    if obj.get("type") in STREAM_TYPES and "session_id" in obj:
        return "claude_code"
    if "source" in obj and "timestamp" in obj and ("action" in obj or "observation" in obj):
        return "openhands"
    if {"type", "cascade_id", "trajectory_id", "step_index", "content_delta"} & obj.keys() or set(obj) == {"id"}:
        return "agy"
    return None


def detect(path: Path) -> str:
    """The format of ``path``; raises :class:`RecordError` when it cannot tell: an empty or binary file, JSON that
    does not parse (the JSON error named: a truncated file, say), or records of no format rb-otel reads
    (:class:`NotRuns` when the file is readable JSON of none of the formats)."""
    with path.open("rb") as handle:
        head = handle.read(_SNIFF_BYTES)
    if head.startswith(b"SQLite format 3\x00"):
        return "io_harness"
    if not head.strip():
        raise RecordError(str(path), "file", "empty file")
    if path.suffix == ".traj":
        return "swe_agent"
    if b"\x00" in head:
        raise RecordError(str(path), "format", "a binary file, not JSON or JSON lines records")
    lines = [line for line in head.splitlines() if line.strip()]
    found: str | None = None
    parsed = False
    if len(lines) > 1:  # JSON lines: the first record tells (a pretty-printed document's first line won't parse)
        try:
            first = json.loads(lines[0])
            parsed = True
        except ValueError:
            first = None
        if is_recording_header(first):
            return "claude_code"
        if isinstance(first, dict):
            found = _line(first)
    if found is None:
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
            found = _document(document)
            parsed = True
            if found is not None:
                remember_document(path, document)  # the reader takes it rather than parse the file again
        except UnicodeDecodeError as exc:
            raise RecordError(str(path), f"byte {exc.start}", "not UTF-8 text, so not JSON records") from None
        except json.JSONDecodeError as exc:
            if not (len(lines) > 1 and _lines_parse(lines[:-1])):  # not JSON lines (the sniff may cut the last)
                where = f"line {exc.lineno} column {exc.colno}"
                raise RecordError(str(path), where, f"not valid JSON ({exc.msg}){_cut_short(exc)}") from None
    if found is None:
        error = NotRuns if parsed else RecordError
        raise error(str(path), "format", f"cannot tell the format; pass --format with one of {', '.join(FORMATS)}")
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


def directory_files(directory: Path, passed_over: list[Path] | None = None) -> list[Path]:
    """The files under ``directory`` and its subfolders, in path order, hidden files and folders (``.name``) left
    out and symbolic links to folders not followed: the runs a directory holds. Files that hold no runs by their
    name (:func:`holds_no_runs`) are left out too, and added to ``passed_over`` when it is given."""
    found: list[Path] = []
    for folder, subfolders, names in os.walk(directory):
        subfolders[:] = sorted(d for d in subfolders if not d.startswith("."))
        for name in names:
            path = Path(folder) / name
            if name.startswith(".") or not path.is_file():
                continue
            if holds_no_runs(path):
                if passed_over is not None:
                    passed_over.append(path)
                continue
            found.append(path)
    return sorted(found, key=lambda p: p.relative_to(directory).parts)


def input_files(paths: Sequence[str | Path], passed_over: list[Path] | None = None) -> list[tuple[Path, bool]]:
    """``(file, found in a directory)`` for command-line inputs: directories expanded by :func:`directory_files`
    (subfolders included; ``passed_over`` collects the files left out by name), so progress is per file; a path
    that does not exist is kept, for the reader to report."""
    out: list[tuple[Path, bool]] = []
    for path in map(Path, paths):
        if path.is_dir():
            out += [(p, True) for p in directory_files(path, passed_over)]
        else:
            out.append((path, False))
    return out
