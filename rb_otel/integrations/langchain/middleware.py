"""``ReasonBlocksMiddleware``: LangChain 1.x hooks -> ``SteeringSession`` -> OpenTelemetry.

All work happens inside ``wrap_model_call`` / ``wrap_tool_call``, which add no graph nodes (the stateful variant
adds one ``after_agent`` node to return the step log). One instance serves any number of sequential or concurrent
invocations: runs live in a registry keyed by the agent graph's own LangChain run, which the process-wide guard
(``_guard.py``) maps hooks to and watches for the run's end; every span is parented to its run explicitly
(LangGraph runs each node in its own context).

Hook contract: steering failures are logged at WARNING and the model or tool is called unmodified; exceptions
raised by the model or a tool propagate unchanged.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Annotated, Any, NotRequired

from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest, ModelResponse
from langchain.agents.middleware.types import OmitFromInput
from langchain_core.messages import SystemMessage, ToolMessage
from langgraph.errors import GraphBubbleUp
from langgraph.types import Command, TracePolicy, omit_payload
from opentelemetry import context as otel_context
from opentelemetry import trace

from rb_otel.integrations.langchain._guard import guard
from rb_otel.integrations.langchain._messages import (
    NO_CACHE_CONTROL,
    chat_response,
    identify_model,
    last_turn,
    message_text,
)
from rb_otel.steering.rendering import system_blocks
from rb_otel.steering.session import SteeringSession
from rb_otel.telemetry import RunInfo
from rb_otel.telemetry.names import OUTCOME_INTERRUPTED, OUTCOME_SUCCESS
from rb_otel.types import StepLogEntry

from ._support import ModelResult, StepCall, base_blocks, detach, node_run_id, reply_of, thread_id_of_config
from .runs import AgentRun, RunRegistry

if TYPE_CHECKING:
    from langgraph.prebuilt.tool_node import ToolCallRequest
    from langgraph.runtime import Runtime

    from rb_otel.reasonblocks import ReasonBlocks

__all__ = ["RBState", "ReasonBlocksMiddleware"]

_log = logging.getLogger("rb_otel.integrations.langchain")
#: Interrupted runs kept for a resume on their checkpointer thread (oldest dropped first).
_MAX_INTERRUPTED = 1024

#: run_start keys that are stored in their own fields, so they are removed from ``metadata`` (spec 1.3).
_DEDICATED_KEYS = ("agent_name", "task", "framework", "model", "codebase_id", "org_id", "project_id", "task_profile")


class RBState(AgentState[Any]):
    """Agent state fields rb_otel adds: the run key, and the run's step log in the returned state."""

    rb_run_id: NotRequired[Annotated[str, OmitFromInput]]
    rb_step_log: NotRequired[Annotated[list[dict[str, Any]], OmitFromInput]]


