"""One benchmark variant in its own process (instrumentors patch LangChain globally), driven by ``compare.py``.

    python benchmarks/peer_run.py VARIANT [--warmup 20]

It builds the variant's agents, warms them up and prints ``{"ready": true, "spans_per_run": ..., "calls_per_run":
{"5": ..., "1": ...}}`` (Python function calls per run of each workload, counted by cProfile); then each
line ``CALLS RUNS`` on stdin (``5 4``: four runs of the 5-call workload; ``1 4``: of the 1-call one) is answered
with the JSON list of those runs' times in ms (the span exporter is drained after each command, outside the
timing), and ``quit`` with ``{"rss_growth_mb": ...}``. ``CALLS`` may be any number of model calls (``100 2``: two
runs of 100 steps, each ``CALLS - 1`` tool calls and an answer); ``CALLS RUNS AT_ONCE`` (``5 200 200``) starts the
runs on ``AT_ONCE`` threads together and answers with one figure, the batch's wall time divided by its runs.
``--count-steps 10,100`` adds those run lengths to ``calls_per_run``. The coordinator keeps every variant's process
alive and lets them take turns, so a slow minute of the machine hits every variant alike.

Variants: ``bare``, ``rb-otel`` (the middleware), ``rb-otel-stateless`` (the middleware with
``step_log_in_state=False``: no graph state), ``rb-otel-unsteered`` (the middleware with its steering reduced to
nothing: a constant score, no monitors, no E-traces; the same spans and metrics), ``rb-otel-wrapper``
(``rb.chat_model``), ``otel-genai`` (the
official OpenTelemetry GenAI LangChain instrumentation, ``opentelemetry-instrumentation-genai-langchain``),
``openllmetry``, ``openllmetry-nocontent`` (``TRACELOOP_TRACE_CONTENT=false``), ``openinference``, ``agento11y``
(its generation export discarded in-process, spans and metrics to the same providers; it is a callback handler,
so it is passed in the run's config). The workload is the performance issue's: create_agent with a deterministic
scripted model, 5 model calls and 4 tool calls per run, sync invoke, spans through a BatchSpanProcessor into an
in-memory exporter (cleared between runs), metrics into an in-memory reader.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import json
import os
import pstats
import sys
import threading
import time
from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from rb_otel.testing import ScriptedChatModel, tool_call


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def script_of(calls: int) -> list[AIMessage]:
    """A run of ``calls`` model calls: ``calls - 1`` tool calls, then the answer."""
    steps = [tool_call("add", {"a": i, "b": i + 1}, f"c{i}", content=f"Adding {i} and {i + 1} next.")
             for i in range(calls - 1)]  # fmt: skip
    return [*steps, AIMessage("The answer is 30.")]


SCRIPT = script_of(5)
PROMPT = "You are a calculator."
#: The 1-call workload: one model call, no tool (the fixed per-run cost of each package).
ONE_CALL = [AIMessage("The answer is 3.")]


class _OffThread:
    """While a count is taken (:func:`profiled`): the profiles of the batches rb-otel's flusher thread did."""

    profiles: list[cProfile.Profile] | None = None


def _profile_flushes_off_the_agents_thread() -> None:
    """Have every batch of rb-otel's finished work that its flusher thread does during a count profiled there.

    cProfile sees only the thread it runs in, and the flusher takes over the queue of a run that outlasts the
    batch window (docs/telemetry.md, "Finished work is batched"): every few steps of a long run, and any run
    under the profiler on a busy machine. Uncounted, that work would make rb-otel look cheaper than it is. Call
    this on the thread the counted runs are made on."""
    from rb_otel.telemetry.batch import Batch

    flush = Batch.flush
    agents_thread = threading.get_ident()  # the counted runs' (main's): its flushes are in its own profile

    def flush_counted(batch: Batch) -> None:  # two calls of its own a flush on the agent's thread, counted
        profiles = _OffThread.profiles
        if profiles is None or threading.get_ident() == agents_thread:
            return flush(batch)
        profile = cProfile.Profile()
        profile.enable()
        try:
            return flush(batch)
        finally:
            profile.disable()
            profiles.append(profile)

    Batch.flush = flush_counted  # type: ignore[method-assign]


