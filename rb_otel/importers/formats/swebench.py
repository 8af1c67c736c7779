"""A SWE-bench run's outcome, read from the evaluation report found with its trajectory (never from the agent's exit
status, which says how it stopped, not whether its patch works).

Where a report is looked for (bounded: never the whole disk): the trajectory's folder and the two folders above it
(``<run>/<instance>/<instance>.traj.json`` has its run's folder one above, a batch of runs
``<experiment>/<arm>/<instance>.json`` its experiment two above), nearest first. In each folder, in this order:

1. the SWE-bench harness's per-instance reports: ``report.json`` in the folder itself and
   ``logs/run_evaluation/<run id>/<model>/<instance id>/report.json`` below it (the harness's own layout). A report
   counts only when the ``patch.diff`` the harness wrote beside it is the trajectory's submission (``info.submission``;
   trailing whitespace aside, which the harness strips): that joins a report to the run whose patch it evaluated,
   whichever harness run it came from, even when the same instance was run several times. Two matching reports that
   disagree leave the run without an outcome (a problem says so);
2. ``results_summary.json`` (mini-swe-agent's: ``instances[].resolved``);
3. ``*_eval.json`` files in name order (the harness's run report: ``resolved_ids``, ``unresolved_ids``,
   ``empty_patch_ids``, ``error_ids``).

The first that names the instance decides. Statuses: ``resolved`` (``success``), ``unresolved``, ``empty_patch`` and
``error`` (the harness could not evaluate the patch), all three failures as SWE-bench counts them; the status is
kept as ``rb.metadata.swebench.status`` so an analysis may drop the last two. A run no report names has no outcome
(``unlabelled``): training leaves it out and counts it. ``--labels`` still overrides.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rb_otel.importers.formats.records import load_json
from rb_otel.importers.model import ImportProblem, RecordError
from rb_otel.telemetry import names as n
from rb_otel.telemetry.attributes import AttributeValue

__all__ = ["FOLDERS_ABOVE", "OUTCOMES", "Evaluation", "evaluation", "run_statuses"]

#: How many folders above the trajectory's own a report is looked for in.
FOLDERS_ABOVE = 2
#: A status's run outcome.
OUTCOMES = {
    "resolved": "success",
    "unresolved": "failure: unresolved",
    "empty_patch": "failure: empty patch",
    "error": "failure: evaluation error",
}
# The run report's id lists, in the order a status is taken when an id is in several.
_ID_LISTS = (
    ("resolved_ids", "resolved"),
    ("unresolved_ids", "unresolved"),
    ("empty_patch_ids", "empty_patch"),
    ("error_ids", "error"),
)
_SUMMARY = "results_summary.json"
_META = n.RB_METADATA_PREFIX


@dataclass(frozen=True, slots=True)
class Evaluation:
    """What the report found for a run said: its status and where it was read."""

    status: str
    report: Path

    @property
    def outcome(self) -> str:
        return OUTCOMES[self.status]

    def attributes(self, trajectory: Path) -> dict[str, AttributeValue]:
        """``rb.metadata.swebench.status`` and ``.report`` (the report's path from the trajectory's folder)."""
        report = os.path.relpath(self.report, trajectory.parent)
        return {_META + "swebench.status": self.status, _META + "swebench.report": report}


def evaluation(
    trajectory: Path, instance_id: str, submission: str | None, problems: list[ImportProblem]
) -> Evaluation | None:
    """The evaluation of ``instance_id`` as run in ``trajectory`` (module docstring), ``None`` when no report
    names it. Reports that cannot be read are problems (each listed once per read), never errors."""
    if not instance_id:
        return None
    folders = [trajectory.parent, *trajectory.parent.parents][: FOLDERS_ABOVE + 1]
    for folder in folders:
        found = _instance_report(folder, instance_id, submission, problems)
        if found is not None:
            return found or None  # an empty tuple: matching reports disagree
        for summary in _summaries(folder):
            status = _statuses(summary, problems).get(instance_id)
            if status is not None:
                return Evaluation(status, summary)
    return None


def _instance_report(
    folder: Path, instance_id: str, submission: str | None, problems: list[ImportProblem]
) -> Evaluation | tuple[()] | None:
    """The per-instance report in ``folder`` whose evaluated patch is ``submission``; ``()`` when two such
    reports disagree; ``None`` when there is none."""
    if submission is None:
        return None
    matches: list[Evaluation] = []
    for report in _instance_reports(folder, instance_id):
        patch = report.parent / "patch.diff"
        try:
            evaluated = patch.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue  # a report without the patch it evaluated cannot be joined to a run
        if evaluated.rstrip() != submission.rstrip():
            continue
        entry = _report(report, problems).get(instance_id)
        resolved = entry.get("resolved") if isinstance(entry, Mapping) else None
        if isinstance(resolved, bool):
            matches.append(Evaluation("resolved" if resolved else "unresolved", report))
    if not matches:
        return None
    if len({m.status for m in matches}) > 1:
        _once(problems, ImportProblem(str(matches[0].report), instance_id, "the same patch evaluated with different "
                                      f"outcomes in {len(matches)} reports: the run is left unlabelled"))  # fmt: skip
        return ()
    return matches[0]


def _instance_reports(folder: Path, instance_id: str) -> list[Path]:
    if "/" in instance_id or "\\" in instance_id or instance_id.startswith("."):
        return []  # not an instance id: never a path out of the harness's folders
    found = [folder / "report.json"] if (folder / "report.json").is_file() else []
    root = folder / "logs" / "run_evaluation"
    found += [run / instance_id / "report.json" for run in _listed(str(root), _mtime(root), _harness_runs)]
    return [p for p in found if p.is_file()]


def _summaries(folder: Path) -> tuple[Path, ...]:
    return _listed(str(folder), _mtime(folder), _summary_files)


def _mtime(folder: Path) -> int:
    try:
        return folder.stat().st_mtime_ns
    except OSError:
        return -1


@functools.lru_cache(maxsize=256)
def _listed(folder: str, mtime_ns: int, lister: Any) -> tuple[Path, ...]:
    """What ``lister`` finds in ``folder``, listed once per version of the folder (its modification time)."""
    try:
        return tuple(lister(Path(folder)))
    except OSError:
        return ()


def _harness_runs(root: Path) -> list[Path]:
    """The ``<run id>/<model>`` folders of the harness's ``logs/run_evaluation``, in name order."""
    if not root.is_dir():
        return []
    return [m for r in sorted(root.iterdir()) if r.is_dir() for m in sorted(r.iterdir()) if m.is_dir()]


