"""OpenHands event histories: an evaluation output (``{"history": [...]}``) or a bare list of events.

Each agent action (anything but the system prompt) is a model call; the observation whose ``cause`` is that
action is its tool result. Token counts are the deltas of ``llm_metrics.accumulated_token_usage``; events carry
real timestamps.

The agent (docs/importers.md, "Agent identity"): the harness is ``openhands``, with the agent class an evaluation
output's ``metadata.agent_class`` names (``openhands CodeActAgent``); the model is ``metadata.llm_config.model``
(:func:`~rb_otel.importers.identity.agent_model`), else the first step's.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rb_otel.importers.formats.records import as_int, iso_seconds, load_json, text
from rb_otel.importers.formats.records import observation as kept_observation
from rb_otel.importers.identity import agent_model
from rb_otel.importers.model import ImportedRun, ImportedStep, ImportedTool, ImportProblem, RecordError

__all__ = ["read"]

_NOT_MODEL_CALLS = frozenset({"system", "recall", "change_agent_state", "null"})


def _mapping(value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        return value
    if isinstance(value, str) and value.startswith("{"):
        try:
            parsed = ast.literal_eval(value)  # some dumps store dicts as Python reprs
        except (ValueError, SyntaxError):
            return {}
        return parsed if isinstance(parsed, dict) else {}
    return {}


class _TokenDeltas:
    """OpenHands reports accumulated usage per event: a step's tokens are the difference to the previous one."""

    def __init__(self) -> None:
        self.prompt = self.completion = 0

    def of(self, usage: dict[str, Any]) -> tuple[int | None, int | None]:
        if not usage:
            return None, None
        prompt, completion = as_int(usage.get("prompt_tokens")), as_int(usage.get("completion_tokens"))
        deltas = max(prompt - self.prompt, 0), max(completion - self.completion, 0)
        self.prompt, self.completion = prompt, completion
        return deltas


def read(path: Path, problems: list[ImportProblem]) -> Iterator[ImportedRun]:
    data = load_json(path)
    events = data.get("history") if isinstance(data, dict) else data
    if not isinstance(events, list):
        raise RecordError(str(path), "top level", "expected a list of events or an object with 'history'")
    observations: dict[str, dict[str, Any]] = {}
    for event in events:
        if isinstance(event, dict) and event.get("observation") and event.get("cause") is not None:
            observations[str(event["cause"])] = event
    steps: list[ImportedStep] = []
    tokens = _TokenDeltas()
    first_time = None
    task = ""
    for i, event in enumerate(events):
        if not isinstance(event, dict):
            problems.append(ImportProblem(str(path), f"history[{i}]", "expected an event object"))
            continue
        timestamp = iso_seconds(event.get("timestamp"))
        first_time = first_time if first_time is not None else timestamp
        if event.get("source") == "user" and event.get("action") == "message" and not task:
            task = text(event.get("message"))[:2000]
        action = event.get("action")
        if event.get("source") != "agent" or not action or action in _NOT_MODEL_CALLS:
            continue
        observation = observations.get(str(event.get("id")))
        steps.append(
            _step(len(steps), event, action=str(action), observation=observation, timestamp=timestamp, tokens=tokens)
        )
    error = data.get("error") if isinstance(data, dict) else None
    run_id = str(data.get("instance_id")) if isinstance(data, dict) and data.get("instance_id") else path.stem
    last_time = max((s.timestamp for s in steps if s.timestamp is not None), default=None)
    metadata = _mapping(data.get("metadata")) if isinstance(data, dict) else {}
    agent_class = str(metadata.get("agent_class") or "")
    model = str(_mapping(metadata.get("llm_config")).get("model") or next((s.model for s in steps if s.model), ""))
    yield ImportedRun(
        run_id=run_id,
        source="openhands",
        harness=f"openhands {agent_class}".strip(),
        model=agent_model(model),
        steps=steps,
        task=task,
        outcome=f"failure: {str(error)[:80]}" if error else "success",
        start=first_time,
        end=last_time,
        synthetic_timing=first_time is None,
    )


def _step(
    index: int,
    event: dict[str, Any],
    *,
    action: str,
    observation: dict[str, Any] | None,
    timestamp: float | None,
    tokens: _TokenDeltas,
) -> ImportedStep:
    """One agent action event (and the observation it caused) as a model-call step."""
    meta = _mapping(event.get("tool_call_metadata"))
    usage = _mapping(_mapping(event.get("llm_metrics")).get("accumulated_token_usage"))
    input_tokens, output_tokens = tokens.of(usage)
    response = _mapping(meta.get("model_response"))
    choices = response.get("choices") if isinstance(response.get("choices"), list) else []
    first_choice = choices[0] if choices and isinstance(choices[0], dict) else {}
    message: dict[str, Any] = first_choice["message"] if isinstance(first_choice.get("message"), dict) else {}
    args = _mapping(event.get("args"))
    thought = text(message.get("content")) or text(args.get("thought")) or text(event.get("message"))
    tool_name = str(meta.get("function_name") or action)
    result = text(observation.get("content")) if observation else None
    tools = []
    if action not in ("message", "finish", "think"):
        failed = observation is not None and (
            observation.get("observation") == "error" or str(observation.get("success", "")).lower() == "false"
        )
        tools.append(
            ImportedTool(
                name=tool_name,
                call_id=str(meta.get("tool_call_id") or ""),
                arguments=args or text(event.get("args")),
                result=result,
                error="tool_error" if failed else None,
            )
        )
    duration = None
    if observation is not None and timestamp is not None:
        end = iso_seconds(observation.get("timestamp"))
        duration = None if end is None else max(end - timestamp, 0.0)
    return ImportedStep(
        index=index,
        thought=thought,
        action=tool_name if tools else None,
        action_input=text(args.get("command") or event.get("args"))[:2000] if tools else None,
        observation=kept_observation(result),
        tools=tools,
        tokens=(input_tokens or 0) + (output_tokens or 0),
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        model=str(response.get("model") or usage.get("model") or ""),
        finish_reason=str(first_choice.get("finish_reason") or ""),
        timestamp=timestamp,
        duration_s=duration,
    )
