"""What one read of several files keeps across them: the runs already taken (a simulation saved in two files is read
once) and the files passed over because they hold no runs (said as one count, not a problem per file)."""

from __future__ import annotations

from pathlib import Path

from rb_otel.importers.model import ImportedRun, ImportProblem

__all__ = ["SeenRuns", "not_runs_problem"]


class SeenRuns:
    """The runs with a :attr:`~rb_otel.importers.model.ImportedRun.unique_id` one read has taken: the first run
    with an id wins; a later one is a duplicate, listed as a problem (not an error) and not read."""

    def __init__(self) -> None:
        self._first: dict[str, str] = {}

    def duplicate(self, run: ImportedRun, path: str | Path, problems: list[ImportProblem]) -> bool:
        """Whether ``run`` (read from ``path``) repeats a run already taken; a duplicate is listed in ``problems``
        and its steps are read past (a streamed run's steps come from the same file)."""
        if not run.unique_id:
            return False
        first = self._first.get(run.unique_id)
        if first is None:
            self._first[run.unique_id] = str(path)
            return False
        for _ in run.steps:
            pass
        where = f"run {run.run_id}"
        problems.append(ImportProblem(str(path), where, f"a duplicate of the run first read from {first}; skipped"))
        return True


def not_runs_problem(where: str, files: list[Path]) -> ImportProblem | None:
    """One line for the files a read passed over because they hold no runs (evaluation reports, predictions,
    metadata, configs, documentation): how many, and the first few names. ``None`` when there were none."""
    if not files:
        return None
    names = sorted({f.name for f in files})
    shown = ", ".join(names[:4]) + (", ..." if len(names) > 4 else "")
    count = "1 file holds" if len(files) == 1 else f"{len(files):,} files hold"
    return ImportProblem(where, "not runs", f"{count} no runs and {'was' if len(files) == 1 else 'were'} not read "
                         f"as runs ({shown})")  # fmt: skip
