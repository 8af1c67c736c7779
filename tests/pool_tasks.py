"""Tasks a process pool runs (importable by spawn and forkserver workers): one steered agent run each.

Each worker process sets itself up on its first task: a ``BatchSpanProcessor`` exporting to a file of its own
(``spans-<pid>.jsonl`` in the folder given) and a ``ReasonBlocks`` with the pilot's baselines in the shared
store. Nothing is closed or flushed by the task: what reaches the file and the store does so on the worker's
way out.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

_WORKER: dict[str, Any] = {}


def _setup(folder: str, store: str) -> Any:
    if _WORKER.get("pid") != os.getpid():
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        from rb_otel import ReasonBlocks
        from rb_otel.telemetry.otlp_json import OtlpJsonSpanExporter

        provider = TracerProvider()
        exporter = OtlpJsonSpanExporter(Path(folder) / f"spans-{os.getpid()}.jsonl")
        provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=60_000))
        _WORKER.update(pid=os.getpid(), rb=ReasonBlocks(tracer_provider=provider, scorer="pilot", baselines=store))
    return _WORKER["rb"]


def one_run(job: tuple[str, str, int]) -> int:
    """Run agent run ``i``; returns the worker's pid."""
    from conftest import add, calc_script
    from langchain.agents import create_agent

    from rb_otel.testing import ScriptedChatModel

    folder, store, i = job
    rb = _setup(folder, store)
    model = ScriptedChatModel(script=calc_script(2, thought=f"Adding, pass {i}."))
    agent = create_agent(model, [add], middleware=[rb.middleware(agent_name="pooled", model="m")])
    agent.invoke({"messages": [("user", "add them")]})
    return os.getpid()
