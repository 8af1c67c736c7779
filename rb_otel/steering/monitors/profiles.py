"""Monitor weight profiles and their resolution (docs/steering.md, "Monitors").

Resolution order: defaults (``coding``) <- named profile <- per-call overrides. Overrides may be partial;
unknown monitor names are dropped, negative weights become 0 and each weight is capped at 1.0. Weights are not
renormalised (the docs never say so).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from types import MappingProxyType

__all__ = ["PROFILES", "V1_MONITORS", "register_profile", "resolve_weights"]

_log = logging.getLogger("rb_otel.steering.monitors")

V1_MONITORS: tuple[str, ...] = (
    "claim_contradiction",
    "semantic_loop",
    "verification_skip",
    "cyclic_compression",
    "late_sprawl",
    "silent_topic_drift",
)

_BUILTIN: dict[str, Mapping[str, float]] = {
    "coding": MappingProxyType(
        {
            "claim_contradiction": 0.30,
            "semantic_loop": 0.25,
            "verification_skip": 0.15,
            "cyclic_compression": 0.10,
            "late_sprawl": 0.10,
            "silent_topic_drift": 0.10,
        }
    ),
    "pr_review": MappingProxyType(
        {
            "claim_contradiction": 0.20,
            "semantic_loop": 0.30,
            "verification_skip": 0.10,
            "cyclic_compression": 0.15,
            "late_sprawl": 0.15,
            "silent_topic_drift": 0.10,
        }
    ),
    "qa": MappingProxyType(
        {
            "claim_contradiction": 0.40,
            "semantic_loop": 0.15,
            "verification_skip": 0.05,
            "cyclic_compression": 0.05,
            "late_sprawl": 0.10,
            "silent_topic_drift": 0.25,
        }
    ),
}

#: Built-in profiles plus any registered with :func:`register_profile` (read-only view).
PROFILES: Mapping[str, Mapping[str, float]] = MappingProxyType(_BUILTIN)


def _clean(weights: Mapping[str, object], *, where: str) -> dict[str, float]:
    cleaned: dict[str, float] = {}
    for name, value in weights.items():
        if name not in V1_MONITORS:
            _log.debug("%s: dropping unknown monitor %r", where, name)
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise ValueError(f"{where}: weight for {name!r} must be a finite number, got {value!r}")
        cleaned[name] = min(max(float(value), 0.0), 1.0)
    return cleaned


def register_profile(name: str, weights: Mapping[str, float]) -> None:
    """Register a custom named profile, usable as ``task_profile``; a partial dict keeps the coding weights."""
    if not isinstance(name, str) or not name:
        raise ValueError("profile name must be a non-empty string")
    merged = dict(_BUILTIN["coding"])
    merged.update(_clean(weights, where=f"profile {name!r}"))
    _BUILTIN[name] = MappingProxyType(merged)


def resolve_weights(task_profile: str, overrides: Mapping[str, float] | None = None) -> dict[str, float]:
    """Return the weight of every v1 monitor for ``task_profile`` with ``overrides`` applied.

    Raises ``ValueError`` for an unknown profile name or a non-numeric weight.
    """
    try:
        profile = _BUILTIN[task_profile]
    except KeyError:
        raise ValueError(
            f"unknown task_profile {task_profile!r}; known: {', '.join(sorted(_BUILTIN))} "
            "(register a custom one with rb_otel.steering.monitors.register_profile)"
        ) from None
    weights = dict(profile)
    if overrides:
        weights.update(_clean(overrides, where="monitor_weights"))
    return weights
