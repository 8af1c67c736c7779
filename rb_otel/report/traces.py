"""Runs read back from OTLP/JSON trace files (the Collector ``file`` exporter's format, which the demo, replay and
``configure(traces_file=...)`` write): each ``invoke_agent`` span with its ``chat`` and ``execute_tool`` children.

Only the JSON is read: nothing here talks to OpenTelemetry. A line that is not valid JSON is reported (file and
line) and skipped; the rest of the file is read.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rb_otel.types import FSMState

__all__ = [
    "ReportRun",
    "ReportStep",
    "ReportTool",
    "RunSpanFilter",
    "SpanRecord",
    "load_runs",
    "runs_from_records",
    "runs_from_spans",
    "span_record",
]

#: Which run parts to keep: ``keep(attributes, start_ns, service)`` of an ``invoke_agent`` span (its typed
#: attributes, its start in nanoseconds, its resource's ``service.name``); the parts it drops take their model
#: calls and tools with them.
RunSpanFilter = Callable[[dict[str, Any], int, str], bool]


@dataclass(slots=True)
class ReportTool:
    name: str
    start: float
    end: float
    arguments: str | None = None  # only when content was captured
    result: str | None = None
    error: str | None = None


@dataclass(slots=True)
class ReportStep:
    index: int
    start: float
    end: float
    state: str
    difficulty: float | None
    model: str
    routed_model: str
    monitors: list[tuple[str, float]] = field(default_factory=list)  # fired, with scores
    composite: float | None = None
    guidance_sources: list[str] = field(default_factory=list)
    guidance: list[str] = field(default_factory=list)  # the injected texts, when captured
    thought: str | None = None  # the thought preview, when captured
    error: str | None = None
    tools: list[ReportTool] = field(default_factory=list)
    response_model: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    output_messages: str | None = None  # gen_ai.output.messages, when captured
    #: The step's tokens (``rb.tokens``, the step log's and the demo table's); ``None`` when its call reported no
    #: usage (unknown, not 0).
    tokens: int | None = None


@dataclass(slots=True)
class ReportRun:
    run_id: str
    agent: str
    outcome: str
    start: float
    end: float
    trace_id: str
    steps: list[ReportStep] = field(default_factory=list)
    scorer: str = ""
    risk: float | None = None
    attributes: dict[str, Any] = field(default_factory=dict)  # the run span's own (the last part's, joined)
    #: Model calls in the run that were no step (``rb.call.source``: another middleware's, a tool's).
    calls: list[ReportStep] = field(default_factory=list)
    parts: int = 1  # invoke_agent spans of the run: a run interrupted and resumed has one per part

    @property
    def states(self) -> list[str]:
        """The FSM states the run was in, in order of first appearance."""
        seen: dict[str, None] = {}
        for step in self.steps:
            if step.state:
                seen.setdefault(step.state)
        return list(seen)

    @property
    def most_severe(self) -> str:
        return max(self.states, key=FSMState.severity_of, default="")

    @property
    def tokens(self) -> int | None:
        """The run's tokens: its ``rb.tokens`` (the sum over its parts, as the fleet summary counts them), else
        the sum of its steps' input and output tokens; ``None`` when none of its model calls reported usage
        (unknown, not 0)."""
        if "rb.tokens" not in self.attributes and _int(self.attributes.get("rb.usage.unreported")):
            return None
        return _int(self.attributes.get("rb.tokens")) or sum(s.input_tokens + s.output_tokens for s in self.steps)


def _value(raw: dict[str, Any]) -> Any:
    for key in ("stringValue", "boolValue", "doubleValue"):
        if key in raw:
            return raw[key]
    if "intValue" in raw:
        return int(raw["intValue"])
    if "arrayValue" in raw:
        return [_value(v) for v in raw["arrayValue"].get("values", [])]
    return None


def _attributes(raw: Iterable[dict[str, Any]] | None) -> dict[str, Any]:
    return {a["key"]: _value(a.get("value", {})) for a in raw or () if isinstance(a, dict) and "key" in a}


#: The spans a run is read from: the run span, and its model calls and tools. A trace's other spans (LangGraph
#: nodes, retrievals, HTTP) are not read at all.
_RUN_SPANS = ("invoke_agent", "chat", "execute_tool")


def _spans(path: Path, problems: list[str], keep: RunSpanFilter | None) -> Iterable[SpanRecord]:
    with path.open(encoding="utf-8", errors="replace") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                document = json.loads(line)
            except json.JSONDecodeError as exc:
                problems.append(f"{path}: line {number}: not valid JSON ({exc.msg})")
                continue
            if not isinstance(document, dict):
                problems.append(f"{path}: line {number}: expected an OTLP/JSON object with 'resourceSpans'")
                continue
            for resource_spans in document.get("resourceSpans", []):
                service = ""
                if keep is not None:
                    resource = _attributes((resource_spans.get("resource") or {}).get("attributes"))
                    service = str(resource.get("service.name") or "")
                for scope_spans in resource_spans.get("scopeSpans", []):
                    for span in scope_spans.get("spans", []):
                        if not str(span.get("name", "")).startswith(_RUN_SPANS):
                            continue
                        record = span_record(span)
                        if keep is None or not _dropped(record, service, keep):
                            yield record


def _dropped(record: SpanRecord, service: str, keep: RunSpanFilter) -> bool:
    return record.name.startswith("invoke_agent") and not keep(record.attributes, record.start_ns, service)


@dataclass(slots=True)
class SpanRecord:
    """One span as the run readers read it, whatever held it: an OTLP/JSON span object (:func:`span_record`) or
    a store's row (:func:`rb_otel.analysis.runs.span_record`). Its attributes are typed values, read once."""

    name: str
    span_id: str
    parent_id: str  # "" for a root span
    trace_id: str
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # (name, typed attributes)
    #: The status message of a span whose status is Error ("error" when it has none); None otherwise.
    error_status: str | None = None


