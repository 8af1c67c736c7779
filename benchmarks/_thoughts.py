"""Realistic agent thoughts for the benchmarks.

Read from the SWE-agent trajectories under the development records' data root (``RB_OTEL_DATA``, ``../shared/data``
beside the checkout or ``make data``'s ``data/``: real agent text, MIT, from SWE-agent/SWE-agent), else a built-in
sample of the same kind.
"""

from __future__ import annotations

import json
from pathlib import Path

from rb_otel.datasets import find_data_root

FALLBACK = [
    (
        "First, I'll create a new Python script to reproduce the bug described in the issue, then run it.",
        "create",
        "reproduce_bug.py",
    ),
    (
        "The `reproduce_bug.py` script has been updated. Now let's run it to see if we can reproduce the bug.",
        "python",
        "reproduce_bug.py",
    ),
    (
        "The traceback shows a KeyError in pydicom/pixel_data_handlers/numpy_handler.py; maybe the float pixel "
        "data tag is not handled. I'm not sure yet, let me open the handler.",
        "open",
        "numpy_handler.py",
    ),
    (
        "The edit failed with a syntax error: the indentation is wrong. Let me fix the edit and try again.",
        "edit",
        "numpy_handler.py 280:290",
    ),
]


def thoughts() -> list[tuple[str, str, str]]:
    """``(thought, action, action_input)`` triples, at least a dozen."""
    found: list[tuple[str, str, str]] = []
    root = find_data_root()
    folder = root / "swe_agent" if root is not None else Path("-")
    for path in sorted(folder.glob("*.traj")) if folder.is_dir() else []:
        try:
            for step in json.loads(path.read_text())["trajectory"]:
                action = str(step.get("action", "")).strip()
                name, _, rest = action.partition(" ")
                found.append((str(step.get("thought", "")), name, rest[:200]))
        except (ValueError, KeyError, TypeError):
            continue
    return [t for t in found if t[0]] or FALLBACK * 3
