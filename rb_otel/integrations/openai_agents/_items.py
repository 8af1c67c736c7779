"""Reading the OpenAI Agents SDK's Responses-format items (dicts or the SDK's pydantic objects); no state."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rb_otel.telemetry import ChatResponse

__all__ = ["Turn", "chat_response", "last_turn", "model_name", "tool_call_names"]

#: A tool observation is cut to this many characters before it is recorded (docs/frameworks.md, "Other frameworks").
OBSERVATION_CHARS = 8000


def _get(item: Any, key: str) -> Any:
    return item.get(key) if isinstance(item, dict) else getattr(item, key, None)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = [_get(part, "text") for part in content or ()]
    return " ".join(p for p in parts if isinstance(p, str) and p)


@dataclass(frozen=True, slots=True)
class Turn:
    """The newest assistant text, its first tool call, and the newest tool output of a conversation."""

    thought: str = ""
    action: str | None = None
    action_input: str | None = None
    observation: str | None = None
    reasoning: str = ""


def last_turn(items: str | Sequence[Any]) -> Turn:
    """Read the conversation the model is about to be given (``input``: a string or Responses items)."""
    if isinstance(items, str):
        return Turn()
    thought = reasoning = ""
    action = action_input = observation = None
    for item in reversed(items):
        kind = _get(item, "type")
        if kind == "function_call_output" and observation is None and not thought:
            output = _get(item, "output")
            observation = (output if isinstance(output, str) else json.dumps(output, default=str))[:OBSERVATION_CHARS]
        elif kind == "function_call" and not thought:
            action, action_input = str(_get(item, "name") or ""), str(_get(item, "arguments") or "")
        elif kind == "reasoning" and not thought:
            reasoning = _text(_get(item, "summary")) or reasoning
        elif (kind in (None, "message")) and _get(item, "role") == "assistant":
            thought = _text(_get(item, "content"))
            if thought:
                break
    return Turn(thought or reasoning, action, action_input, observation, reasoning)


def tool_call_names(output: Sequence[Any]) -> list[str]:
    """The tools a response asks for (function calls, in order)."""
    return [str(_get(item, "name") or "") for item in output if _get(item, "type") == "function_call"]


def chat_response(response: Any) -> tuple[ChatResponse, int]:
    """What the provider reported (for the ``chat`` span) and the call's total tokens (for the step)."""
    usage = _get(response, "usage")
    inputs, outputs = _get(usage, "input_tokens"), _get(usage, "output_tokens")
    cached = _get(_get(usage, "input_tokens_details"), "cached_tokens")
    reasoning = _get(_get(usage, "output_tokens_details"), "reasoning_tokens")
    total = _get(usage, "total_tokens") or (inputs or 0) + (outputs or 0)
    report = ChatResponse(
        response_id=str(_get(response, "response_id") or ""),
        finish_reasons=["tool_calls" if tool_call_names(_get(response, "output") or ()) else "stop"],
        input_tokens=inputs if isinstance(inputs, int) else None,
        output_tokens=outputs if isinstance(outputs, int) else None,
        cache_read_tokens=cached if isinstance(cached, int) and cached else None,
        reasoning_tokens=reasoning if isinstance(reasoning, int) and reasoning else None,
    )
    return report, int(total or 0)


def model_name(model: Any) -> str:
    """The model id a Model instance calls (``OpenAIResponsesModel.model``), else its class name."""
    name = getattr(model, "model", None)
    return name if isinstance(name, str) and name else type(model).__name__
