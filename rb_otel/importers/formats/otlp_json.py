"""rb-otel's own traces as OTLP/JSON (the Collector ``file`` exporter's format, what ``configure(traces_file=...)``
and the demo write): one run per ``invoke_agent`` span, a step per ``chat`` span, its tools from the
``execute_tool`` spans after it.

What a step carries depends on what was recorded. Always: its tool calls (names), errors, token counts and the
run's outcome (``rb.outcome``; labels joined by ``rb.run_id`` replace it). With content capture on: the model's
output text as the thought, the tool's arguments and result. Without it, a fitted pilot learns from tool names,
errors and sizes in tokens only (characters written are unknown: 0). Runs are grouped by ``rb.metadata.task_id``
when the agent set it (``metadata={"task_id": ...}``), else each run is its own group.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rb_otel.importers.formats.records import observation as kept_observation
from rb_otel.importers.model import ImportedRun, ImportedStep, ImportedTool, ImportProblem, RecordError
from rb_otel.report.traces import ReportRun, ReportStep, load_runs
from rb_otel.telemetry import names as n

__all__ = ["imported_run", "read", "read_problem"]


def _text_of(messages: Any) -> str:
    """The text parts of ``gen_ai.output.messages`` (a JSON string of messages with ``parts``)."""
    try:
        data = json.loads(messages) if isinstance(messages, str) else messages
    except ValueError:
        return str(messages)
    out = []
    for message in data if isinstance(data, list) else []:
        for part in message.get("parts", []) if isinstance(message, dict) else []:
            if isinstance(part, dict) and part.get("type") in ("text", "reasoning") and part.get("content"):
                out.append(str(part["content"]))
    return "\n".join(out)


def _step(index: int, step: ReportStep) -> ImportedStep:
    acting = step.tools[0] if step.tools else None
    thought = _text_of(step.output_messages) if step.output_messages else (step.thought or "")
    imported = ImportedStep(
        index=index,
        thought=thought,
        action=acting.name if acting else None,
        action_input=acting.arguments if acting else None,
        observation=kept_observation(acting.result or acting.error) if acting else None,
        tools=[ImportedTool(t.name, arguments=t.arguments, result=t.result, error=t.error) for t in step.tools],
        tokens=step.input_tokens + step.output_tokens,
        input_tokens=step.input_tokens or None,
        output_tokens=step.output_tokens or None,
        model=step.model,
        timestamp=step.start,
        duration_s=max(step.end - step.start, 0.0),
        error_type=None,
    )
    return imported


def imported_run(run: ReportRun) -> ImportedRun:
    """A joined run of rb-otel's traces (:func:`~rb_otel.report.traces.load_runs`'s, a store's) as an imported run."""
    steps = [s for s in run.steps if not s.error]  # a failed model call is a span, not a step
    models = Counter(s.model for s in steps if s.model)
    task = str(run.attributes.get(n.RB_METADATA_PREFIX + "task_id") or "")
    return ImportedRun(
        run_id=run.run_id,
        source="otlp_json",
        steps=[_step(i, s) for i, s in enumerate(steps)],
        agent_name=run.agent,
        harness=str(run.attributes.get(n.RB_METADATA_PREFIX + "harness") or ""),  # as a replay recorded it
        model=models.most_common(1)[0][0] if models else "",
        agent_key=str(run.attributes.get(n.RB_AGENT_KEY) or ""),  # the worker's key (its calls may be routed)
        task_id=task,
        group_id=task or run.run_id,
        outcome=run.outcome or "unfinished",
        start=run.start,
        end=run.end,
        attributes={k: v for k, v in run.attributes.items() if k.startswith(n.RB_METADATA_PREFIX)},
    )


def read(path: Path, problems: list[ImportProblem]) -> Iterator[ImportedRun]:
    runs, skipped = load_runs([path])
    problems += [read_problem(problem) for problem in skipped]
    if not runs:
        raise RecordError(str(path), "top level", "no invoke_agent spans (is this an rb-otel OTLP/JSON trace file?)")
    for run in runs:
        yield imported_run(run)


def read_problem(problem: str) -> ImportProblem:
    """A problem the trace loader reported (``"path: line N: what"``) as an :class:`ImportProblem`."""
    path, _, rest = problem.partition(": ")
    where, _, what = rest.partition(": ")
    return ImportProblem(path, where, what)
