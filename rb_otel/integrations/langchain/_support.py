"""Small helpers of the LangChain middleware: reading responses and configs, context tokens, cached blocks."""

from __future__ import annotations

import contextlib
import uuid
from typing import Any

from langchain.agents.middleware import ModelRequest, ModelResponse
from langchain.agents.middleware.types import ExtendedModelResponse
from langchain_core.messages import AIMessage, SystemMessage
from langgraph.config import get_config
from opentelemetry import context as otel_context

from rb_otel.types import StepDecision

__all__ = ["ModelResult", "StepCall", "base_blocks", "detach", "node_run_id", "reply_of", "thread_id_of_config"]

ModelResult = ModelResponse | AIMessage | ExtendedModelResponse


def reply_of(response: ModelResult) -> AIMessage | None:
    if isinstance(response, AIMessage):
        return response
    if isinstance(response, ExtendedModelResponse):
        response = response.model_response
    for message in response.result:
        if isinstance(message, AIMessage):
            return message
    return None


class StepCall:
    """What ``wrap_model_call`` carries from before the model call to after it."""

    __slots__ = ("decision", "request", "token")

    def __init__(self, decision: StepDecision, request: ModelRequest[Any], token: object) -> None:
        self.decision = decision
        self.request = request
        self.token = token


_BASE_BLOCKS: dict[int, tuple[SystemMessage, list[dict[str, Any]]]] = {}


def base_blocks(message: SystemMessage | None) -> list[dict[str, Any]]:
    """The system message's content blocks; cached by identity (an agent sends the same message every call)."""
    if message is None:
        return []
    hit = _BASE_BLOCKS.get(id(message))
    if hit is not None and hit[0] is message:
        return hit[1]
    blocks = [dict(b) for b in message.content_blocks]
    if len(_BASE_BLOCKS) > 256:
        _BASE_BLOCKS.clear()
    _BASE_BLOCKS[id(message)] = (message, blocks)
    return blocks


def detach(token: object | None) -> None:
    if token is None:
        return
    with contextlib.suppress(Exception):  # detaching in another context (abandoned generator) is harmless
        otel_context.detach(token)  # type: ignore[arg-type]


def node_run_id() -> uuid.UUID | None:
    try:
        callbacks = get_config().get("callbacks")
    except RuntimeError:  # not inside a runnable
        return None
    parent = getattr(callbacks, "parent_run_id", None)
    return parent if isinstance(parent, uuid.UUID) else None


def thread_id_of_config() -> str:
    """The LangGraph ``thread_id`` of the current run (``""`` without a checkpointer thread)."""
    try:
        configurable = get_config().get("configurable") or {}
    except RuntimeError:
        return ""
    thread = configurable.get("thread_id")
    return str(thread) if thread else ""
