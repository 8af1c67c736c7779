"""The agent-state face of the middleware: ``rb_run_id`` and ``rb_step_log`` in what ``invoke`` returns.

``StatefulReasonBlocksMiddleware`` (what ``rb.middleware()`` builds unless ``step_log_in_state=False``) returns
each model call's step as a state update of the model node it ran in, reduced by :func:`add_steps`; no graph
node is added.
"""

from __future__ import annotations

from typing import Annotated, Any, NotRequired

from langchain.agents.middleware import AgentState, ModelResponse
from langchain.agents.middleware.types import ExtendedModelResponse, OmitFromInput
from langchain_core.messages import AIMessage
from langgraph.types import Command

from rb_otel.types import StepLogEntry

from ._model_step import ModelResult
from .middleware import ReasonBlocksMiddleware
from .runs import AgentRun

__all__ = ["RBState", "StatefulReasonBlocksMiddleware", "add_steps"]


def add_steps(log: list[dict[str, Any]] | None, new: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Reducer of ``rb_step_log``: a model call's entry replaces any entry from its step on, and is appended.

    So a run's log grows one entry per call (O(1) state update per step), and a step 0 starts the log afresh
    (the next run on a checkpointed thread); a resumed run continues its own numbering and appends.
    """
    if not new:
        return list(log or ())
    first = new[0]["step"]
    if not log or log[-1]["step"] < first:
        return [*(log or ()), *new]
    return [entry for entry in log if entry["step"] < first] + new


class RBState(AgentState[Any]):
    """Agent state fields rb_otel adds: the run key, and the run's step log in the returned state."""

    rb_run_id: NotRequired[Annotated[str, OmitFromInput]]
    #: Each entry carries the part of the run that made it (``part``): a worker that resumes the thread links its
    #: part to the last one (``resume.py``). Not a channel of its own: LangGraph reads every channel at every node.
    rb_step_log: NotRequired[Annotated[list[dict[str, Any]], OmitFromInput, add_steps]]


class StatefulReasonBlocksMiddleware(ReasonBlocksMiddleware):
    """``ReasonBlocksMiddleware`` that also returns ``rb_run_id`` and ``rb_step_log`` in the agent's output state.

    Each model call returns its step's entry as a state update of the model node it ran in (reduced by
    :func:`add_steps`), so no graph node is added; the state holds the run's log as far as it has got.
    """

    state_schema = RBState

    def _with_state_update(self, run: AgentRun, entry: StepLogEntry, response: ModelResult) -> ModelResult:
        if isinstance(response, ExtendedModelResponse):
            if response.command is not None:  # one command per response: an inner middleware's wins
                return response
            response = response.model_response
        elif isinstance(response, AIMessage):
            response = ModelResponse(result=[response])
        values: dict[str, Any] = {"rb_step_log": [entry.as_dict()]}
        if not run.run_id_in_state:  # written once per part of a run, not on every step
            values["rb_run_id"] = run.key
            run.run_id_in_state = True
        return ExtendedModelResponse(model_response=response, command=Command(update=values))
