"""Which runs a pilot model was fitted on, kept as hashes: a model file's ``trained.fingerprint``.

``rb-otel train`` records every training run's id and the task keys of its task group (the group id, or the task,
and the task's family across its domain's variants: the rule the training folds follow), each as a truncated
SHA-256, so the file holds neither run ids nor task names. ``rb-otel evaluate --pilot-model`` reads it back to tell
the runs the model has seen, itself or another run of the same task (its figures on them are in-sample), from
the runs it has not.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["HASH", "FitFingerprint", "task_family", "task_keys"]

#: How each id is hashed: SHA-256 of a fixed prefix and the id, the first 16 hex digits (64 bits: no collision to
#: expect among millions of runs).
HASH = "sha256/16"
_PREFIX = "rb-otel fit\x00"
_DIGITS = 16
#: A domain's variant suffix: ``airline-relaxed`` and ``airline_tighter_policy`` are variants of ``airline``.
_VARIANT = re.compile(r"^([A-Za-z0-9]+)[-_].*$")


def task_family(task_id: str) -> str:
    """``domain/task`` with the domain's variant dropped (``airline-relaxed/8`` -> ``airline/8``); ``""`` for a
    task id without a domain."""
    domain, slash, task = task_id.partition("/")
    if not slash or not task:
        return ""
    base = _VARIANT.sub(r"\1", domain)
    return f"{base}/{task}"


def task_keys(run_id: str, group_id: str = "", task_id: str = "") -> tuple[str, ...]:
    """The keys that put a run in a task group: its group id (else its task, else the run itself) and, when its
    task has a domain, the task's family (``family:airline/8``)."""
    family = task_family(task_id)
    return (group_id or task_id or run_id, *((f"family:{family}",) if family else ()))


def _hash(text: str) -> str:
    return hashlib.sha256((_PREFIX + text).encode("utf-8")).hexdigest()[:_DIGITS]


@dataclass(frozen=True, slots=True)
class FitFingerprint:
    """The hashed run ids and task keys of the runs a model was fitted on."""

    runs: frozenset[str]
    tasks: frozenset[str]

    @classmethod
    def of(cls, runs: Iterable[tuple[str, Iterable[str]]]) -> FitFingerprint:
        """The fingerprint of ``(run id, task keys)`` pairs (:func:`task_keys`)."""
        ids: set[str] = set()
        keys: set[str] = set()
        for run_id, tasks in runs:
            ids.add(_hash(run_id))
            keys.update(_hash(k) for k in tasks)
        return cls(frozenset(ids), frozenset(keys))

    @classmethod
    def from_dict(cls, data: Any) -> FitFingerprint | None:
        """The fingerprint a model file's ``trained.fingerprint`` holds; ``None`` when it holds none (a file written
        before fingerprints, the shipped model) or one of another hash."""
        if not isinstance(data, Mapping) or data.get("hash") != HASH:
            return None
        runs, tasks = data.get("runs"), data.get("task_groups")
        if not isinstance(runs, list) or not isinstance(tasks, list):
            return None
        return cls(frozenset(map(str, runs)), frozenset(map(str, tasks)))

    def as_dict(self) -> dict[str, Any]:
        """What the model file records (sorted, so the same runs give the same file)."""
        return {"hash": HASH, "runs": sorted(self.runs), "task_groups": sorted(self.tasks)}

    def saw_run(self, run_id: str) -> bool:
        """Whether the run itself was in the fit."""
        return _hash(run_id) in self.runs

    def saw_task(self, keys: Iterable[str]) -> bool:
        """Whether a run of the same task group (any of ``keys``, :func:`task_keys`) was in the fit."""
        return any(_hash(k) in self.tasks for k in keys)
