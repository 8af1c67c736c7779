"""One scripted LangChain agent run recorded by rb-otel or by the official GenAI LangChain instrumentation.

    python tests/conformance_dump.py rb|official

Prints JSON: the finished spans (name, kind, parent span's name, ``gen_ai.*`` / ``error.type`` attributes, scope)
and, per metric, the attribute keys its points carry. The official instrumentor patches LangChain process-wide, so
each side runs in a process of its own.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from conftest import add, calc_script
from langchain.agents import create_agent
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from rb_otel.testing import ScriptedChatModel


def _span(span: ReadableSpan, names: dict[int, str]) -> dict[str, Any]:
    attrs = {
        key: list(value) if isinstance(value, tuple) else value
        for key, value in (span.attributes or {}).items()
        if key.startswith(("gen_ai.", "error."))
    }
    scope = span.instrumentation_scope
    return {
        "name": span.name,
        "kind": span.kind.name,
        "parent": names.get(span.parent.span_id) if span.parent else None,
        "attrs": attrs,
        "scope": scope.name if scope else "",
        "schema": scope.schema_url if scope else "",
    }


def main(side: str) -> None:
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    middleware = []
    if side == "official":
        from opentelemetry.instrumentation.genai.langchain import LangChainInstrumentor

        LangChainInstrumentor().instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)
    else:
        from rb_otel import ReasonBlocks

        rb = ReasonBlocks(tracer_provider=tracer_provider, meter_provider=meter_provider, telemetry_batch_window=0)
        middleware = [rb.middleware(agent_name="calc")]
    agent = create_agent(
        ScriptedChatModel(script=calc_script(2)), [add], middleware=middleware, name="calc", system_prompt="Add."
    )
    agent.invoke({"messages": [("user", "what is 1+2?")]})
    tracer_provider.force_flush()
    spans = sorted(exporter.get_finished_spans(), key=lambda s: s.start_time or 0)
    names = {s.context.span_id: s.name for s in spans if s.context is not None}
    metrics: dict[str, list[str]] = {}
    data = reader.get_metrics_data()
    for resource_metrics in data.resource_metrics if data else ():
        for scope_metrics in resource_metrics.scope_metrics:
            for metric in scope_metrics.metrics:
                keys = {key for point in metric.data.data_points for key in (point.attributes or {})}
                metrics[metric.name] = sorted(keys)
    print(json.dumps({"spans": [_span(s, names) for s in spans], "metrics": metrics}))


if __name__ == "__main__":
    main(sys.argv[1])
