"""Other OpenTelemetry instrumentations of LangChain in the same process: told about once, since both would
record every model and tool call (each as its own span)."""

from __future__ import annotations

import logging
import sys

__all__ = ["warn_if_instrumented_twice"]

_log = logging.getLogger("rb_otel.integrations.langchain")

#: module -> the instrumentor class in it (``BaseInstrumentor`` subclasses are singletons, so ``cls()`` is the
#: instance an application instrumented with) and the name a user knows it by.
_PEERS = (
    (
        "opentelemetry.instrumentation.genai.langchain",
        "LangChainInstrumentor",
        "opentelemetry-instrumentation-genai-langchain",
    ),
    ("opentelemetry.instrumentation.langchain", "LangchainInstrumentor", "opentelemetry-instrumentation-langchain"),
)


class _Warned:
    done = False


def warn_if_instrumented_twice() -> str:
    """One warning per process when another LangChain instrumentor is active; the package's name, else ``""``.
    Cheap when none is imported (a dictionary look-up per peer): called at every run start."""
    if _Warned.done:
        return ""
    for module_name, class_name, package in _PEERS:
        module = sys.modules.get(module_name)
        if module is None:
            continue
        try:
            active = bool(getattr(module, class_name)().is_instrumented_by_opentelemetry)
        except Exception:  # a version without the singleton or the flag: say nothing rather than guess
            continue
        if active:
            _Warned.done = True
            _log.warning(
                "%s is also instrumenting LangChain in this process: every model and tool call is recorded twice "
                "(its spans and rb-otel's). Run one or the other: rb-otel's spans carry the steering (states, "
                "difficulty, guidance) and the official ones nothing rb-otel lacks for these agents; see "
                "docs/telemetry.md, 'Against the official instrumentation'",
                package,
            )
            return package
    return ""
