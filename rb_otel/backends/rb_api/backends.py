"""rb-api backends behind the same protocols as the embedded ones (docs/rb-api.md, "Using rb-api"; docs/steering.md,
"E-traces").

Both fail open within the step's budget: the monitor backend falls back to the embedded evaluator (the result
is marked ``degraded``), the pattern store raises and the step simply gets no guidance from that tier. Every
call is reported to the request's observer (one ``rb.monitors.evaluate`` / ``rb.etraces.retrieve`` span).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

from rb_otel.backends.rb_api.client import RbApiClient, RemoteError
from rb_otel.steering.calls import OP_ETRACES_RETRIEVE, OP_MONITORS_EVALUATE, observe
from rb_otel.steering.etraces.store import RetrievalQuery
from rb_otel.steering.monitors.local import LocalMonitorBackend, MonitorBackend, MonitorRequest
from rb_otel.types import ETrace, MonitorEvaluation

__all__ = ["HttpMonitorBackend", "HttpPatternStore", "parse_evaluation", "parse_traces"]

_MAX_STEPS_SENT = 200  # bounded requests: the server scores the recent trace


def _number(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise RemoteError("bad_shape", f"{name} is not a finite number")
    return float(value)


def parse_evaluation(data: Mapping[str, Any]) -> MonitorEvaluation:
    """Validate a ``/monitors/evaluate`` response (docs/rb-api.md, "Using rb-api"); raises
    ``RemoteError("bad_shape")``."""
    fired = data.get("fired", [])
    scores = data.get("scores", {})
    if not isinstance(fired, list) or not all(isinstance(f, str) for f in fired):
        raise RemoteError("bad_shape", "fired is not a list of names")
    if not isinstance(scores, dict):
        raise RemoteError("bad_shape", "scores is not an object")
    text = data.get("intervention_text")
    if text is not None and not isinstance(text, str):
        raise RemoteError("bad_shape", "intervention_text is not a string")
    failure_type = data.get("failure_type")
    source = data.get("intervention_source")
    return MonitorEvaluation(
        inject=bool(data.get("inject", False)) and bool(text),
        intervention_text=text,
        fired=tuple(fired),
        scores={str(k): min(max(_number(v, f"scores[{k}]"), 0.0), 1.0) for k, v in scores.items()},
        composite=_number(data.get("composite", 0.0), "composite"),
        failure_type=failure_type if isinstance(failure_type, str) and failure_type else None,
        intervention_source=source if isinstance(source, str) else None,
    )


def parse_traces(data: Mapping[str, Any], tier: str) -> list[ETrace]:
    """Validate a ``/traces/retrieve`` response; raises ``RemoteError("bad_shape")``."""
    traces = data.get("traces")
    if not isinstance(traces, list):
        raise RemoteError("bad_shape", "traces is not a list")
    out = []
    for item in traces:
        if not isinstance(item, dict) or not isinstance(item.get("fields", {}), dict):
            raise RemoteError("bad_shape", "a trace is not an object with fields")
        out.append(
            ETrace(
                tier=str(item.get("tier") or tier),
                similarity=_number(item.get("similarity", 0.0), "similarity"),
                pattern_id=str(item.get("pattern_id") or ""),
                fields=dict(item.get("fields") or {}),
                failure_type=item.get("failure_type") if isinstance(item.get("failure_type"), str) else None,
                model_family=str(item.get("model_family") or ""),
            )
        )
    return out


class HttpMonitorBackend:
    """``POST /monitors/evaluate``; on any failure the embedded evaluator answers instead (marked degraded)."""

    def __init__(self, client: RbApiClient, *, fallback: MonitorBackend | None = None) -> None:
        self.client = client
        self.fallback = fallback if fallback is not None else LocalMonitorBackend()

    def __repr__(self) -> str:
        return f"HttpMonitorBackend({self.client!r})"

    def evaluate(self, request: MonitorRequest) -> MonitorEvaluation:
        payload: dict[str, Any] = {
            "model": request.model,
            "task_profile": request.task_profile,
            "steps": [
                {"thought": s.thought[:4000], "action": s.action, "action_input": s.action_input,
                 "observation": s.observation, "step_index": s.step_index, "difficulty": s.difficulty}
                for s in request.steps[-_MAX_STEPS_SENT:]
            ],
        }  # fmt: skip
        if request.weights:
            payload["weights"] = dict(request.weights)
        with observe(request.observer, OP_MONITORS_EVALUATE, step=request.step, tier=None,
                     server=self.client.config.host) as note:  # fmt: skip
            try:
                return parse_evaluation(self.client.post("/monitors/evaluate", payload, deadline=request.deadline))
            except RemoteError as exc:
                note.error = exc.kind
                reason = exc.kind
        evaluation = self.fallback.evaluate(request)
        return dataclasses.replace(evaluation, degraded=f"rb-api monitors unavailable ({reason}): evaluated locally")


class HttpPatternStore:
    """``POST /traces/retrieve``; raises ``RemoteError`` on failure (the injection then adds nothing)."""

    def __init__(self, client: RbApiClient) -> None:
        self.client = client

    def __repr__(self) -> str:
        return f"HttpPatternStore({self.client!r})"

    def retrieve(self, query: RetrievalQuery) -> list[ETrace]:
        payload: dict[str, Any] = {"context": query.context, "tier": query.tier, "top_k": query.top_k}
        if query.model:
            payload["model"] = query.model
        if query.failure_type:
            payload["failure_type"] = query.failure_type
        with observe(query.observer, OP_ETRACES_RETRIEVE, step=query.step, tier=query.tier,
                     server=self.client.config.host) as note:  # fmt: skip
            try:
                traces = parse_traces(self.client.post("/traces/retrieve", payload, deadline=query.deadline),
                                      query.tier)[: query.top_k]  # fmt: skip
            except RemoteError as exc:
                note.error = exc.kind
                raise
            note.count = len(traces)
            return traces
