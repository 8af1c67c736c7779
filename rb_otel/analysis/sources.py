"""Where an analysis reads runs from: trace files, an embedded ClickHouse (chdb), or a ClickHouse server.

A *source* is what the analysis commands take where they took paths: a path (OTLP/JSON lines files), or a URL:

* ``clickhouse://user@host:8123/db?table=otel_traces`` (``clickhouses://`` for TLS, default ports 8123 and 8443)
  through the official client (clickhouse-connect, the ``[clickhouse]`` extra);
* ``chdb:///path/to/folder?database=otel&table=otel_traces``, a chdb database folder (the ``[chdb]`` extra);
* files with ``engine="chdb"``: loaded into an in-memory chdb table with the exporter's schema by SQL
  (:data:`~rb_otel.analysis.schema.OTLP_JSON_ROWS`), then the same queries as a server's.

Every source answers the same three questions: :meth:`RunsSource.fleet_summary` (:mod:`rb_otel.analysis.fleet`)
and :meth:`RunsSource.experiment_report` (:mod:`rb_otel.analysis.experiment`), which a store computes in SQL and
returns as aggregates, and :meth:`RunsSource.runs` (:mod:`rb_otel.analysis.runs`): the runs with their steps, for
the commands that replay every step (``evaluate``, ``train``, the report page). Every failure to reach or read a
source is a :class:`SourceError`: one line naming the source (a URL's password elided), never a stack.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import parse_qs, unquote, urlsplit

from rb_otel.ab.experiment_report import answer, not_found, report, select_arms
from rb_otel.ab.prices import Prices
from rb_otel.analysis.experiment import (
    arm_runs_from_store,
    arm_usage_from_store,
    experiment_sql,
    experiments_found_sql,
)
from rb_otel.analysis.fleet import FleetFilter, FleetRow, fleet_sql, rows_from_store, run_filter, summarise_spans
from rb_otel.analysis.runs import runs_sql, span_record
from rb_otel.analysis.schema import OTEL_TRACES_DDL, OTLP_JSON_ROWS, REQUIRED_COLUMNS
from rb_otel.analysis.spans import SpanFileError, span_rows
from rb_otel.analysis.trace_files import trace_files
from rb_otel.report.traces import ReportRun, load_runs, runs_from_records
from rb_otel.urls import display_url, scrub

__all__ = ["ENGINES", "ChdbSource", "ClickHouseSource", "FilesSource", "RunsSource", "SourceError", "open_source"]

#: How file sources are read: in Python (the plain definition), or by the embedded engine's SQL.
ENGINES = ("python", "chdb")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_ERRNO = re.compile(r"\[Errno -?\d+\] ([^\"')(]+)")
_INSERT_COLUMNS = ", ".join(("Timestamp", "TraceId", "SpanId", "ParentSpanId", "TraceState", "SpanName", "SpanKind",
                             "ServiceName", "ResourceAttributes", "ScopeName", "ScopeVersion", "SpanAttributes",
                             "Duration", "StatusCode", "StatusMessage", "`Events.Timestamp`", "`Events.Name`",
                             "`Events.Attributes`", "`Links.TraceId`", "`Links.SpanId`"))  # fmt: skip


_QUIET = logging.NullHandler()


class SourceError(ValueError):
    """A source that cannot be reached or read; the message is one line naming it (without a password)."""


class RunsSource(Protocol):
    """Runs to analyse, wherever they are."""

    #: The source as messages show it.
    shown: str
    #: One line naming the files of a folder left out (they hold no OTLP/JSON traces), else ``None``.
    skipped: str | None

    def fleet_summary(self, where: FleetFilter) -> list[FleetRow]:
        """The fleet summary for ``where`` (:mod:`rb_otel.analysis.fleet`)."""
        ...

    def experiment_report(self, experiment_id: str, where: FleetFilter, *, on_fraction: float | None = None,
                          prices: Prices | None = None) -> dict[str, Any]:  # fmt: skip
        """The experiment's report (``rb-otel ab-report``'s) over the runs under ``where``; raises
        :class:`~rb_otel.ab.experiment_report.ExperimentNotFound` when it has no runs there."""
        ...

    def runs(self, where: FleetFilter) -> tuple[list[ReportRun], list[str]]:
        """The runs under ``where`` with their steps, and the problems met reading them."""
        ...

    def close(self) -> None: ...


class FilesSource:
    """OTLP/JSON lines files read in Python."""

    skipped: str | None = None

    def __init__(self, paths: Sequence[str | Path], *, shown: str = "") -> None:
        self.paths = [Path(p) for p in paths]
        self.shown = shown or ", ".join(map(str, self.paths))
        for path in self.paths:
            if not path.is_file():
                raise SourceError(f"{path}: no such trace file")

    def fleet_summary(self, where: FleetFilter) -> list[FleetRow]:
        try:
            return summarise_spans(span_rows(self.paths), where)
        except SpanFileError as exc:
            raise SourceError(str(exc)) from None

    def experiment_report(self, experiment_id: str, where: FleetFilter, *, on_fraction: float | None = None,
                          prices: Prices | None = None) -> dict[str, Any]:  # fmt: skip
        return report(self.paths, experiment_id, on_fraction=on_fraction, prices=prices, keep=run_filter(where))

    def runs(self, where: FleetFilter) -> tuple[list[ReportRun], list[str]]:
        return load_runs(self.paths, keep=run_filter(where))

    def close(self) -> None:
        return None


def _identifier(value: str, what: str, shown: str) -> str:
    if not _NAME.match(value):
        raise SourceError(f"{shown}: the {what} {value!r} is not a plain identifier")
    return value


class _SqlSource:
    """The queries and the schema check shared by chdb and a server: ``_rows(sql)`` is the engine."""

    skipped: str | None = None

    shown: str
    database: str
    table: str

    def _rows(self, sql: str) -> list[list[Any]]:  # pragma: no cover - each engine's own
        raise NotImplementedError

    def _row_stream(self, sql: str) -> Iterator[Sequence[Any]]:
        """The rows of ``sql`` in order, as the engine hands them over: a large answer (every span ``evaluate``
        and ``train`` replay) need not be held whole. The plain definition is ``iter(self._rows(sql))``."""
        return iter(self._rows(sql))

    @property
    def qualified(self) -> str:
        return f"`{self.database}`.`{self.table}`"

    def check_schema(self) -> None:
        """The table exists with the columns and types the queries read (else a one-line :class:`SourceError`)."""
        columns = f"SELECT name, type FROM system.columns WHERE database = '{self.database}' AND table = '{self.table}'"
        found = {str(name): str(kind) for name, kind in self._rows(columns)}
        if not found:
            raise SourceError(f"{self.shown}: no table {self.database}.{self.table} (is the Collector's clickhouse "
                              "exporter writing there? ?table= and the database in the URL choose it)")  # fmt: skip
        for column, kind in REQUIRED_COLUMNS.items():
            if column not in found:
                raise SourceError(f"{self.shown}: {self.database}.{self.table} has no column {column} (the "
                                  "exporter's otel_traces schema is expected)")  # fmt: skip
            if _base_type(found[column]) != _base_type(kind):
                raise SourceError(f"{self.shown}: {self.database}.{self.table}.{column} is {found[column]}, "
                                  f"not {kind} (the exporter's otel_traces schema is expected)")  # fmt: skip

    def fleet_summary(self, where: FleetFilter) -> list[FleetRow]:
        by_run, by_state = fleet_sql(self.qualified, where)
        return rows_from_store(self._rows(by_run), self._rows(by_state))

    def experiment_report(self, experiment_id: str, where: FleetFilter, *, on_fraction: float | None = None,
                          prices: Prices | None = None) -> dict[str, Any]:  # fmt: skip
        runs_query, usage_query = experiment_sql(self.qualified, experiment_id, where)
        runs = arm_runs_from_store(self._rows(runs_query))
        if not runs:
            found = {str(e): int(count) for e, count in self._rows(experiments_found_sql(self.qualified, where))}
            raise not_found(experiment_id, self.shown, found)
        by_arm = select_arms(runs, experiment_id, self.shown)
        usage = arm_usage_from_store(self._rows(usage_query))
        return answer(by_arm, usage, experiment_id, on_fraction=on_fraction, prices=prices)

    def runs(self, where: FleetFilter) -> tuple[list[ReportRun], list[str]]:
        return runs_from_records(map(span_record, self._row_stream(runs_sql(self.qualified, where)))), []

    def explain(self, where: FleetFilter, *, experiment: str | None = None) -> str:
        """The engine's plan (``EXPLAIN``) of the summary's runs query, or of ``experiment``'s runs query: it
        shows where the filters are applied."""
        query = fleet_sql(self.qualified, where)[0] if experiment is None else experiment_sql(
            self.qualified, experiment, where)[0]  # fmt: skip
        return "\n".join(str(r[0]) for r in self._rows(f"EXPLAIN actions = 1 {query}"))


def _base_type(kind: str) -> str:
    """A column type without LowCardinality and spaces (``Map(LowCardinality(String), String)`` and
    ``Map(String, String)`` read the same)."""
    return kind.replace("LowCardinality(", "(").replace(" ", "").replace("((", "(").replace("(String)", "String")


class ChdbSource(_SqlSource):
    """An embedded ClickHouse (chdb): a database folder, or OTLP/JSON files loaded into memory."""

    def __init__(self, *, folder: str | None = None, files: Sequence[str | Path] = (), database: str = "default",
                 table: str = "otel_traces", shown: str = "") -> None:  # fmt: skip
        try:
            from chdb import session
        except ImportError:
            raise SourceError("the embedded engine needs chdb: pip install 'rb-otel[chdb]'") from None
        opening: Any = session.Session  # chdb ships no type hints
        self.shown = shown or (f"chdb://{folder}" if folder else ", ".join(map(str, files)))
        self.database = _identifier(database, "database", self.shown)
        self.table = _identifier(table, "table", self.shown)
        if folder is not None and not Path(folder).is_dir():
            raise SourceError(f"{self.shown}: no chdb database folder there")
        self._session: Any = opening(folder) if folder else opening()
        try:
            if files:
                self._load(files)
            self.check_schema()
        except BaseException:
            self.close()
            raise

    def _load(self, files: Sequence[str | Path]) -> None:
        self._rows(f"CREATE DATABASE IF NOT EXISTS `{self.database}`")
        self._rows(OTEL_TRACES_DDL.format(table=self.qualified))
        for path in files:
            if not Path(path).is_file():
                raise SourceError(f"{path}: no such trace file")
            literal = "'" + str(Path(path).resolve()).replace("\\", "\\\\").replace("'", "\\'") + "'"
            try:
                self._rows(f"INSERT INTO {self.qualified} ({_INSERT_COLUMNS}) {OTLP_JSON_ROWS.format(files=literal)}")
            except SourceError as exc:
                raise SourceError(f"{path}: not OTLP/JSON trace lines ({str(exc).split(': ', 1)[-1]})") from None

    def _rows(self, sql: str) -> list[list[Any]]:
        try:
            result = self._session.query(sql, "JSONCompact")
        except Exception as exc:  # chdb raises its own error types; one line whatever it is
            raise SourceError(f"{self.shown}: {_first_line(exc)}") from None
        text = result.bytes().decode("utf-8") if hasattr(result, "bytes") else str(result)
        if not text.strip():
            return []
        data: list[list[Any]] = json.loads(text).get("data", [])
        return data

    #: Rows per block of a streamed answer: a block's text is parsed and dropped before the next is read.
    STREAM_BLOCK_ROWS = 4096

    def _row_stream(self, sql: str) -> Iterator[Sequence[Any]]:
        try:
            with self._session.send_query(f"{sql} SETTINGS max_block_size = {self.STREAM_BLOCK_ROWS}",
                                          "JSONCompactEachRow") as stream:  # fmt: skip
                for block in stream:
                    for line in block.bytes().splitlines():
                        if line.strip():
                            yield json.loads(line)
        except Exception as exc:  # chdb raises its own error types; one line whatever it is
            raise SourceError(f"{self.shown}: {_first_line(exc)}") from None

    def close(self) -> None:
        session, self._session = getattr(self, "_session", None), None
        if session is not None:
            session.close()


class ClickHouseSource(_SqlSource):
    """A ClickHouse server, through clickhouse-connect (HTTP)."""

    def __init__(self, url: str) -> None:
        self.shown = display_url(url)
        self._url = url
        try:
            import clickhouse_connect
        except ImportError:
            raise SourceError(f"{self.shown}: reading ClickHouse needs pip install 'rb-otel[clickhouse]'") from None
        # the client logs each failed request at ERROR; with no handler configured Python prints it to stderr
        # (logging's last resort) on top of our one line: a NullHandler keeps it to the application's handlers
        logging.getLogger("clickhouse_connect").addHandler(_QUIET)
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError:
            raise SourceError(f"{self.shown}: the port is not a number between 1 and 65535") from None
        secure = parts.scheme == "clickhouses"
        query = parse_qs(parts.query)
        self.database = _identifier(unquote(parts.path.lstrip("/")) or "default", "database", self.shown)
        self.table = _identifier(query.get("table", ["otel_traces"])[0], "table", self.shown)
        try:
            self._client: Any = clickhouse_connect.get_client(
                host=parts.hostname or "localhost", port=port or (8443 if secure else 8123),
                username=unquote(parts.username or "default"), password=unquote(parts.password or ""),
                database=self.database, secure=secure, connect_timeout=5, send_receive_timeout=60,
            )  # fmt: skip
        except Exception as exc:  # the client's own error types; one line whatever it is
            raise SourceError(f"{self.shown}: {_reason(exc, url)}") from None
        self.check_schema()

    def _rows(self, sql: str) -> list[list[Any]]:
        try:
            return [list(r) for r in self._client.query(sql).result_rows]
        except Exception as exc:  # the client's own error types; one line whatever it is
            raise SourceError(f"{self.shown}: {_reason(exc, self._url)}") from None

    def close(self) -> None:
        client = getattr(self, "_client", None)
        if client is not None:
            client.close()


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:300]


def _reason(exc: BaseException, url: str) -> str:
    """A client error in words: unreachable, refused credentials, or the server's own first line."""
    text = scrub(_first_line(exc), url)
    lowered = text.lower()
    if "authentication" in lowered or "password" in lowered or "code: 516" in lowered:
        return "the server refused the user or password"
    errno = _ERRNO.search(text)
    if errno or "timed out" in lowered or "max retries" in lowered:
        return f"the server did not answer ({errno.group(1).strip() if errno else 'timed out'})"
    return text[:300]


