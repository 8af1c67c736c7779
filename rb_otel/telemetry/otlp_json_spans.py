"""OTLP/JSON trace lines back into SDK spans: what :func:`~rb_otel.telemetry.otlp_json.json_line` wrote from
``encode_spans(...)``, read into ``ReadableSpan`` objects any SDK span exporter sends (the export spool,
:mod:`rb_otel.telemetry.spool`, sends what an earlier process kept). Resource, scope, ids, parent, kind, times,
attributes, events, links and status come back; the dropped counts and the spans' trace flags are not in the
encoding (the OTLP exporters do not send them)."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, TraceFlags, TraceState
from opentelemetry.trace.status import Status, StatusCode

__all__ = ["MalformedSpans", "spans_of_lines"]

#: OTLP's ``Span.flags`` bits for the parent: whether it is known to be remote, and whether it is.
_HAS_IS_REMOTE, _IS_REMOTE = 0x100, 0x200
_SCALARS = {"stringValue": str, "boolValue": bool, "intValue": int}


class MalformedSpans(ValueError):
    """The text is not OTLP/JSON trace lines; ``str()`` is one line: where (line number) and what."""


def _value(any_value: dict[str, Any]) -> Any:
    """An OTLP/JSON ``AnyValue`` as an SDK attribute value (``None`` when it holds none)."""
    for key, kind in _SCALARS.items():
        if key in any_value:
            return kind(any_value[key])
    if "doubleValue" in any_value:
        return float(any_value["doubleValue"])  # a number, or "NaN" / "Infinity" / "-Infinity"
    if "bytesValue" in any_value:
        return base64.b64decode(any_value["bytesValue"])
    if "arrayValue" in any_value:
        return tuple(_value(v) for v in any_value["arrayValue"].get("values", []))
    if "kvlistValue" in any_value:
        return {kv["key"]: _value(kv.get("value", {})) for kv in any_value["kvlistValue"].get("values", [])}
    return None


def _attributes(items: list[dict[str, Any]] | None) -> dict[str, Any]:
    pairs = ((item["key"], _value(item.get("value", {}))) for item in items or [])
    return {key: value for key, value in pairs if value is not None}


def _context(trace_id: str, span_id: str, *, remote: bool = False, state: str = "") -> SpanContext:
    pairs = [tuple(part.split("=", 1)) for part in state.split(",") if "=" in part]
    return SpanContext(int(trace_id, 16), int(span_id, 16), remote, TraceFlags(TraceFlags.SAMPLED),
                       TraceState(pairs))  # type: ignore[arg-type]  # fmt: skip


def _status(status: dict[str, Any] | None) -> Status:
    code = StatusCode(int((status or {}).get("code", 0)))
    # the SDK takes a description only with an error status (it warns and drops it otherwise)
    return Status(code, (status or {}).get("message") if code is StatusCode.ERROR else None)


def _span(span: dict[str, Any], resource: Resource, scope: InstrumentationScope) -> ReadableSpan:
    trace_id = span["traceId"]
    parent_id = span.get("parentSpanId")
    flags = int(span.get("flags", 0))
    parent = (
        _context(trace_id, parent_id, remote=bool(flags & _HAS_IS_REMOTE and flags & _IS_REMOTE)) if parent_id else None
    )
    events = [
        Event(e.get("name", ""), _attributes(e.get("attributes")), int(e.get("timeUnixNano", 0)))
        for e in span.get("events", [])
    ]
    links = [
        Link(_context(k["traceId"], k["spanId"], state=k.get("traceState", "")), _attributes(k.get("attributes")))
        for k in span.get("links", [])
    ]
    return ReadableSpan(
        name=span.get("name", ""),
        context=_context(trace_id, span["spanId"], state=span.get("traceState", "")),
        parent=parent,
        resource=resource,
        attributes=_attributes(span.get("attributes")),
        events=events,
        links=links,
        kind=SpanKind(max(int(span.get("kind", 1)) - 1, 0)),  # OTLP counts from UNSPECIFIED (0), INTERNAL (1)
        status=_status(span.get("status")),
        start_time=int(span.get("startTimeUnixNano", 0)),
        end_time=int(span.get("endTimeUnixNano", 0)),
        instrumentation_scope=scope,
    )


def _spans_of_request(request: dict[str, Any]) -> Iterator[ReadableSpan]:
    for resource_spans in request["resourceSpans"]:
        resource = Resource(
            _attributes(resource_spans.get("resource", {}).get("attributes")), resource_spans.get("schemaUrl")
        )
        for scope_spans in resource_spans.get("scopeSpans", []):
            scope = scope_spans.get("scope", {})
            instrumentation = InstrumentationScope(
                scope.get("name", ""), scope.get("version"), scope_spans.get("schemaUrl"),
                _attributes(scope.get("attributes")),
            )  # fmt: skip
            for span in scope_spans.get("spans", []):
                yield _span(span, resource, instrumentation)


def spans_of_lines(text: str) -> list[ReadableSpan]:
    """Every span of OTLP/JSON trace lines (one ``ExportTraceServiceRequest`` a line, as the Collector's ``file``
    exporter and :func:`~rb_otel.telemetry.otlp_json.json_line` write them). Raises :class:`MalformedSpans` naming
    the line and the problem when a line does not parse or is not a trace request; nothing else."""
    spans: list[ReadableSpan] = []
    lines = [(number, line) for number, line in enumerate(text.splitlines(), 1) if line.strip()]
    if not lines:
        raise MalformedSpans("no OTLP/JSON line in it (empty)")
    for number, line in lines:
        try:
            spans.extend(_spans_of_request(json.loads(line)))
        except json.JSONDecodeError as exc:
            raise MalformedSpans(f"line {number}: not JSON ({exc.msg} at column {exc.colno})") from None
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            problem = f"no {exc}" if isinstance(exc, KeyError) else str(exc).splitlines()[0]
            raise MalformedSpans(f"line {number}: not an OTLP/JSON trace request ({problem})") from None
    return spans
