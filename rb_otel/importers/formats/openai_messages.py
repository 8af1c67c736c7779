"""OpenAI-style message lists (as in tau-bench): assistant turns are model calls; ``tool`` messages, matched by
``tool_call_id`` (or ``id``, as tau2-bench writes them), are their tool results. Accepts ``{"traj": [...]}``
(one tau-bench run: its harness is ``tau-bench``), ``{"messages": [...]}`` or a bare list; a ``reward`` below 1
makes the run a failure.

A tool call's function may be nested (``{"function": {"name", "arguments"}}``, OpenAI) or flat (``{"name",
"arguments"}``, tau2-bench); reasoning content (``reasoning_content``/``reasoning``) and the argument of a
``think`` tool are part of the step's thought.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rb_otel.importers.formats.records import load_json, text
from rb_otel.importers.formats.records import observation as kept_observation
from rb_otel.importers.model import ImportedRun, ImportedStep, ImportedTool, ImportProblem, RecordError
from rb_otel.telemetry import names as n

__all__ = ["TAU_BENCH", "ToolResults", "read", "steps_from_messages"]

#: The harness of a tau-bench (v1) result (``{task_id, reward, info, traj}``), told by that structure.
TAU_BENCH = "tau-bench"
#: Tools whose arguments are the agent's reasoning rather than an action on the world.
THINK_TOOLS = frozenset({"think", "thinking", "reason", "scratchpad"})


def _arguments(raw: Any) -> Any:
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except ValueError:
            return raw
    return raw


class ToolResults:
    """Tool results by call id, each taken once, by the first call at or before it: an id reused later in a run
    (tau2's voice-era agents number calls per turn) is the later call's, never the first's."""

    def __init__(self, messages: list[Any]) -> None:
        self._by_id: dict[str, deque[tuple[int, dict[str, Any]]]] = {}
        for i, m in enumerate(messages):
            if isinstance(m, dict) and m.get("role") == "tool":
                self._by_id.setdefault(str(m.get("tool_call_id") or m.get("id")), deque()).append((i, m))

    def take(self, call_id: str, position: int) -> dict[str, Any] | None:
        """The first result for ``call_id`` after message ``position`` not taken yet (earlier ones are orphans)."""
        queue = self._by_id.get(call_id)
        while queue and queue[0][0] < position:
            queue.popleft()
        return queue.popleft()[1] if queue else None


def _tool(call: Any, results: ToolResults, position: int) -> ImportedTool:
    call = call if isinstance(call, dict) else {}
    function = call.get("function") if isinstance(call.get("function"), dict) else call
    call_id = str(call.get("id") or "")
    result = results.take(call_id, position)
    error = None
    if result is not None and (result.get("error") is True or str(result.get("error", "")).lower() == "true"):
        error = "tool_error"
    return ImportedTool(
        name=str(function.get("name") or "unknown"),
        call_id=call_id,
        arguments=_arguments(function.get("arguments")),
        result=text(result.get("content")) if result else None,
        error=error,
    )


def _thought(message: dict[str, Any], tools: list[ImportedTool]) -> str:
    parts = [text(message.get("reasoning_content") or message.get("reasoning")), text(message.get("content"))]
    for tool in tools:
        if tool.name.lower() in THINK_TOOLS:
            args = tool.arguments
            parts.append(text(args.get("thought") or args) if isinstance(args, dict) else text(args))
    return "\n".join(p for p in parts if p)


def steps_from_messages(
    messages: list[Any], path: str, where: str, problems: list[ImportProblem]
) -> tuple[list[ImportedStep], str]:
    """The model calls in ``messages`` and the first user message (the task). Bad messages become problems.

    A step's observation is its first tool result or, for a turn without tool calls, the next user message
    (a simulated user's reply is what the agent sees next). A call's result is the first tool message with its id
    after the call (ids may be reused later in a run).
    """
    results = ToolResults(messages)
    steps: list[ImportedStep] = []
    task = ""
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or "role" not in message:
            problems.append(ImportProblem(path, f"{where}[{i}]", "expected an object with a 'role'"))
            continue
        if message["role"] == "user" and not task:
            task = text(message.get("content"))[:2000]
        if message["role"] != "assistant":
            continue
        tools = [_tool(call, results, i) for call in message.get("tool_calls") or []]
        acting = [t for t in tools if t.name.lower() not in THINK_TOOLS]
        observation = acting[0].result if acting else _next_user_text(messages, i)
        steps.append(
            ImportedStep(
                index=len(steps),
                thought=_thought(message, tools),
                tools=tools,
                action=acting[0].name if acting else None,
                action_input=json.dumps(acting[0].arguments, sort_keys=True, default=str) if acting else None,
                observation=kept_observation(observation),
            )
        )
    return steps, task


def _next_user_text(messages: list[Any], i: int) -> str | None:
    for message in messages[i + 1 :]:
        if isinstance(message, dict) and message.get("role") == "user":
            return text(message.get("content"))
        if isinstance(message, dict) and message.get("role") == "assistant":
            return None
    return None


def read(path: Path, problems: list[ImportProblem]) -> Iterator[ImportedRun]:
    data = load_json(path)
    messages = data if isinstance(data, list) else (data.get("traj") or data.get("messages"))
    if not isinstance(messages, list):
        raise RecordError(str(path), "top level", "expected a message list, or an object with 'traj' or 'messages'")
    steps, task = steps_from_messages(messages, str(path), "message", problems)
    outcome = "success"
    reward = data.get("reward") if isinstance(data, dict) else None
    if isinstance(reward, int | float) and reward < 1:
        outcome = f"failure: reward {reward:g}"
    # one tau-bench result saved alone ({task_id, reward, info, traj}): its harness, by the file's own structure
    tau_bench = isinstance(data, dict) and isinstance(data.get("traj"), list) and "reward" in data
    yield ImportedRun(
        run_id=path.stem,
        source="openai_messages",
        harness=TAU_BENCH if tau_bench else "",
        steps=steps,
        task=task,
        task_id=str(data.get("task_id")) if isinstance(data, dict) and data.get("task_id") is not None else "",
        outcome=outcome,
        synthetic_timing=True,
        attributes={n.RB_METADATA_PREFIX + "reward": float(reward)} if isinstance(reward, int | float) else {},
    )
