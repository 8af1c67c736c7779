"""A run resumed by another worker: its steering rebuilt from the agent's graph state, its tools recorded.

A run is the graph's, not the process's. What it needs to continue is in the checkpointed state: its run id
(``rb_run_id``), its step log (``rb_step_log``, whose last entry names the part that ended at the interrupt, linked
from the resumed part's ``invoke_agent``) and the conversation itself. The steering session (FSM, trace state, monitors'
window, the scorer's run) is a deterministic function of the turns it was given, so the worker that resumes
replays those turns through a fresh session with no emitter (no span, no metric, no model call) and continues
from there: the same step numbers and states as the run without the interrupt. Tools that ran in the resumed
graph before its first model call (a call approved at the interrupt) are recorded under the resumed part.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage

from rb_otel.steering.session import SteeringSession
from rb_otel.types import StepLogEntry

from ._guard import EarlyTool
from ._messages import chat_response
from ._model_step import begin_model_step
from .runs import AgentRun
from .tool_calls import OpenTool

__all__ = ["RUN_KEY", "STEP_LOG_KEY", "record_early_tools", "replay", "resumable"]

_log = logging.getLogger("rb_otel.integrations.langchain")

RUN_KEY = "rb_run_id"
STEP_LOG_KEY = "rb_step_log"


def resumable(state: Any) -> tuple[str, list[dict[str, Any]], str] | None:
    """``(run id, step log, previous part)`` of a run the state says was in progress, else ``None``; the previous
    part is the one that made the last step (its entry's ``part``; ``""`` when it names none)."""
    if not isinstance(state, Mapping):
        return None
    key, log = state.get(RUN_KEY), state.get(STEP_LOG_KEY)
    if not isinstance(key, str) or not key or not isinstance(log, list) or not log:
        return None
    last = log[-1]
    return key, log, str(last.get("part") or "") if isinstance(last, Mapping) else ""


def replay(session: SteeringSession, messages: Sequence[BaseMessage], steps: int, model_id: str) -> None:
    """Give ``session`` the first ``steps`` model calls of ``messages`` again, as the middleware gave them live
    (the turn before each model reply; the first call's path for the first), with no emitter: nothing is
    recorded or sent, the session's state becomes the run's."""
    emitter, session.emitter = session.emitter, None
    try:
        replies = [i for i, m in enumerate(messages) if isinstance(m, AIMessage)][:steps]
        for index in replies:
            decision = begin_model_step(session, messages[:index], model_id)
            reply = messages[index]
            assert isinstance(reply, AIMessage)
            tokens, tool_calls, _ = chat_response(reply)
            session.end_step(decision, tokens=tokens, tool_calls=tool_calls)
    finally:
        session.emitter = emitter


def restore_log(session: SteeringSession, log: Sequence[Mapping[str, Any]]) -> None:
    """The session's step log is the run's as recorded (its times, models and guidance), not the replay's."""
    try:
        session.step_log[:] = [StepLogEntry.from_dict(dict(entry)) for entry in log]
    except ValueError:
        _log.warning("the step log in the agent's state could not be read; the replayed one is kept", exc_info=True)


def record_early_tools(run: AgentRun, early: Sequence[EarlyTool], *, capture: bool) -> None:
    """``execute_tool`` spans, under the resumed part, of the tools that ran before it started."""
    step = max(run.session.steps_begun - 1, 0)
    for tool in early:
        invocation = run.recorder.start_tool(
            step=step,
            name=tool.name,
            call_id=tool.call_id,
            arguments=tool.arguments if capture else None,
            start_time=tool.started,
            current=False,
            description=tool.description,
        )
        OpenTool(invocation).end(tool.output, tool.error, end_time=tool.ended)
