"""Sees every way an agent run ends, including the ones no middleware hook sees.

``after_agent`` does not run when the model or a tool raises, on ``GraphRecursionError``, on cancellation, on
an interrupt or when a stream is abandoned; LangChain's callback system does see all of them, as the end or the
error of the graph's own chain run. The first middleware created registers one process-wide handler through
LangChain's public ``register_configure_hook`` (the mechanism LangSmith tracing uses), so it is attached to
every run without the caller passing ``callbacks=``.

The handler only keeps a child -> parent map of chain and tool runs in flight (dropped as they end), calls back
the runs a middleware asked to watch, and reports tool runs to the middleware that claims their agent graph (a
callback costs the agent far less than a ``wrap_tool_call`` hook). It also sees every chat model call: the
steered call of a step is marked (:data:`STEERED`, or claimed by its run id with :meth:`RunEndGuard.claim`);
any other call inside a watched agent graph (a model that another middleware, a tool or a subagent without
rb-otel calls) is reported when it ends, with where it came from, so its usage counts in the run. Its methods are
``run_inline`` (so a tool span is current while the tool runs) and must never raise.
"""

from __future__ import annotations

import contextvars
import functools
import logging
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.tracers.context import register_configure_hook
from langgraph.errors import GraphBubbleUp
from langgraph.types import Command

__all__ = ["STEERED", "ModelCall", "RunEndGuard", "ToolObserver", "guard"]

_log = logging.getLogger("rb_otel.integrations.langchain")

#: Called when the watched chain run ends: ``(its exception or None, whether a child raised an interrupt)``.
EndCallback = Callable[[BaseException | None, bool], None]
_MAX_TRACKED = 200_000
_MAX_DEPTH = 64  # parents walked from a model call up to its agent graph

#: Set (``STEERED.set(True)`` ... ``STEERED.reset(token)``) while a middleware's ``wrap_model_call`` calls the model
#: of its step: that call is the step's own, not one to report.
STEERED: contextvars.ContextVar[bool] = contextvars.ContextVar("rb_otel_steered_call", default=False)


@dataclass(slots=True)
class EarlyTool:
    """A tool that ran in a resumed agent graph before any run claimed the graph (a call approved at an
    interrupt runs before the resumed part's first model call): kept for the run that resumes there."""

    name: str
    call_id: str
    arguments: Any
    description: str
    started: float  # wall clock, seconds
    ended: float | None = None
    output: Any = None
    error: BaseException | None = None


#: Early tools kept per resumed graph, and resumed graphs remembered (oldest dropped first).
_MAX_EARLY = 256


@dataclass(slots=True)
class ModelCall:
    """A chat model call inside an agent graph that no step made: where it came from and when it started.

    ``source``: ``middleware:<Name>`` (a middleware's node), ``tool:<name>`` (inside a tool, a subagent's calls
    included), else ``node:<name>``; ``node`` is the chain run that called the model (a fallback of a failed
    step calls from the same model node)."""

    graph: UUID
    node: UUID | None
    source: str
    model: str
    provider: str
    started: float = 0.0  # wall clock, seconds
    started_perf: float = 0.0


class ToolObserver(Protocol):
    """Records the tool runs of the agent graphs it claims."""

    def tool_started(
        self, graph: UUID, name: str, call_id: str, arguments: Any, description: str = ""
    ) -> object | None:
        """Start recording a tool run of agent graph run ``graph`` (``description``: the tool's own): a handle, or
        ``None`` if not ours."""

    def tool_ended(self, handle: object, output: Any, error: BaseException | None) -> None:
        """The tool run of ``handle`` returned ``output`` or raised ``error``."""

    def run_noted(self, graph: UUID, note: object) -> bool:
        """Another middleware of agent graph run ``graph`` reports ``note`` (``RunNote``); true if it was ours."""

    def model_call_ended(self, call: ModelCall, reply: Any, error: BaseException | None) -> bool:
        """A model call no step made in ``call.graph`` returned ``reply`` (an ``AIMessage``) or raised ``error``;
        true if the graph was ours (recorded)."""


