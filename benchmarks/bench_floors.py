"""The floors under rb-otel's cost: what the framework and the OpenTelemetry SDK take before any steering.

Same workload as ``bench_middleware.py`` (create_agent, scripted model, 5 model calls and 4 tool calls per run).
Each variant's runs alternate one at a time with the bare agent's in one process; reported as the median of the
per-pair ratios and the median extra milliseconds per run:

* ``empty hook + run guard``: a middleware whose ``wrap_model_call`` only calls the handler, with rb-otel's run
  guard (the callback handler that sees every way a run ends) active. Every steering middleware pays at least
  this: LangChain wraps each ``wrap_*`` hook in LangSmith's ``traceable`` and runs it in a copied context.
* ``model wrapper + run guard``: no hook; the agent's chat model is wrapped in one that calls the real model's
  ``_generate`` (where a wrapper integration would steer): what the hook's share of the first row costs.
* ``no steering, no-op OTel``: rb-otel with steering reduced to nothing (no monitors, no E-traces, a constant
  score) and no-op OpenTelemetry providers: our glue and the framework.
* ``no steering, SDK``: the same with the SDK (``BatchSpanProcessor`` into an in-memory exporter, an in-memory
  metric reader); the difference from the row above is what the contract's spans and metrics cost in the SDK.
* ``rb-otel (full)``: the default (embedded monitors and E-traces), with the SDK.
* ``rb-otel model wrapper (full)``: the same pipeline through ``rb.chat_model(model)`` instead of the middleware.

Then the SDK alone, without rb-otel or an agent: ``chat``-shaped spans (the contract's attributes) started and
ended as fast as one thread can, through a ``BatchSpanProcessor`` into an exporter that drops them.
Numbers, not assertions.

    python benchmarks/bench_floors.py [--runs 150] [--seconds 3] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from typing import Any

from bench_middleware import SCRIPT, add
from bench_middleware import _one as time_one_run
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatResult
from langchain_core.tracers.context import _configure_hooks
from opentelemetry import trace
from opentelemetry.metrics import NoOpMeterProvider
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NoOpTracerProvider

from rb_otel import ReasonBlocks
from rb_otel.integrations.langchain._guard import RunEndGuard, guard
from rb_otel.steering.monitors import MonitorRequest
from rb_otel.testing import ScriptedChatModel
from rb_otel.types import MonitorEvaluation

#: A chat span's attributes as rb-otel sets them on the workload's steps (start and end together).
CHAT_ATTRIBUTES: dict[str, Any] = {
    "gen_ai.operation.name": "chat",
    "gen_ai.provider.name": "scripted",
    "gen_ai.request.model": "scripted",
    "rb.step": 3,
    "rb.fsm_state": "NORMAL",
    "rb.difficulty": 0.42,
    "rb.monitors_fired": [],
    "rb.injection_sources": ["E1Injection"],
    "rb.monitor.composite": 0.12,
    "rb.steering.duration_ms": 0.2,
    "rb.tokens": 512,
    "rb.latency_ms": 1.5,
    "rb.tool_calls": ["add"],
    "gen_ai.response.model": "scripted",
    "gen_ai.response.finish_reasons": ["tool_calls"],
    "gen_ai.usage.input_tokens": 300,
    "gen_ai.usage.output_tokens": 212,
}


class EmptyHook(AgentMiddleware[Any, Any, Any]):
    """A ``wrap_model_call`` that only calls the handler."""

    def wrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        return handler(request)


class ModelWrapper(BaseChatModel):
    """A chat model that hands every call to ``inner`` (tools bound as the scripted model binds them: not at all)."""

    inner: Any

    @property
    def _llm_type(self) -> str:
        return "model-wrapper"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ModelWrapper:
        return self

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None, **kwargs: Any) -> ChatResult:
        return self.inner._generate(messages, stop=stop, **kwargs)  # type: ignore[no-any-return]


class NoMonitors:
    """A monitor backend that evaluates nothing."""

    def evaluate(self, request: MonitorRequest) -> MonitorEvaluation:
        return MonitorEvaluation()


class DroppingExporter(SpanExporter):
    """Keeps nothing it is given."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


def _guard_switch() -> ContextVar[RunEndGuard | None]:
    """The context variable LangChain reads the run guard from, so bare runs can go without it."""
    instance = guard()
    for var, *_ in _configure_hooks:
        if var.get() is instance:
            return var
    raise RuntimeError("rb-otel's run guard is not registered with LangChain")


