"""``SteeredChatModel``: the steering and the telemetry of the middleware, as a chat model wrapping the agent's.

LangChain wraps every middleware ``wrap_model_call`` hook in LangSmith's ``traceable`` and runs it in a copied
context, tracing on or off: ~1 ms per 5-call run on the benchmark machine (``make bench-floors``: an empty hook
against an empty wrapper). A wrapper pays none of it. It is the same pipeline (the middleware's own code steers
and records each call, the run guard opens and closes runs and records tools), reached from the model's
``_generate`` instead of a hook::

    agent = create_agent(rb.chat_model(model, agent_name="coder"), tools)

What it cannot do, having no hook: return ``rb_step_log`` in the agent's state (read ``model.step_log_for(run_id)``
or ``model.step_log`` instead), or stream tokens (``stream_mode="messages"`` still gets every message, whole).
Routing works with tools bound: the tools the agent binds are bound to the routed model too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain.agents.middleware import ModelRequest, ModelResponse
from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.language_models.base import LangSmithParams
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable, RunnableBinding
from langchain_core.tools import BaseTool
from pydantic import ConfigDict, Field, PrivateAttr

from rb_otel.steering.pilot.kinds import tool_names
from rb_otel.types import StepLogEntry

from ._guard import guard
from ._model_step import StepCall, reply_of
from .middleware import ReasonBlocksMiddleware
from .runs import AgentRun

__all__ = ["SteeredChatModel"]

#: The tools ``bind_tools`` was given, and its keyword arguments (``tool_choice``, ...).
_ToolBinding = tuple[tuple[Any, ...], dict[str, Any]]
#: Tool-bound copies one model keeps (an agent has one set of tools; dynamic tool sets could have more).
_MAX_BOUND_COPIES = 32


class SteeredChatModel(BaseChatModel):
    """A chat model that steers and records every call of ``inner`` (built by ``ReasonBlocks.chat_model``).

    Calls outside an agent graph run (``model.invoke(...)`` on its own) go to ``inner`` unsteered, as the
    middleware's hook does. Steering failures are logged and the call goes ahead unmodified; the model's own
    exceptions propagate unchanged.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    inner: BaseChatModel
    steering: ReasonBlocksMiddleware = Field(exclude=True)
    tool_binding: _ToolBinding | None = None
    _bound_copies: dict[Any, SteeredChatModel] = PrivateAttr(default_factory=dict)
    _bound_targets: dict[int, tuple[BaseChatModel, BaseChatModel, dict[str, Any]]] = PrivateAttr(default_factory=dict)

    # -- what the agent and LangChain's callbacks see: the inner model --------------------------------------

    @property
    def _llm_type(self) -> str:
        return self.inner._llm_type

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return dict(self.inner._identifying_params)

    def _get_ls_params(self, stop: list[str] | None = None, **kwargs: Any) -> LangSmithParams:
        return self.inner._get_ls_params(stop=stop, **kwargs)

    @property
    def step_log(self) -> list[StepLogEntry]:
        """The step log of the most recent run."""
        return self.steering.step_log

    def step_log_for(self, run_id: str) -> list[StepLogEntry] | None:
        """The step log of run ``run_id`` (one of the 256 most recently finished, or in flight)."""
        return self.steering.step_log_for(run_id)

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Runnable[LanguageModelInput, AIMessage]:
        """Remember the tools; they are bound to whichever model a call is routed to.

        The agent binds its tools again on every model call: the copy is built once per set of tools and options
        (LangChain caches per model instance what its callbacks serialize of it).
        """
        key = (tuple(map(id, tools)), tuple(sorted((k, repr(v)) for k, v in kwargs.items())))
        copy = self._bound_copies.get(key)
        if copy is None:
            if len(self._bound_copies) >= _MAX_BOUND_COPIES:
                self._bound_copies.clear()
            # the copy holds the tools, so their ids in the key stay theirs while the entry exists
            copy = self.model_copy(update={"tool_binding": (tuple(tools), dict(kwargs))})
            copy._bound_copies, copy._bound_targets = {}, {}
            self._bound_copies[key] = copy
        return copy

    def __repr__(self) -> str:
        # LangChain's callbacks serialize the model (its repr, for a model that is not serializable)
        return f"SteeredChatModel(inner={type(self.inner).__name__})"

    # -- calls ----------------------------------------------------------------------------------------------

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        run, call = self._before(messages)
        if call is None:
            return self._call(self.inner, messages, stop, run_manager, kwargs)
        guard().claim(run_manager.run_id if run_manager is not None else None)  # this call is the step's own
        if call.chat is None:
            return _result(self.steering._stopped(run, call))
        try:
            result = self._call(call.request.model, _sent(call.request), stop, run_manager, kwargs)
        except BaseException as exc:
            self.steering._model_failed(run, call, exc)
            raise
        self._after(run, call, result)
        return result

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        run, call = self._before(messages)
        if call is None:
            return await self._acall(self.inner, messages, stop, run_manager, kwargs)
        guard().claim(run_manager.run_id if run_manager is not None else None)
        if call.chat is None:
            return _result(self.steering._stopped(run, call))
        try:
            result = await self._acall(call.request.model, _sent(call.request), stop, run_manager, kwargs)
        except BaseException as exc:
            self.steering._model_failed(run, call, exc)
            raise
        self._after(run, call, result)
        return result

    # -- internals ------------------------------------------------------------------------------------------

    def _before(self, messages: list[BaseMessage]) -> tuple[AgentRun | None, StepCall | None]:
        system = messages[0] if messages and isinstance(messages[0], SystemMessage) else None
        conversation: list[Any] = messages[1:] if system is not None else messages
        # the tools the agent bound say the run's kind of agent (none bound: a kind not known, not customer service)
        tools: list[BaseTool | dict[str, Any]] = (
            [{"name": name} for name in tool_names(self.tool_binding[0])] if self.tool_binding else []
        )
        request: ModelRequest[Any] = ModelRequest(
            model=self.inner,
            messages=conversation,
            system_message=system,
            tool_choice=None,
            tools=tools,
            response_format=None,
            state=None,
            runtime=None,
        )
        return self.steering._before_model(request)

    def _after(self, run: AgentRun | None, call: StepCall, result: ChatResult) -> None:
        reply = next((g.message for g in result.generations if isinstance(g.message, AIMessage)), None)
        self.steering._after_model(run, call, ModelResponse(result=[reply] if reply is not None else []))

    def _target(self, model: BaseChatModel) -> tuple[BaseChatModel, dict[str, Any]]:
        """``model`` with the agent's tools bound: the model whose ``_generate`` to call, and its bound kwargs.

        Bound once per model (the agent's own, or a routed one) and kept on this tool-bound copy: the agent calls
        the same copy on every model call, and binding converts every tool's schema again."""
        if self.tool_binding is None:
            return model, {}
        bound = self._bound_targets.get(id(model))
        if bound is not None and bound[0] is model:
            return bound[1], bound[2]
        tools, options = self.tool_binding
        binding: Runnable[Any, Any] = model.bind_tools(list(tools), **options)
        if isinstance(binding, RunnableBinding) and isinstance(binding.bound, BaseChatModel):
            target, kwargs = binding.bound, dict(binding.kwargs)
        elif isinstance(binding, BaseChatModel):
            target, kwargs = binding, {}
        else:
            raise TypeError(f"{type(model).__name__}.bind_tools returned {type(binding).__name__}, not a chat model")
        self._bound_targets[id(model)] = (model, target, kwargs)  # holds the model: its id stays its own
        return target, kwargs

    def _call(
        self,
        model: BaseChatModel,
        messages: list[BaseMessage],
        stop: list[str] | None,
        run_manager: CallbackManagerForLLMRun | None,
        kwargs: dict[str, Any],
    ) -> ChatResult:
        target, bound = self._target(model)
        return target._generate(messages, stop=stop, run_manager=run_manager, **{**bound, **kwargs})

    async def _acall(
        self,
        model: BaseChatModel,
        messages: list[BaseMessage],
        stop: list[str] | None,
        run_manager: AsyncCallbackManagerForLLMRun | None,
        kwargs: dict[str, Any],
    ) -> ChatResult:
        target, bound = self._target(model)
        return await target._agenerate(messages, stop=stop, run_manager=run_manager, **{**bound, **kwargs})


def _sent(request: ModelRequest[Any]) -> list[BaseMessage]:
    """The messages of a (possibly steered) request, system message first."""
    system = request.system_message
    return [system, *request.messages] if system is not None else list(request.messages)


def _result(response: Any) -> ChatResult:
    """The chat result carrying a hook's reply (the stop message of a stopped run)."""
    reply = reply_of(response)
    return ChatResult(generations=[ChatGeneration(message=reply)] if reply is not None else [])