def profiled(run: Any, runs: int = 5) -> pstats.Stats:
    """cProfile's statistics of ``runs`` calls of ``run`` on this thread, with the batches rb-otel's flusher thread
    did for them meanwhile (:func:`_profile_flushes_off_the_agents_thread`)."""
    _OffThread.profiles = off_thread = []
    profile = cProfile.Profile()
    profile.enable()
    try:
        for _ in range(runs):
            run()
    finally:
        profile.disable()
        _OffThread.profiles = None
    return pstats.Stats(profile, *off_thread)


def _calls_per_run(run: Any, runs: int = 5) -> float:
    """Python function calls per run (cProfile's count: deterministic, unlike the timings of a busy machine)."""
    return float(profiled(run, runs).total_calls) / runs  # type: ignore[attr-defined]


#: Where a Python call goes, by the file of its function: rb-otel's layers first (a path fragment each), then the
#: official GenAI instrumentation, the OpenTelemetry SDK and the framework. The first fragment that matches wins.
_LC = "rb_otel/integrations/langchain/"
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("the scripted model (rb_otel.testing)", ("rb_otel/testing",)),
    ("rb-otel: steering step", ("rb_otel/steering/",)),
    ("rb-otel: callbacks", tuple(_LC + m for m in ("_guard", "lifecycle", "model_calls", "tool_calls"))),
    ("rb-otel: LangGraph state", tuple(_LC + m for m in ("state", "resume", "_graph_context", "runs"))),
    ("rb-otel: attribute mapping", tuple(f"rb_otel/telemetry/{m}" for m in ("attributes", "content", "sums",
                                                                             "run_tally"))),
    ("rb-otel: export hand-over", ("rb_otel/telemetry/batch", "rb_otel/telemetry/export")),
    ("rb-otel: span building", ("rb_otel/telemetry/",)),
    ("rb-otel: middleware and the rest", ("rb_otel/",)),
    ("official GenAI instrumentation", ("opentelemetry/instrumentation/genai", "opentelemetry/util/genai")),
    ("other instrumentation", ("opentelemetry/instrumentation/", "openinference/", "traceloop/", "agento11y")),
    ("OpenTelemetry SDK and API", ("opentelemetry/",)),
    ("LangChain and LangGraph", ("langchain", "langgraph", "langsmith")),
)  # fmt: skip


def _layer(filename: str) -> str:
    path = filename.replace("\\", "/")
    for name, fragments in LAYERS:
        if any(f in path for f in fragments):
            return name
    return "Python and the rest"


#: The benchmark's own code (the agent's tool, the driver): the agent's, so never attributed to a caller.
_HERE = os.path.dirname(os.path.abspath(__file__))


def _made_by_caller(filename: str) -> bool:
    """Code that is no layer of its own: a builtin (``len``, ``dict.get``, a C method), generated code, the standard
    library, or a library outside :data:`LAYERS` (pydantic, numpy). Its calls belong to whoever made them."""
    if filename in ("~", "") or filename.startswith("<"):
        return True
    return _layer(filename) == "Python and the rest" and os.path.dirname(filename) != _HERE


_Func = tuple[str, int, str]


def _shares(
    func: _Func, stats: dict[_Func, Any], memo: dict[_Func, dict[str, float]], visiting: set[_Func]
) -> dict[str, float]:
    """The layers ``func``'s calls belong to, as fractions: its own layer, or for a function made by its caller the
    layers of its callers, weighted by how often each called it (through chains of standard-library calls)."""
    if not _made_by_caller(func[0]):
        return {_layer(func[0]): 1.0}
    if func in memo:
        return memo[func]
    if func in visiting:  # recursion: its share comes from the callers outside the cycle
        return {}
    visiting.add(func)
    weights: dict[str, float] = {}
    entry = stats.get(func)
    for caller, (_cc, calls, _tt, _ct) in (entry[4] if entry else {}).items():
        for name, fraction in _shares(caller, stats, memo, visiting).items():
            weights[name] = weights.get(name, 0.0) + calls * fraction
    visiting.discard(func)
    total = sum(weights.values())
    memo[func] = {k: v / total for k, v in weights.items()} if total else {"Python and the rest": 1.0}
    return memo[func]


