"""Monitor evaluation: the backend protocol, the embedded local backend, profiles and the v0 suite."""

from rb_otel.steering.monitors.local import (
    DEFAULT_FIRE_THRESHOLD,
    LocalMonitorBackend,
    MonitorBackend,
    MonitorRequest,
)
from rb_otel.steering.monitors.profiles import PROFILES, V1_MONITORS, register_profile, resolve_weights
from rb_otel.steering.monitors.v0 import DEFAULT_WEIGHTS, evaluate_all, v0_signals

__all__ = [
    "DEFAULT_FIRE_THRESHOLD",
    "DEFAULT_WEIGHTS",
    "PROFILES",
    "V1_MONITORS",
    "LocalMonitorBackend",
    "MonitorBackend",
    "MonitorRequest",
    "evaluate_all",
    "register_profile",
    "resolve_weights",
    "v0_signals",
]
