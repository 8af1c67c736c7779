"""tau2-bench results files, ``{timestamp, info, tasks, simulations: [...]}``: what tau2's runner writes (the
Sierra branches, researchers' forks) and what leaderboard submissions carry in their ``trajectories/`` folders.

Submissions exported from other harnesses may lack fields tau2's runner always writes (message ``timestamp``,
``cost``, ``usage``, a tool result's ``error``, a simulation's ``seed`` and costs): each is optional here, and a
missing one leaves the step without it (no tokens, synthetic timing). What a run is, its outcome and its agent:
:mod:`rb_otel.importers.formats.tau2_common`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from rb_otel.importers.formats.records import load_json
from rb_otel.importers.formats.tau2_common import simulation_runs, simulations
from rb_otel.importers.model import ImportedRun, ImportProblem

__all__ = ["read"]


def read(path: Path, problems: list[ImportProblem]) -> Iterator[ImportedRun]:
    data = load_json(path)
    found = simulations(path, data, problems)
    yield from simulation_runs(path, data, problems, source="tau2_bench", simulations=found)
