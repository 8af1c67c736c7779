"""io_harness SQLite stores (schemas 0.22 to 0.29), read-only.

One run per ``runs`` row; child runs (``parent_run_id``) nest under their parent at the spawning step (from
``spawns``). Rows of ``steps`` are grouped by step number: a retry writes a row with the same number, so each
distinct number is one model-call span whose attempts are ``rb.attempt`` events; the step count is MAX(step) and
tokens are summed over every row. ``provider_calls`` supply model, usage and finish reasons when present. Rows
carry no timestamps: steps are spread over the run's recorded duration when known, else one second apart from
``started_at``, and the run is marked ``rb.synthetic_timing``.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.request import pathname2url

from rb_otel.importers.formats.records import iso_seconds, observation
from rb_otel.importers.model import ImportedRun, ImportedStep, ImportedTool, ImportProblem, RecordError
from rb_otel.telemetry import names as n
from rb_otel.telemetry.attributes import AttributeValue

__all__ = ["parse_tool_calls", "read"]

_SEGMENT = re.compile(r"^([\w.\-]+):([\[{].*)$", re.S)
_SEPARATOR = " | "


def parse_tool_calls(raw: str) -> list[ImportedTool]:
    """The three ``tool_call`` shapes of real stores (docs/importers.md, "Importing other harnesses' runs"); the raw
    string is kept when nothing parses."""
    raw = raw.strip()
    if not raw:
        return []
    if raw.startswith("{"):
        try:
            obj = json.loads(raw)
        except ValueError:
            obj = None
        if isinstance(obj, dict):
            if isinstance(obj.get("name"), str):
                return [ImportedTool(name=obj["name"], arguments=obj.get("arguments", obj.get("args")))]
            return [ImportedTool(name="write_file", arguments=obj)]  # bare arguments of a write_file call
    segments: list[str] = []
    for part in raw.split(_SEPARATOR):
        if segments and not _SEGMENT.match(part):
            segments[-1] += _SEPARATOR + part  # a " | " inside the arguments, not a separator
        else:
            segments.append(part)
    tools = []
    for segment in segments:
        match = _SEGMENT.match(segment)
        if match is None:
            return [ImportedTool(name="unparsed", arguments=raw)]
        name, args = match.groups()
        try:
            arguments: Any = json.loads(args)
        except ValueError:
            arguments = args
        tools.append(ImportedTool(name=name, arguments=arguments))
    return tools


def _connect(path: Path) -> sqlite3.Connection:
    """Open the store read-only, leaving nothing beside it. Without a write-ahead log to read, ``immutable=1``
    takes no locks and creates no ``-wal``/``-shm`` files (and works on read-only media); a store whose ``-wal``
    holds data still being written is opened ``mode=ro`` so that data is read (SQLite then needs its ``-shm``)."""
    wal = path.with_name(path.name + "-wal")
    live = wal.exists() and wal.stat().st_size > 0
    query = "mode=ro" if live else "mode=ro&immutable=1"
    try:
        connection = sqlite3.connect(f"file:{pathname2url(str(path.resolve()))}?{query}", uri=True)
        connection.execute("SELECT 1 FROM runs LIMIT 1")
    except sqlite3.DatabaseError as exc:
        raise RecordError(str(path), "database", f"not an io_harness store ({exc})") from None
    connection.row_factory = sqlite3.Row
    return connection


def _tables(connection: sqlite3.Connection) -> set[str]:
    return {r[0] for r in connection.execute("SELECT name FROM sqlite_master WHERE type='table'")}


def _rows(connection: sqlite3.Connection, table: str, tables: set[str], sql: str) -> list[sqlite3.Row]:
    return list(connection.execute(sql)) if table in tables else []


def read(path: Path, problems: list[ImportProblem]) -> Iterator[ImportedRun]:
    connection = _connect(path)
    try:
        runs = _load(connection, path, problems)
    finally:
        connection.close()
    yield from runs


def _load(connection: sqlite3.Connection, path: Path, problems: list[ImportProblem]) -> list[ImportedRun]:
    tables = _tables(connection)
    step_rows: dict[int, list[sqlite3.Row]] = defaultdict(list)
    for row in _rows(connection, "steps", tables, "SELECT * FROM steps ORDER BY run_id, step, id"):
        step_rows[row["run_id"]].append(row)
    outcomes = {r["run_id"]: r for r in _rows(connection, "run_outcomes", tables, "SELECT * FROM run_outcomes")}
    calls: dict[tuple[int, int], list[sqlite3.Row]] = defaultdict(list)
    for row in _rows(connection, "provider_calls", tables, "SELECT * FROM provider_calls ORDER BY id"):
        calls[(row["run_id"], row["step"])].append(row)
    spawned_at = {r["child_run_id"]: r["step"] for r in _rows(connection, "spawns", tables, "SELECT * FROM spawns")}
    built: dict[int, ImportedRun] = {}
    parents: dict[int, int] = {}
    for run in connection.execute("SELECT * FROM runs ORDER BY id"):
        try:
            built[run["id"]] = _run(run, step_rows[run["id"]], outcomes.get(run["id"]), calls)
        except (KeyError, TypeError, ValueError) as exc:
            problems.append(ImportProblem(str(path), f"runs row {run['id']}", f"skipped: {exc}"))
            continue
        parent = run["parent_run_id"] if "parent_run_id" in set(run.keys()) else None
        if parent is not None:
            parents[run["id"]] = parent
    top: list[ImportedRun] = []
    for run_id, run in built.items():
        parent = parents.get(run_id)
        if parent is not None and parent in built:
            step = spawned_at.get(run_id)
            built[parent].children.append((None if step is None else step - 1, run))
        else:
            top.append(run)
    return top


def _apply_provider_calls(step: ImportedStep, provider: list[sqlite3.Row]) -> None:
    if not provider:
        return
    last_call = provider[-1]
    step.model = str(last_call["model"] or "")
    step.provider = str(last_call["provider"] or "")
    step.finish_reason = str(last_call["finish_reason"] or "")
    step.input_tokens = sum(int(c["prompt_tokens"] or 0) for c in provider)
    step.output_tokens = sum(int(c["completion_tokens"] or 0) for c in provider)
    step.cache_read_tokens = sum(int(c["cache_read_tokens"] or 0) for c in provider)
    step.cache_creation_tokens = sum(int(c["cache_write_tokens"] or 0) for c in provider)
    step.reasoning_tokens = sum(int(c["reasoning_tokens"] or 0) for c in provider)
    if last_call["failure"]:
        step.error_type = str(last_call["failure"])


def _provider_only_step(number: int, provider: list[sqlite3.Row], start: float, duration: float) -> ImportedStep:
    step = ImportedStep(index=number - 1, timestamp=start, duration_s=duration, attributes={n.RB_STEP_NUMBER: number})
    _apply_provider_calls(step, provider)
    step.tokens = sum(int(c["total_tokens"] or 0) for c in provider)
    return step


def _committed_step(
    number: int, attempts: list[sqlite3.Row], provider: list[sqlite3.Row], timestamp: float, duration: float
) -> ImportedStep:
    """A step from its attempts (the last one committed; each attempt an event) and its provider calls."""
    committed = attempts[-1]
    columns = set(committed.keys())  # older schemas lack the audit columns
    step = ImportedStep(
        index=number - 1,
        thought=str(committed["decision"]),
        action=None,
        observation=observation(str(committed["result"])),
        tools=parse_tool_calls(str(committed["tool_call"] or "")) if "tool_call" in columns else [],
        tokens=sum(int(a["tokens"] or 0) for a in attempts) if "tokens" in columns else 0,
        timestamp=timestamp,
        duration_s=duration,
        attributes={n.RB_STEP_NUMBER: number},
    )
    if step.tools:
        step.action = step.tools[0].name
        step.action_input = json.dumps(step.tools[0].arguments, sort_keys=True, default=str)
    _apply_provider_calls(step, provider)
    for attempt, row in enumerate(attempts):
        event: dict[str, AttributeValue] = {
            n.RB_ATTEMPT: attempt,
            n.RB_STEP_RETRY: attempt < len(attempts) - 1,
            n.RB_TOKENS: int(row["tokens"] or 0),
        }
        step.events.append((n.EVENT_ATTEMPT, event))
    return step


def _summary(
    run: sqlite3.Row, rows: list[sqlite3.Row], outcome_row: sqlite3.Row | None, outcome: str, last_step: int
) -> dict[str, Any]:
    """The run's summary in the shape io_harness reports it."""
    columns = run.keys()  # a Row's `in` tests values, not column names
    summary: dict[str, Any] = {
        "run_id": int(run["id"]),
        "goal": run["goal"],
        "workspace": run["file"],
        "status": run["status"] if "status" in columns else None,
        "outcome": outcome,
        "success": outcome == "success",
        "last_step": last_step,
        "step_count": last_step,
        "spent_tokens": sum(int(r["tokens"] or 0) for r in rows),
        "tokens": sum(int(r["tokens"] or 0) for r in rows),
        "steps": [{"step": int(r["step"]), "decision": r["decision"], "tokens": int(r["tokens"] or 0)} for r in rows],
    }
    if outcome_row is not None:
        summary["duration_ms"] = outcome_row["duration_ms"]
        summary["finished_at"] = outcome_row["finished_at"]
    return summary


