"""One worker of a durable-resume test: a human-in-the-loop agent on a real checkpointer, in a fresh process.

    python tests/resume_worker.py CHECKPOINTER TRACES --part first|resume|whole --thread T [--thread T2 ...]

``CHECKPOINTER``: ``sqlite:PATH`` or ``postgres:DSN``. ``first`` runs each thread to its first interrupt and exits;
``resume`` approves every pending tool call of each thread (in the order given) until the run ends; ``whole``
runs the same agent without the human-in-the-loop middleware (the run without interrupts). Spans go to
``TRACES`` (OTLP/JSON lines, a simple span processor); it prints one JSON line per thread (``rb_run_id``,
``rb_step_log``, whether it was interrupted) and ``{"active_runs": N, "pending": N}`` at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from conftest import add, calc_script
from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langgraph.types import Command
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from rb_otel import ReasonBlocks
from rb_otel.telemetry.otlp_json import OtlpJsonSpanExporter
from rb_otel.testing import ScriptedChatModel


@contextlib.contextmanager
def checkpointer(spec: str) -> Iterator[Any]:
    kind, _, where = spec.partition(":")
    if kind == "sqlite":
        from langgraph.checkpoint.sqlite import SqliteSaver

        with SqliteSaver.from_conn_string(where) as saver:
            yield saver
    else:
        from langgraph.checkpoint.postgres import PostgresSaver

        with PostgresSaver.from_conn_string(where) as saver:
            saver.setup()
            yield saver


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("checkpointer")
    parser.add_argument("traces")
    parser.add_argument("--part", choices=["first", "resume", "whole"], required=True)
    parser.add_argument("--thread", action="append", required=True)
    args = parser.parse_args()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(OtlpJsonSpanExporter(Path(args.traces))))
    rb = ReasonBlocks(tracer_provider=provider)
    approve = Command(resume={"decisions": [{"type": "approve"}]})
    with checkpointer(args.checkpointer) as saver:
        middleware: list[Any] = [rb.middleware(agent_name="calc")]
        if args.part != "whole":
            middleware.insert(0, HumanInTheLoopMiddleware(interrupt_on={"add": True}))
        model = ScriptedChatModel(script=calc_script(2))
        agent = create_agent(model, [add], middleware=middleware, checkpointer=saver)
        for thread in args.thread:
            config = {"configurable": {"thread_id": thread}}
            if args.part == "resume":
                out = agent.invoke(approve, config)
                while "__interrupt__" in out:  # a later tool call asks again: approved in this process too
                    out = agent.invoke(approve, config)
            else:
                out = agent.invoke({"messages": [("user", "add them")]}, config)
            row = {"thread": thread, "rb_run_id": out.get("rb_run_id"), "rb_step_log": out.get("rb_step_log")}
            print(json.dumps({**row, "interrupted": "__interrupt__" in out}), flush=True)
    rb.close()
    runs = {"active_runs": middleware[-1].active_runs, "runs_in_flight": rb.telemetry.runs_in_flight}
    print(json.dumps({**runs, "pending": rb.telemetry.pending}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
