"""Analysis where the traces live: runs read from trace files, an embedded ClickHouse (chdb) or a ClickHouse
server's ``otel_traces`` table, and the aggregates the commands print computed in the store
(docs/fleet-analysis.md)."""

from rb_otel.analysis.fleet import FleetFilter, FleetRow, format_summary, summarise_spans
from rb_otel.analysis.sources import ENGINES, RunsSource, SourceError, open_source

__all__ = ["ENGINES", "FleetFilter", "FleetRow", "RunsSource", "SourceError", "format_summary", "open_source",
           "summarise_spans"]  # fmt: skip
