"""Outcomes from an evaluation's results, for runs whose own records do not say whether they succeeded.

Accepted shapes (``load_labels``): a SWE-bench ``results.json`` (``{"resolved": [ids], ...}``, with the other
id lists such as ``unresolved``/``error`` counting as failures when present), the SWE-bench harness's run report
(``<model>.<run id>.json``: ``resolved_ids``, and ``unresolved_ids``/``empty_patch_ids``/``error_ids`` as
failures), mini-swe-agent's
``results_summary.json`` (``{"instances": [{"instance_id", "resolved"}]}``), or a plain
``{run_id: true|false}`` mapping (true = success). A run id matches exactly, or with a ``.traj``/``.json``
suffix removed, or (``<batch>/<instance>``) by its instance.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rb_otel.importers.formats.records import load_json
from rb_otel.importers.formats.swebench import run_statuses
from rb_otel.importers.model import RecordError

__all__ = ["Labels", "failed_of", "load_labels", "with_recorded"]

_FAILED_LISTS = ("unresolved", "unresolved_ids", "error", "error_ids", "empty_patch", "empty_patch_ids")


def failed_of(outcome: str) -> bool | None:
    """What a run's outcome says of it: ``False`` for ``success``, ``True`` for a failure (``failure`` or
    ``failure: ...``), ``None`` for anything else (unlabelled, unfinished, a run rb-otel stopped: not known)."""
    if outcome == "success":
        return False
    if outcome.startswith("failure"):
        return True
    return None


class Labels(Mapping[str, bool]):
    """``run id -> succeeded``, read from ``path``."""

    def __init__(self, path: str, outcomes: Mapping[str, bool], *, resolved_only: bool = False) -> None:
        self.path = path
        self._outcomes = dict(outcomes)
        # SWE-bench results.json listing only resolved ids: every other run of the evaluation failed.
        self.resolved_only = resolved_only
        self._recorded: Labels | None = None  # outcome events, for the runs this file says nothing of (beside)

    def beside(self, recorded: Labels | None) -> Labels:
        """These labels with ``recorded`` (the outcome events where the runs live) behind them: a run this file
        names keeps this file's outcome (the file given on the command line wins); a run it does not name takes
        the recorded one, before a ``resolved_only`` file's implied failure."""
        if recorded is None:
            return self
        both = Labels(f"{self.path} and {recorded.path}", self._outcomes, resolved_only=self.resolved_only)
        both._recorded = recorded
        return both

    def __getitem__(self, key: str) -> bool:
        return self._outcomes[key]

    def __iter__(self) -> Any:
        return iter(self._outcomes)

    def __len__(self) -> int:
        return len(self._outcomes)

    def outcome_of(self, run_id: str) -> bool | None:
        """Whether ``run_id`` succeeded; ``None`` when the file says nothing of it. A run id qualified by its batch
        (``<batch>/<instance>``, as mini-swe-agent runs are) matches the instance's label too."""
        instance = run_id.rsplit("/", 1)[-1]
        for key in (run_id, run_id.removesuffix(".json").removesuffix(".traj"), instance):
            if key in self._outcomes:
                return self._outcomes[key]
        recorded = self._recorded.outcome_of(run_id) if self._recorded is not None else None
        if recorded is not None:
            return recorded
        return False if self.resolved_only else None


def with_recorded(labels: Labels | None, recorded: Labels | None) -> Labels | None:
    """``labels`` (a ``--labels`` file) with the ``recorded`` outcome events behind them (:meth:`Labels.beside`);
    either alone when the other is ``None``."""
    return labels.beside(recorded) if labels is not None else recorded


def load_labels(path: str | Path) -> Labels:
    """Read a labels file; :class:`RecordError` (file, place, problem) when it is none of the accepted shapes."""
    source = Path(path)
    if not source.is_file():
        raise RecordError(str(source), "file", "no such labels file")
    data = load_json(source)
    where = str(source)
    if isinstance(data, dict) and isinstance(data.get("instances"), list):
        outcomes: dict[str, bool] = {}
        for i, item in enumerate(data["instances"]):
            if not isinstance(item, dict) or "instance_id" not in item or not isinstance(item.get("resolved"), bool):
                raise RecordError(where, f"instances[{i}]", "expected {instance_id, resolved: true|false}")
            outcomes[str(item["instance_id"])] = item["resolved"]
        return Labels(where, outcomes)
    if isinstance(data, dict) and isinstance(data.get("resolved_ids"), list):
        return Labels(where, {k: v == "resolved" for k, v in run_statuses(data).items()})
    if isinstance(data, dict) and isinstance(data.get("resolved"), list):
        outcomes = {str(i): True for i in data["resolved"]}
        failed = [name for name in _FAILED_LISTS if isinstance(data.get(name), list)]
        for name in failed:
            outcomes.update({str(i): False for i in data[name] if str(i) not in outcomes})
        return Labels(where, outcomes, resolved_only=not failed)
    if isinstance(data, dict) and data and all(isinstance(v, bool) for v in data.values()):
        return Labels(where, {str(k): v for k, v in data.items()})
    raise RecordError(
        where,
        "top level",
        "not a labels file: expected SWE-bench results.json ({'resolved': [ids]}), mini-swe-agent "
        "results_summary.json ({'instances': [...]}) or {run_id: true|false}",
    )
