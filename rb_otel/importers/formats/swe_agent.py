"""SWE-agent trajectories (``.traj``, 0.x and 1.x): ``trajectory`` steps with thought, action and observation.

The action's first word is the tool; run tokens come from ``info.model_stats`` (per step they are unknown, so
the totals go on the run); 1.x ``execution_time`` gives tool durations; timing is otherwise synthetic.

The outcome: ``info.exit_status`` ``submitted`` (also ``submitted (exit_cost)``, an automatic submission) says the
agent submitted a patch, not that the patch resolves the issue: such a run is ``unlabelled`` until ``--labels``
(SWE-bench's results) says; any other exit status means no patch was submitted, a failure; none: ``unfinished``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rb_otel.importers.formats.mini_swe_agent import UNLABELLED
from rb_otel.importers.formats.records import as_int, load_json, text
from rb_otel.importers.formats.records import observation as kept_observation
from rb_otel.importers.model import ImportedRun, ImportedStep, ImportedTool, ImportProblem, RecordError
from rb_otel.telemetry import names as n

__all__ = ["read"]


def _step(index: int, raw: dict[str, Any]) -> ImportedStep:
    action = text(raw.get("action")).strip()
    name, _, rest = action.partition(" ")
    name = name.split("\n", 1)[0] or "noop"
    observation = text(raw.get("observation"))
    try:
        duration = float(raw["execution_time"]) if raw.get("execution_time") is not None else None
    except (TypeError, ValueError):
        duration = None
    return ImportedStep(
        index=index,
        thought=text(raw.get("thought") or raw.get("response")),
        action=name,
        action_input=rest.strip()[:2000],
        observation=kept_observation(observation) or "",
        tools=[ImportedTool(name=name, call_id=f"step-{index}", arguments=rest.strip(), result=observation)],
        duration_s=duration,
    )


def read(path: Path, problems: list[ImportProblem]) -> Iterator[ImportedRun]:
    data = load_json(path)
    if not isinstance(data, dict) or not isinstance(data.get("trajectory"), list):
        raise RecordError(str(path), "top level", "expected an object with a 'trajectory' list")
    steps: list[ImportedStep] = []
    for i, raw in enumerate(data["trajectory"]):
        if not isinstance(raw, dict):
            problems.append(ImportProblem(str(path), f"trajectory[{i}]", "expected a step object"))
            continue
        steps.append(_step(len(steps), raw))
    info: dict[str, Any] = data["info"] if isinstance(data.get("info"), dict) else {}
    stats: dict[str, Any] = info["model_stats"] if isinstance(info.get("model_stats"), dict) else {}
    exit_status = str(info.get("exit_status") or "")
    outcome = (
        UNLABELLED
        if exit_status.lower().startswith("submitted")
        else (f"failure: {exit_status}" if exit_status else "unfinished")
    )
    task = ""
    for message in data.get("history") or []:
        if isinstance(message, dict) and message.get("role") == "user":
            task = text(message.get("content"))[:2000]
            break
    yield ImportedRun(
        run_id=path.name.removesuffix(".traj"),
        source="swe_agent",
        steps=steps,
        task=task,
        outcome=outcome,
        synthetic_timing=True,
        attributes={
            n.RB_METADATA_PREFIX + "swe_agent.tokens_sent": as_int(stats.get("tokens_sent")),
            n.RB_METADATA_PREFIX + "swe_agent.tokens_received": as_int(stats.get("tokens_received")),
            n.RB_METADATA_PREFIX + "swe_agent.api_calls": as_int(stats.get("api_calls")),
        },
        summary={"exit_status": exit_status, "model_stats": stats},
    )
