"""Which files an analysis reads as OTLP/JSON traces: the paths given, a folder's files among them.

A folder is read as ``evaluate``, ``replay`` and ``train`` read one: its files in name order, hidden ones left out.
A file of the folder that holds no OTLP/JSON traces (the demo's metrics, its HTML page, another harness's records)
is left out and named in :attr:`TraceFiles.skipped`; a file given by name that is not one is an error saying what it
looks like and the command that reads it. Only the file's first bytes are read to tell.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from rb_otel.files import not_a_file
from rb_otel.importers.detect import detect, directory_files
from rb_otel.importers.model import RecordError

__all__ = ["SNIFF_BYTES", "TraceFiles", "not_traces", "trace_files"]

#: How much of a file is read to tell what it holds.
SNIFF_BYTES = 1 << 16


@dataclass(slots=True)
class TraceFiles:
    """The trace files to read, and the folder files left out (``name (what it holds)``)."""

    files: list[Path]
    skipped: list[str] = field(default_factory=list)

    def note(self) -> str | None:
        """One line naming the folder files left out, or ``None`` when none was."""
        if not self.skipped:
            return None
        shown = ", ".join(self.skipped[:4]) + (f" and {len(self.skipped) - 4} more" if len(self.skipped) > 4 else "")
        return f"skipped {len(self.skipped)} file(s) holding no OTLP/JSON traces: {shown}"


def not_traces(path: Path) -> str | None:
    """Why ``path`` is not an OTLP/JSON traces file (``None`` when it is one, or is empty: a file being written)."""
    with path.open("rb") as handle:
        head = handle.read(SNIFF_BYTES)
    if not head.strip():
        return None
    if b"\x00" in head:
        return "a binary file, not OTLP/JSON traces"
    if b'"resourceSpans"' in head:
        return None
    for key, signal in ((b'"resourceMetrics"', "metrics"), (b'"resourceLogs"', "logs")):
        if key in head:
            return f"OTLP/JSON {signal}, not traces"
    try:
        found = detect(path)
    except RecordError as exc:
        return f"not OTLP/JSON traces ({exc.where}: {exc.problem})"
    return f"{found} records, not OTLP/JSON traces (rb-otel replay {path} turns them into traces)"


def trace_files(paths: Sequence[str | Path]) -> TraceFiles:
    """The files ``paths`` name, folders expanded (module docstring). Raises ``FileNotFoundError`` for a path that
    does not exist and ``ValueError`` (its message one line) for a file given by name that holds no traces, or
    folders none of whose files do."""
    out = TraceFiles(files=[])
    for path in map(Path, paths):
        if path.is_dir():
            files = directory_files(path)
            if not files:
                raise ValueError(f"{path}: an empty folder, no trace files")
            for file in files:
                reason = not_traces(file)
                if reason is None:
                    out.files.append(file)
                else:
                    out.skipped.append(f"{file.name} ({reason.split(' (', 1)[0]})")
            continue
        if not path.is_file():
            raise FileNotFoundError(f"{path}: {not_a_file(path, 'no such trace file or folder')}")
        reason = not_traces(path)
        if reason is not None:
            raise ValueError(f"{path}: {reason}")
        out.files.append(path)
    if not out.files and out.skipped:
        raise ValueError(f"{', '.join(map(str, paths))}: no OTLP/JSON trace files ({out.note()}); rb-otel replay "
                         "turns other harnesses' records into traces")  # fmt: skip
    return out
