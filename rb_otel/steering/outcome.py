"""A run's outcome as the caller gives it, checked at the boundary: pure (no OpenTelemetry, no I/O).

``ReasonBlocks.record_outcome`` and ``SteeringSession.record_outcome`` check their arguments here, so a bad run id
or outcome fails with one line naming the parameter, before anything is emitted (``rb_otel.telemetry.outcomes``
emits it).
"""

from __future__ import annotations

import math
import re
import uuid
from dataclasses import dataclass

__all__ = ["MAX_RUN_ID", "OUTCOMES", "RunOutcome", "checked_outcome", "checked_run_id"]

#: The outcomes a run can be given (the telemetry contract's ``success``/``failure``).
OUTCOMES = ("success", "failure")
#: The longest run id accepted: ids are keys, not documents.
MAX_RUN_ID = 512
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


@dataclass(frozen=True, slots=True)
class RunOutcome:
    """What is known of a run after it ended: ``outcome`` (``success``/``failure``), an optional ``score`` and
    ``reason`` (free text)."""

    run_id: str
    outcome: str
    score: float | None = None
    reason: str | None = None


def checked_run_id(run_id: object) -> str:
    """``run_id`` as the key events carry (a ``uuid.UUID``, as LangChain names runs, becomes its string); a
    ``ValueError``/``TypeError`` naming ``run_id`` for anything that cannot be one."""
    if isinstance(run_id, uuid.UUID):
        return str(run_id)
    if not isinstance(run_id, str):
        raise TypeError(f"run_id must be a string (the run's rb.run_id), got {type(run_id).__name__}")
    if not run_id.strip():
        raise ValueError("run_id must name a run (the run's rb.run_id), got an empty string")
    if len(run_id) > MAX_RUN_ID:
        raise ValueError(f"run_id is {len(run_id)} characters long; a run id is at most {MAX_RUN_ID}")
    if _CONTROL.search(run_id):
        raise ValueError(f"run_id {run_id!r} contains a control character; no run is named so")
    return run_id


def checked_outcome(run_id: object, outcome: object, score: object = None, reason: object = None) -> RunOutcome:
    """The boundary check of ``record_outcome``'s arguments: one ``ValueError``/``TypeError`` naming the parameter.

    ``outcome`` is ``"success"`` or ``"failure"``, or a bool (``True``: success), as labels files say it;
    ``score`` a finite number (any scale: the evaluator's); ``reason`` a string."""
    key = checked_run_id(run_id)
    if isinstance(outcome, bool):
        label = OUTCOMES[0] if outcome else OUTCOMES[1]
    elif isinstance(outcome, str) and outcome in OUTCOMES:
        label = outcome
    else:
        raise ValueError(f"outcome must be 'success', 'failure' or a bool (True: success), got {outcome!r}")
    value: float | None = None
    if score is not None:
        if isinstance(score, bool) or not isinstance(score, int | float):
            raise TypeError(f"score must be a number, got {type(score).__name__}")
        if not math.isfinite(score):
            raise ValueError(f"score must be finite, got {score!r}")
        value = float(score)
    if reason is not None and not isinstance(reason, str):
        raise TypeError(f"reason must be a string, got {type(reason).__name__}")
    return RunOutcome(key, label, value, reason or None)
