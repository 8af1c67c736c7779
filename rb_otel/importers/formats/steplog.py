"""ReasonBlocks step logs: ``StepLogEntry.as_dict()`` records as JSON or JSONL, with optional run headers.

Accepted shapes: a JSON list of entries; a JSON object ``{"run": {...header}, "steps": [...]}`` or with the header
fields at the top level; JSONL where each line is an entry, and a line without ``step`` but with ``run_id`` is a
header that starts a new run. JSONL is streamed: a run's steps are read as they are replayed.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rb_otel.importers.formats.records import json_lines, load_json
from rb_otel.importers.model import ImportedRun, ImportedStep, ImportProblem, RecordError
from rb_otel.telemetry import names as n
from rb_otel.types import StepLogEntry

__all__ = ["read"]

_HEADER_KEYS = ("agent_name", "task", "outcome", "framework", "model")


def _step(entry: StepLogEntry) -> ImportedStep:
    return ImportedStep(
        index=entry.step,
        thought=entry.thought_preview if entry.thought_preview != "(first call)" else "",
        tokens=entry.tokens,
        timestamp=entry.timestamp or None,
        duration_s=None,
        entry=entry,
    )


def _entry(raw: Any, path: Path, where: str, problems: list[ImportProblem]) -> ImportedStep | None:
    if not isinstance(raw, dict):
        problems.append(ImportProblem(str(path), where, "expected a step object"))
        return None
    try:
        return _step(StepLogEntry.from_dict(raw))
    except ValueError as exc:
        problems.append(ImportProblem(str(path), where, str(exc)))
        return None


def _run(header: dict[str, Any], run_index: int, path: Path, steps: Any) -> ImportedRun:
    run_id = str(header.get("run_id") or f"{path.stem}-{run_index}")
    return ImportedRun(
        run_id=run_id,
        source="steplog",
        steps=steps,
        agent_name=str(header.get("agent_name") or ""),
        task=str(header.get("task") or ""),
        outcome=str(header.get("outcome") or "success"),
        attributes={n.RB_FRAMEWORK: str(header.get("framework") or "reasonblocks")},
    )


def _read_json(path: Path, problems: list[ImportProblem]) -> Iterator[ImportedRun]:
    data = load_json(path)
    if isinstance(data, list):
        header: dict[str, Any] = {}
        raw_steps: Any = data
    elif isinstance(data, dict) and isinstance(data.get("steps"), list):
        header = data["run"] if isinstance(data.get("run"), dict) else data
        raw_steps = data["steps"]
    else:
        raise RecordError(str(path), "top level", "expected a list of step entries or an object with 'steps'")
    steps = [s for i, raw in enumerate(raw_steps) if (s := _entry(raw, path, f"steps[{i}]", problems))]
    yield _run(header, 0, path, steps)


class _Lines:
    """A JSONL line iterator with one line of pushback, shared by the runs of one file."""

    def __init__(self, path: Path, problems: list[ImportProblem]) -> None:
        self._it = json_lines(path, problems)
        self._pending: tuple[int, dict[str, Any]] | None = None

    def next(self) -> tuple[int, dict[str, Any]] | None:
        if self._pending is not None:
            item, self._pending = self._pending, None
            return item
        return next(self._it, None)

    def push(self, item: tuple[int, dict[str, Any]]) -> None:
        self._pending = item


def _is_header(obj: dict[str, Any]) -> bool:
    return "step" not in obj and ("run_id" in obj or any(k in obj for k in _HEADER_KEYS))


def _read_jsonl(path: Path, problems: list[ImportProblem]) -> Iterator[ImportedRun]:
    lines = _Lines(path, problems)

    def steps() -> Iterator[ImportedStep]:
        while (item := lines.next()) is not None:
            number, obj = item
            if _is_header(obj):
                lines.push(item)
                return
            step = _entry(obj, path, f"line {number}", problems)
            if step is not None:
                yield step

    run_index = 0
    while (item := lines.next()) is not None:
        header = item[1] if _is_header(item[1]) else {}
        if not header:
            lines.push(item)
        yield _run(header, run_index, path, steps())
        run_index += 1


def _first_line(path: Path) -> bytes:
    """The first non-blank line, whole however long it is (a JSONL entry may be larger than any sniff)."""
    with path.open("rb") as handle:
        for line in handle:
            if line.strip():
                return line.strip()
    return b""


def read(path: Path, problems: list[ImportProblem]) -> Iterator[ImportedRun]:
    first_line = _first_line(path)
    if first_line.startswith(b"["):
        return _read_json(path, problems)
    try:
        first = json.loads(first_line)
    except ValueError:
        return _read_json(path, problems)  # a pretty-printed document
    if isinstance(first, dict) and isinstance(first.get("steps"), list):
        return _read_json(path, problems)  # a one-line document with a header
    return _read_jsonl(path, problems)
