"""The adapters of ``ReasonBlocks`` beyond the LangChain middleware: one style, each a method of the facade.

``rb.chat_model()`` (LangChain, no hook), ``rb.anthropic_loop()`` / ``rb.anthropic_loop_async()`` (the Messages
API), ``rb.openai_model()`` / ``rb.openai_hooks()`` (the OpenAI Agents SDK) and ``rb.claude_agent()`` (the Claude
Agent SDK). Each builds its run from the facade's :class:`~rb_otel.integrations.steered_runs.RunFactory` and
imports its framework only when called.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterable, AsyncIterator, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rb_otel.deprecation import deprecated

if TYPE_CHECKING:
    from rb_otel.integrations.langchain.chat_model import SteeredChatModel
    from rb_otel.integrations.langchain.middleware import ReasonBlocksMiddleware
    from rb_otel.integrations.openai_agents import ReasonBlocksRunHooks, SteeredOpenAIModel
    from rb_otel.integrations.openai_agents.runs import OpenAIRuns
    from rb_otel.integrations.steered_runs import RunFactory
    from rb_otel.steering.session import SteeringSession

__all__ = ["AdapterMethods"]


class AdapterMethods:
    """Mixed into :class:`~rb_otel.facade.reasonblocks.ReasonBlocks` (which provides ``runs``, ``session()`` and
    ``middleware()``)."""

    runs: RunFactory
    session: Callable[..., SteeringSession]
    middleware: Callable[..., ReasonBlocksMiddleware]

    def claude_messages_session(
        self,
        *,
        run_id: str | None = None,
        agent_name: str = "",
        task: str = "",
        model: str = "",
        **metadata: Any,
    ) -> SteeringSession:
        """Deprecated: :meth:`anthropic_loop` makes the session and runs the loop in one call."""
        deprecated(
            "rb.claude_messages_session() + run_messages_agent_loop(session=...)",
            instead="rb.anthropic_loop(client, ...) (it makes the session and runs the loop)",
        )
        return self._anthropic_session(run_id, agent_name, task, model, metadata)

    def _anthropic_session(
        self,
        run_id: str | None,
        agent_name: str,
        task: str,
        model: str,
        metadata: Mapping[str, Any],
        *,
        tool_specs: Sequence[Mapping[str, Any]] | None = None,
    ) -> SteeringSession:
        return self.session(run_id=run_id, agent_name=agent_name, task=task, framework="anthropic", model=model,
                            tools=tool_specs, **metadata)  # fmt: skip

    def anthropic_loop(
        self,
        client: Any,
        *,
        model: str,
        messages: Sequence[Mapping[str, Any]],
        tool_specs: Sequence[Mapping[str, Any]],
        dispatch: Callable[[str, dict[str, Any]], Any],
        system: str = "",
        max_steps: int = 40,
        max_tokens: int = 4096,
        agent_name: str = "",
        task: str = "",
        run_id: str | None = None,
        **metadata: Any,
    ) -> dict[str, Any]:
        """Run an agent on the Anthropic Messages API (an ``anthropic.Anthropic`` client) until it answers without
        a tool call or ``max_steps`` model calls were made, steering every turn and recording the run
        (``framework="anthropic"``). Returns ``{"final_text", "messages", "stop_reason", "tool_calls"}``
        (``docs/frameworks.md``) with the run's ``rb_step_log`` and ``rb_run_id``. A loop needing the session
        itself builds it with ``rb.session(framework="anthropic")`` and calls
        :func:`~rb_otel.integrations.anthropic.run_messages_agent_loop`."""
        from rb_otel.integrations.anthropic import run_messages_agent_loop

        session = self._anthropic_session(run_id, agent_name, task, model, metadata, tool_specs=tool_specs)
        out = run_messages_agent_loop(
            client, model=model, messages=messages, tool_specs=tool_specs, dispatch=dispatch, system=system,
            max_steps=max_steps, max_tokens=max_tokens, session=session,
        )  # fmt: skip
        return _with_step_log(out, session)

    async def anthropic_loop_async(
        self,
        client: Any,
        *,
        model: str,
        messages: Sequence[Mapping[str, Any]],
        tool_specs: Sequence[Mapping[str, Any]],
        dispatch: Callable[[str, dict[str, Any]], Any],
        system: str = "",
        max_steps: int = 40,
        max_tokens: int = 4096,
        agent_name: str = "",
        task: str = "",
        run_id: str | None = None,
        **metadata: Any,
    ) -> dict[str, Any]:
        """:meth:`anthropic_loop` for an ``anthropic.AsyncAnthropic`` client; ``dispatch`` may be async."""
        from rb_otel.integrations.anthropic import arun_messages_agent_loop

        session = self._anthropic_session(run_id, agent_name, task, model, metadata, tool_specs=tool_specs)
        out = await arun_messages_agent_loop(
            client, model=model, messages=messages, tool_specs=tool_specs, dispatch=dispatch, system=system,
            max_steps=max_steps, max_tokens=max_tokens, session=session,
        )  # fmt: skip
        return _with_step_log(out, session)

    def claude_agent(
        self, messages: AsyncIterable[Any], *, agent_name: str = "", task: str = "", model: str = "", **metadata: Any
    ) -> AsyncIterator[Any]:
        """A Claude Agent SDK ``query()`` stream, passed through unchanged and recorded as a run (``async for
        message in rb.claude_agent(query(prompt=...), agent_name="coder")``): a step and ``chat`` span per
        assistant turn, ``execute_tool`` spans from ``tool_use`` to ``tool_result``, the outcome from the
        ``ResultMessage``. Telemetry only (the SDK's loop is not steered)."""
        from rb_otel.integrations.claude_agent import claude_agent_telemetry

        return claude_agent_telemetry(messages, self, agent_name=agent_name, task=task, model=model, **metadata)

    def chat_model(self, model: Any, /, **middleware_kwargs: Any) -> SteeredChatModel:
        """The agent's chat model (an instance, or a ``"provider:model"`` id), steered and recorded on every call:
        the middleware's pipeline without a ``wrap_model_call`` hook, ~1 ms cheaper per 5-call run.

        ``create_agent(rb.chat_model(model, agent_name="coder"), tools)``; ``middleware_kwargs`` are those of
        :meth:`middleware`. Runs, tools, routing (tools bound to the routed model), retries and interrupts are
        recorded as with the middleware; the step log is read from ``model.step_log_for(run_id)``, not the state.
        """
        from langchain_core.language_models import BaseChatModel

        from rb_otel.integrations.langchain.chat_model import SteeredChatModel

        if isinstance(model, str):
            from langchain.chat_models import init_chat_model

            model = init_chat_model(model)
        if not isinstance(model, BaseChatModel):
            raise TypeError(f"chat_model() wraps a LangChain chat model or a model id, got {type(model).__name__}")
        if "step_log_in_state" in middleware_kwargs:
            raise TypeError("chat_model() has no state to put the step log in: read model.step_log_for(run_id)")
        steering = self.middleware(step_log_in_state=False, **middleware_kwargs)
        return SteeredChatModel(inner=model, steering=steering)

    def openai_hooks(
        self, *, agent_name: str = "", task: str = "", model: str = "", **metadata: Any
    ) -> ReasonBlocksRunHooks:
        """OpenAI Agents SDK ``RunHooks`` recording every run (``Runner.run(agent, input, hooks=...)``): the
        ``invoke_agent`` span, a ``chat`` span and a step per model response, an ``execute_tool`` span per tool.
        Telemetry only (scored, nothing injected); add :meth:`openai_model` to steer. One instance serves any
        number of runs; as a context manager it fails the runs an escaping exception interrupted."""
        from rb_otel.integrations.openai_agents.build import run_hooks

        return run_hooks(self._openai_runs, agent_name=agent_name, task=task, model=model, metadata=metadata)

    def openai_model(
        self,
        model: Any,
        *,
        model_factory: Callable[[str], Any] | None = None,
        agent_name: str = "",
        task: str = "",
        **metadata: Any,
    ) -> SteeredOpenAIModel:
        """An OpenAI Agents SDK ``Model`` that steers every response of ``model`` (an ``agents`` ``Model``, e.g.
        ``OpenAIResponsesModel``): guidance in the system instructions, routing through ``model_factory(model_id)``
        (built lazily, cached; without it an override is only noted on the step). ``Agent(model=rb.openai_model(m))``;
        pass ``hooks=rb.openai_hooks(...)`` to the runner too for exact run ends."""
        from rb_otel.integrations.openai_agents.build import steered_model

        return steered_model(
            self._openai_runs, model, model_factory=model_factory, agent_name=agent_name, task=task, metadata=metadata
        )

    @functools.cached_property
    def _openai_runs(self) -> OpenAIRuns:
        """The open runs of this configuration's OpenAI Agents SDK adapters (hooks and models share them)."""
        from rb_otel.integrations.openai_agents.runs import OpenAIRuns

        return OpenAIRuns(self.runs)


def _with_step_log(out: dict[str, Any], session: SteeringSession) -> dict[str, Any]:
    return {**out, "rb_step_log": [e.as_dict() for e in session.step_log], "rb_run_id": session.run_id}
