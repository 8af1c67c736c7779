"""``ReasonBlocksRunHooks``: the OpenAI Agents SDK's ``RunHooks``, recording each run as rb-otel telemetry.

Lifecycle (docs/frameworks.md, "OpenAI Agents SDK"): ``on_agent_start`` opens the run (its ``invoke_agent`` span; a
handoff's next agent joins
it); ``on_llm_start`` / ``on_llm_end`` are one ``chat`` span and one step, whose tokens are the whole response's
(ReasonBlocks gives them to the first tool call after the response and 0 to the later ones; here they sit on the
response's own step, whose ``tool_calls`` list those tools: the same run total); ``on_tool_start`` /
``on_tool_end`` are an ``execute_tool`` span (the result cut to 8,000 characters, recorded only with content
capture on); ``on_agent_end`` ends the run with ``success``. Used as a context manager, an exception escaping
the block ends the runs still open with ``failure: <exception>`` and ``__exit__`` flushes the telemetry.

Telemetry only: the run is scored (difficulty, FSM state) and nothing is injected. For steering, give the agent
``rb.openai_model(...)``; the hooks then leave each model call to it (no duplicate ``chat`` span). The SDK's own
tracing is left alone (it exports to its own processors; nothing is bridged into OpenTelemetry).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from types import TracebackType
from typing import Any

from agents import RunHooks

from rb_otel.integrations.live_calls import LiveCall
from rb_otel.types import RunFields

from ._items import OBSERVATION_CHARS, chat_response, last_turn, model_name, tool_call_names
from .runs import OpenAIRuns

__all__ = ["ReasonBlocksRunHooks"]

_log = logging.getLogger("rb_otel.integrations.openai_agents")
_PROVIDER = "openai"


class ReasonBlocksRunHooks(RunHooks[Any]):
    """``Runner.run(agent, input, hooks=rb.openai_hooks(agent_name="support"))``; one instance serves any number
    of sequential or concurrent runs. Never raises into the runner: failures are logged and the run goes on."""

    def __init__(self, runs: OpenAIRuns, fields: RunFields, metadata: Mapping[str, Any] | None = None) -> None:
        self._runs = runs
        self._fields = fields
        self._metadata = dict(metadata or {})

    # -- the run -------------------------------------------------------------------------------------------

    async def on_agent_start(self, context: Any, agent: Any) -> None:
        from .model import SteeredOpenAIModel

        try:  # the run steers when its agent's model is a steered one (which then records each call)
            steer = isinstance(getattr(agent, "model", None), SteeredOpenAIModel)
            tools = getattr(agent, "tools", None)  # the agent's tools say its kind of agent
            self._runs.open(self._fields, metadata=self._metadata, steer=steer, owner="hooks",
                            tools=tools if isinstance(tools, list) else None)  # fmt: skip
        except Exception:
            _log.warning("opening the run failed; continuing", exc_info=True)

    async def on_agent_end(self, context: Any, agent: Any, output: Any) -> None:
        run = self._runs.current()
        if run is not None and run.owner == "hooks":
            self._runs.finish(run, "success")

    # -- model calls ---------------------------------------------------------------------------------------

    async def on_llm_start(self, context: Any, agent: Any, system_prompt: str | None, input_items: Any) -> None:
        from .model import SteeredOpenAIModel

        run = self._runs.current()
        if run is None or isinstance(getattr(agent, "model", None), SteeredOpenAIModel):
            return  # not ours, or the steered model records its own calls
        try:
            turn = last_turn(input_items)
            first = run.run.session.steps_begun == 0
            call = LiveCall.begin(
                run.run.session,
                run.run.recorder,
                thought=None if first else turn.thought,
                action=turn.action,
                action_input=turn.action_input,
                observation=turn.observation,
                reasoning=turn.reasoning,
                model_id=str(getattr(agent, "model", "") or ""),
            )
            # the runner calls each hook in a task of its own: the span cannot be made current across them
            call.open(request_model=_agent_model(agent), provider=_PROVIDER, input_messages=input_items, current=False)
            run.llm = call
        except Exception:
            _log.warning("recording the model call failed; continuing", exc_info=True)

    async def on_llm_end(self, context: Any, agent: Any, response: Any) -> None:
        run = self._runs.current()
        if run is None:
            return
        try:
            report, tokens = chat_response(response)
            run.tokens += tokens  # the running total of the run's tokens (docs/frameworks.md, "Other frameworks")
            call, run.llm = run.llm, None
            if call is not None:
                call.succeeded(report, tokens=tokens, tool_calls=tool_call_names(response.output))
        except Exception:
            _log.warning("recording the model response failed; continuing", exc_info=True)

    # -- tools ---------------------------------------------------------------------------------------------

    async def on_tool_start(self, context: Any, agent: Any, tool: Any) -> None:
        run = self._runs.current()
        if run is None:
            return
        call_id = _call_id(context, tool)
        try:
            run.tools[call_id] = run.run.recorder.start_tool(
                step=max(run.run.session.steps_begun - 1, 0),
                name=str(getattr(tool, "name", "") or ""),
                call_id=str(getattr(context, "tool_call_id", "") or ""),
                arguments=getattr(context, "tool_arguments", None),  # recorded only with content capture on
                current=False,  # the hook returns before the tool runs: nothing could nest under it
                description=str(getattr(tool, "description", "") or ""),
            )
        except Exception:
            _log.warning("recording the tool call failed; continuing", exc_info=True)

    async def on_tool_end(self, context: Any, agent: Any, tool: Any, result: Any) -> None:
        run = self._runs.current()
        call_id = _call_id(context, tool)
        invocation = run.tools.pop(call_id, None) if run is not None else None
        if invocation is not None:
            invocation.stop(str(result)[:OBSERVATION_CHARS])

    # -- as a context manager ------------------------------------------------------------------------------

    def __enter__(self) -> ReasonBlocksRunHooks:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        """An exception escaped the block: the runs these hooks opened and nobody ended fail with it."""
        if exc is not None:
            for run in self._runs.open_runs():
                if run.owner == "hooks":
                    self._runs.finish(run, f"failure: {type(exc).__name__}", error=exc)
        self.close()

    async def __aenter__(self) -> ReasonBlocksRunHooks:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.__exit__(exc_type, exc, tb)

    def close(self, timeout: float = 5.0) -> None:
        """Flush the telemetry of the runs so far (bounded by ``timeout`` seconds)."""
        try:
            self._runs.factory.flush(timeout)
        except Exception:
            _log.warning("flushing the telemetry failed", exc_info=True)


def _agent_model(agent: Any) -> str:
    model = getattr(agent, "model", None)
    return model if isinstance(model, str) and model else model_name(model) if model is not None else ""


def _call_id(context: Any, tool: Any) -> str:
    """A tool call's id (``ToolContext.tool_call_id``), else its tool's name (calls of other tool families)."""
    return str(getattr(context, "tool_call_id", "") or f"tool:{getattr(tool, 'name', '')}")
