"""One worker of the chaos fleet (``chaos_fleet.py``): scripted LangChain agent runs through rb-otel's middleware,
the pilot on, baselines in a shared store, spans exported over OTLP by ``rb_otel.configure()`` to the Collector.

It runs in a process forked from a preloaded server (``multiprocessing``'s forkserver, as gunicorn's ``--preload``
or Celery's prefork pool start theirs), so fifty start in seconds on two cores; everything the process records is
made after the fork. It runs one agent run after another until the stop file exists, then closes rb-otel and the
providers (a normal exit), and keeps a ledger: one JSON line per event, written with one ``write`` each (an
append of a few hundred bytes lands whole), so a ``kill -9`` leaves every line written before it:

* ``{"e": "up", "pid", "t"}`` the worker is ready;
* ``{"e": "start", "r": run id, "t"}`` before a run, ``{"e": "end", "r", "t", "s": seconds, "cpu": process CPU
  seconds during the run, "q": baseline summaries not yet in the store}`` after it;
* ``{"e": "call", "r", "k": "chat" | "tool", "t"}`` when a model or tool call returns (its span ends now, in the
  agent's eyes: the spans rb-otel has not yet handed to the SDK are these, less the ``span`` lines);
* ``{"e": "root", "r", "tr": trace id}`` when the run's ``invoke_agent`` span starts (SDK ``on_start``);
* ``{"e": "span", "tr", "sp": span id, "n": name, "t"}`` when a span reaches the SDK's processors (``on_end``);
* ``{"e": "ack", "sp": [span ids], "t"}`` when the Collector accepted a batch (the exporter returned success);
* ``{"e": "try", "t"}`` and ``{"e": "tried", "t", "ok"}`` around each try of the OTLP exporter (one export is tries
  and waits between them while the Collector refuses; a try in progress holds the process's way out);
* ``{"e": "exit", "t", "exported", "dropped"}`` at a normal exit, ``{"e": "sigterm", "t"}`` when SIGTERM's exit
  work starts.

Times are ``time.time()`` (the receiver's clock is the same machine's).
"""

from __future__ import annotations

import json
import logging
import os
import random
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: The script of every run: ``TOOLS`` tool calls then the answer (``TOOLS + 1`` chat spans, ``TOOLS`` tool spans).
TOOLS = 2
SPANS_PER_RUN = 1 + (TOOLS + 1) + TOOLS


@dataclass(frozen=True)
class WorkerConfig:
    """What one worker process is told (picklable: it crosses to the forkserver)."""

    slot: int  # its place in the fleet (a replacement takes the slot of the worker it replaces)
    ledger: str
    log: str
    endpoint: str  # the Collector's OTLP endpoint (http://127.0.0.1:PORT)
    protocol: str  # grpc or http/protobuf
    baselines: str  # the shared store's URL
    agent: str
    stop_file: str
    model_sleep_s: float  # each model call's latency
    pace_s: float  # mean pause between runs (uniform in [0.5, 1.5] times it)
    spool: str = ""  # the fleet's export spool (RB_OTEL_EXPORT_SPOOL), "" for none


class Ledger:
    """Append-only JSON lines, one ``os.write`` each (thread-safe: ``O_APPEND`` writes of a line land whole)."""

    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def write(self, **event: Any) -> None:
        os.write(self.fd, (json.dumps(event, separators=(",", ":")) + "\n").encode())


class _Current:
    """The run this worker is in (one at a time), for the model and tool ledger lines."""

    run = ""


def _agent(cfg: WorkerConfig, ledger: Ledger, middleware: Any) -> Any:
    from langchain.agents import create_agent
    from langchain_core.messages import AIMessage
    from langchain_core.tools import tool

    from rb_otel.testing import ScriptedChatModel, tool_call

    class LedgerModel(ScriptedChatModel):
        def _generate(self, *args: Any, **kwargs: Any) -> Any:
            result = super()._generate(*args, **kwargs)
            ledger.write(e="call", r=_Current.run, k="chat", t=time.time())
            return result

    @tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        ledger.write(e="call", r=_Current.run, k="tool", t=time.time())
        return a + b

    calls = [tool_call("add", {"a": i, "b": i + 1}, f"call_{i}", content="Adding the next pair.") for i in range(TOOLS)]
    model = LedgerModel(script=[*calls, AIMessage("The answer is 4.")], sleep_s=cfg.model_sleep_s)
    return create_agent(model, [add], middleware=[middleware])


