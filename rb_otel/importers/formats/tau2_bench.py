"""tau2-bench results files: ``{info, tasks, simulations: [...]}``, one run per simulation, in file order.

Messages are OpenAI-style with flat tool calls (``{id, name, arguments}``) and tool results whose ``id`` is the
call's; the outcome is ``reward_info.reward`` (below 1 is a failure). The agent is ``info.agent_info``'s
implementation and model, the task id is the domain and ``task_id``. Real timestamps are kept.

Runs are grouped (folds, bootstrap intervals) by their task's *user scenario*: the same simulated user under two
policy variants (``airline`` and ``airline_tighter_policy``) is one group, so a fold never sees a scenario it is
tested on.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rb_otel.importers.formats.openai_messages import steps_from_messages
from rb_otel.importers.formats.records import iso_seconds, load_json
from rb_otel.importers.formats.tau_bench import reward_outcome
from rb_otel.importers.model import ImportedRun, ImportProblem, RecordError
from rb_otel.telemetry import names as n

__all__ = ["read"]


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _scenarios(tasks: Any) -> dict[str, str]:
    """``task id -> "scenario/<digest>"`` of each task's user scenario (the simulated user's instructions)."""
    out: dict[str, str] = {}
    for task in tasks if isinstance(tasks, list) else []:
        if isinstance(task, dict) and task.get("id") is not None and task.get("user_scenario") is not None:
            text = json.dumps(task["user_scenario"], sort_keys=True, default=str)
            out[str(task["id"])] = "scenario/" + hashlib.sha256(text.encode()).hexdigest()[:12]
    return out


def read(path: Path, problems: list[ImportProblem]) -> Iterator[ImportedRun]:
    data = load_json(path)
    if not isinstance(data, dict) or not isinstance(data.get("simulations"), list):
        raise RecordError(str(path), "top level", "expected an object with a 'simulations' list (tau2-bench)")
    info = _mapping(data.get("info"))
    agent = _mapping(info.get("agent_info"))
    domain = str(_mapping(info.get("environment_info")).get("domain_name") or "")
    model = str(agent.get("llm") or "")
    implementation = str(agent.get("implementation") or "tau2-agent")
    scenarios = _scenarios(data.get("tasks"))
    for i, sim in enumerate(data["simulations"]):
        where = f"simulations[{i}]"
        if not isinstance(sim, dict) or not isinstance(sim.get("messages"), list):
            problems.append(ImportProblem(str(path), where, "expected a simulation with a 'messages' list"))
            continue
        reward = _mapping(sim.get("reward_info")).get("reward")
        if isinstance(reward, bool) or not isinstance(reward, int | float):
            problems.append(ImportProblem(str(path), where, f"'reward_info.reward' must be a number, got {reward!r}"))
            continue
        steps, task = steps_from_messages(sim["messages"], str(path), f"{where}: messages", problems)
        replies = [m for m in sim["messages"] if _mapping(m).get("role") == "assistant"]
        for step, message in zip(steps, replies, strict=False):  # a malformed message is a problem, not a step
            step.timestamp = iso_seconds(message.get("timestamp"))
            step.model = model
            usage = _mapping(message.get("usage"))
            step.input_tokens = usage.get("prompt_tokens") if isinstance(usage.get("prompt_tokens"), int) else None
            step.output_tokens = (
                usage.get("completion_tokens") if isinstance(usage.get("completion_tokens"), int) else None
            )
            step.tokens = (step.input_tokens or 0) + (step.output_tokens or 0)
        start, end = iso_seconds(sim.get("start_time")), iso_seconds(sim.get("end_time"))
        task_id = str(sim.get("task_id", ""))
        yield ImportedRun(
            run_id=str(sim.get("id") or f"{path.stem}-{i}"),
            source="tau2_bench",
            agent_name=f"{implementation}:{domain}" if domain else implementation,
            model=model,
            steps=steps,
            task=task,
            task_id=f"{domain}/{task_id}" if domain else task_id,
            group_id=scenarios.get(task_id, ""),
            outcome=reward_outcome(reward),
            start=start,
            end=end,
            synthetic_timing=start is None,
            attributes={
                n.RB_METADATA_PREFIX + "reward": float(reward),
                n.RB_METADATA_PREFIX + "tau2.termination_reason": str(sim.get("termination_reason") or ""),
            },
        )