def _summary_files(folder: Path) -> list[Path]:
    names = sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []
    ordered = ([_SUMMARY] if _SUMMARY in names else []) + [name for name in names if name.endswith("_eval.json")]
    return [folder / name for name in ordered if (folder / name).is_file()]


def _report(path: Path, problems: list[ImportProblem]) -> Mapping[str, Any]:
    found: Mapping[str, Any] = _cached(path, problems, _per_instance)
    return found


def _statuses(path: Path, problems: list[ImportProblem]) -> Mapping[str, str]:
    found: Mapping[str, str] = _cached(path, problems, run_statuses)
    return found


def _per_instance(data: Any) -> Mapping[str, Any]:
    return data if isinstance(data, dict) else {}


def run_statuses(data: Any) -> Mapping[str, str]:
    """``instance id -> status`` of a mini-swe-agent summary or a harness run report (module docstring)."""
    out: dict[str, str] = {}
    if not isinstance(data, dict):
        return out
    if isinstance(data.get("instances"), list):
        for item in data["instances"]:
            if isinstance(item, dict) and isinstance(item.get("resolved"), bool) and item.get("instance_id"):
                out.setdefault(str(item["instance_id"]), "resolved" if item["resolved"] else "unresolved")
    for key, status in _ID_LISTS:
        ids = data.get(key)
        for instance in ids if isinstance(ids, list) else []:
            out.setdefault(str(instance), status)
    return out


def _cached(path: Path, problems: list[ImportProblem], shape: Any) -> Any:
    try:
        stat = path.stat()
        return _parsed(str(path), stat.st_mtime_ns, stat.st_size, shape)
    except RecordError as exc:
        _once(problems, ImportProblem(exc.path, exc.where, f"{exc.problem}; not used as an evaluation report"))
    except OSError as exc:
        _once(problems, ImportProblem(str(path), "file", f"cannot read it ({exc.strerror}); not used as a report"))
    return {}


@functools.lru_cache(maxsize=256)
def _parsed(path: str, mtime_ns: int, size: int, shape: Any) -> Any:
    """A report parsed once per version of the file (its modification time and size are part of the key)."""
    return shape(load_json(Path(path)))


def _once(problems: list[ImportProblem], problem: ImportProblem) -> None:
    if problem not in problems:
        problems.append(problem)
