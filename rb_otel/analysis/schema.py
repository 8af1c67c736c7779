"""The ``otel_traces`` table as the OpenTelemetry Collector's ``clickhouse`` exporter (and rotel's) creates it, and
the SQL that reads OTLP/JSON trace files into the same columns.

Only the columns the exporter writes are used, by the exporter's names and types: ``Timestamp`` (the span's start,
``DateTime64(9)``), ``TraceId``, ``SpanId``, ``ParentSpanId``, ``SpanName``, ``SpanKind``, ``ServiceName``,
``ResourceAttributes`` and ``SpanAttributes`` (``Map(LowCardinality(String), String)``: every attribute value
as its string form), ``Duration`` (nanoseconds, ``UInt64``), ``StatusCode`` and ``Links.*``. :data:`OTEL_TRACES_DDL`
creates such a table in an embedded engine (chdb) for files, so the analysis queries
(:mod:`rb_otel.analysis.fleet`) run unchanged on a file, a chdb folder and a ClickHouse server.
"""

from __future__ import annotations

__all__ = ["ATTRIBUTE_STRING", "OTEL_TRACES_DDL", "OTLP_JSON_ROWS", "REQUIRED_COLUMNS"]

#: The columns (and the types) the queries read: a table without them is refused with one line.
REQUIRED_COLUMNS: dict[str, str] = {
    "Timestamp": "DateTime64(9)",
    "TraceId": "String",
    "SpanId": "String",
    "ParentSpanId": "String",
    "SpanName": "LowCardinality(String)",
    "ServiceName": "LowCardinality(String)",
    "SpanAttributes": "Map(LowCardinality(String), String)",
    "Duration": "UInt64",
}

#: The exporter's table, for an embedded engine (its codecs and skip indexes left out: they change no answer).
OTEL_TRACES_DDL = """
CREATE TABLE IF NOT EXISTS {table} (
    Timestamp DateTime64(9),
    TraceId String,
    SpanId String,
    ParentSpanId String,
    TraceState String,
    SpanName LowCardinality(String),
    SpanKind LowCardinality(String),
    ServiceName LowCardinality(String),
    ResourceAttributes Map(LowCardinality(String), String),
    ScopeName String,
    ScopeVersion String,
    SpanAttributes Map(LowCardinality(String), String),
    Duration UInt64,
    StatusCode LowCardinality(String),
    StatusMessage String,
    Events Nested (
        Timestamp DateTime64(9), Name LowCardinality(String), Attributes Map(LowCardinality(String), String)
    ),
    Links Nested (TraceId String, SpanId String, TraceState String, Attributes Map(LowCardinality(String), String))
) ENGINE = MergeTree
PARTITION BY toDate(Timestamp)
ORDER BY (ServiceName, SpanName, toDateTime(Timestamp), Timestamp)
"""

#: An OTLP/JSON ``AnyValue`` (``v``) as the exporter stores it: strings as they are, integers in decimal, booleans
#: ``true``/``false``, doubles by ClickHouse's float formatting, an array of strings as its JSON list (the
#: Collector's ``AsString``: ``["a","b"]``), anything else as its OTLP JSON.
ATTRIBUTE_STRING = """multiIf(
    JSONHas(v, 'stringValue'), JSONExtractString(v, 'stringValue'),
    JSONHas(v, 'intValue'), trim(BOTH '"' FROM JSONExtractRaw(v, 'intValue')),
    JSONHas(v, 'boolValue'), if(JSONExtractBool(v, 'boolValue'), 'true', 'false'),
    JSONHas(v, 'doubleValue'), toString(JSONExtractFloat(v, 'doubleValue')),
    JSONHas(v, 'arrayValue'), toJSONString(arrayMap(x -> JSONExtractString(x, 'stringValue'),
                                                    JSONExtractArrayRaw(JSONExtractRaw(v, 'arrayValue'), 'values'))),
    JSONExtractRaw(v))"""


def _attributes(source: str) -> str:
    value = ATTRIBUTE_STRING.replace("v,", "JSONExtractRaw(a, 'value'),").replace("(v)", "(JSONExtractRaw(a, 'value'))")
    return (
        f"CAST(mapFromArrays(arrayMap(a -> JSONExtractString(a, 'key'), JSONExtractArrayRaw({source}, 'attributes')), "
        f"arrayMap(a -> {value}, JSONExtractArrayRaw({source}, 'attributes'))), "
        "'Map(LowCardinality(String), String)')"
    )


_KINDS = "['Unspecified', 'Internal', 'Server', 'Client', 'Producer', 'Consumer']"
_STATUS = "['Unset', 'Ok', 'Error']"

#: ``INSERT ... SELECT`` body: every span of the OTLP/JSON lines file(s) ``{files}`` (one ``ExportTraceService
#: Request`` per line, the Collector ``file`` exporter's format and rb-otel's) as a row of :data:`OTEL_TRACES_DDL`.
OTLP_JSON_ROWS = f"""
SELECT
    fromUnixTimestamp64Nano(toInt64(JSONExtractString(sp, 'startTimeUnixNano'))) AS Timestamp,
    JSONExtractString(sp, 'traceId') AS TraceId,
    JSONExtractString(sp, 'spanId') AS SpanId,
    JSONExtractString(sp, 'parentSpanId') AS ParentSpanId,
    JSONExtractString(sp, 'traceState') AS TraceState,
    JSONExtractString(sp, 'name') AS SpanName,
    {_KINDS}[JSONExtractInt(sp, 'kind') + 1] AS SpanKind,
    ResourceAttributes['service.name'] AS ServiceName,
    {_attributes("JSONExtractRaw(rs, 'resource')")} AS ResourceAttributes,
    JSONExtractString(JSONExtractRaw(ss, 'scope'), 'name') AS ScopeName,
    JSONExtractString(JSONExtractRaw(ss, 'scope'), 'version') AS ScopeVersion,
    {_attributes("sp")} AS SpanAttributes,
    toUInt64(toInt64(JSONExtractString(sp, 'endTimeUnixNano')) - toInt64(JSONExtractString(sp, 'startTimeUnixNano')))
        AS Duration,
    {_STATUS}[JSONExtractInt(JSONExtractRaw(sp, 'status'), 'code') + 1] AS StatusCode,
    JSONExtractString(JSONExtractRaw(sp, 'status'), 'message') AS StatusMessage,
    arrayMap(e -> fromUnixTimestamp64Nano(toInt64(JSONExtractString(e, 'timeUnixNano'))),
             JSONExtractArrayRaw(sp, 'events')) AS `Events.Timestamp`,
    arrayMap(e -> JSONExtractString(e, 'name'), JSONExtractArrayRaw(sp, 'events')) AS `Events.Name`,
    arrayMap(e -> {_attributes("e")}, JSONExtractArrayRaw(sp, 'events')) AS `Events.Attributes`,
    arrayMap(l -> JSONExtractString(l, 'traceId'), JSONExtractArrayRaw(sp, 'links')) AS `Links.TraceId`,
    arrayMap(l -> JSONExtractString(l, 'spanId'), JSONExtractArrayRaw(sp, 'links')) AS `Links.SpanId`
FROM file({{files}}, 'JSONAsString', 'json String')
ARRAY JOIN JSONExtractArrayRaw(json, 'resourceSpans') AS rs
ARRAY JOIN JSONExtractArrayRaw(rs, 'scopeSpans') AS ss
ARRAY JOIN JSONExtractArrayRaw(ss, 'spans') AS sp
"""
