"""Model calls in a run that no step made: another middleware's, a tool's, a subagent's, or a step's fallback.

The guard (``_guard.py``) reports a chat model call in one of our agent graphs when it ends, unless it was a
step's own (the middleware marks that one, the wrapper claims it). It is recorded as a ``chat`` span under the
run with ``rb.call.source`` and its usage, counted in the run's totals, with no step, state or guidance; except
when a step's call failed in the same model node just before: then it is that step's next attempt (the model
wrapper under ``ModelFallbackMiddleware``, whose backup model is not wrapped).
"""

from __future__ import annotations

import time
from typing import Any

from langchain_core.messages import AIMessage

from ._guard import ModelCall
from ._messages import chat_response
from .runs import AgentRun

__all__ = ["record_model_call"]


def record_model_call(run: AgentRun, call: ModelCall, reply: Any, error: BaseException | None) -> None:
    """Record ``call`` (it returned ``reply``, an ``AIMessage``, or raised ``error``) on ``run``."""
    if run.failed is not None and run.failed[1] == call.node:
        _fallback_attempt(run, call, reply, error)
        return
    tokens, details = 0, None
    if isinstance(reply, AIMessage):
        tokens, _, details = chat_response(reply)
    run.recorder.model_call(
        source=call.source,
        request_model=call.model,
        provider=call.provider,
        start_time=call.started,
        duration=time.perf_counter() - call.started_perf,
        tokens=tokens,
        response=details,
        error=error,
    )


def _fallback_attempt(run: AgentRun, call: ModelCall, reply: Any, error: BaseException | None) -> None:
    """The next attempt of the step whose call failed: its ``chat`` span, and the step ends with it."""
    assert run.failed is not None
    decision = run.failed[0].decision
    decision.entry.attempts += 1
    chat = run.recorder.start_chat(
        decision.entry,
        request_model=call.model,
        provider=call.provider,
        steering_ms=decision.steering_ms,
        composite=decision.evaluation.composite if decision.evaluation else None,
        start_time=call.started,
        current=False,
    )
    if error is not None or not isinstance(reply, AIMessage):
        chat.fail(error if error is not None else RuntimeError("the model returned no message"))
        return  # still failed: a further fallback is its next attempt
    run.failed = None
    tokens, tool_calls, details = chat_response(reply)
    chat.stop(details, step=run.session.end_step(decision, tokens=tokens, tool_calls=tool_calls))
