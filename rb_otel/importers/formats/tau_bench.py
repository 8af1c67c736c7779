"""tau-bench results files: one JSON list of runs ``{task_id, trial, reward, traj, info}``, in file order, or one
such run on its own (an element of that list saved as a file, as the records under tau-bench's
``historical_trajectories`` are often kept).

Each element is one run (``task-<task_id>-trial-<trial>``); ``traj`` is an OpenAI-style message list; a
``reward`` below 1 is a failure. A malformed element is skipped and listed; the rest are read. The harness is
``tau-bench`` (the files do not name the agent's model).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from rb_otel.importers.formats.openai_messages import TAU_BENCH, steps_from_messages
from rb_otel.importers.formats.records import load_json
from rb_otel.importers.model import ImportedRun, ImportProblem, RecordError
from rb_otel.telemetry import names as n

__all__ = ["HARNESS", "read", "reward_outcome"]

#: The harness of tau-bench (v1) results, read from their structure (``{task_id, reward, info, traj}``).
HARNESS = TAU_BENCH


def reward_outcome(reward: object) -> str:
    """``success`` for a reward of at least 1, ``failure: reward R`` below it, ``unfinished`` without one."""
    if isinstance(reward, bool) or not isinstance(reward, int | float):
        return "unfinished"
    return "success" if reward >= 1 else f"failure: reward {reward:g}"


def read(path: Path, problems: list[ImportProblem]) -> Iterator[ImportedRun]:
    data = load_json(path)
    if isinstance(data, dict) and "traj" in data:
        data, alone = [data], True  # one result: read as an element, named as the file's top level
    elif isinstance(data, list):
        alone = False
    else:
        raise RecordError(str(path), "top level", "expected a JSON list of results {task_id, trial, reward, traj}, "
                          "or one such result")  # fmt: skip
    for i, element in enumerate(data):
        where = "top level" if alone else f"element {i}"
        if not isinstance(element, dict) or not isinstance(element.get("traj"), list):
            problems.append(ImportProblem(str(path), where, "expected an object with a 'traj' message list"))
            continue
        reward = element.get("reward")
        if isinstance(reward, bool) or not isinstance(reward, int | float):
            problems.append(ImportProblem(str(path), where, f"'reward' must be a number, got {reward!r}"))
            continue
        steps, task = steps_from_messages(element["traj"], str(path), f"{where}: traj", problems)
        task_id, trial = element.get("task_id"), element.get("trial", 0)
        yield ImportedRun(
            run_id=f"task-{task_id}-trial-{trial}",
            source="tau_bench",
            agent_name="tau-bench",
            harness=HARNESS,
            steps=steps,
            task=task,
            task_id=str(task_id),
            outcome=reward_outcome(reward),
            synthetic_timing=True,
            attributes={n.RB_METADATA_PREFIX + "reward": float(reward)},
        )
