"""Deterministic arm assignment for A/B experiments (docs/experiments.md, "A/B experiments", the proposed hash
exactly)."""

from __future__ import annotations

import hashlib
from typing import Literal

from rb_otel.steering.checks import check_number

__all__ = ["ARMS", "Arm", "assign_arm", "check_experiment"]

Arm = Literal["on", "off"]
#: The two arms: ``on`` steers, ``off`` is a true passthrough (scored and recorded only).
ARMS: tuple[Arm, Arm] = ("on", "off")


def check_experiment(experiment_id: object, on_fraction: object) -> float:
    """Validate an experiment's id and on-fraction at the boundary; returns the fraction as a float."""
    if not isinstance(experiment_id, str) or not experiment_id.strip():
        raise ValueError(f"experiment_id must be a non-empty string, got {experiment_id!r}")
    return check_number("on_fraction", on_fraction, low=0.0, high=1.0)


def assign_arm(experiment_id: str, unit_id: str, on_fraction: float = 0.5) -> Arm:
    """``"on"`` or ``"off"`` for ``unit_id`` in ``experiment_id``: the same unit always lands in the same arm.

    ``sha256(f"{experiment_id}\\x1f{unit_id}")``, its first 8 bytes read big-endian and divided by 2**64, is a
    uniform draw in [0, 1); below ``on_fraction`` is ``"on"``. So P(on) = ``on_fraction`` (0 puts every unit in
    ``off``, 1 every unit in ``on``), and units of different experiments are assigned independently.
    """
    fraction = check_experiment(experiment_id, on_fraction)
    if not isinstance(unit_id, str) or not unit_id:
        raise ValueError(f"unit_id must be a non-empty string, got {unit_id!r}")
    digest = hashlib.sha256(f"{experiment_id}\x1f{unit_id}".encode()).digest()
    draw = int.from_bytes(digest[:8], "big") / 2**64
    return "on" if draw < fraction else "off"