def layers_per_run(run: Any, runs: int = 5) -> dict[str, dict[str, float]]:
    """Python calls and own time (ms) per run of each layer (cProfile: calls are deterministic, times are not and
    include the profiler's overhead; read them as shares). A call to code that is no layer of its own (a builtin,
    the standard library, pydantic, numpy) counts for the layer that made it (:func:`_shares`), so rb-otel's rows
    include the ``uuid``, ``enum`` or ``numpy`` work its code asks for, and "Python and the rest" is the
    benchmark's own code (the agent's tool) and what no layer asked for."""
    stats = profiled(run, runs).stats  # type: ignore[attr-defined]
    out: dict[str, dict[str, float]] = {}
    memo: dict[_Func, dict[str, float]] = {}
    for func, (_primitive, calls, own, _cumulative, _callers) in stats.items():
        for name, fraction in _shares(func, stats, memo, set()).items():
            layer = out.setdefault(name, {"calls": 0.0, "ms": 0.0})
            layer["calls"] += calls * fraction / runs
            layer["ms"] += own * 1000 * fraction / runs
    return dict(sorted(out.items(), key=lambda kv: -kv[1]["calls"]))


def _rss_mb() -> float:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * 4096 / 1e6


class _DiscardGenerations:
    """agento11y's generation exporter protocol, accepting everything and sending nothing."""

    def export_generations(self, request: Any) -> Any:
        from agento11y.models import ExportGenerationResult, ExportGenerationsResponse

        return ExportGenerationsResponse(
            results=[ExportGenerationResult(generation_id=g.id, accepted=True) for g in request.generations]
        )

    def export_workflow_steps(self, request: Any) -> Any:
        from agento11y.models import ExportWorkflowStepsResponse

        return ExportWorkflowStepsResponse(results=[])

    def shutdown(self) -> None:
        pass


