"""Whole runs read from a store, for what needs every step: ``rb-otel evaluate`` and ``train`` replay the steps
(their model, tokens, tools, errors and, with capture on, their text), which no aggregate can stand for.

The store selects the run spans (``invoke_agent``) under the filters and their direct ``chat`` and
``execute_tool`` children (``ParentSpanId``), and returns those spans only, a handful of columns each: no other
span of the trace (retrievals, LangGraph nodes, HTTP) leaves the store. Each row becomes the OTLP/JSON span object
it was exported from, its attribute values given back their types (:data:`TYPED_ATTRIBUTES`: the exporter stores
every value as a string), and :func:`rb_otel.report.traces.runs_from_spans` builds the runs exactly as it does
from trace files.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from rb_otel.analysis.fleet import FleetFilter, run_predicates, starts_at_or_after
from rb_otel.telemetry import names as n

__all__ = ["TYPED_ATTRIBUTES", "runs_sql", "span_object"]

_INT, _DOUBLE, _BOOL, _STRINGS = "intValue", "doubleValue", "boolValue", "arrayValue"

#: The attributes the run readers read as something other than a string, by their OTLP/JSON value kind (the
#: names' types in docs/telemetry.md); every other attribute comes back as the string the store holds.
TYPED_ATTRIBUTES: Mapping[str, str] = {
    n.RB_STEP: _INT,
    "rb.steps": _INT,
    "rb.tokens": _INT,
    "rb.usage.unreported": _INT,
    "rb.token_saving.chars_saved": _INT,
    "rb.token_saving.compressions": _INT,
    "rb.token_saving.early_exits": _INT,
    n.RB_MONITOR_INJECTIONS: _INT,
    "gen_ai.usage.input_tokens": _INT,
    "gen_ai.usage.output_tokens": _INT,
    "gen_ai.usage.cache_read.input_tokens": _INT,
    "rb.difficulty": _DOUBLE,
    "rb.risk": _DOUBLE,
    "rb.monitor.composite": _DOUBLE,
    "rb.experiment.on_fraction": _DOUBLE,
    "gen_ai.evaluation.score.value": _DOUBLE,
    "rb.latency_ms": _DOUBLE,
    "rb.steering.duration_ms": _DOUBLE,
    "rb.entered_skip": _BOOL,
    n.RB_MONITORS_FIRED: _STRINGS,
    "rb.injection_sources": _STRINGS,
    "rb.intervention_texts": _STRINGS,
    "rb.tool_calls": _STRINGS,
    "gen_ai.response.finish_reasons": _STRINGS,
}

_STATUS_CODES = {"Unset": 0, "Ok": 1, "Error": 2}


def runs_sql(table: str, where: FleetFilter) -> str:
    """The spans of the runs under ``where``: their run spans and those spans' ``chat`` and ``execute_tool``
    children, oldest first (:func:`span_object`'s columns)."""
    runs = " AND ".join(run_predicates(where, operation=False))
    children = f"(startsWith(SpanName, 'chat') OR startsWith(SpanName, 'execute_tool')) AND ParentSpanId IN " \
               f"(SELECT SpanId FROM {table} WHERE {runs})"  # fmt: skip
    if where.since is not None:  # a child starts after its run: the same bound prunes the scan
        children += " AND " + starts_at_or_after(where.since)
    return f"""
        SELECT toString(toUnixTimestamp64Nano(Timestamp)), TraceId, SpanId, ParentSpanId, SpanName,
               toString(Duration), StatusCode, StatusMessage, SpanAttributes, `Events.Name`, `Events.Attributes`
        FROM {table} WHERE ({runs}) OR ({children})
        ORDER BY Timestamp, SpanId"""


def _value(key: str, text: str) -> dict[str, Any]:
    kind = TYPED_ATTRIBUTES.get(key)
    try:
        if kind == _INT:
            return {_INT: str(int(text))}
        if kind == _DOUBLE:
            return {_DOUBLE: float(text)}
        if kind == _BOOL:
            return {_BOOL: text == "true"}
        if kind == _STRINGS:
            items = json.loads(text)
            return {_STRINGS: {"values": [{"stringValue": str(v)} for v in items]}}
    except (ValueError, TypeError):
        pass  # not the type the name promises: kept as the text, as a file with that value would be read
    return {"stringValue": text}


def _attributes(attributes: Mapping[str, str]) -> list[dict[str, Any]]:
    return [{"key": str(k), "value": _value(str(k), str(v))} for k, v in attributes.items()]


def span_object(row: Sequence[Any]) -> dict[str, Any]:
    """One row of :func:`runs_sql` as the OTLP/JSON span object it was exported from."""
    start, trace, span, parent, name, duration, status, message, attributes, event_names, event_attributes = row
    events = [
        {"name": str(e), "attributes": _attributes(a)} for e, a in zip(event_names, event_attributes, strict=True)
    ]
    return {
        "traceId": str(trace),
        "spanId": str(span),
        "parentSpanId": str(parent),
        "name": str(name),
        "startTimeUnixNano": str(start),
        "endTimeUnixNano": str(int(start) + int(duration)),
        "attributes": _attributes(attributes),
        "events": events,
        "status": {"code": _STATUS_CODES.get(str(status), 0), "message": str(message)},
    }


def span_objects(rows: Iterable[Sequence[Any]]) -> list[dict[str, Any]]:
    """Every row of :func:`runs_sql` as a span object."""
    return [span_object(row) for row in rows]
