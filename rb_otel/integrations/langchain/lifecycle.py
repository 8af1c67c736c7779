"""Which run a hook belongs to, and how each run ends: the middleware's run tracker."""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from langgraph.errors import GraphBubbleUp

from rb_otel.integrations.steered_runs import RunFactory
from rb_otel.steering.pilot.kinds import tool_names as names_of
from rb_otel.telemetry.names import OUTCOME_INTERRUPTED, OUTCOME_SUCCESS
from rb_otel.types import ExperimentArm, FSMState, RunFields

from ._graph_context import node_run_id, thread_id_of_config
from ._guard import guard
from ._messages import identify_model
from .peers import warn_if_instrumented_twice
from .resume import record_early_tools, replay, restore_log, resumable
from .runs import AgentRun, RunRegistry

__all__ = ["RunTracker"]


def _matches(run: AgentRun, state: tuple[str, list[Any], str] | None) -> bool:
    """The run kept in memory is the one the graph state continues (not one another worker has moved on)."""
    return state is None or (state[0] == run.key and len(state[1]) == len(run.session.step_log))


_log = logging.getLogger("rb_otel.integrations.langchain")
#: Interrupted runs kept for a resume on their checkpointer thread (oldest dropped first).
_MAX_INTERRUPTED = 1024


class RunTracker:
    """Runs keyed by the agent graph's own LangChain run; started on a run's first hook, ended by the guard.

    ``cm_depth`` > 0 while the owning middleware is used as a context manager: clean returns are then left for
    ``__exit__`` to finish (so ``mark_failure`` after ``invoke`` still counts).
    """

    def __init__(
        self,
        runs: RunFactory,
        *,
        first_run_id: str | None,
        fields: RunFields,
        metadata: Mapping[str, Any],
        routing_ids: Mapping[FSMState, str],
        experiment: ExperimentArm | None = None,
        steer: bool = True,
    ) -> None:
        self._factory = runs
        self._steer = steer  # False: runs are scored and recorded, never steered
        self._first_run_id = first_run_id
        self._fields = fields
        self._metadata = dict(metadata)
        self._routing_ids = dict(routing_ids)
        self._experiment = experiment
        self.runs = RunRegistry()
        self.cm_depth = 0
        self._by_graph: dict[uuid.UUID, AgentRun] = {}
        self._interrupted: dict[str, AgentRun] = {}
        self._lock = threading.Lock()
        self._guard = guard()

    def open(
        self,
        conversation_id: str = "",
        *,
        key: str | None = None,
        links: Sequence[str] = (),
        start_time: float | None = None,
        tools: list[str] | None = None,
    ) -> AgentRun:
        warn_if_instrumented_twice()
        key = self._first_run_id or key or str(uuid.uuid4())
        self._first_run_id = None  # the given run_id names the first run; later runs get fresh ids
        steered = self._factory.open(
            self._fields,
            run_id=key,
            metadata=self._metadata,
            conversation_id=conversation_id,
            routing_ids=self._routing_ids,
            experiment=self._experiment,
            steer=self._steer,
            links=links,
            tools=tools,
        )
        session, recorder = steered.session, steered.recorder
        if start_time is not None:
            recorder.run_start(key, {}, start_time=start_time)  # the part began with a tool, before this hook
        session.start()
        run = AgentRun(key=key, session=session, recorder=recorder, in_context_manager=self.cm_depth > 0)
        self.runs.add(run)
        return run

    def current(self, request: Any = None) -> AgentRun | None:
        """The run of the agent graph invocation this hook belongs to, started on its first hook.

        Runs are keyed by the graph's own chain run (known to the guard), so no graph node is needed to start
        or finish them. A graph resumed from its checkpoint (``Command(resume=...)``) continues its run: from
        memory when this middleware ran the part before, else from the graph state in ``request`` (a model
        call's ``ModelRequest``: ``resume.py``), whichever process ran it.
        """
        graph = self._guard.graph_run_of(node_run_id())
        if graph is None:
            return None  # not inside a LangGraph run we could identify: call through unsteered
        return self._run_for(graph, request)

    def run_of(self, graph: uuid.UUID) -> AgentRun | None:
        """The run of agent graph run ``graph`` for a tool or a companion's note: a started run, or one resuming
        in memory on this thread inside a tool (an agent nested in another graph, which sees no resume command).
        ``None`` when the graph is not one of ours; a tool of a resumed graph that runs before its first model call
        is kept by the guard for the run that resumes there."""
        run = self._by_graph.get(graph)
        if (
            run is None
            and self._interrupted
            and not self._guard.is_resume(graph)
            and thread_id_of_config() in self._interrupted
        ):
            run = self._run_for(graph)
        return run

    def _run_for(self, graph: uuid.UUID, request: Any = None) -> AgentRun:
        run = self._by_graph.get(graph)
        if run is not None:
            run.touched = time.monotonic()
            return run
        with self._lock:
            run = self._by_graph.get(graph)
            if run is None:
                self.runs.sweep(self.expire)
                run = self._start_for(graph, request)
                self._by_graph[graph] = run
        self._guard.watch(graph, lambda error, interrupted: self._graph_ended(graph, run, error, interrupted))
        return run

    def _start_for(self, graph: uuid.UUID, request: Any) -> AgentRun:
        thread = thread_id_of_config()
        early = self._guard.resumed(graph)  # None: not started by a resume command
        kept = self._interrupted.pop(thread, None) if thread else None
        state = resumable(getattr(request, "state", None)) if early is not None else None
        begun = min((t.started for t in early or ()), default=None)
        if kept is not None and not kept.session.finished and _matches(kept, state):
            self._factory.resume(kept, start_time=begun)
            kept.run_id_in_state = False  # the new part writes rb_run_id into the state again
            self.runs.add(kept)
            run = kept
        elif state is not None:
            run = self._restored(thread, state, request, begun)
        else:
            return self.open(thread, key=str(graph), tools=tool_names(request))
        record_early_tools(run, early or (), capture=self._factory.capture_content)
        return run

    def _restored(self, thread: str, state: tuple[str, list[Any], str], request: Any, begun: float | None) -> AgentRun:
        """The run the graph state describes, continued here: its session rebuilt by replaying its turns."""
        key, log, previous = state
        run = self.open(
            thread, key=key, links=[previous] if previous else (), start_time=begun, tools=tool_names(request)
        )
        try:
            model_id = identify_model(request.model).model_id
            replay(run.session, list(request.messages), len(log), model_id)
            restore_log(run.session, log)
        except Exception:
            _log.warning("rebuilding run %s from the graph state failed; it continues from here", key, exc_info=True)
        return run

    def _graph_ended(self, graph: uuid.UUID, run: AgentRun, error: BaseException | None, interrupted: bool) -> None:
        """The agent graph's own chain run ended: finish its run (deferred to ``__exit__`` inside ``with``)."""
        self._by_graph.pop(graph, None)
        if run.recorder.finished:
            return
        if error is not None and not isinstance(error, GraphBubbleUp):
            self.finish(run, f"failure: {type(error).__name__}", error=error)
        elif interrupted or error is not None:
            # Not a failure: the session stays open so a resume on the same thread continues the run.
            run.recorder.run_finish(run.key, OUTCOME_INTERRUPTED)
            thread = run.recorder.info.conversation_id
            if thread:
                self._interrupted[thread] = run
                while len(self._interrupted) > _MAX_INTERRUPTED:
                    self._interrupted.pop(next(iter(self._interrupted)))
            else:
                self.runs.retire(run)
        elif run.in_context_manager:
            run.completed = True  # a clean return inside `with mw:`: __exit__ finishes it (mark_failure may follow)
        else:
            self.finish(run, OUTCOME_SUCCESS)

    def finish(self, run: AgentRun, outcome: str, *, error: BaseException | None = None) -> None:
        """End ``run``: one call to its session, which ends the run span (with ``error``, the exception itself)."""
        run.session.finish(outcome_status=outcome, error=error)
        self.runs.retire(run)

    def expire(self, run: AgentRun) -> None:
        _log.warning("run %s idle for %.0f s; closing its spans", run.key, self.runs.ttl)
        self.finish(run, "failure: expired")


def tool_names(request: Any) -> list[str] | None:
    """The names of the tools a model request offers (``ModelRequest.tools``: tools or their dict schemas), which
    say the run's kind of agent; ``None`` when there is no request to read them from (a run that began with a
    tool)."""
    tools = getattr(request, "tools", None)
    if request is None or tools is None:
        return None
    return names_of(tools)