def instrument(
    variant: str, tracer_provider: TracerProvider, meter_provider: MeterProvider
) -> tuple[list[Any], dict[str, Any]]:
    """Instrument for ``variant``: the agent middleware and the invoke config it needs."""
    if variant == "rb-otel":
        from rb_otel import ReasonBlocks

        rb = ReasonBlocks(tracer_provider=tracer_provider, meter_provider=meter_provider)
        return [rb.middleware(agent_name="bench")], {}
    if variant == "rb-otel-stateless":  # the middleware without its graph state (step_log_in_state=False)
        from rb_otel import ReasonBlocks

        rb = ReasonBlocks(tracer_provider=tracer_provider, meter_provider=meter_provider)
        return [rb.middleware(agent_name="bench", step_log_in_state=False)], {}
    if variant == "rb-otel-unsteered":  # steering reduced to nothing: what the rest of the middleware costs
        from bench_floors import NoMonitors

        from rb_otel import ReasonBlocks

        rb = ReasonBlocks(
            tracer_provider=tracer_provider,
            meter_provider=meter_provider,
            monitor_backend=NoMonitors(),
            e_traces_enabled=False,
            scorer=lambda text: 0.5,
        )
        return [rb.middleware(agent_name="bench")], {}
    if variant == "rb-otel-wrapper":  # the model wrapper: main() wraps the agents' model with this ReasonBlocks
        from rb_otel import ReasonBlocks

        return [], {"rb": ReasonBlocks(tracer_provider=tracer_provider, meter_provider=meter_provider)}
    if variant == "agento11y":
        from agento11y import Client
        from agento11y.config import ClientConfig
        from agento11y_langchain import Agento11yLangChainHandler

        client = Client(
            ClientConfig(
                tracer_provider=tracer_provider,
                meter_provider=meter_provider,
                generation_exporter=_DiscardGenerations(),
            )
        )
        return [], {"callbacks": [Agento11yLangChainHandler(client=client, agent_name="bench")]}
    if variant.startswith("openllmetry"):
        if variant == "openllmetry-nocontent":
            os.environ["TRACELOOP_TRACE_CONTENT"] = "false"
        from opentelemetry.instrumentation.langchain import LangchainInstrumentor

        LangchainInstrumentor().instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)
    elif variant == "otel-genai":  # the official OpenTelemetry GenAI instrumentation (opentelemetry-python-contrib)
        from opentelemetry.instrumentation.genai.langchain import LangChainInstrumentor as OfficialInstrumentor

        OfficialInstrumentor().instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)
    elif variant == "openinference":
        from openinference.instrumentation.langchain import LangChainInstrumentor

        LangChainInstrumentor().instrument(tracer_provider=tracer_provider)
    elif variant != "bare":
        raise SystemExit(f"unknown variant {variant}")
    return [], {}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("variant")
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--count-steps", default="", help="more run lengths for calls_per_run, e.g. 10,100")
    args = parser.parse_args()
    _profile_flushes_off_the_agents_thread()
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(BatchSpanProcessor(exporter))
    meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
    middleware, config = instrument(args.variant, tracer_provider, meter_provider)
    rb = config.pop("rb", None)

    def model(script: list[AIMessage]) -> Any:
        chat_model = ScriptedChatModel(script=script)
        return rb.chat_model(chat_model, agent_name="bench") if rb is not None else chat_model

    agents = {
        calls: create_agent(model(script), [add], middleware=middleware, system_prompt=PROMPT)
        for calls, script in ((5, SCRIPT), (1, ONE_CALL))
    }
    # a long run needs more graph steps than LangGraph's default limit (a model and a tool node per call)
    long_config = {**config, "recursion_limit": 4 * 1000}

    def invoke(calls: int) -> None:
        if calls not in agents:
            agents[calls] = create_agent(model(script_of(calls)), [add], middleware=middleware, system_prompt=PROMPT)
        agents[calls].invoke({"messages": [("user", "what is 1+2?")]}, config=config if calls <= 5 else long_config)

    def at_once(calls: int, runs: int, threads: int) -> float:
        """Wall ms per run of ``runs`` runs started on ``threads`` threads together."""
        from concurrent.futures import ThreadPoolExecutor

        invoke(calls)  # built before the clock starts
        with ThreadPoolExecutor(max_workers=threads) as pool:
            started = time.perf_counter()
            for future in [pool.submit(invoke, calls) for _ in range(runs)]:
                future.result()
            return (time.perf_counter() - started) * 1000 / runs

    def drain() -> None:  # so no variant is slowed by a growing heap of finished spans
        tracer_provider.force_flush()
        exporter.clear()

    for _ in range(args.warmup):
        invoke(5)
    tracer_provider.force_flush()
    spans_per_run = len(exporter.get_finished_spans()) / max(args.warmup, 1)
    for _ in range(args.warmup):
        invoke(1)
    drain()
    lengths = (5, 1, *(int(x) for x in args.count_steps.split(",") if x))
    for n in lengths[2:]:
        invoke(n)  # warm: the agent is built on its first run
    calls = {n: _calls_per_run(lambda n=n: invoke(n)) for n in lengths}
    drain()
    layers = layers_per_run(lambda: invoke(5))
    drain()
    gc.collect()
    rss_before = _rss_mb()
    ready = {"ready": True, "variant": args.variant, "spans_per_run": spans_per_run, "calls_per_run": calls,
             "layers": layers}  # fmt: skip
    print(json.dumps(ready), flush=True)
    for line in sys.stdin:
        command = line.split()
        if not command or command[0] == "quit":
            break
        calls, runs = int(command[0]), int(command[1])
        if len(command) > 2:
            print(json.dumps([at_once(calls, runs, int(command[2]))]), flush=True)
            drain()
            continue
        timings = []
        for _ in range(runs):
            started = time.perf_counter()
            invoke(calls)
            timings.append((time.perf_counter() - started) * 1000)
        drain()
        print(json.dumps(timings), flush=True)
    gc.collect()
    print(json.dumps({"rss_growth_mb": _rss_mb() - rss_before}), flush=True)


if __name__ == "__main__":
    main()
