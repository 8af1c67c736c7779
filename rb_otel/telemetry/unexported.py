"""One warning when the environment asks for export and nothing would export: ``OTEL_*`` exporter variables set
while the global providers runs record to are still the OpenTelemetry API's own (its no-op providers, or the proxies
that stand in until an SDK is installed). Without it a user who set ``OTEL_EXPORTER_OTLP_ENDPOINT`` and built
``ReasonBlocks()`` with no providers sees nothing arrive and nothing said, at any log level.

Checked when a run starts (the moment rb-otel needs the providers: an application may install them after it built
``ReasonBlocks``), for the providers it was not given; told once per process.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Any

from opentelemetry import metrics, trace

__all__ = ["EXPORT_VARIABLES", "warn_if_unexported"]

_log = logging.getLogger("rb_otel")

#: The variables that ask for each signal's export: the OTLP endpoints, and an exporter named (``none`` asks for
#: nothing).
EXPORT_VARIABLES = {
    "traces": ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_TRACES_EXPORTER"),
    "metrics": ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "OTEL_METRICS_EXPORTER"),
}

_NOUNS = {"traces": ("tracer", "spans"), "metrics": ("meter", "metrics")}


class _Warned:
    lock = threading.Lock()
    done = False


def _asked(variable: str) -> bool:
    value = os.environ.get(variable, "").strip().lower()
    if variable.endswith("_EXPORTER"):
        return bool(value) and value != "none"
    return bool(value)


def _api_default(provider: Any) -> bool:
    """Whether ``provider`` is one the API package defines itself (a no-op, or the proxy of a global not yet set):
    every SDK, the OpenTelemetry one or another, lives in a package of its own."""
    return type(provider).__module__.startswith(("opentelemetry.trace", "opentelemetry.metrics"))


def warn_if_unexported(*, tracer_provider: Any, meter_provider: Any) -> bool:
    """Warn (logger ``rb_otel``, once per process) when an exporter variable asks for a signal whose provider
    (``None``: the global one, read now) is the API's; whether it warned. A provider given explicitly is the
    caller's choice, never warned about; so is ``OTEL_SDK_DISABLED=true``. Cheap once warned (a flag)."""
    if _Warned.done or os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    given = {"traces": tracer_provider, "metrics": meter_provider}
    globals_ = {"traces": trace.get_tracer_provider, "metrics": metrics.get_meter_provider}
    lost: list[str] = []
    asked_by: list[str] = []
    for signal, variables in EXPORT_VARIABLES.items():
        asking = [v for v in variables if _asked(v)]
        if asking and given[signal] is None and _api_default(globals_[signal]()):
            lost.append(signal)
            asked_by += [v for v in asking if v not in asked_by]
    if not lost:
        return False
    with _Warned.lock:
        if _Warned.done:
            return False
        _Warned.done = True
    kinds = " and ".join(_NOUNS[s][0] for s in lost)
    _log.warning(
        "%s %s set, but no OpenTelemetry SDK is configured in this process (the global %s %s the API's "
        "no-op), so rb-otel's %s go nowhere. One line fixes it: run the application under `opentelemetry-instrument "
        "python app.py` (pip install opentelemetry-distro), or give ReasonBlocks the providers rb_otel.configure() "
        "builds from these variables (docs/telemetry.md, 'Provider setup')",
        " and ".join(asked_by),
        "is" if len(asked_by) == 1 else "are",
        kinds,
        "provider is" if len(lost) == 1 else "providers are",
        " and ".join(_NOUNS[s][1] for s in lost),
    )
    return True
