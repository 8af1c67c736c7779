"""``ReasonBlocksMiddleware``: LangChain 1.x hooks -> ``SteeringSession`` -> OpenTelemetry.

Model calls are steered and recorded inside ``wrap_model_call``, which adds no graph node (the stateful variant
returns each step's log entry as a state update of the model node it ran in); tool calls are recorded from the
callbacks LangChain already sends for them (``_guard.py``), which costs the agent less than a ``wrap_tool_call``
hook. One instance serves any number of sequential or concurrent
invocations: runs live in a registry keyed by the agent graph's own LangChain run, which the process-wide guard
(``_guard.py``) maps hooks to and watches for the run's end; every span is parented to its run explicitly
(LangGraph runs each node in its own context).

Hook contract: steering failures are logged at WARNING and the model or tool is called unmodified; exceptions
raised by the model or a tool propagate unchanged.
"""

from __future__ import annotations

import inspect
import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping
from types import TracebackType
from typing import Any

from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest, ModelResponse
from langgraph.errors import GraphBubbleUp
from langgraph.types import TracePolicy, omit_payload

from rb_otel.integrations.langchain._messages import (
    NO_CACHE_CONTROL,
    ModelIdentity,
    chat_response,
    identify_model,
    message_text,
)
from rb_otel.integrations.langchain.stopping import ON_SKIP, STOPPED, stop_message, was_stopped
from rb_otel.integrations.langchain.tool_calls import OpenTool
from rb_otel.integrations.steered_runs import RunFactory
from rb_otel.steering.session import SteeringSession
from rb_otel.telemetry import ChatInvocation
from rb_otel.telemetry.names import OUTCOME_SUCCESS
from rb_otel.types import RUN_FIELD_NAMES, ExperimentArm, FSMState, RunFields, StepDecision, StepLogEntry

from ._graph_context import node_run_id
from ._guard import STEERED, ModelCall, guard
from ._model_step import ModelResult, StepCall, begin_model_step, reply_of, steered_system_message
from .lifecycle import RunTracker
from .model_calls import record_model_call
from .notes import HintGiven, TokensSaved
from .routing import ModelRouter
from .runs import AgentRun

__all__ = ["ON_SKIP", "STOPPED", "ReasonBlocksMiddleware", "stop_message", "was_stopped"]


_log = logging.getLogger("rb_otel.integrations.langchain")

