"""``SteeredOpenAIModel``: an OpenAI Agents SDK ``Model`` that runs the steering pipeline before every response.

Per call (docs/frameworks.md, "Other frameworks"): the newest assistant text of ``input`` is the thought ->
``begin_step`` -> the
``[REASONBLOCKS]`` block appended to the system instructions when something fired (the Responses and Chat
Completions APIs have no cache marks: one instruction string) -> routing: with a ``model_factory``, the routed
model id (``provider:`` prefix stripped) is built once by it and cached; without one the override is only noted
on the step and the default model answers -> the inner model's ``get_response`` (or ``stream_response``) inside a
``chat`` span -> ``end_step`` with the response's tokens and tool calls.

The run is the current ``Runner.run`` (its SDK trace). With ``hooks=rb.openai_hooks(...)`` the hooks open and end
it; without them the model opens it on the first call and ends it on the first response that asks for no tool
(or on a model error). Model errors reach the runner unchanged.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

from agents.models.interface import Model

from rb_otel.integrations.live_calls import LiveCall, strip_provider
from rb_otel.steering.rendering import guidance_block
from rb_otel.types import RunFields

from ._items import chat_response, last_turn, model_name, tool_call_names
from .runs import AgentRun, OpenAIRuns

__all__ = ["SteeredOpenAIModel"]

_log = logging.getLogger("rb_otel.integrations.openai_agents")
_PROVIDER = "openai"


class SteeredOpenAIModel(Model):
    """Built by ``ReasonBlocks.openai_model(model, model_factory=...)``; give it to ``Agent(model=...)``."""

    def __init__(
        self,
        model: Model,
        runs: OpenAIRuns,
        fields: RunFields,
        *,
        metadata: Mapping[str, Any] | None = None,
        model_factory: Callable[[str], Model] | None = None,
    ) -> None:
        self.model = model
        self._runs = runs
        self._fields = fields
        self._metadata = dict(metadata or {})
        self._factory = model_factory
        self._routed: dict[str, Model] = {}
        self._lock = threading.Lock()

    # -- the Model interface -------------------------------------------------------------------------------

    async def get_response(self, system_instructions: str | None, input: Any, *args: Any, **kwargs: Any) -> Any:
        run, call, target, instructions = self._before(system_instructions, input, _tools_of(args, kwargs))
        if call is None:
            return await target.get_response(instructions, input, *args, **kwargs)
        try:
            response = await target.get_response(instructions, input, *args, **kwargs)
        except BaseException as exc:
            self._failed(run, call, exc)
            raise
        self._answered(run, call, response)
        return response

    async def stream_response(
        self, system_instructions: str | None, input: Any, *args: Any, **kwargs: Any
    ) -> AsyncIterator[Any]:
        run, call, target, instructions = self._before(system_instructions, input, _tools_of(args, kwargs))
        completed = None
        try:
            async for event in target.stream_response(instructions, input, *args, **kwargs):
                if getattr(event, "type", None) == "response.completed":
                    completed = getattr(event, "response", None)
                yield event
        except BaseException as exc:
            if call is not None:
                self._failed(run, call, exc)
            raise
        if call is not None:
            self._answered(run, call, _StreamedResponse(completed))

    async def close(self) -> None:
        await self.model.close()

    # -- internals -----------------------------------------------------------------------------------------

    def _before(
        self, instructions: str | None, items: Any, tools: list[Any] | None
    ) -> tuple[AgentRun | None, LiveCall | None, Model, Any]:
        """Steer the call: the run, its live call (``None`` when steering failed), the model and instructions."""
        try:
            run = self._runs.current() or self._runs.open(
                self._fields, metadata=self._metadata, steer=True, owner="model", tools=tools
            )
            session = run.run.session
            turn = last_turn(items)
            call = LiveCall.begin(
                session,
                run.run.recorder,
                thought=None if session.steps_begun == 0 else turn.thought,
                action=turn.action,
                action_input=turn.action_input,
                observation=turn.observation,
                reasoning=turn.reasoning,
                model_id=model_name(self.model),
            )
            decision = call.decision
            target = self._route(decision.model_override) if decision.model_override else self.model
            if target is self.model:
                decision.model_override = decision.model_override if self._factory is None else None
            guidance = decision.rendered_injection_text
            if guidance:
                block = guidance_block(guidance)
                instructions = f"{instructions}\n\n{block}" if instructions else block
            call.open(request_model=model_name(target), provider=_PROVIDER, input_messages=items)
            return run, call, target, instructions
        except Exception:
            _log.warning("steering the model call failed, calling the model unmodified", exc_info=True)
            return None, None, self.model, instructions

    def _route(self, model_id: str) -> Model:
        """The routed model: built once per id by the factory; the default model without a factory."""
        if self._factory is None:
            return self.model
        with self._lock:
            routed = self._routed.get(model_id)
            if routed is None:
                try:
                    routed = self._routed[model_id] = self._factory(strip_provider(model_id))
                except Exception as exc:
                    _log.warning(
                        "model_factory(%r) failed (%s); keeping the default model", model_id, type(exc).__name__
                    )
                    return self.model
        return routed

    def _answered(self, run: AgentRun | None, call: LiveCall, response: Any) -> None:
        try:
            report, tokens = chat_response(response)
            tools = tool_call_names(getattr(response, "output", None) or ())
            call.succeeded(report, tokens=tokens, tool_calls=tools, model_id=call.decision.model_override or "")
            if run is not None:
                run.tokens += tokens
                if run.owner == "model" and not tools:  # no hooks: the final answer ends the run
                    self._runs.finish(run, "success")
        except Exception:
            _log.warning("recording the model response failed; continuing", exc_info=True)

    def _failed(self, run: AgentRun | None, call: LiveCall, error: BaseException) -> None:
        call.failed(error)
        if run is not None and run.owner == "model":
            self._runs.finish(run, f"failure: {type(error).__name__}", error=error)


class _StreamedResponse:
    """A streamed call's completed Responses ``Response`` read as the ``ModelResponse`` fields we record."""

    def __init__(self, response: Any) -> None:
        self.output = list(getattr(response, "output", None) or [])
        self.usage = getattr(response, "usage", None)
        self.response_id = getattr(response, "id", None)


def _tools_of(args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any] | None:
    """The ``tools`` argument of ``Model.get_response``/``stream_response`` (after ``model_settings``), which says
    the run's kind of agent; ``None`` when the call has none."""
    tools = args[1] if len(args) > 1 else kwargs.get("tools")
    return tools if isinstance(tools, list) else None
