"""How a LangChain run rb-otel stops at SKIP ends: the final message the caller gets, and how to recognise it."""

from __future__ import annotations

from langchain_core.messages import AIMessage

from rb_otel.types import StepLogEntry

__all__ = ["ON_SKIP", "STOPPED", "stop_message", "was_stopped"]

#: What a run that reaches SKIP does: ``"escalate"`` (the default: guidance and the SKIP route of ``model_routing``,
#: as ever) or ``"stop"`` (the model is not called; the run ends with :func:`stop_message` as its final answer
#: and ``rb.outcome`` ``stopped``).
ON_SKIP = ("escalate", "stop")
#: The ``response_metadata`` key that marks the final message of a run rb-otel stopped.
STOPPED = "rb_otel_stopped"


def stop_message(entry: StepLogEntry) -> AIMessage:
    """The final answer of a run rb-otel stopped at SKIP: no tool calls (the agent ends), marked with
    ``response_metadata[STOPPED]`` so the caller can tell it from the model's own (:func:`was_stopped`)."""
    return AIMessage(
        content=(
            f"[rb-otel] This run was stopped at step {entry.step}: its risk of failing stayed high enough to reach "
            "SKIP, and the steering layer is set to stop such runs (on_skip='stop')."
        ),
        response_metadata={STOPPED: True, "rb_step": entry.step, "rb_fsm_state": entry.fsm_state},
    )


def was_stopped(message: object) -> bool:
    """Whether ``message`` (e.g. ``out["messages"][-1]``) is the final answer of a run rb-otel stopped."""
    return isinstance(message, AIMessage) and bool(message.response_metadata.get(STOPPED))