def _nanos(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def span_record(span: dict[str, Any]) -> SpanRecord:
    """An OTLP/JSON span object (``name``, ``spanId``, ``parentSpanId``, ``attributes``, ...) as a record."""
    status = span.get("status") or {}
    failed = status.get("code") in (2, "STATUS_CODE_ERROR")
    return SpanRecord(
        name=str(span.get("name", "")),
        span_id=str(span.get("spanId")),
        parent_id=str(span.get("parentSpanId") or ""),
        trace_id=str(span.get("traceId") or ""),
        start_ns=_nanos(span.get("startTimeUnixNano")),
        end_ns=_nanos(span.get("endTimeUnixNano")),
        attributes=_attributes(span.get("attributes")),
        events=[(str(e.get("name", "")), _attributes(e.get("attributes"))) for e in span.get("events") or ()],
        error_status=(status.get("message") or "error") if failed else None,
    )


def _step(span: SpanRecord) -> ReportStep:
    attrs = span.attributes
    scores = {}
    for name, e in span.events:
        if name == "gen_ai.evaluation.result":
            scores[str(e.get("gen_ai.evaluation.name"))] = float(e.get("gen_ai.evaluation.score.value") or 0.0)
    fired = [str(m) for m in attrs.get("rb.monitors_fired") or []]
    error = attrs.get("error.type")
    if error is None:
        error = span.error_status
    return ReportStep(
        index=int(attrs.get("rb.step", 0) or 0),
        start=span.start_ns / 1e9,
        end=span.end_ns / 1e9,
        state=str(attrs.get("rb.fsm_state") or ""),
        difficulty=attrs.get("rb.difficulty"),
        model=str(attrs.get("gen_ai.request.model") or ""),
        routed_model=str(attrs.get("rb.model_id") or ""),
        monitors=[(m, scores.get(m, float("nan"))) for m in fired],
        composite=attrs.get("rb.monitor.composite"),
        guidance_sources=[str(s) for s in attrs.get("rb.injection_sources") or []],
        guidance=[str(t) for t in attrs.get("rb.intervention_texts") or []],
        thought=attrs.get("rb.thought_preview"),
        error=None if error is None else str(error),
        response_model=str(attrs.get("gen_ai.response.model") or ""),
        input_tokens=_int(attrs.get("gen_ai.usage.input_tokens")),
        output_tokens=_int(attrs.get("gen_ai.usage.output_tokens")),
        cache_read_tokens=_int(attrs.get("gen_ai.usage.cache_read.input_tokens")),
        output_messages=attrs.get("gen_ai.output.messages"),
        tokens=attrs["rb.tokens"] if isinstance(attrs.get("rb.tokens"), int) else None,
    )


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _tool(span: SpanRecord) -> ReportTool:
    attrs = span.attributes
    error = attrs.get("error.type")
    return ReportTool(
        name=str(attrs.get("gen_ai.tool.name") or span.name),
        start=span.start_ns / 1e9,
        end=span.end_ns / 1e9,
        arguments=attrs.get("gen_ai.tool.call.arguments"),
        result=attrs.get("gen_ai.tool.call.result"),
        error=None if error is None else str(error),
    )


def load_runs(paths: Iterable[str | Path], *, keep: RunSpanFilter | None = None) -> tuple[list[ReportRun], list[str]]:
    """Every run in ``paths``, in start order, and the problems met (``file: line N: what``); with ``keep``, only
    the run parts it keeps (:data:`RunSpanFilter`)."""
    problems: list[str] = []
    records: list[SpanRecord] = []
    for path in map(Path, paths):
        if not path.is_file():
            problems.append(f"{path}: no such file")
            continue
        records.extend(_spans(path, problems, keep))
    return runs_from_records(records), problems


def runs_from_spans(spans: Iterable[dict[str, Any]]) -> list[ReportRun]:
    """The runs of OTLP/JSON span objects (``name``, ``spanId``, ``parentSpanId``, ``attributes``, ...), in start
    order: each ``invoke_agent`` span with its ``chat`` and ``execute_tool`` children, the parts of a run joined."""
    return runs_from_records(span_record(s) for s in spans if str(s.get("name", "")).startswith(_RUN_SPANS))


def runs_from_records(records: Iterable[SpanRecord]) -> list[ReportRun]:
    """:func:`runs_from_spans` on span records: what every reader of runs (files or a store) ends in."""
    records = list(records)
    children: dict[str, list[SpanRecord]] = defaultdict(list)
    for record in records:
        if record.parent_id:
            children[record.parent_id].append(record)
    runs = []
    for span in records:
        if not span.name.startswith("invoke_agent"):
            continue
        attrs = span.attributes
        run = ReportRun(
            run_id=str(attrs.get("rb.run_id") or span.span_id),
            agent=str(attrs.get("gen_ai.agent.name") or ""),
            outcome=str(attrs.get("rb.outcome") or ""),
            start=span.start_ns / 1e9,
            end=span.end_ns / 1e9,
            trace_id=span.trace_id,
            scorer="",
            risk=attrs.get("rb.risk"),
            attributes=attrs,
        )
        for kid in sorted(children.get(span.span_id, []), key=lambda s: s.start_ns):
            if kid.name.startswith("chat"):
                if "rb.call.source" in kid.attributes:  # a model call that was no step
                    run.calls.append(_step(kid))
                    continue
                run.scorer = run.scorer or str(kid.attributes.get("rb.scorer") or "")
                run.steps.append(_step(kid))
            elif kid.name.startswith("execute_tool") and run.steps:
                run.steps[-1].tools.append(_tool(kid))  # a tool runs after the model call that asked for it
        runs.append(run)
    runs.sort(key=lambda r: r.start)
    return _joined(runs)


#: Run-span totals that add up across the parts of one run.
_SUMMED = ("rb.tokens", "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens", "rb.usage.unreported", "rb.steps")


def _joined(runs: list[ReportRun]) -> list[ReportRun]:
    """One run per ``rb.run_id``: the parts of a run interrupted and resumed (each its own ``invoke_agent``, in
    its own trace, maybe from another worker) joined in start order; the outcome and the run attributes are the
    last part's, the totals the sum of every part's, the steps all of them."""
    by_id: dict[str, list[ReportRun]] = defaultdict(list)
    for run in runs:
        by_id[run.run_id].append(run)
    joined = []
    for parts in by_id.values():
        if len(parts) == 1:
            joined.append(parts[0])
            continue
        first, last = parts[0], parts[-1]
        attributes = dict(last.attributes)
        for key in _SUMMED:
            values = [p.attributes[key] for p in parts if isinstance(p.attributes.get(key), int)]
            if values:
                attributes[key] = sum(values)
        joined.append(
            ReportRun(
                run_id=first.run_id,
                agent=first.agent,
                outcome=last.outcome,
                start=first.start,
                end=last.end,
                trace_id=first.trace_id,
                steps=[step for part in parts for step in part.steps],
                scorer=first.scorer or last.scorer,
                risk=last.risk,
                attributes=attributes,
                calls=[call for part in parts for call in part.calls],
                parts=len(parts),
            )
        )
    joined.sort(key=lambda r: r.start)
    return joined
