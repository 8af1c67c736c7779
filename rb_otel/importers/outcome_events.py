"""Outcomes recorded after the runs (``rb.record_outcome``, ``rb-otel label``), read back where the traces live.

An outcome is a ``gen_ai.evaluation.result`` log event with ``gen_ai.evaluation.name`` ``rb.run.outcome``
(docs/telemetry.md, "Outcomes"). ``rb-otel train`` and ``evaluate`` read them from the same source as the runs:

* files: the OTLP/JSON logs lines among the paths (a file given by name, or a folder's files; a file is one when
  its first line is an ``ExportLogsServiceRequest``: rb-otel's ``--out`` files and the Collector ``file``
  exporter's);
* a store (``chdb:///folder``, ``clickhouse://...``): the Collector ``clickhouse`` exporter's logs table
  (:data:`LOGS_TABLE`, ``otel_logs``, in the traces' database; ``?logs_table=`` names another), its
  ``LogAttributes`` map.

Several events for one run: the latest (by its timestamp, then by the order read) wins, so a corrected label
replaces the first. :func:`outcome_labels` gives them as :class:`~rb_otel.importers.labels.Labels`, which an
explicit ``--labels`` file overrides run by run (:meth:`Labels.beside`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from rb_otel.importers.detect import input_files
from rb_otel.importers.labels import Labels
from rb_otel.report.traces import span_record
from rb_otel.telemetry import names as n
from rb_otel.urls import display_url

__all__ = [
    "LOGS_TABLE",
    "OTEL_LOGS_DDL",
    "OutcomeEvent",
    "events_of_document",
    "json_documents",
    "latest_outcomes",
    "outcome_labels",
    "outcome_log_files",
    "read_outcome_events",
    "recorded_outcomes",
    "split_outcome_files",
]

#: The Collector ``clickhouse`` exporter's logs table (its default name).
LOGS_TABLE = "otel_logs"
#: The columns of that table the reader uses, as the exporter creates them (for an embedded engine; the exporter's
#: codecs, indexes and other columns left out: they change no answer).
OTEL_LOGS_DDL = """
CREATE TABLE IF NOT EXISTS {table} (
    Timestamp DateTime64(9),
    TraceId String,
    SpanId String,
    TraceFlags UInt8,
    SeverityText LowCardinality(String),
    SeverityNumber UInt8,
    ServiceName LowCardinality(String),
    Body String,
    EventName String,
    LogAttributes Map(LowCardinality(String), String)
) ENGINE = MergeTree
ORDER BY (ServiceName, toDateTime(Timestamp), Timestamp)
"""
_SNIFF = 64
_OUTCOMES = (n.OUTCOME_SUCCESS, n.OUTCOME_FAILURE)


@dataclass(frozen=True, slots=True)
class OutcomeEvent:
    """One outcome event: the run it is about, ``outcome`` (``success``/``failure``), its ``score`` when one was
    given, the agent when the event names it (``gen_ai.agent.name``; ``""`` otherwise: join on the run), when it
    was recorded (``time_ns``), and the trace and span it is parented to (hex; ``""`` when none)."""

    run_id: str
    outcome: str
    score: float | None
    agent: str
    time_ns: int
    trace_id: str = ""
    span_id: str = ""


def _event(attributes: Mapping[str, Any], time_ns: int, trace_id: str, span_id: str) -> OutcomeEvent | None:
    """The outcome ``attributes`` say (every value a string, as a store keeps them, or typed), or ``None`` for
    another event or one without a run id or a known outcome."""
    if str(attributes.get(n.GEN_AI_EVALUATION_NAME) or "") != n.EVALUATION_RUN_OUTCOME:
        return None
    run_id = str(attributes.get(n.RB_RUN_ID) or "")
    outcome = str(attributes.get(n.GEN_AI_EVALUATION_SCORE_LABEL) or "")
    if not run_id or outcome not in _OUTCOMES:
        return None
    raw = attributes.get(n.GEN_AI_EVALUATION_SCORE_VALUE)
    try:
        score = float(raw) if raw not in (None, "") and not isinstance(raw, bool) else None
    except (TypeError, ValueError):
        score = None
    zero = trace_id.strip("0") == ""
    return OutcomeEvent(run_id, outcome, score, str(attributes.get(n.GEN_AI_AGENT_NAME) or ""), time_ns,
                        "" if zero else trace_id, "" if zero else span_id)  # fmt: skip


def _nanos(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def events_of_document(document: Mapping[str, Any]) -> Iterator[OutcomeEvent]:
    """The outcome events of one OTLP/JSON ``ExportLogsServiceRequest`` (one line of a logs file)."""
    for resource_logs in document.get("resourceLogs") or ():
        for scope_logs in resource_logs.get("scopeLogs") or ():
            for record in scope_logs.get("logRecords") or ():
                name = record.get("eventName")
                if name not in (None, "", n.EVENT_EVALUATION_RESULT):
                    continue
                read = span_record(record)  # its attributes and ids, decoded as a span's are
                time_ns = _nanos(record.get("timeUnixNano")) or _nanos(record.get("observedTimeUnixNano"))
                event = _event(read.attributes, time_ns, read.trace_id, "" if read.span_id == "None" else read.span_id)
                if event is not None:
                    yield event


def _is_logs_file(path: Path) -> bool:
    """Whether ``path`` starts as OTLP/JSON logs lines do (only its first bytes are read)."""
    try:
        with path.open("rb") as handle:
            head = handle.read(_SNIFF).lstrip()
    except OSError:
        return False
    return head.startswith(b'{"resourceLogs"')


def outcome_log_files(paths: Sequence[str | Path]) -> list[Path]:
    """The OTLP/JSON logs files among ``paths`` (folders expanded as the run readers expand them)."""
    return [path for path, _ in input_files(paths) if path.is_file() and _is_logs_file(path)]


def split_outcome_files(paths: Sequence[str | Path]) -> tuple[list[str | Path], list[Path]]:
    """``paths`` without the logs files named on their own (the run readers would refuse them), and the logs files
    among all of ``paths`` (folders' included). A URL is left to the runs and read by :func:`read_outcome_events`."""
    if any("://" in str(p) for p in paths):
        return list(paths), []
    named = {Path(p) for p in paths if Path(p).is_file() and _is_logs_file(Path(p))}
    runs: list[str | Path] = [p for p in paths if Path(p) not in named]
    return runs, outcome_log_files(paths)


def json_documents(path: Path) -> Iterator[dict[str, Any]]:
    """The JSON objects of an OTLP/JSON lines file, one per line; a blank, broken or non-object line is passed over
    (a line being written: the file's other lines still count; the run readers report broken lines)."""
    with path.open(encoding="utf-8", errors="replace") as handle:
        for line in handle:
            if not line.strip():
                continue
            try:
                document = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(document, dict):
                yield document


def _file_events(files: Iterable[Path]) -> Iterator[OutcomeEvent]:
    for path in files:
        for document in json_documents(path):
            yield from events_of_document(document)


def _store_sql(table: str) -> str:
    attribute = "LogAttributes['{}']".format
    return (
        f"SELECT {attribute(n.RB_RUN_ID)}, {attribute(n.GEN_AI_EVALUATION_SCORE_LABEL)}, "
        f"{attribute(n.GEN_AI_EVALUATION_SCORE_VALUE)}, {attribute(n.GEN_AI_AGENT_NAME)}, "
        f"toString(toUnixTimestamp64Nano(Timestamp)), TraceId, SpanId FROM {table} "
        f"WHERE {attribute(n.GEN_AI_EVALUATION_NAME)} = '{n.EVALUATION_RUN_OUTCOME}' "
        f"AND {attribute(n.RB_RUN_ID)} != '' ORDER BY Timestamp"
    )


def _store_events(url: str) -> list[OutcomeEvent]:
    """The outcome events of a store's logs table; none when the store has no such table (nothing was recorded
    there yet). A store that cannot be reached raises the source's one-line ``SourceError``."""
    from rb_otel.analysis.sources import ChdbSource, ClickHouseSource, SourceError, open_source

    table = parse_qs(urlsplit(url).query).get("logs_table", [LOGS_TABLE])[0]
    source = open_source([url])
    try:
        if not isinstance(source, ChdbSource | ClickHouseSource):
            return []
        if not table.isidentifier():
            raise SourceError(f"{display_url(url)}: the logs table {table!r} is not a plain identifier")
        found = source._rows(
            f"SELECT count() FROM system.tables WHERE database = '{source.database}' AND name = '{table}'"
        )
        if not found or not int(found[0][0]):
            return []
        rows = source._rows(_store_sql(f"`{source.database}`.`{table}`"))
    finally:
        source.close()
    events = []
    for run_id, label, score, agent, time_ns, trace_id, span_id in rows:
        attributes = {
            n.GEN_AI_EVALUATION_NAME: n.EVALUATION_RUN_OUTCOME,
            n.RB_RUN_ID: run_id,
            n.GEN_AI_EVALUATION_SCORE_LABEL: label,
            n.GEN_AI_EVALUATION_SCORE_VALUE: score,
            n.GEN_AI_AGENT_NAME: agent,
        }
        event = _event(attributes, _nanos(time_ns), str(trace_id or "").lower(), str(span_id or "").lower())
        if event is not None:
            events.append(event)
    return events


def read_outcome_events(paths: Sequence[str | Path]) -> list[OutcomeEvent]:
    """Every outcome event where ``paths`` (a command's SOURCE: files and folders, or one store URL) live, in the
    order read (module docstring). Raises :class:`~rb_otel.analysis.sources.SourceError` for a store that cannot
    be reached or read."""
    urls = [str(p) for p in paths if "://" in str(p)]
    if urls:
        return _store_events(urls[0])
    return list(_file_events(outcome_log_files(paths)))


def latest_outcomes(events: Iterable[OutcomeEvent]) -> dict[str, OutcomeEvent]:
    """The latest event of each run (by ``time_ns``; of two at the same time, the later read)."""
    latest: dict[str, OutcomeEvent] = {}
    for event in events:
        known = latest.get(event.run_id)
        if known is None or event.time_ns >= known.time_ns:
            latest[event.run_id] = event
    return latest


def recorded_outcomes(paths: Sequence[str | Path]) -> tuple[list[str | Path], Labels | None]:
    """What ``train`` and ``evaluate`` read from their SOURCE: the paths to read runs from (logs files named on
    their own taken out) and the outcome events recorded there, as labels (``None`` when there are none)."""
    runs, files = split_outcome_files(paths)
    if any("://" in str(p) for p in paths):
        return runs, outcome_labels(paths)
    return runs, _labels(_file_events(files), paths)


def outcome_labels(paths: Sequence[str | Path]) -> Labels | None:
    """The outcomes recorded where ``paths`` live, as labels (the latest per run); ``None`` when there are none."""
    return _labels(read_outcome_events(paths), paths)


def _labels(events: Iterable[OutcomeEvent], paths: Sequence[str | Path]) -> Labels | None:
    latest = latest_outcomes(events)
    if not latest:
        return None
    where = ", ".join(display_url(str(p)) for p in paths)
    return Labels(f"outcome events in {where}", {k: e.outcome == n.OUTCOME_SUCCESS for k, e in latest.items()})
