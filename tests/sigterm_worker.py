"""A process that gets SIGTERM mid-run: a scripted LangChain agent whose third tool call blocks.

    python tests/sigterm_worker.py TRACES.jsonl --processor simple|batch --order provider-first|rb-first
                                   --handler configure|call|none

Before the block, five spans have ended (three ``chat``, two ``execute_tool``); the blocking tool's
``execute_tool`` and the run's ``invoke_agent`` are open. It prints ``ready`` then and waits to be killed.
``--processor``: ``simple`` (a ``SimpleSpanProcessor``) or ``batch``; ``--order``: the provider made before
``ReasonBlocks`` (and passed to it) or after it (installed as the global provider); ``--handler``: SIGTERM
handled by ``rb_otel.configure()`` (its providers), by ``rb_otel.handle_sigterm()``, or not at all.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from langchain.agents import create_agent
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

import rb_otel
from rb_otel import ReasonBlocks
from rb_otel.telemetry.otlp_json import OtlpJsonSpanExporter
from rb_otel.testing import ScriptedChatModel, tool_call


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def block() -> str:
    """Wait for a long time."""
    print("ready", flush=True)
    time.sleep(60)
    return "done"


def _provider(args: argparse.Namespace) -> TracerProvider:
    if args.handler == "configure":
        return rb_otel.configure(traces_file=args.traces).tracer_provider  # batch, and the SIGTERM handler
    provider = TracerProvider()
    exporter = OtlpJsonSpanExporter(Path(args.traces))
    processor = SimpleSpanProcessor(exporter) if args.processor == "simple" else BatchSpanProcessor(exporter)
    provider.add_span_processor(processor)
    return provider


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("traces")
    parser.add_argument("--processor", choices=["simple", "batch"], default="simple")
    parser.add_argument("--order", choices=["provider-first", "rb-first"], default="provider-first")
    parser.add_argument("--handler", choices=["configure", "call", "none"], default="none")
    args = parser.parse_args()
    if args.order == "provider-first":
        rb = ReasonBlocks(tracer_provider=_provider(args))
    else:
        rb = ReasonBlocks()
        trace.set_tracer_provider(_provider(args))
    if args.handler == "call":
        rb_otel.handle_sigterm()
    script = [
        tool_call("add", {"a": 1, "b": 2}, "call_1", content="Adding first."),
        tool_call("add", {"a": 3, "b": 4}, "call_2", content="Adding again."),
        tool_call("block", {}, "call_3", content="Now waiting."),
        AIMessage("never reached"),
    ]
    agent = create_agent(ScriptedChatModel(script=script), [add, block], middleware=[rb.middleware(agent_name="t")])
    agent.invoke({"messages": [("user", "go")]})
    return 0


if __name__ == "__main__":
    sys.exit(main())
