"""agy_bridge ``Step`` streams (JSONL), merged by step id (docs/importers.md, "Importing other harnesses' runs").

Every field is optional (``{"id": "s1"}`` parses); ``"type"`` is ``step_type`` on the wire; unknown enum strings
become ``UNKNOWN`` with the raw value kept in an attribute. Updates of one id are merged: a full ``content`` /
``thinking`` replaces, a ``*_delta`` appends, the last status wins, other fields keep their last non-empty value.
One run per ``cascade_id`` (or per file); each subagent trajectory (both ids set and different) is a nested run.
Streams carry no timestamps, so timing is synthetic (one second per step).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rb_otel.importers.formats.records import as_int, dump, json_lines
from rb_otel.importers.model import ImportedRun, ImportedStep, ImportedTool, ImportProblem
from rb_otel.telemetry import names as n

__all__ = ["AgyStep", "merge", "read"]

STEP_TYPES = frozenset({"TEXT_RESPONSE", "TOOL_CALL", "SYSTEM_MESSAGE", "COMPACTION", "FINISH", "THINKING", "UNKNOWN"})
SOURCES = frozenset({"SYSTEM", "USER", "MODEL", "UNKNOWN"})
TARGETS = frozenset({"TARGET_MODEL", "TARGET_USER", "TARGET_ENVIRONMENT", "TARGET_UNSPECIFIED", "UNKNOWN"})
STATUSES = frozenset({"ACTIVE", "DONE", "WAITING_FOR_USER", "ERROR", "CANCELED", "UNKNOWN"})
_MODEL_CALL_TYPES = frozenset({"TEXT_RESPONSE", "THINKING", "TOOL_CALL"})


@dataclass(slots=True)
class AgyStep:
    """One merged step."""

    id: str
    first_seen: int
    step_index: int = 0
    trajectory_id: str = ""
    cascade_id: str = ""
    step_type: str = "UNKNOWN"
    source: str = "UNKNOWN"
    target: str = "UNKNOWN"
    status: str = "UNKNOWN"
    content: str = ""
    thinking: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    error: str = ""
    http_code: int = 0
    is_complete_response: bool | None = None
    structured_output: Any = None
    usage: dict[str, Any] | None = None
    raw_enums: dict[str, str] = field(default_factory=dict)

    @property
    def is_subagent(self) -> bool:
        return bool(self.cascade_id) and bool(self.trajectory_id) and self.trajectory_id != self.cascade_id


def _enum(step: AgyStep, key: str, value: Any, allowed: frozenset[str]) -> str:
    raw = str(value)
    if raw in allowed:
        return raw
    step.raw_enums[key] = raw
    return "UNKNOWN"


def merge(step: AgyStep, obj: dict[str, Any]) -> None:
    """Fold one update into ``step``."""
    for key, allowed in (("type", STEP_TYPES), ("source", SOURCES), ("target", TARGETS), ("status", STATUSES)):
        if obj.get(key) not in (None, ""):
            setattr(step, "step_type" if key == "type" else key, _enum(step, key, obj[key], allowed))
    for key in ("trajectory_id", "cascade_id", "error"):
        if obj.get(key):
            setattr(step, key, str(obj[key]))
    if obj.get("step_index") not in (None, 0):
        step.step_index = as_int(obj.get("step_index"), step.step_index)
    for full, delta in (("content", "content_delta"), ("thinking", "thinking_delta")):
        if obj.get(full):
            setattr(step, full, str(obj[full]))
        if obj.get(delta):
            setattr(step, full, getattr(step, full) + str(obj[delta]))
    if isinstance(obj.get("tool_calls"), list) and obj["tool_calls"]:
        step.tool_calls = [c for c in obj["tool_calls"] if isinstance(c, dict)]
    if as_int(obj.get("http_code")):
        step.http_code = as_int(obj.get("http_code"))
    if obj.get("is_complete_response") is not None:
        step.is_complete_response = bool(obj["is_complete_response"])
    if obj.get("structured_output") is not None:
        step.structured_output = obj["structured_output"]
    if isinstance(obj.get("usage_metadata"), dict):
        step.usage = obj["usage_metadata"]


def _imported(step: AgyStep, index: int) -> ImportedStep:
    usage = step.usage or {}
    prompt = usage.get("prompt_token_count")
    candidates = usage.get("candidates_token_count")
    thoughts = usage.get("thoughts_token_count")
    total = usage.get("total_token_count")
    output = None if candidates is None and thoughts is None else as_int(candidates) + as_int(thoughts)
    tools = [
        ImportedTool(name=str(c.get("name") or "unknown"), call_id=str(c.get("id") or ""), arguments=c.get("args"))
        for c in step.tool_calls
    ]
    attributes: dict[str, Any] = {n.RB_STEP_INDEX: step.step_index, n.RB_AGY_STEP_TYPE: step.step_type}
    for key, raw in step.raw_enums.items():
        attributes[n.RB_AGY_RAW_PREFIX + key] = raw
    if step.status == "CANCELED":
        attributes[n.RB_CANCELED] = True
    for call in step.tool_calls:
        if call.get("canonical_path"):
            attributes[n.RB_AGY_CANONICAL_PATH] = str(call["canonical_path"])
    error_type = None
    if step.status == "ERROR" or step.error:
        error_type = str(step.http_code) if step.http_code else "agy_error"
    imported = ImportedStep(
        index=index,
        thought=step.thinking or step.content,
        tools=tools,
        tokens=as_int(total) if total is not None else as_int(prompt) + (output or 0),
        input_tokens=None if prompt is None else as_int(prompt),
        output_tokens=output,
        cache_read_tokens=None
        if usage.get("cached_content_token_count") is None
        else as_int(usage.get("cached_content_token_count")),
        reasoning_tokens=None if thoughts is None else as_int(thoughts),
        error_type=error_type,
        attributes=attributes,
    )
    if tools:
        imported.action = tools[0].name
        imported.action_input = dump(tools[0].arguments)
    return imported


def _trajectory_run(run_id: str, steps: list[AgyStep], *, subagent: bool, cascade: str) -> ImportedRun:
    steps.sort(key=lambda s: (s.step_index, s.first_seen))
    model_calls = [s for s in steps if s.step_type in _MODEL_CALL_TYPES]
    run = ImportedRun(
        run_id=run_id,
        source="agy",
        steps=[_imported(s, i) for i, s in enumerate(model_calls)],
        synthetic_timing=True,
        attributes={n.RB_CASCADE_ID: cascade}
        | ({n.RB_TRAJECTORY_ID: run_id.rsplit("/", maxsplit=1)[-1], n.RB_SUBAGENT: True} if subagent else {}),
    )
    if any(s.status == "ERROR" for s in model_calls):
        run.outcome = "failure: agy_error"
    for s in steps:
        if s.step_type == "COMPACTION":
            run.events.append((n.EVENT_COMPACTION, {n.RB_STEP_INDEX: s.step_index}))
        elif s.step_type == "SYSTEM_MESSAGE":
            run.events.append((n.EVENT_SYSTEM_MESSAGE, {n.RB_STEP_INDEX: s.step_index}))
        elif s.step_type == "FINISH":
            run.events.append(
                (n.EVENT_FINISH, {n.RB_STEP_INDEX: s.step_index, n.RB_STRUCTURED_OUTPUT: dump(s.structured_output)})
            )
            if s.status == "ERROR" or s.error:
                run.outcome = f"failure: {s.http_code or 'agy_error'}"
    return run


def read(path: Path, problems: list[ImportProblem]) -> Iterator[ImportedRun]:
    merged: dict[str, AgyStep] = {}
    for number, obj in json_lines(path, problems):
        step_id = str(obj.get("id") or f"line-{number}")
        step = merged.get(step_id)
        if step is None:
            step = merged[step_id] = AgyStep(id=step_id, first_seen=number)
        try:
            merge(step, obj)
        except (TypeError, ValueError) as exc:
            problems.append(ImportProblem(str(path), f"line {number}", f"bad step update: {exc}"))
    cascades: dict[str, list[AgyStep]] = {}
    for step in merged.values():
        cascades.setdefault(step.cascade_id or path.stem, []).append(step)
    for cascade, steps in cascades.items():
        primary = [s for s in steps if not s.is_subagent]
        run = _trajectory_run(cascade, primary, subagent=False, cascade=cascade)
        subagents: dict[str, list[AgyStep]] = {}
        for s in steps:
            if s.is_subagent:
                subagents.setdefault(s.trajectory_id, []).append(s)
        for trajectory, sub_steps in subagents.items():
            run.children.append(
                (None, _trajectory_run(f"{cascade}/{trajectory}", sub_steps, subagent=True, cascade=cascade))
            )
        yield run
