"""One model call's step in the LangChain middleware: begun from the conversation, the steered system message sent,
the reply read back, and what the call carries from before the model to after it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain.agents.middleware import ModelRequest, ModelResponse
from langchain.agents.middleware.types import ExtendedModelResponse
from langchain_core.messages import AIMessage, SystemMessage

from rb_otel.integrations.langchain._messages import last_turn
from rb_otel.steering.memo import IdentityMemo
from rb_otel.steering.rendering import system_blocks
from rb_otel.steering.session import SteeringSession
from rb_otel.telemetry import ChatInvocation
from rb_otel.types import StepDecision

__all__ = [
    "ModelResult",
    "StepCall",
    "begin_model_step",
    "reply_of",
    "steered_system_message",
]

ModelResult = ModelResponse | AIMessage | ExtendedModelResponse


def reply_of(response: ModelResult) -> AIMessage | None:
    """The model's reply in what the call returned (``None`` when it holds no AIMessage)."""
    if isinstance(response, AIMessage):
        return response
    if isinstance(response, ExtendedModelResponse):
        response = response.model_response
    for message in response.result:
        if isinstance(message, AIMessage):
            return message
    return None


class StepCall:
    """What ``wrap_model_call`` carries from before the model call to after it; ``chat`` is ``None`` when the
    run is stopped instead (``on_skip="stop"``); ``given_model`` is the model the hook was handed (before
    routing), to tell a retry of the same model from a fallback to another."""

    __slots__ = ("chat", "decision", "given_model", "request")

    def __init__(
        self,
        decision: StepDecision,
        request: ModelRequest[Any],
        chat: ChatInvocation | None,
        given_model: Any = None,
    ) -> None:
        self.decision = decision
        self.request = request
        self.chat = chat
        self.given_model = given_model


#: (the agent's system message, guidance text, cache marks) -> the message sent instead.
_STEERED: IdentityMemo[SystemMessage | None, SystemMessage] = IdentityMemo("langchain.steered_system", 256)


def steered_system_message(
    message: SystemMessage | None, guidance: str, *, cache_control: bool
) -> SystemMessage | None:
    """The system message to send: ``message``'s blocks (last one cache-marked) then the guidance block.

    ``None`` when there is neither a base message nor guidance. Built once per (message, guidance, cache marks)
    and then shared: an agent sends the same system message every call and guidance repeats, and building a
    message validates every block again. Messages sent to a model are not mutated by it.
    """
    hit = _STEERED.get(message, (guidance, cache_control))
    if hit is not None:
        return hit
    base = message.content_blocks if message is not None else []
    blocks = system_blocks(base, guidance, cache_control=cache_control)  # copies each block
    if not blocks:
        return None  # not remembered: nothing to build
    return _STEERED.put(message, SystemMessage(content=blocks), (guidance, cache_control))  # type: ignore[arg-type]


def begin_model_step(session: SteeringSession, messages: Sequence[Any], model_id: str) -> StepDecision:
    """Begin the step of a model call about to be made on ``messages`` (the conversation, no system message):
    the first call's path for a run's first step, else the turn the history ends with. The middleware does it
    live; a resumed run replays it (``resume.py``)."""
    if not session.steps_begun:
        return session.begin_step(thought=None, model_id=model_id)
    turn = last_turn(messages)
    return session.begin_step(
        thought=turn.thought,
        action=turn.action,
        action_input=turn.action_input,
        observation=turn.observation,
        model_id=model_id,
        error=turn.observation_error,
        reasoning=turn.reasoning,
        tokens=turn.tokens,
    )