def open_source(specs: Sequence[str], *, engine: str = "python") -> RunsSource:
    """The source that ``specs`` (what the command line gave where paths go) name (module docstring)."""
    if engine not in ENGINES:
        raise SourceError(f"unknown engine {engine!r}; choose {', '.join(ENGINES)}")
    urls = [s for s in specs if "://" in s]
    if urls:
        if len(specs) != 1:
            raise SourceError(f"{display_url(urls[0])}: give one URL, or files, not both")
        url = urls[0]
        scheme = url.split("://", 1)[0].lower()
        if scheme in ("clickhouse", "clickhouses"):
            return ClickHouseSource(url)
        if scheme == "chdb":
            parts = urlsplit(url)
            query = parse_qs(parts.query)
            return ChdbSource(folder=unquote(parts.path), database=query.get("database", ["default"])[0],
                              table=query.get("table", ["otel_traces"])[0], shown=display_url(url))  # fmt: skip
        raise SourceError(f"{display_url(url)}: not a source rb-otel reads (clickhouse://, clickhouses://, chdb://)")
    try:
        found = trace_files(specs)
    except (FileNotFoundError, ValueError) as exc:
        raise SourceError(str(exc)) from None
    except OSError as exc:
        raise SourceError(f"{exc.filename}: cannot read it ({exc.strerror})") from None
    shown = ", ".join(specs)
    source: RunsSource = (
        ChdbSource(files=found.files, shown=shown) if engine == "chdb" else FilesSource(found.files, shown=shown)
    )
    source.skipped = found.note()
    return source
