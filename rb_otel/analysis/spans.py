"""OTLP/JSON trace files as rows of the ``otel_traces`` columns, in Python: the files path's reader (the plain
definition the embedded engine's SQL, :data:`~rb_otel.analysis.schema.OTLP_JSON_ROWS`, is tested against).

A line that is not valid JSON, or a span without its times, is a :class:`SpanFileError` naming the file and line:
an analysis never answers from part of a file without saying so.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

__all__ = ["SpanFileError", "attribute_string", "span_rows"]


class SpanFileError(ValueError):
    """A trace file that cannot be read as OTLP/JSON lines; the message names the file and the line."""


def attribute_string(value: Any) -> str:
    """An OTLP/JSON ``AnyValue`` as the ClickHouse exporter stores it (strings as they are, integers in decimal,
    booleans ``true``/``false``, arrays of strings as their JSON list; doubles in a form the analysis never
    compares)."""
    if not isinstance(value, dict):
        return ""
    if "stringValue" in value:
        return str(value["stringValue"])
    if "intValue" in value:
        return str(int(value["intValue"]))
    if "boolValue" in value:
        return "true" if value["boolValue"] else "false"
    if "doubleValue" in value:
        return repr(float(value["doubleValue"]))
    if "arrayValue" in value:
        items = (value["arrayValue"] or {}).get("values", [])
        return json.dumps([str(v.get("stringValue", "")) for v in items if isinstance(v, dict)], separators=(",", ":"))
    return json.dumps(value, separators=(",", ":"))


def _attributes(holder: Any) -> dict[str, str]:
    items = holder.get("attributes", []) if isinstance(holder, dict) else []
    return {str(a.get("key", "")): attribute_string(a.get("value")) for a in items if isinstance(a, dict)}


def span_rows(paths: Sequence[str | Path]) -> Iterator[dict[str, Any]]:
    """Every span of the OTLP/JSON lines files ``paths`` as a row with the ``otel_traces`` columns the analysis
    reads (``Timestamp`` and ``Duration`` in nanoseconds)."""
    for path in paths:
        with open(path, encoding="utf-8") as lines:
            for number, line in enumerate(lines, start=1):
                if not line.strip():
                    continue
                try:
                    request = json.loads(line)
                    yield from _rows(request)
                except (ValueError, KeyError, TypeError, AttributeError) as exc:
                    raise SpanFileError(f"{path}: line {number}: not an OTLP/JSON trace request ({exc})") from None


def _rows(request: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for resource_spans in request.get("resourceSpans", []):
        resource = _attributes(resource_spans.get("resource", {}))
        for scope_spans in resource_spans.get("scopeSpans", []):
            for span in scope_spans.get("spans", []):
                start, end = int(span["startTimeUnixNano"]), int(span["endTimeUnixNano"])
                yield {
                    "Timestamp": start,
                    "TraceId": span.get("traceId", ""),
                    "SpanId": span.get("spanId", ""),
                    "ParentSpanId": span.get("parentSpanId", ""),
                    "SpanName": span.get("name", ""),
                    "ServiceName": resource.get("service.name", ""),
                    "SpanAttributes": _attributes(span),
                    "Duration": end - start,
                }
