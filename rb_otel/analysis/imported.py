"""A source's runs as importers' runs: what ``rb-otel train`` and ``evaluate`` read from a trace store.

``train`` and ``evaluate`` read any importer's format from files. When they are given a URL, ``--engine chdb``
or a filter (``--since``, ``--until``, ``--agent``, ``--service``), their runs come from a :class:`RunsSource`
instead: the store selects the runs under the filter in SQL (:mod:`rb_otel.analysis.runs`) and returns those runs'
spans only, which become the same :class:`~rb_otel.importers.model.ImportedRun` the OTLP/JSON reader makes of a
file. The filters read rb-otel's own run attributes, so with files they need rb-otel's traces (OTLP/JSON): another
harness's records are refused with a message naming the file and its format.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from rb_otel.analysis.fleet import FleetFilter
from rb_otel.analysis.sources import open_source
from rb_otel.importers.detect import detect, input_files
from rb_otel.importers.formats.otlp_json import imported_run, read_problem
from rb_otel.importers.model import ImportedRun, ImportProblem, RecordError

__all__ = ["SourceRuns", "read_from_source", "source_runs"]


def read_from_source(paths: Sequence[str | Path], where: FleetFilter | None, engine: str) -> bool:
    """Whether ``paths`` are read through a source: a URL among them, the chdb engine, or a filter."""
    return any("://" in str(p) for p in paths) or engine != "python" or (where or FleetFilter()) != FleetFilter()


class SourceRuns:
    """The runs of one source: ``runs``, the ``problems`` met reading them, and ``shown`` (the source as
    messages name it, a URL without its password)."""

    def __init__(self, runs: list[ImportedRun], problems: list[ImportProblem], shown: str, files: int) -> None:
        self.runs = runs
        self.problems = problems
        self.shown = shown
        self.files = files


def source_runs(paths: Sequence[str | Path], where: FleetFilter | None = None, *, engine: str = "python") -> SourceRuns:
    """The runs under ``where`` of a URL or of OTLP/JSON files (directories expanded, in name order).

    Raises :class:`~rb_otel.analysis.sources.SourceError` for a source that cannot be reached or read and
    :class:`RecordError` for a file that is not rb-otel's traces.
    """
    specs = [str(p) for p in paths]
    files = 1
    if not any("://" in s for s in specs):
        found = [path for path, _ in input_files(paths)]
        for path in found:
            if path.is_file() and (fmt := detect(path)) != "otlp_json":
                raise RecordError(str(path), "format", f"this is {fmt}; the filters and the chdb engine read "
                                  "rb-otel's traces (OTLP/JSON files, a chdb folder or a ClickHouse URL)")  # fmt: skip
        specs, files = [str(p) for p in found], len(found)
    source = open_source(specs, engine=engine)
    try:
        runs, problems = source.runs(where or FleetFilter())
    finally:
        source.close()
    return SourceRuns([imported_run(r) for r in runs], [read_problem(p) for p in problems], source.shown, files)
