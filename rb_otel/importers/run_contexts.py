"""The runs of a SOURCE as ``rb-otel label`` needs them: each run's id, its agent, and where its ``invoke_agent``
span is, so an outcome event recorded now is parented to the run.

* rb-otel's traces (OTLP/JSON files, a ``chdb://`` folder, a ``clickhouse://`` URL): every ``invoke_agent`` span;
  a run resumed in several parts is parented to its latest part.
* another harness's records (any importer format): the run ids and agents the importer reads, and the span
  ``rb-otel replay`` gives the run: a replay derives its ids from the file's content and the run id
  (:class:`~rb_otel.telemetry.derived_ids.DerivedIds`), so the same ids are derived here without replaying.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from rb_otel.importers.detect import NotRuns, detect, input_files
from rb_otel.importers.model import ImportProblem, RecordError
from rb_otel.importers.outcome_events import json_documents, split_outcome_files
from rb_otel.importers.replay import READERS, file_digest
from rb_otel.report.traces import span_record
from rb_otel.telemetry import names as n
from rb_otel.telemetry.derived_ids import DerivedIds

__all__ = ["SourceRun", "replayed_span", "source_run_contexts"]


@dataclass(frozen=True, slots=True)
class SourceRun:
    """A run of the source: its id, agent (``gen_ai.agent.name``; ``""`` when not known) and its ``invoke_agent``
    span (hex trace and span ids): read from rb-otel's traces, or the one a replay of the records gives it."""

    run_id: str
    agent: str = ""
    trace_id: str = ""
    span_id: str = ""


def _trace_file_runs(path: Path) -> Iterator[tuple[int, SourceRun]]:
    for document in json_documents(path):
        for resource_spans in document.get("resourceSpans") or ():
            for scope_spans in resource_spans.get("scopeSpans") or ():
                for span in scope_spans.get("spans") or ():
                    if str(span.get("name", "")).startswith(n.OP_INVOKE_AGENT):
                        record = span_record(span)
                        run_id = str(record.attributes.get(n.RB_RUN_ID) or record.span_id)
                        agent = str(record.attributes.get(n.GEN_AI_AGENT_NAME) or "")
                        yield record.start_ns, SourceRun(run_id, agent, record.trace_id, record.span_id)


def _store_runs(url: str) -> Iterator[tuple[int, SourceRun]]:
    from rb_otel.analysis.sources import ChdbSource, ClickHouseSource, open_source

    source = open_source([url])
    try:
        if not isinstance(source, ChdbSource | ClickHouseSource):
            return
        rows = source._rows(
            f"SELECT SpanAttributes['{n.RB_RUN_ID}'], SpanAttributes['{n.GEN_AI_AGENT_NAME}'], TraceId, SpanId, "
            f"toString(toUnixTimestamp64Nano(Timestamp)) FROM {source.qualified} "
            f"WHERE startsWith(SpanName, '{n.OP_INVOKE_AGENT}') ORDER BY Timestamp"
        )
    finally:
        source.close()
    for run_id, agent, trace_id, span_id, start in rows:
        yield int(start), SourceRun(str(run_id or span_id), str(agent or ""), str(trace_id), str(span_id))


def replayed_span(digest: bytes, run_id: str) -> tuple[str, str]:
    """The trace and span ids (hex) of the ``invoke_agent`` span ``rb-otel replay`` gives a top-level run of a
    file whose content has ``digest``: the first trace id and the next span id of its seeded block, in the order
    the SDK asks for them when it opens a root span."""
    ids = DerivedIds()
    with ids.seeded(digest + run_id.encode()):
        trace_id = ids.generate_trace_id()
        span_id = ids.generate_span_id()
    return f"{trace_id:032x}", f"{span_id:016x}"


def _record_runs(path: Path, format: str, problems: list[ImportProblem]) -> Iterator[tuple[int, SourceRun]]:
    digest = file_digest(path)
    for run in READERS[format](path, problems):
        for _ in run.steps:  # read past it (a streamed run's steps come from the same file)
            pass
        yield 0, SourceRun(run.run_id, run.agent_name, *replayed_span(digest, run.run_id))


def source_run_contexts(
    paths: Sequence[str | Path], *, format: str = "auto", problems: list[ImportProblem] | None = None
) -> list[SourceRun]:
    """Every run of ``paths`` (files and folders, or one store URL), once each, in the order first read; the
    outcome logs files among them are left out. A file named on its own that holds no runs raises
    :class:`RecordError`; one in a folder is passed over (a bad one is added to ``problems``). A store that cannot
    be reached raises its one-line ``SourceError``."""
    problems = [] if problems is None else problems
    found: list[tuple[int, SourceRun]] = []
    urls = [str(p) for p in paths if "://" in str(p)]
    if urls:
        found += _store_runs(urls[0])
    else:
        runs_paths, logs = split_outcome_files(paths)
        for path, in_directory in input_files(runs_paths):
            if path in logs:
                continue
            try:
                if not path.is_file():
                    raise RecordError(str(path), "file", "no such file or directory")
                fmt = detect(path) if format == "auto" else format
                found += _trace_file_runs(path) if fmt == "otlp_json" else _record_runs(path, fmt, problems)
            except NotRuns:
                if not in_directory:
                    raise
            except RecordError as exc:
                if not in_directory:
                    raise
                problems.append(ImportProblem(exc.path, exc.where, exc.problem))
    latest: dict[str, tuple[int, SourceRun]] = {}
    for start, run in found:
        if run.run_id not in latest or start >= latest[run.run_id][0]:
            latest[run.run_id] = (start, run)
    order = list(dict.fromkeys(run.run_id for _, run in found))
    return [latest[run_id][1] for run_id in order]