class ReasonBlocksMiddleware(AgentMiddleware[AgentState[Any], Any, Any]):
    """Steers every model call of a LangChain agent and records the run as OpenTelemetry spans and metrics.

    Example::

        rb = ReasonBlocks(model_routing={"SLOW": strong_model})
        agent = create_agent(model, tools, middleware=[rb.middleware(agent_name="coder")])
        out = agent.invoke({"messages": [("user", "fix the bug")]})
        out["rb_step_log"]  # this run's steps, as StepLogEntry.as_dict() dicts

    Put it last in ``middleware=[...]`` so each retry or fallback attempt is its own ``chat`` span.
    """

    trace_policy = TracePolicy(process_inputs=omit_payload, process_outputs=omit_payload)

    def __init__(
        self,
        rb: ReasonBlocks,
        *,
        run_id: str | None = None,
        agent_name: str = "",
        task: str = "",
        framework: str = "langchain",
        model: str = "",
        codebase_id: str = "",
        org_id: str = "default",
        project_id: str = "default",
        metadata: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__()
        if metadata is not None and not isinstance(metadata, Mapping):
            raise TypeError(f"metadata must be a mapping, got {type(metadata).__name__}")
        for name, value in (
            ("agent_name", agent_name),
            ("task", task),
            ("framework", framework),
            ("model", model),
            ("codebase_id", codebase_id),
            ("org_id", org_id),
            ("project_id", project_id),
        ):
            if not isinstance(value, str):
                raise TypeError(f"{name} must be a str, got {type(value).__name__}")
        self._rb = rb
        self._first_run_id = run_id
        self.agent_name = agent_name
        self._run_fields = {
            "agent_name": agent_name,
            "task": task,
            "framework": framework,
            "model": model,
            "codebase_id": codebase_id,
            "org_id": org_id,
            "project_id": project_id,
            "task_profile": rb.task_profile,
        }
        self._metadata = {k: v for k, v in (metadata or {}).items() if k not in _DEDICATED_KEYS}
        self._runs = RunRegistry()
        self._by_graph: dict[uuid.UUID, AgentRun] = {}
        self._interrupted: dict[str, AgentRun] = {}
        self._lock = threading.Lock()
        self._cm_depth = 0
        self._guard = guard()
        rb.telemetry.instruments.init_skip_series(agent_name)

    # -- public surface ------------------------------------------------------------------------------------

    @property
    def step_log(self) -> list[StepLogEntry]:
        """The step log of the most recent run (one-run-per-middleware use); ``[]`` before any run."""
        run = self._runs.latest
        return run.step_log if run is not None else []

    def step_log_for(self, run_id: str) -> list[StepLogEntry] | None:
        """The step log of run ``run_id`` (the ``rb_run_id`` of the returned state); recent runs only."""
        return self._runs.step_log(run_id)

    @property
    def session(self) -> SteeringSession | None:
        """The ``SteeringSession`` of the most recent run."""
        run = self._runs.latest
        return run.session if run is not None else None

    @property
    def active_runs(self) -> int:
        return len(self._runs)

    def mark_failure(self, reason: str = "failure") -> None:
        """Replace the ``success`` outcome of the most recent run (before it finishes, see spec [C1])."""
        run = self._runs.latest
        if run is None or run.recorder.finished:
            _log.warning("mark_failure(%r) came after the run finished; call it inside `with mw:`", reason)
            return
        run.session.mark_failure(reason=reason)

    def flush_session(self, outcome_status: str = "success") -> None:
        """Finish every open run now with ``outcome_status`` (for use without a context manager)."""
        for run in self._runs.active():
            self._finish(run, outcome_status)

    def close(self, timeout: float = 5.0) -> None:
        """Flush the tracer and meter providers (when they support it); safe to call more than once."""
        self._rb.flush(timeout)

    def __enter__(self) -> ReasonBlocksMiddleware:
        self._cm_depth += 1
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._cm_depth = max(self._cm_depth - 1, 0)
        try:
            for run in self._runs.active():
                if not run.in_context_manager:
                    continue
                if exc_type is None:
                    self._finish(run, OUTCOME_SUCCESS)
                else:
                    self._finish(run, f"failure: {exc_type.__name__}", error=exc)
        finally:
            self.close()

    async def __aenter__(self) -> ReasonBlocksMiddleware:
        return self.__enter__()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.__exit__(exc_type, exc, tb)

    # -- model calls ---------------------------------------------------------------------------------------

    def wrap_model_call(
        self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], ModelResponse]
    ) -> ModelResult:
        run, call = self._before_model(request)
        if call is None:
            return handler(request)
        try:
            response = handler(call.request)
        except BaseException as exc:
            self._model_failed(run, call, exc)
            raise
        self._after_model(run, call, response)
        return response

    async def awrap_model_call(
        self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse]]
    ) -> ModelResult:
        run, call = self._before_model(request)
        if call is None:
            return await handler(request)
        try:
            response = await handler(call.request)
        except BaseException as exc:
            self._model_failed(run, call, exc)
            raise
        self._after_model(run, call, response)
        return response

    # -- tool calls ----------------------------------------------------------------------------------------

    def wrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]]
    ) -> ToolMessage | Command[Any]:
        run, tool, token = self._before_tool(request)
        try:
            result = handler(request)
        except BaseException as exc:
            self._tool_failed(run, tool, token, exc)
            raise
        self._after_tool(run, tool, token, result)
        return result

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        run, tool, token = self._before_tool(request)
        try:
            result = await handler(request)
        except BaseException as exc:
            self._tool_failed(run, tool, token, exc)
            raise
        self._after_tool(run, tool, token, result)
        return result

    # -- internals: runs -----------------------------------------------------------------------------------

    def _open_run(self, conversation_id: str = "", *, key: str | None = None) -> AgentRun:
        key = self._first_run_id or key or str(uuid.uuid4())
        self._first_run_id = None  # the given run_id names the first run; later runs get fresh ids
        fields = self._run_fields
        info = RunInfo(
            run_id=key,
            agent_name=fields["agent_name"],
            framework=fields["framework"],
            task_profile=fields["task_profile"],
            task=fields["task"],
            model=fields["model"],
            codebase_id=fields["codebase_id"],
            org_id=fields["org_id"],
            project_id=fields["project_id"],
            conversation_id=conversation_id,
            metadata=self._metadata,
        )
        recorder = self._rb.telemetry.run(info)
        session = self._rb.new_session(
            run_id=key, emitter=recorder, run_metadata={**fields, "metadata": dict(self._metadata)}
        )
        session.start()
        run = AgentRun(key=key, session=session, recorder=recorder, in_context_manager=self._cm_depth > 0)
        self._runs.add(run)
        return run

    def _current_run(self) -> AgentRun | None:
        """The run of the agent graph invocation this hook belongs to, started on its first hook.

        Runs are keyed by the graph's own chain run (known to the guard), so no graph node is needed to start
        or finish them; a run interrupted on a checkpointer thread continues, under a new span, when that thread
        resumes.
        """
        graph = self._guard.graph_run_of(node_run_id())
        if graph is None:
            return None  # not inside a LangGraph run we could identify: call through unsteered
        run = self._by_graph.get(graph)
        if run is not None:
            run.touched = time.monotonic()
            return run
        with self._lock:
            run = self._by_graph.get(graph)
            if run is None:
                self._runs.sweep(self._expire)
                run = self._start_for(graph)
                self._by_graph[graph] = run
        self._guard.watch(graph, lambda error, interrupted: self._graph_ended(graph, run, error, interrupted))
        return run

    def _start_for(self, graph: uuid.UUID) -> AgentRun:
        thread = thread_id_of_config()
        resumed = self._interrupted.pop(thread, None) if thread else None
        if resumed is not None and not resumed.session.finished:
            recorder = self._rb.telemetry.run(resumed.recorder.info)
            recorder.run_start(resumed.key, {})
            resumed.recorder = recorder
            resumed.session.emitter = recorder
            self._runs.add(resumed)
            return resumed
        return self._open_run(thread, key=str(graph))

    def _graph_ended(self, graph: uuid.UUID, run: AgentRun, error: BaseException | None, interrupted: bool) -> None:
        """The agent graph's own chain run ended: finish its run (deferred to ``__exit__`` inside ``with``)."""
        self._by_graph.pop(graph, None)
        if run.recorder.finished:
            return
        if error is not None and not isinstance(error, GraphBubbleUp):
            self._finish(run, f"failure: {type(error).__name__}", error=error)
        elif interrupted or error is not None:
            # Not a failure: the session stays open so a resume on the same thread continues the run.
            run.recorder.run_finish(run.key, OUTCOME_INTERRUPTED)
            thread = run.recorder.info.conversation_id
            if thread:
                self._interrupted[thread] = run
                while len(self._interrupted) > _MAX_INTERRUPTED:
                    self._interrupted.pop(next(iter(self._interrupted)))
            else:
                self._runs.retire(run)
        elif run.in_context_manager:
            run.completed = True  # a clean return inside `with mw:`: __exit__ finishes it (mark_failure may follow)
        else:
            self._finish(run, OUTCOME_SUCCESS)

    def _finish(self, run: AgentRun, outcome: str, *, error: BaseException | None = None) -> None:
        if error is not None:
            run.recorder.run_finish(run.key, outcome, error=error)  # the span gets the exception itself
        run.session.finish(outcome_status=outcome)  # emits run_finish, a no-op if the span already ended
        self._runs.retire(run)

    def _expire(self, run: AgentRun) -> None:
        _log.warning("run %s idle for %.0f s; closing its spans", run.key, self._runs.ttl)
        self._finish(run, "failure: expired")

    # -- internals: model calls ----------------------------------------------------------------------------

    def _before_model(self, request: ModelRequest[Any]) -> tuple[AgentRun | None, StepCall | None]:
        try:
            run = self._current_run()
            if run is None:
                return None, None
            return run, self._steer(run, request)
        except Exception:
            _log.warning("wrap_model_call failed, calling handler directly", exc_info=True)
            return None, None

    def _steer(self, run: AgentRun, request: ModelRequest[Any]) -> StepCall:
        session = run.session
        own_model = identify_model(request.model)
        if session.steps_begun:
            turn = last_turn(request.messages)
            decision = session.begin_step(
                thought=turn.thought,
                action=turn.action,
                action_input=turn.action_input,
                observation=turn.observation,
                model_id=own_model.model_id,
            )
        else:
            decision = session.begin_step(thought=None, model_id=own_model.model_id)
        overrides: dict[str, Any] = {}
        model = request.model
        if decision.model_override:
            routed = self._rb.router.model(decision.model_override)
            if routed is not None:
                overrides["model"] = model = routed
            else:  # could not be built: the call keeps the agent's model, and the step log says so
                decision.model_override = None
        identity = identify_model(model) if model is not request.model else own_model
        base = base_blocks(request.system_message)
        blocks = system_blocks(
            base, decision.rendered_injection_text, cache_control=identity.provider not in NO_CACHE_CONTROL
        )
        if blocks:
            overrides["system_message"] = SystemMessage(content=blocks)  # type: ignore[arg-type]
        new_request = request.override(**overrides) if overrides else request
        input_messages = None
        if self._rb.telemetry.content.capture:
            input_messages = [{"role": m.type, "content": message_text(m)} for m in new_request.messages]
        chat_ctx = run.recorder.begin_chat(
            decision.entry,
            request_model=identity.name,
            provider=identity.provider,
            steering_ms=decision.steering_ms,
            composite=decision.evaluation.composite if decision.evaluation else None,
            input_messages=input_messages,
        )
        token = otel_context.attach(chat_ctx)  # provider SDK spans nest under the chat span
        return StepCall(decision, new_request, token)

    def _after_model(self, run: AgentRun | None, call: StepCall, response: ModelResult) -> None:
        detach(call.token)
        if run is None:
            return
        try:
            reply = reply_of(response)
            tokens, tool_calls, details = chat_response(reply) if reply is not None else (0, [], None)
            if details is not None:
                if self._rb.telemetry.content.capture and reply is not None:
                    details.output_messages = [{"role": "assistant", "content": message_text(reply)}]
                run.recorder.chat_response(call.decision.entry.step, details)
            entry = call.decision.entry
            latency = 0.0 if run.last_timestamp is None else (entry.timestamp - run.last_timestamp) * 1000.0
            run.last_timestamp = entry.timestamp
            run.session.end_step(call.decision, tokens=tokens, tool_calls=tool_calls, latency_ms=latency)
        except Exception:
            _log.warning("recording the model call failed; continuing", exc_info=True)

    def _model_failed(self, run: AgentRun | None, call: StepCall, error: BaseException) -> None:
        detach(call.token)
        if run is None:
            return
        try:
            run.session.discard_step(call.decision)
            if isinstance(error, GraphBubbleUp):
                run.recorder.step(run.key, call.decision.entry, steering_ms=call.decision.steering_ms)
            else:
                run.recorder.chat_failed(call.decision.entry.step, error)
        except Exception:
            _log.warning("recording the failed model call failed", exc_info=True)

    # -- internals: tool calls -----------------------------------------------------------------------------

    def _before_tool(self, request: ToolCallRequest) -> tuple[AgentRun | None, Any, object | None]:
        try:
            run = self._current_run()
            if run is None:
                return None, None, None
            call = request.tool_call
            capture = self._rb.telemetry.content.capture
            tool = run.recorder.start_tool(
                step=max(run.session.steps_begun - 1, 0),
                name=str(call.get("name", "")),
                call_id=str(call.get("id") or ""),
                arguments=call.get("args") if capture else None,
            )
            return run, tool, otel_context.attach(trace.set_span_in_context(tool.span))
        except Exception:
            _log.warning("wrap_tool_call failed, calling the tool directly", exc_info=True)
            return None, None, None

    def _after_tool(self, run: AgentRun | None, tool: Any, token: object | None, result: Any) -> None:
        detach(token)
        if run is None or tool is None:
            return
        try:
            if isinstance(result, ToolMessage):
                error = (message_text(result) or "tool error") if result.status == "error" else None
                run.recorder.end_tool(tool, result=result.content, error=error)
            else:
                run.recorder.end_tool(tool)
        except Exception:
            _log.warning("recording the tool call failed; continuing", exc_info=True)

    def _tool_failed(self, run: AgentRun | None, tool: Any, token: object | None, error: BaseException) -> None:
        detach(token)
        if run is None or tool is None:
            return
        try:
            run.recorder.end_tool(tool, error=None if isinstance(error, GraphBubbleUp) else error)
        except Exception:
            _log.warning("recording the failed tool call failed", exc_info=True)


class StatefulReasonBlocksMiddleware(ReasonBlocksMiddleware):
    """``ReasonBlocksMiddleware`` that also returns ``rb_run_id`` and ``rb_step_log`` in the agent's output state.

    It adds one graph node (``after_agent``) and two state fields per run; use it when the caller needs each
    run's step log from ``invoke``'s result rather than from ``mw.step_log_for(run_id)``.
    """

    state_schema = RBState

    def after_agent(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        try:
            run = self._current_run()
            if run is None:
                return None
            return {"rb_run_id": run.key, "rb_step_log": [entry.as_dict() for entry in run.step_log]}
        except Exception:
            _log.warning("after_agent failed, continuing", exc_info=True)
            return None

    async def aafter_agent(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        return self.after_agent(state, runtime)
