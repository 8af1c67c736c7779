"""Whole runs read from a store, for what needs every step: ``rb-otel evaluate`` and ``train`` replay the steps
(their model, tokens, tools, errors and, with capture on, their text), which no aggregate can stand for.

The store selects the run spans (``invoke_agent``) under the filters and their direct ``chat`` and
``execute_tool`` children (``ParentSpanId``), and returns those spans only, a handful of columns each: no other
span of the trace (retrievals, LangGraph nodes, HTTP) leaves the store. Each row becomes a span record
(:class:`rb_otel.report.traces.SpanRecord`, what a trace file's span is read into), its attribute values given back
their types (:data:`TYPED_ATTRIBUTES`: the exporter stores every value as a string), and
:func:`rb_otel.report.traces.runs_from_records` builds the runs exactly as it does from trace files.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from rb_otel.analysis.fleet import FleetFilter, run_predicates, starts_at_or_after
from rb_otel.report.traces import SpanRecord
from rb_otel.telemetry import names as n

__all__ = ["TYPED_ATTRIBUTES", "runs_sql", "span_record", "typed_value"]

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


def runs_sql(table: str, where: FleetFilter) -> str:
    """The spans of the runs under ``where``: their run spans and those spans' ``chat`` and ``execute_tool``
    children, oldest first (:func:`span_record`'s columns)."""
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


def typed_value(key: str, text: str) -> Any:
    """The value of attribute ``key`` that the store holds as ``text``, as the run readers read it from a trace
    file: an int, a float, a bool or a list of strings for :data:`TYPED_ATTRIBUTES`, else the text itself. A
    text that is not the type its name promises is kept as the text, as a file with that value would be read."""
    kind = TYPED_ATTRIBUTES.get(key)
    if kind is None:
        return text
    try:
        if kind == _INT:
            return int(text)
        if kind == _DOUBLE:
            return float(text)
        if kind == _BOOL:
            return text == "true"
        items = json.loads(text)
    except (ValueError, TypeError):
        return text
    return [str(v) for v in items] if isinstance(items, list) else text


def _attributes(attributes: Mapping[str, str]) -> dict[str, Any]:
    return {str(k): typed_value(str(k), str(v)) for k, v in attributes.items()}


def span_record(row: Sequence[Any]) -> SpanRecord:
    """One row of :func:`runs_sql` as the span record the run readers take, built straight from the row: no
    OTLP/JSON object in between."""
    start, trace, span, parent, name, duration, status, message, attributes, event_names, event_attributes = row
    start_ns = int(start)
    return SpanRecord(
        name=str(name),
        span_id=str(span),
        parent_id=str(parent or ""),
        trace_id=str(trace or ""),
        start_ns=start_ns,
        end_ns=start_ns + int(duration),
        attributes=_attributes(attributes),
        events=[(str(e), _attributes(a)) for e, a in zip(event_names, event_attributes, strict=True)],
        error_status=(str(message) or "error") if str(status) == "Error" else None,
    )