def _one(agent: Any, switch: ContextVar[RunEndGuard | None], with_guard: bool) -> float:
    """One run of ``agent`` (ms), timed as ``bench_middleware`` times it, with or without the run guard."""
    token = switch.set(guard() if with_guard else None)
    try:
        return time_one_run(agent)
    finally:
        switch.reset(token)


def agent_floors(runs: int, warmup: int = 20) -> list[dict[str, float | str]]:
    model = ScriptedChatModel(script=SCRIPT)

    def agent(middleware: list[Any], chat_model: BaseChatModel = model) -> Any:
        return create_agent(chat_model, [add], middleware=middleware, system_prompt="You are a calculator.")

    def unsteered(**providers: Any) -> ReasonBlocks:
        return ReasonBlocks(monitor_backend=NoMonitors(), e_traces_enabled=False, scorer=lambda t: 0.5, **providers)

    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(BatchSpanProcessor(exporter))
    meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
    noop = unsteered(tracer_provider=NoOpTracerProvider(), meter_provider=NoOpMeterProvider())
    sdk = unsteered(tracer_provider=tracer_provider, meter_provider=meter_provider)
    full = ReasonBlocks(tracer_provider=tracer_provider, meter_provider=meter_provider)
    variants = {
        "empty hook + run guard": agent([EmptyHook()]),
        "model wrapper + run guard": agent([], ModelWrapper(inner=model)),
        "no steering, no-op OTel": agent([noop.middleware(agent_name="floors")]),
        "no steering, SDK": agent([sdk.middleware(agent_name="floors")]),
        "rb-otel (full)": agent([full.middleware(agent_name="floors")]),
        "rb-otel model wrapper (full)": agent([], full.chat_model(model, agent_name="floors-wrapper")),
    }
    switch = _guard_switch()
    bare = agent([])
    rows: list[dict[str, float | str]] = []
    for name, steered in variants.items():
        for _ in range(warmup):
            _one(bare, switch, False)
            _one(steered, switch, True)
        tracer_provider.force_flush()
        exporter.clear()
        bare_ms, steered_ms = [], []
        for _ in range(runs):
            bare_ms.append(_one(bare, switch, False))
            steered_ms.append(_one(steered, switch, True))
        tracer_provider.force_flush()
        spans = len(exporter.get_finished_spans())
        exporter.clear()
        pairs = list(zip(bare_ms, steered_ms, strict=True))
        row: dict[str, float | str] = {
            "variant": name,
            "bare_ms": statistics.median(bare_ms),
            "variant_ms": statistics.median(steered_ms),
            "ratio": statistics.median(s / b for b, s in pairs),
            "extra_ms_per_run": statistics.median(s - b for b, s in pairs),
            "spans_per_run": spans / runs,
        }
        rows.append(row)
        print(
            f"{name:30s} bare {row['bare_ms']:6.2f} ms  variant {row['variant_ms']:6.2f} ms  "
            f"ratio {row['ratio']:.3f}x  +{row['extra_ms_per_run']:.2f} ms/run  {spans / runs:g} spans/run",
            flush=True,
        )
    return rows


def sdk_span_rate(seconds: float) -> float:
    """``chat``-shaped spans per second one thread starts and ends through the SDK alone."""
    exporter = DroppingExporter()
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(exporter, max_queue_size=1 << 20))
    tracer = provider.get_tracer("floors")
    root = tracer.start_span("invoke_agent floors")
    context = trace.set_span_in_context(root)
    created = 0
    started = time.perf_counter()
    deadline = started + seconds
    while time.perf_counter() < deadline:
        for _ in range(100):
            tracer.start_span("chat scripted", context, trace.SpanKind.CLIENT, CHAT_ATTRIBUTES).end()
        created += 100
    rate = created / (time.perf_counter() - started)
    provider.shutdown()
    return rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=150, help="pairs (bare, variant) per variant")
    parser.add_argument("--warmup", type=int, default=20, help="pairs run first and not counted")
    parser.add_argument("--seconds", type=float, default=3.0, help="duration of the SDK span-rate measurement")
    parser.add_argument("--json")
    args = parser.parse_args()
    rows = agent_floors(args.runs, args.warmup)
    rate = sdk_span_rate(args.seconds)
    print(f"SDK alone: {rate:,.0f} chat-shaped spans/s from one thread (BatchSpanProcessor, exporter dropping them)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"agent": rows, "sdk_chat_spans_per_s": rate}, f, indent=1)


if __name__ == "__main__":
    main()