class LedgerSpans:
    """A span processor (duck-typed, as the SDK calls it) writing ``root`` and ``span`` ledger lines."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        if span.name.startswith("invoke_agent"):
            self.ledger.write(e="root", r=_Current.run, tr=format(span.context.trace_id, "032x"))

    def _on_ending(self, span: Any) -> None:
        return None

    def on_end(self, span: Any) -> None:
        context = span.context
        self.ledger.write(
            e="span",
            tr=format(context.trace_id, "032x"),
            sp=format(context.span_id, "016x"),
            n=span.name.split(" ")[0],
            t=time.time(),
        )

    def shutdown(self) -> None:
        return None

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


class LedgerAcks:
    """Wraps the exporter the counting wrapper holds: a batch the Collector accepted is an ``ack`` line."""

    def __init__(self, inner: Any, ledger: Ledger) -> None:
        self.inner = inner
        self.ledger = ledger

    def export(self, spans: Sequence[Any]) -> Any:
        from opentelemetry.sdk.trace.export import SpanExportResult

        result = self.inner.export(spans)
        if result is SpanExportResult.SUCCESS:
            self.ledger.write(e="ack", sp=[format(s.context.span_id, "016x") for s in spans], t=time.time())
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return bool(self.inner.force_flush(timeout_millis))


class LedgerTries:
    """Wraps the OTLP exporter the retries call: each try is a ``try`` line before and a ``tried`` line after."""

    def __init__(self, inner: Any, ledger: Ledger) -> None:
        self.inner = inner
        self.ledger = ledger

    def export(self, spans: Sequence[Any]) -> Any:
        from opentelemetry.sdk.trace.export import SpanExportResult

        self.ledger.write(e="try", t=time.time())
        ok = False
        try:
            result = self.inner.export(spans)
            ok = result is SpanExportResult.SUCCESS
            return result
        finally:
            self.ledger.write(e="tried", t=time.time(), ok=ok)

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return bool(self.inner.force_flush(timeout_millis))


def _cpu() -> float:
    times = os.times()
    return times.user + times.system


def work(cfg: WorkerConfig) -> None:
    """The worker's life (the target of its process)."""
    log = os.open(cfg.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.environ.update(
        OTEL_EXPORTER_OTLP_ENDPOINT=cfg.endpoint,
        OTEL_EXPORTER_OTLP_PROTOCOL=cfg.protocol,
        OTEL_METRICS_EXPORTER="none",
        OTEL_LOGS_EXPORTER="none",
        OTEL_SERVICE_NAME=f"chaos-worker-{cfg.slot}",
    )
    if cfg.spool:  # one spool for the fleet: what a worker could not hand over at its end, its successors send
        os.environ["RB_OTEL_EXPORT_SPOOL"] = cfg.spool
    logging.basicConfig(
        level=logging.WARNING, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    import rb_otel
    from rb_otel import ReasonBlocks, process_exit

    ledger = Ledger(cfg.ledger)
    providers = rb_otel.configure()  # the SIGTERM handler too
    providers.tracer_provider.add_span_processor(LedgerSpans(ledger))  # type: ignore[arg-type]
    counting = providers.span_exporter
    assert counting is not None, "configure() built no OTLP span exporter"
    retrying = counting.inner
    if hasattr(retrying, "inner"):  # rb-otel's retries around the OTLP exporter: log each try
        retrying.inner = LedgerTries(retrying.inner, ledger)
    counting.inner = LedgerAcks(counting.inner, ledger)  # type: ignore[assignment]
    process_exit.on_exit(lambda _deadline, terminating: terminating and ledger.write(e="sigterm", t=time.time()))
    rb = ReasonBlocks(
        scorer="pilot",
        baselines=cfg.baselines,
        tracer_provider=providers.tracer_provider,
        meter_provider=providers.meter_provider,
    )
    baselines = rb.scorer.baselines  # type: ignore[attr-defined]
    agent = _agent(cfg, ledger, rb.middleware(agent_name=cfg.agent, model="chaos-model"))
    ledger.write(e="up", pid=os.getpid(), t=time.time())
    stop = Path(cfg.stop_file)
    rng = random.Random(os.getpid())
    while not stop.exists():
        run = str(uuid.uuid4())
        _Current.run = run
        ledger.write(e="start", r=run, t=time.time())
        wall, cpu = time.perf_counter(), _cpu()
        agent.invoke({"messages": [("user", "add them")]}, {"run_id": uuid.UUID(run)})
        wall, cpu = time.perf_counter() - wall, _cpu() - cpu
        ledger.write(e="end", r=run, t=time.time(), s=round(wall, 5), cpu=round(cpu, 5), q=baselines.pending)
        time.sleep(cfg.pace_s * rng.uniform(0.5, 1.5))
    rb.close()
    providers.force_flush(10_000)
    providers.shutdown()
    ledger.write(e="exit", t=time.time(), exported=counting.exported, dropped=counting.dropped)


def drain(endpoint: str, protocol: str, spool: str, report: str, timeout_s: float) -> None:
    """Send what the fleet's export spool still holds once every worker has ended (the next start of a process
    with that spool, as a deployment's next worker would be): ``configure()`` with the spool, its sender waited for
    up to ``timeout_s``; ``report`` gets ``{"sent", "files", "left"}`` (files still in the spool)."""
    os.environ.update(
        OTEL_EXPORTER_OTLP_ENDPOINT=endpoint,
        OTEL_EXPORTER_OTLP_PROTOCOL=protocol,
        OTEL_METRICS_EXPORTER="none",
        OTEL_LOGS_EXPORTER="none",
        OTEL_SERVICE_NAME="chaos-spool-drain",
    )
    import rb_otel

    providers = rb_otel.configure(spool=spool)
    at_exit = providers.spool
    assert at_exit is not None, "configure(spool=...) kept no export spool"
    assert at_exit.sender is not None, "configure(spool=...) started no spool sender"
    at_exit.sender.wait(timeout_s)
    sent, files = at_exit.sender.sent, at_exit.sender.files
    providers.shutdown()
    left = len(at_exit.spool.pending()) if Path(spool).is_dir() else 0
    Path(report).write_text(json.dumps({"sent": sent, "files": files, "left": left}))


#: What the forkserver imports before it forks workers; not the OTLP exporters (gRPC is made after the fork).
PRELOAD = [
    "chaos_worker",
    "langchain.agents",
    "langchain_core.tools",
    "rb_otel.facade.reasonblocks",
    "rb_otel.backends.pilot",
    "rb_otel.backends.baselines.redis_store",
    "rb_otel.backends.baselines.sqlite_store",
    "rb_otel.testing",
    "opentelemetry.sdk.trace",
]


if __name__ == "__main__":  # for a look at one worker by hand: python chaos_worker.py CONFIG.json
    work(WorkerConfig(**json.loads(Path(sys.argv[1]).read_text())))