class RunEndGuard(BaseCallbackHandler):
    """Maps chain runs to their parents, reports the end of watched runs and hands tool runs to observers."""

    run_inline = True
    raise_error = False
    ignore_llm = False  # LangChain gates on_llm_end / on_llm_error (of chat models too) behind ignore_llm
    ignore_chat_model = False
    ignore_retriever = True
    ignore_agent = False  # LangChain gates tool callbacks behind ignore_agent
    ignore_retry = True
    ignore_custom_event = True

    def __init__(self) -> None:
        self._parents: dict[UUID, UUID | None] = {}
        self._watched: dict[UUID, EndCallback] = {}
        self._interrupted: set[UUID] = set()
        self._lock = threading.Lock()
        self._observers: weakref.WeakSet[ToolObserver] = weakref.WeakSet()
        self._tools: dict[UUID, tuple[ToolObserver, object]] = {}
        self._tool_names: dict[UUID, str] = {}  # tool runs in flight (their parent is in _parents too)
        self._calls: dict[UUID, ModelCall] = {}  # model calls no step claimed, in flight
        self._resumed: dict[UUID, list[EarlyTool]] = {}  # graphs started by Command(resume=...), their early tools
        self._early: dict[UUID, EarlyTool] = {}  # early tools in flight, by their tool run

    # -- for middleware ------------------------------------------------------------------------------------

    def graph_run_of(self, node_run_id: UUID | None) -> UUID | None:
        """The chain run a hook's node belongs to (the agent graph's own run), or ``None`` if unknown."""
        if node_run_id is None:
            return None
        return self._parents.get(node_run_id)

    def watch(self, run_id: UUID, callback: EndCallback) -> None:
        with self._lock:
            self._watched[run_id] = callback

    def unwatch(self, run_id: UUID) -> None:
        with self._lock:
            self._watched.pop(run_id, None)

    def add_tool_observer(self, observer: ToolObserver) -> None:
        """Offer ``observer`` every tool run inside an agent graph (held weakly)."""
        with self._lock:
            self._observers.add(observer)

    def note(self, node_run_id: UUID | None, note: object) -> bool:
        """Hand ``note`` (what a companion middleware did in this run: tokens saved, a hint given) to the
        middleware that records the run of the hook's node; false when no run claims it (no rb-otel tracing)."""
        graph = self.graph_run_of(node_run_id)
        if graph is None:
            return False
        for observer in list(self._observers):
            try:
                if observer.run_noted(graph, note):
                    return True
            except Exception:
                _log.warning("recording a run note failed", exc_info=True)
        return False

    # -- callbacks -----------------------------------------------------------------------------------------

    def is_resume(self, graph: UUID) -> bool:
        """Agent graph run ``graph`` was started with ``Command(resume=...)`` and no run has claimed it yet."""
        return graph in self._resumed

    def resumed(self, graph: UUID) -> list[EarlyTool] | None:
        """Whether agent graph run ``graph`` was started with ``Command(resume=...)``: the tools that ran in it
        before any run claimed it (handed over once), else ``None`` for a graph that is not a resume."""
        with self._lock:
            return self._resumed.pop(graph, None)

    def on_chain_start(
        self, serialized: Any, inputs: Any, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        parents = self._parents
        if len(parents) >= _MAX_TRACKED:  # only leaks if chains never end; bound it anyway
            parents.clear()
        parents[run_id] = parent_run_id
        if type(inputs) is Command and inputs.resume is not None:  # a graph resumed from its checkpoint
            with self._lock:
                self._resumed[run_id] = []
                while len(self._resumed) > _MAX_EARLY:
                    self._resumed.pop(next(iter(self._resumed)))

    def on_chain_end(self, outputs: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self._ended(run_id, None)

    def on_chain_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._ended(run_id, error)

    def claim(self, run_id: UUID | None) -> None:
        """The chat model run ``run_id`` is a step's own call (the model wrapper, which learns its run id only
        once LangChain has announced the call)."""
        if run_id is not None:
            self._calls.pop(run_id, None)

    def on_chat_model_start(
        self,
        serialized: dict[str, Any] | None,
        messages: Any,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        if STEERED.get() or parent_run_id is None:
            return  # a step's own call (the middleware records it), or not inside any graph
        found = self._owner(parent_run_id)
        if found is None:
            return
        graph, tool = found
        meta = metadata or {}
        node = str(meta.get("langgraph_node") or "")
        source = f"tool:{tool}" if tool else (f"middleware:{node.split('.', 1)[0]}" if "." in node else f"node:{node}")
        if len(self._calls) >= _MAX_TRACKED:
            self._calls.clear()
        model = str(meta.get("ls_model_name") or kwargs.get("name") or "")
        provider = str(meta.get("ls_provider") or "")
        self._calls[run_id] = ModelCall(graph, parent_run_id, source, model, provider, time.time(), time.perf_counter())

    def on_llm_end(self, response: Any, *, run_id: UUID, **kwargs: Any) -> None:
        call = self._calls.pop(run_id, None) if self._calls else None
        if call is not None:
            generations = getattr(response, "generations", None) or [[]]
            first = generations[0][0] if generations and generations[0] else None
            self._model_call_ended(call, getattr(first, "message", None), None)

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        call = self._calls.pop(run_id, None) if self._calls else None
        if call is not None:
            self._model_call_ended(call, None, error)

    def _model_call_ended(self, call: ModelCall, reply: Any, error: BaseException | None) -> None:
        for observer in list(self._observers):
            try:
                if observer.model_call_ended(call, reply, error):
                    return
            except Exception:
                _log.warning("recording a model call failed", exc_info=True)

    def _owner(self, parent: UUID) -> tuple[UUID, str] | None:
        """The watched agent graph a run under ``parent`` belongs to, and the outermost tool on the way up."""
        node: UUID | None = parent
        tool = ""
        watched, parents, tools = self._watched, self._parents, self._tool_names
        for _ in range(_MAX_DEPTH):
            if node is None:
                return None
            if node in watched:
                return node, tool
            tool = tools.get(node, tool)
            node = parents.get(node)
        return None

    def on_tool_start(
        self,
        serialized: dict[str, Any] | None,
        input_str: str,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        inputs: Any = None,
        **kwargs: Any,
    ) -> None:
        name = str((serialized or {}).get("name") or kwargs.get("name") or "")
        if parent_run_id is not None:  # models a tool calls (a subagent's too) are found through it
            if len(self._tool_names) >= _MAX_TRACKED:
                self._tool_names.clear()
            self._parents[run_id] = parent_run_id
            self._tool_names[run_id] = name
        graph = self._parents.get(parent_run_id) if parent_run_id is not None else None
        if graph is None:
            return  # not a tool node's tool (or its graph is unknown): nothing to record
        description = str((serialized or {}).get("description") or "")
        call_id = str(kwargs.get("tool_call_id") or "")
        for observer in list(self._observers):
            try:
                handle = observer.tool_started(graph, name, call_id, inputs, description)
            except Exception:
                _log.warning("starting a tool span failed", exc_info=True)
                continue
            if handle is not None:
                if len(self._tools) >= _MAX_TRACKED:  # only leaks if tools never end; bound it anyway
                    self._tools.clear()
                self._tools[run_id] = (observer, handle)
                return
        early = self._resumed.get(graph) if self._resumed else None
        if early is not None and len(early) < _MAX_EARLY:  # no run has claimed this resumed graph yet
            tool = EarlyTool(name, call_id, inputs, description, time.time())
            early.append(tool)
            self._early[run_id] = tool

    def on_tool_end(self, output: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self._tool_ended(run_id, output, None)

    def on_tool_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._tool_ended(run_id, None, error)

    def _tool_ended(self, run_id: UUID, output: Any, error: BaseException | None) -> None:
        if self._tool_names.pop(run_id, None) is not None:
            self._parents.pop(run_id, None)
        early = self._early.pop(run_id, None) if self._early else None
        if early is not None:
            early.ended, early.output, early.error = time.time(), output, error
        open_tool = self._tools.pop(run_id, None)
        if open_tool is None:
            return
        observer, handle = open_tool
        try:
            observer.tool_ended(handle, output, error)
        except Exception:
            _log.warning("ending a tool span failed", exc_info=True)

    def _ended(self, run_id: UUID, error: BaseException | None) -> None:
        parent = self._parents.pop(run_id, None)
        if self._resumed and run_id in self._resumed:
            with self._lock:
                self._resumed.pop(run_id, None)
        if error is not None and parent is not None and isinstance(error, GraphBubbleUp):
            self._interrupted.add(parent)  # a node raised an interrupt: its graph ends "cleanly" but paused
        if run_id not in self._watched:
            return
        with self._lock:
            callback = self._watched.pop(run_id, None)
        interrupted = run_id in self._interrupted
        self._interrupted.discard(run_id)
        if callback is None:
            return
        try:
            callback(error, interrupted)
        except Exception:
            _log.warning("closing a run after its graph ended failed", exc_info=True)


_GUARD_LOCK = threading.Lock()


@functools.cache
def _registered_guard() -> RunEndGuard:
    instance = RunEndGuard()
    register_configure_hook(contextvars.ContextVar("rb_otel_run_end_guard", default=instance), True)
    return instance


def guard() -> RunEndGuard:
    """The process-wide guard, registered with LangChain on first use (never on import)."""
    with _GUARD_LOCK:  # functools.cache alone may build twice under a race
        return _registered_guard()
