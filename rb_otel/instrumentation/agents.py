"""Where the instrumentor meets LangChain: ``create_agent`` wrapped, in every module that exports it, so each agent
built gets rb-otel's middleware appended (last, where it belongs), once.

Scripts bind ``create_agent`` when they import it (``from langchain.agents import create_agent``), so the wrapper
must be in place before they do: the instrumentor installs it when ``langchain.agents`` is imported (at once if it
already is), and ``opentelemetry-instrument`` runs the instrumentor before the script. A name bound before that
keeps the original; :meth:`CreateAgentPatch.restore` puts the originals back.
"""

from __future__ import annotations

import functools
import logging
import sys
import threading
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["EXPORTERS", "CreateAgentPatch", "has_reasonblocks"]

_log = logging.getLogger("rb_otel")

#: The modules that export ``create_agent`` (the public one first) with the name they export it under.
EXPORTERS = (("langchain.agents", "create_agent"), ("langchain.agents.factory", "create_agent"))
#: The attribute a wrapper carries: the function it wraps.
_ORIGINAL = "__rb_otel_original__"

#: Makes the middleware for an agent from ``create_agent``'s keyword arguments (``None``: none, rb-otel is off).
MiddlewareFor = Callable[[Mapping[str, Any]], Any]


def has_reasonblocks(model: Any, middleware: list[Any]) -> bool:
    """Whether an agent already has rb-otel: a ``ReasonBlocksMiddleware`` of the user's among ``middleware`` (any
    configuration, subclasses too), or a model ``rb.chat_model()`` wrapped."""
    from rb_otel.integrations.langchain.chat_model import SteeredChatModel
    from rb_otel.integrations.langchain.middleware import ReasonBlocksMiddleware

    return isinstance(model, SteeredChatModel) or any(isinstance(m, ReasonBlocksMiddleware) for m in middleware)


class CreateAgentPatch:
    """``create_agent`` wrapped in each of :data:`EXPORTERS` while :attr:`active`; :meth:`restore` unwraps.

    ``middleware_for`` is called on the thread that calls ``create_agent``, once per agent that has no rb-otel of
    its own. Whatever fails in it is logged and the agent is built as the caller asked: instrumenting never breaks
    an application's ``create_agent``."""

    def __init__(self, middleware_for: MiddlewareFor) -> None:
        self._middleware_for = middleware_for
        self._saved: list[tuple[Any, str, Any]] = []
        self._lock = threading.Lock()
        self.active = True

    def install(self, _module: Any = None) -> None:
        """Wrap ``create_agent`` where it is exported (the post-import hook of ``langchain.agents``); a no-op once
        restored, and for a module whose ``create_agent`` is already wrapped."""
        with self._lock:
            if not self.active:
                return
            wrappers: dict[int, Any] = {}  # one wrapper per original: both modules export the same function
            for module_name, attribute in EXPORTERS:
                module = sys.modules.get(module_name)
                original = getattr(module, attribute, None)
                if original is None or hasattr(original, _ORIGINAL):
                    continue
                wrapper = wrappers.setdefault(id(original), self._wrap(original))
                setattr(module, attribute, wrapper)
                self._saved.append((module, attribute, original))

    def restore(self) -> None:
        """Put back the ``create_agent`` each module had (where it is still this patch's wrapper)."""
        with self._lock:
            self.active = False
            for module, attribute, original in reversed(self._saved):
                if getattr(getattr(module, attribute, None), _ORIGINAL, None) is original:
                    setattr(module, attribute, original)
            self._saved.clear()

    def _wrap(self, original: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(original)
        def create_agent(*args: Any, **kwargs: Any) -> Any:
            if self.active:
                kwargs = self._with_middleware(args, kwargs)
            return original(*args, **kwargs)

        setattr(create_agent, _ORIGINAL, original)
        return create_agent

    def _with_middleware(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        try:
            middleware = list(kwargs.get("middleware") or ())
            model = args[0] if args else kwargs.get("model")
            if has_reasonblocks(model, middleware):
                return kwargs  # the user's own rb-otel, configured as they chose
            ours = self._middleware_for(kwargs)
            if ours is None:
                return kwargs
            return {**kwargs, "middleware": [*middleware, ours]}
        except Exception:
            _log.warning("rb-otel could not add its middleware to this agent; it is built without it", exc_info=True)
            return kwargs
