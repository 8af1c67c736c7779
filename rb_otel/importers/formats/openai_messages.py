"""OpenAI-style message lists (as in tau-bench): assistant turns are model calls; ``tool`` messages, matched by
``tool_call_id``, are their tool results. Accepts ``{"traj": [...]}`` (tau-bench), ``{"messages": [...]}`` or a
bare list; a ``reward`` below 1 makes the run a failure.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rb_otel.importers.formats._common import load_json, text
from rb_otel.importers.model import ImportedRun, ImportedStep, ImportedTool, ImportProblem, RecordError
from rb_otel.telemetry import names as n

__all__ = ["read"]


def _arguments(raw: Any) -> Any:
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except ValueError:
            return raw
    return raw


def read(path: Path, problems: list[ImportProblem]) -> Iterator[ImportedRun]:
    data = load_json(path)
    messages = data if isinstance(data, list) else (data.get("traj") or data.get("messages"))
    if not isinstance(messages, list):
        raise RecordError(str(path), "top level", "expected a message list, or an object with 'traj' or 'messages'")
    results = {str(m.get("tool_call_id")): m for m in messages if isinstance(m, dict) and m.get("role") == "tool"}
    steps: list[ImportedStep] = []
    task = ""
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or "role" not in message:
            problems.append(ImportProblem(str(path), f"message[{i}]", "expected an object with a 'role'"))
            continue
        if message["role"] == "user" and not task:
            task = text(message.get("content"))[:2000]
        if message["role"] != "assistant":
            continue
        tools = []
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {} if isinstance(call, dict) else {}
            call_id = str(call.get("id") or "") if isinstance(call, dict) else ""
            result = results.get(call_id)
            tools.append(
                ImportedTool(
                    name=str(function.get("name") or "unknown"),
                    call_id=call_id,
                    arguments=_arguments(function.get("arguments")),
                    result=text(result.get("content")) if result else None,
                )
            )
        first_result = results.get(tools[0].call_id) if tools else None
        steps.append(
            ImportedStep(
                index=len(steps),
                thought=text(message.get("content")),
                tools=tools,
                action=tools[0].name if tools else None,
                action_input=json.dumps(tools[0].arguments, sort_keys=True, default=str) if tools else None,
                observation=text(first_result.get("content"))[:400] if first_result else None,
            )
        )
    outcome = "success"
    reward = data.get("reward") if isinstance(data, dict) else None
    if isinstance(reward, int | float) and reward < 1:
        outcome = f"failure: reward {reward:g}"
    run_id = path.stem
    if isinstance(data, dict) and data.get("task_id") is not None:
        run_id = f"{path.stem}"
    yield ImportedRun(
        run_id=run_id,
        source="openai_messages",
        steps=steps,
        task=task,
        outcome=outcome,
        synthetic_timing=True,
        attributes={n.RB_METADATA_PREFIX + "reward": float(reward)} if isinstance(reward, int | float) else {},
    )
