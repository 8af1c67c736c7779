"""``ReasonBlocksInstrumentor``: rb-otel as an OpenTelemetry instrumentor (the ``opentelemetry_instrumentor`` entry
point ``rb_otel``), so ``opentelemetry-instrument python app.py`` steers and records every LangChain agent the
application builds with ``create_agent``, with no change to its code.

The agents record to the providers ``instrument()`` is given, else the global ones, which the OpenTelemetry distro
set up from the ``OTEL_*`` variables before the application started; the ``RB_OTEL_*`` variables name, score and
steer them (``environment_variables.py``). ``OTEL_PYTHON_DISABLED_INSTRUMENTATIONS=rb_otel`` leaves rb-otel out.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Collection, Mapping
from types import MappingProxyType
from typing import Any

try:
    from opentelemetry.instrumentation.instrumentor import BaseInstrumentor
except ImportError as exc:  # the extra is not installed: say which
    raise ImportError(
        "rb_otel.instrumentation needs opentelemetry-instrumentation: pip install 'rb-otel[instrument]'"
    ) from exc
import wrapt

from rb_otel.instrumentation.agents import CreateAgentPatch
from rb_otel.instrumentation.settings import InstrumentSettings, read_settings

__all__ = ["ReasonBlocksInstrumentor"]

_log = logging.getLogger("rb_otel")

#: What ``instrument()`` takes besides the distro's defaults: the providers to record to (else the global ones).
_PROVIDERS = ("tracer_provider", "meter_provider", "logger_provider")


class ReasonBlocksInstrumentor(BaseInstrumentor):  # type: ignore[misc]  # the base class is untyped
    """Appends rb-otel's middleware to every agent ``langchain.agents.create_agent`` builds while instrumented.

    ``instrument(tracer_provider=..., meter_provider=..., logger_provider=...)`` (each optional: else the global
    ones) reads the ``RB_OTEL_*`` settings, and wraps ``create_agent`` once ``langchain.agents`` is imported (at once
    if it is). One ``ReasonBlocks`` is built at the first agent and shared by all; an agent that already has
    rb-otel's middleware (or an ``rb.chat_model()`` model) keeps its own and gets no second one.
    ``uninstrument()`` puts the original ``create_agent`` back; agents built meanwhile keep their middleware.

    Like every instrumentor it is a singleton (``ReasonBlocksInstrumentor()`` is always the same object), and
    ``opentelemetry-instrument`` calls ``instrument()`` with no arguments, before the application's code runs.
    """

    _patch: CreateAgentPatch | None = None
    _settings = InstrumentSettings()
    _providers: Mapping[str, Any] = MappingProxyType({})
    _reasonblocks: Any = None
    _failed = False
    _build_lock = threading.Lock()

    def instrumentation_dependencies(self) -> Collection[str]:
        return ("langchain >= 1.3.16, < 2",)

    def _instrument(self, **kwargs: Any) -> None:
        self._settings = read_settings()
        self._providers = {name: kwargs[name] for name in _PROVIDERS if kwargs.get(name) is not None}
        self._reasonblocks, self._failed = None, False
        self._patch = CreateAgentPatch(self._middleware_for)
        wrapt.register_post_import_hook(self._patch.install, "langchain.agents")

    def _uninstrument(self, **kwargs: Any) -> None:
        if self._patch is not None:
            self._patch.restore()  # its import hook, if it has not fired, does nothing now
            self._patch = None

    @property
    def reasonblocks(self) -> Any:
        """The ``ReasonBlocks`` instrumented agents share (``None`` before the first agent, or if it failed)."""
        return self._reasonblocks

    def _middleware_for(self, create_agent_kwargs: Mapping[str, Any]) -> Any:
        rb = self._shared()
        if rb is None:
            return None
        name = str(create_agent_kwargs.get("name") or self._settings.agent_name)
        return rb.middleware(agent_name=name, steer=self._settings.steer)

    def _shared(self) -> Any:
        """The shared ``ReasonBlocks``, built on first use; a configuration it refuses is said once (ERROR) and
        leaves every agent uninstrumented."""
        with self._build_lock:
            if self._reasonblocks is None and not self._failed:
                from rb_otel.facade.reasonblocks import ReasonBlocks

                settings, providers = self._settings, self._providers
                try:
                    self._reasonblocks = ReasonBlocks(
                        scorer=settings.scorer,
                        pilot_model=settings.pilot_model,
                        agent_kind=settings.agent_kind,
                        tracer_provider=providers.get("tracer_provider"),
                        meter_provider=providers.get("meter_provider"),
                        logger_provider=providers.get("logger_provider"),
                    )
                except (ValueError, TypeError, OSError) as exc:  # a bad setting: its message says which
                    self._failed = True
                    _log.error("rb-otel instrumentation is off: %s (agents run without it)", exc)
                except Exception:
                    self._failed = True
                    _log.error("rb-otel instrumentation is off (agents run without it)", exc_info=True)
            return self._reasonblocks
