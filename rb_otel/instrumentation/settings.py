"""The instrumentor's settings, read from the ``RB_OTEL_*`` variables (``environment_variables.py``) and checked
once: a value that is not one of the accepted ones is warned about (naming them) and the default used, never
silently flipped."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from rb_otel.instrumentation.environment_variables import (
    RB_OTEL_AGENT_KIND,
    RB_OTEL_AGENT_NAME,
    RB_OTEL_PILOT_MODEL,
    RB_OTEL_SCORER,
    RB_OTEL_STEERING,
)
from rb_otel.steering.pilot.kinds import AGENT_KINDS

__all__ = ["SCORERS", "STEERING", "InstrumentSettings", "read_settings"]

_log = logging.getLogger("rb_otel")

SCORERS = ("heuristic", "pilot")
#: ``RB_OTEL_STEERING``'s values: whether instrumented agents are steered.
STEERING = {"on": True, "observe": False}


@dataclass(frozen=True, slots=True)
class InstrumentSettings:
    """What every instrumented agent gets: its default name, its scorer (and the pilot's model file and kind of agent)
    and whether it is steered or only observed."""

    agent_name: str = ""
    scorer: str = "heuristic"
    pilot_model: Path | None = None
    steer: bool = True
    agent_kind: str | None = None  # None: inferred per run from the agent's tools


def _choice(environ: Mapping[str, str], variable: str, accepted: tuple[str, ...], default: str) -> str:
    raw = environ.get(variable, "").strip()
    if not raw:
        return default
    if raw.lower() in accepted:
        return raw.lower()
    _log.warning("%s=%r is not one of %s; using %s", variable, raw, ", ".join(accepted), default)
    return default


def read_settings(environ: Mapping[str, str] | None = None) -> InstrumentSettings:
    """The settings the variables give (``environ``: default ``os.environ``); warns about each bad value."""
    env = os.environ if environ is None else environ
    model_raw = env.get(RB_OTEL_PILOT_MODEL, "").strip()
    pilot_model = Path(model_raw) if model_raw else None
    scorer = _choice(env, RB_OTEL_SCORER, SCORERS, "pilot" if pilot_model is not None else "heuristic")
    if pilot_model is not None and scorer != "pilot":
        _log.warning("%s is set but %s=%s: the model file is not used", RB_OTEL_PILOT_MODEL, RB_OTEL_SCORER, scorer)
        pilot_model = None
    steering = _choice(env, RB_OTEL_STEERING, tuple(STEERING), "on")
    kind = _choice(env, RB_OTEL_AGENT_KIND, AGENT_KINDS, "")
    return InstrumentSettings(
        agent_name=env.get(RB_OTEL_AGENT_NAME, "").strip(),
        scorer=scorer,
        pilot_model=pilot_model,
        steer=STEERING[steering],
        agent_kind=kind or None,
    )