#: run_start keys that are stored in their own fields, so they are removed from ``metadata`` (docs/middleware.md,
#: "Using the middleware").
_DEDICATED_KEYS = (*RUN_FIELD_NAMES, "task_profile")
_LANGCHAIN_FIELDS = RunFields(framework="langchain")


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
        runs: RunFactory,
        *,
        router: ModelRouter | None = None,
        run_id: str | None = None,
        fields: RunFields = _LANGCHAIN_FIELDS,
        metadata: Mapping[str, Any] | None = None,
        experiment: ExperimentArm | None = None,
        on_skip: str = "escalate",
        steer: bool = True,
    ) -> None:
        """Built by ``ReasonBlocks.middleware()``: ``runs`` opens each invocation's steered run, ``router`` holds
        the chat models of ``model_routing`` (built once, shared by the middleware of one configuration);
        ``experiment`` puts every run in one arm of an A/B experiment (``ReasonBlocks.ab_middleware``);
        ``on_skip`` (:data:`ON_SKIP`) what a run that reaches SKIP does; ``steer=False`` observes only (every run
        scored and recorded, requests passed through as they came)."""
        super().__init__()
        if metadata is not None and not isinstance(metadata, Mapping):
            raise TypeError(f"metadata must be a mapping, got {type(metadata).__name__}")
        if on_skip not in ON_SKIP:
            raise ValueError(f"on_skip must be one of {', '.join(map(repr, ON_SKIP))}, got {on_skip!r}")
        self.on_skip = on_skip
        self._runs = runs
        self._router = router if router is not None else ModelRouter(runs.model_routing)
        self._capture = runs.capture_content
        self._wants_content = runs.wants_content  # captured, or uploaded by a completion hook
        self.agent_name = fields.agent_name
        extras = {k: v for k, v in (metadata or {}).items() if k not in _DEDICATED_KEYS}
        self.experiment = experiment
        # the off arm is a true passthrough: requests reach the model exactly as they came in (docs/experiments.md,
        # "A/B experiments")
        self._passthrough = not steer or (experiment is not None and experiment.arm == "off")
        self._tracker = RunTracker(
            runs,
            first_run_id=run_id,
            fields=fields,
            metadata=extras,
            routing_ids=self._router.ids,
            experiment=experiment,
            steer=steer,
        )
        guard().add_tool_observer(self)
        runs.watch_agent(fields.agent_name)

    # -- public surface ------------------------------------------------------------------------------------

    @property
    def arm(self) -> str:
        """``"on"`` or ``"off"`` in an A/B experiment, ``""`` outside one (docs/experiments.md, "A/B experiments")."""
        return self.experiment.arm if self.experiment is not None else ""

    @property
    def step_log(self) -> list[StepLogEntry]:
        """The step log of the most recent run (one-run-per-middleware use); ``[]`` before any run."""
        run = self._tracker.runs.latest
        return run.step_log if run is not None else []

    def step_log_for(self, run_id: str) -> list[StepLogEntry] | None:
        """The step log of run ``run_id`` (the ``rb_run_id`` of the returned state); recent runs only."""
        return self._tracker.runs.step_log(run_id)

    @property
    def session(self) -> SteeringSession | None:
        """The ``SteeringSession`` of the most recent run."""
        run = self._tracker.runs.latest
        return run.session if run is not None else None

    @property
    def active_runs(self) -> int:
        return len(self._tracker.runs)

    def mark_failure(self, reason: str = "failure") -> None:
        """Replace the ``success`` outcome of the most recent run, before it finishes (docs/steering.md,
        "`mark_failure` timing")."""
        run = self._tracker.runs.latest
        if run is None or run.recorder.finished:
            _log.warning("mark_failure(%r) came after the run finished; call it inside `with mw:`", reason)
            return
        run.session.mark_failure(reason=reason)

    def flush_session(self, outcome_status: str = "success") -> None:
        """Finish every open run now with ``outcome_status`` (for use without a context manager)."""
        for run in self._tracker.runs.active():
            self._tracker.finish(run, outcome_status)

    def close(self, timeout: float = 5.0) -> None:
        """Flush the tracer and meter providers (when they support it); safe to call more than once."""
        self._runs.flush(timeout)

    def __enter__(self) -> ReasonBlocksMiddleware:
        self._tracker.cm_depth += 1
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._tracker.cm_depth = max(self._tracker.cm_depth - 1, 0)
        try:
            for run in self._tracker.runs.active():
                if not run.in_context_manager:
                    continue
                if exc_type is None:
                    self._tracker.finish(run, OUTCOME_SUCCESS)
                else:
                    self._tracker.finish(run, f"failure: {exc_type.__name__}", error=exc)
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
        if call.chat is None:
            return self._stopped(run, call)
        steered = STEERED.set(True)  # this call is the step's own (the guard reports the others)
        try:
            response = handler(call.request)
        except BaseException as exc:
            self._model_failed(run, call, exc)
            raise
        finally:
            STEERED.reset(steered)
        return self._after_model(run, call, response)

    async def awrap_model_call(
        self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse]]
    ) -> ModelResult:
        run, call = self._before_model(request)
        if call is None:
            return await handler(request)
        if call.chat is None:
            return self._stopped(run, call)
        steered = STEERED.set(True)  # this call is the step's own (the guard reports the others)
        try:
            response = await handler(call.request)
        except BaseException as exc:
            self._model_failed(run, call, exc)
            raise
        finally:
            STEERED.reset(steered)
        return self._after_model(run, call, response)

    # -- internals: model calls ----------------------------------------------------------------------------

    def _before_model(self, request: ModelRequest[Any]) -> tuple[AgentRun | None, StepCall | None]:
        try:
            run = self._tracker.current(request)
            if run is None:
                return None, None
            return run, self._steer(run, request)
        except Exception:
            _log.warning("wrap_model_call failed, calling handler directly", exc_info=True)
            return None, None

    def _steer(self, run: AgentRun, request: ModelRequest[Any]) -> StepCall:
        session = run.session
        own_model = identify_model(request.model)
        if run.failed is not None:
            failed, node, given = run.failed
            run.failed = None
            if node is not None and node == node_run_id():  # the same model node calls again: a retry
                return self._attempt_again(run, failed, request, own_model, same_model=request.model is given)
            session.discard_step(failed.decision)  # the failed call was not tried again: its step is dropped
        decision = begin_model_step(session, request.messages, own_model.model_id)
        if decision.state is FSMState.SKIP and self.on_skip == "stop" and not self._passthrough:
            return StepCall(decision, request, None)  # no model call: the run ends here (``_stopped``)
        return self._prepared(run, decision, request, own_model, route=True)

    def _attempt_again(
        self, run: AgentRun, failed: StepCall, request: ModelRequest[Any], own_model: ModelIdentity, *, same_model: bool
    ) -> StepCall:
        """Another attempt at a step whose call failed: the same step and the same ``[REASONBLOCKS]`` block, a new
        ``chat`` span (``rb.attempt``); routed as the first attempt was when it is the same model (a retry), on
        the model it is given when that is another (a fallback)."""
        decision = failed.decision
        decision.entry.attempts += 1
        return self._prepared(run, decision, request, own_model, route=same_model)

    def _prepared(
        self,
        run: AgentRun,
        decision: StepDecision,
        request: ModelRequest[Any],
        own_model: ModelIdentity,
        *,
        route: bool,
    ) -> StepCall:
        """The request as it is sent (routed model, guidance in the system message) and its open ``chat`` span."""
        if self._passthrough:
            return StepCall(decision, request, self._start_chat(run, decision, request, own_model), request.model)
        overrides: dict[str, Any] = {}
        model = request.model
        if decision.model_override and route:
            routed = self._router.model(decision.model_override)
            if routed is not None:
                overrides["model"] = model = routed
            else:  # could not be built: the call keeps the agent's model, and the step log says so
                decision.model_override = None
        identity = identify_model(model) if model is not request.model else own_model
        system_message = steered_system_message(
            request.system_message,
            decision.rendered_injection_text,
            cache_control=identity.provider not in NO_CACHE_CONTROL,
        )
        if system_message is not None:
            overrides["system_message"] = system_message
        new_request = request.override(**overrides) if overrides else request
        return StepCall(decision, new_request, self._start_chat(run, decision, new_request, identity), request.model)

    def _start_chat(
        self, run: AgentRun, decision: StepDecision, request: ModelRequest[Any], identity: ModelIdentity
    ) -> ChatInvocation:
        input_messages = system = None
        if self._wants_content:
            input_messages = [{"role": m.type, "content": message_text(m)} for m in request.messages]
            system = message_text(request.system_message) if request.system_message is not None else None
        return run.recorder.start_chat(
            decision.entry,
            request_model=identity.name,
            provider=identity.provider,
            steering_ms=decision.steering_ms,
            composite=decision.evaluation.composite if decision.evaluation else None,
            input_messages=input_messages,
            monitor_scores=decision.evaluation.scores if decision.evaluation else None,
            hints=run.take_hints(),
            system_instruction=system,
        )

    def _stopped(self, run: AgentRun | None, call: StepCall) -> ModelResult:
        """End the run at SKIP instead of calling the model: the final answer is :func:`stop_message`."""
        entry = call.decision.entry
        if run is not None:
            try:
                entry = run.session.stop(call.decision)
                entry.part = run.recorder.part_id
            except Exception:
                _log.warning("recording the stop failed; the run still ends", exc_info=True)
        response = ModelResponse(result=[stop_message(entry)])
        return response if run is None else self._with_state_update(run, entry, response)

    def _after_model(self, run: AgentRun | None, call: StepCall, response: ModelResult) -> ModelResult:
        """Record the call's result; returns what the hook returns (``response``, or it with a state update)."""
        assert call.chat is not None
        if run is None:
            call.chat.stop()
            return response
        try:
            reply = reply_of(response)
            tokens, tool_calls, details = chat_response(reply) if reply is not None else (0, [], None)
            if details is not None and self._wants_content and reply is not None:
                details.output_messages = [{"role": "assistant", "content": message_text(reply)}]
            entry = call.decision.entry
            latency = 0.0 if run.last_timestamp is None else (entry.timestamp - run.last_timestamp) * 1000.0
            run.last_timestamp = entry.timestamp
            entry = run.session.end_step(call.decision, tokens=tokens, tool_calls=tool_calls, latency_ms=latency)
            entry.part = run.recorder.part_id  # what a worker that resumes the run links its part to (resume.py)
            call.chat.stop(details, step=entry)
            return self._with_state_update(run, entry, response)
        except Exception:
            call.chat.stop()
            _log.warning("recording the model call failed; continuing", exc_info=True)
            return response

    def _with_state_update(self, run: AgentRun, entry: StepLogEntry, response: ModelResult) -> ModelResult:
        """The stateless middleware returns the response unchanged (see ``StatefulReasonBlocksMiddleware``)."""
        return response

    def _model_failed(self, run: AgentRun | None, call: StepCall, error: BaseException) -> None:
        """The model raised: its span ends with the error. An interrupt is control flow (the step is recorded
        plainly); any other error keeps the step open for another attempt in the same model node."""
        assert call.chat is not None
        try:
            if isinstance(error, GraphBubbleUp):
                if run is not None:
                    run.session.discard_step(call.decision)
                call.chat.interrupt(call.decision.entry, steering_ms=call.decision.steering_ms)
                return
            call.chat.fail(error)
            if run is not None:
                run.failed = (call, node_run_id(), call.given_model)
        except Exception:
            call.chat.fail(error)  # ends the span if it is still open (a no-op otherwise)
            _log.warning("recording the failed model call failed", exc_info=True)

    def run_noted(self, graph: uuid.UUID, note: object) -> bool:
        """A companion middleware's note about agent graph run ``graph``: recorded if the run is one of ours."""
        run = self._tracker.run_of(graph)
        if run is None:
            return False
        if isinstance(note, TokensSaved):
            run.recorder.token_saving(
                chars_saved=note.chars_saved, compressions=note.compressions, early_exits=note.early_exits
            )
        elif isinstance(note, HintGiven):
            run.hints.append(note.rule)
        return True

    # -- model calls no step made: the guard reports them when they end -----------------------------------

    def model_call_ended(self, call: ModelCall, reply: Any, error: BaseException | None) -> bool:
        """A model call in agent graph run ``call.graph`` that no step made (``model_calls.py``): recorded when
        the graph is one of ours."""
        run = self._tracker.run_of(call.graph)
        if run is None:
            return False
        try:
            record_model_call(run, call, reply, error)
        except Exception:
            _log.warning("recording a model call failed; continuing", exc_info=True)
        return True

    # -- tool calls: the guard reports them as LangChain callbacks (cheaper for the agent than wrap_tool_call) --

    def tool_started(
        self, graph: uuid.UUID, name: str, call_id: str, arguments: Any, description: str = ""
    ) -> OpenTool | None:
        """Open the ``execute_tool`` span of a tool in one of our runs, current while the tool runs."""
        try:
            run = self._tracker.run_of(graph)
            if run is None:
                return None
            tool = run.recorder.start_tool(
                step=max(run.session.steps_begun - 1, 0),
                name=name,
                call_id=call_id,
                arguments=arguments if self._capture else None,
                description=description,
            )
            return OpenTool(tool)
        except Exception:
            _log.warning("recording the tool call failed; continuing", exc_info=True)
            return None

    def tool_ended(self, handle: object, output: Any, error: BaseException | None) -> None:
        """End the tool's span (only ours: the guard passes every tool's handle)."""
        if isinstance(handle, OpenTool):
            handle.end(output, error)


# LangChain wraps every ``wrap_*`` hook in LangSmith's ``traceable``, which calls ``inspect.signature`` on the hook
# at every call, tracing on or off (~25 µs in a tight loop, several times that inside an agent run). A function's
# ``__signature__`` is what ``inspect.signature`` returns first: computed once here, ~0.5 ms less per 5-call run.
for _hook in (ReasonBlocksMiddleware.wrap_model_call, ReasonBlocksMiddleware.awrap_model_call):
    _hook.__signature__ = inspect.signature(_hook)  # type: ignore[union-attr]
del _hook