def _run(
    run: sqlite3.Row,
    rows: list[sqlite3.Row],
    outcome_row: sqlite3.Row | None,
    calls: dict[tuple[int, int], list[sqlite3.Row]],
) -> ImportedRun:
    keys = run.keys()
    run_id = int(run["id"])
    by_step: dict[int, list[sqlite3.Row]] = defaultdict(list)
    for row in rows:
        by_step[int(row["step"])].append(row)
    start = iso_seconds(run["started_at"]) if "started_at" in keys else None
    duration_ms = outcome_row["duration_ms"] if outcome_row is not None else None
    outcome = (outcome_row["outcome"] if outcome_row is not None else None) or run["outcome"] or "unfinished"
    # 0.29 stores may record provider calls for steps that have no step row: those are model calls too
    numbers = sorted(set(by_step) | {step for (run, step) in calls if run == run_id})
    span = (duration_ms / 1000.0) if duration_ms else float(max(len(numbers), 1))
    per_step = span / max(len(numbers), 1)
    base = start if start is not None else 0.0
    steps = []
    for position, number in enumerate(numbers):
        attempts = by_step.get(number, [])
        provider = calls.get((run_id, number), [])
        if not attempts:
            steps.append(_provider_only_step(number, provider, base + position * per_step, per_step))
            continue
        steps.append(_committed_step(number, attempts, provider, base + position * per_step, per_step))
    summary = _summary(run, rows, outcome_row, outcome, max(numbers) if numbers else 0)
    return ImportedRun(
        run_id=f"io_harness-{run_id}",
        source="io_harness",
        steps=steps,
        task=str(run["goal"]),
        outcome=outcome,
        start=start,
        end=(start + span) if start is not None else None,
        synthetic_timing=True,
        attributes={
            n.RB_METADATA_PREFIX + "workspace": str(run["file"]),
            n.RB_METADATA_PREFIX + "io_harness.run_id": run_id,
        },
        summary=summary,
    )
