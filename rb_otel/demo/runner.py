"""``rb-otel demo``: run the scenarios through real agents and the real pipeline, then export and report.

The page (``report.html``) is ``rb-otel report``'s, drawn from the spans the runs exported (collected in memory as
they end, so the page is there whether they went to files or to an OTLP endpoint).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from langchain.agents import create_agent
from langchain_core.messages import HumanMessage

from rb_otel.demo.experiment import run_experiment
from rb_otel.demo.report import RunResult, format_table
from rb_otel.demo.scenarios import SCENARIOS, Scenario, demo_tools
from rb_otel.facade.reasonblocks import ReasonBlocks
from rb_otel.files import write_atomically
from rb_otel.report.html import render_report
from rb_otel.report.traces import runs_from_spans
from rb_otel.steering.etraces import InMemoryPatternStore, load_default_library
from rb_otel.telemetry.names import OUTCOME_SUCCESS
from rb_otel.telemetry.otlp_json import CollectedSpans
from rb_otel.telemetry.setup import Providers, configure
from rb_otel.testing import ScriptedChatModel

__all__ = ["DemoOptions", "demo_outputs", "run_demo"]

SYSTEM_PROMPT = "You are a careful software engineer. Use the tools to complete the task."
#: An instance-level (E1) lesson, as a team would distil it from an earlier run of its own.
DEMO_LESSON = {
    "title": "KeyError from session.get in the login tests",
    "guidance": "Last time this KeyError traceback came from an expired session cookie: session.get fails when "
    "the cookie parser drops the session id. Check the expiry handling in src/auth.py before editing anything.",
}


@dataclass
class DemoOptions:
    out_dir: Path = Path("out")
    scenarios: Sequence[str] = field(default_factory=lambda: list(SCENARIOS))
    prometheus_port: int | None = None
    hold_seconds: float = 0.0
    repeat: int = 1
    quiet: bool = False
    providers: Providers | None = None  # tests inject in-memory providers
    experiment_units: int = 0  # > 0: also run the A/B experiment with this many users and print its report

    def __post_init__(self) -> None:
        """A run that would do nothing is refused before it writes anything (an empty page over a full one)."""
        if self.repeat < 1:
            raise ValueError(f"repeat must be 1 or more, got {self.repeat!r}")
        if self.experiment_units < 0:
            raise ValueError(f"experiment_units must be 0 (none) or more, got {self.experiment_units!r}")
        if not self.hold_seconds >= 0:
            raise ValueError(f"hold_seconds must be 0 or more, got {self.hold_seconds!r}")


def _run_scenario(rb: ReasonBlocks, scenario: Scenario, agent_model: ScriptedChatModel) -> RunResult:
    mw = rb.middleware(
        agent_name=f"demo-{scenario.name}",
        task=scenario.task,
        model=agent_model.model_name,
        metadata={"scenario": scenario.name},
    )
    agent = create_agent(agent_model, demo_tools(), middleware=[mw], system_prompt=SYSTEM_PROMPT)
    outcome = scenario.outcome
    # A task the agent answers but fails is a failure: the run is marked so before it ends (``with mw``)
    verdict = mw if outcome != OUTCOME_SUCCESS else contextlib.nullcontext()
    with rb.telemetry.enclosing_span(f"demo {scenario.name}") as outer:
        langchain_run_id = uuid.uuid4()  # rb-otel names the run after the LangChain run id
        run_id = str(langchain_run_id)
        try:
            with verdict:
                agent.invoke(
                    {"messages": [HumanMessage(scenario.task)]}, {"recursion_limit": 200, "run_id": langchain_run_id}
                )
                if outcome != OUTCOME_SUCCESS:
                    mw.mark_failure(outcome)
        except Exception as exc:
            if not scenario.expects_error:
                raise
            outcome = f"failure: {type(exc).__name__}"
        trace_id = outer.trace_id
    steps = mw.step_log_for(run_id) or mw.step_log
    return RunResult(scenario.name, scenario.description, run_id, outcome, list(steps), trace_id)


def _write_step_logs(path: Path, results: Sequence[RunResult]) -> None:
    """The runs' step logs in the ``steplog`` import format (a header line per run, then its entries), written
    whole or not at all."""
    lines = []
    for r in results:
        header = {"run_id": r.run_id, "agent_name": f"demo-{r.name}", "outcome": r.outcome, "trace_id": r.trace_id}
        lines.append(json.dumps(header))
        lines += [json.dumps(entry.as_dict()) for entry in r.steps]
    write_atomically(path, "".join(line + "\n" for line in lines))


def demo_outputs(out: Path) -> list[Path]:
    """Every file the demo may write in ``out`` (checked before it starts; the trace and metric files only when
    spans and metrics go to files)."""
    return [out / name for name in ("traces.jsonl", "metrics.jsonl", "report.html", "steplogs.jsonl")]


def _page(spans: CollectedSpans, results: Sequence[RunResult]) -> str:
    """``rb-otel report``'s page of the scenarios' runs (not the experiment's, nor repeats), with their descriptions."""
    described = {r.run_id: r.description for r in results}
    runs = [run for run in runs_from_spans(spans.objects()) if run.run_id in described]
    return render_report(runs, title="rb-otel demo", descriptions=described)


def demo_providers(out: Path, prometheus_port: int | None = None) -> Providers:
    """The demo's providers: OTLP when ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set, else OTLP/JSON files in ``out``,
    each replaced whole when the providers shut down (never touched when they are not the exporter chosen)."""
    return configure(
        service_name="rb-otel-demo",
        traces_file=out / "traces.jsonl",
        metrics_file=out / "metrics.jsonl",
        prometheus_port=prometheus_port,
        fresh_files=True,
    )


def run_demo(options: DemoOptions, *, stream: TextIO = sys.stdout) -> list[RunResult]:
    """Run every selected scenario; returns the results (the report and files are written too)."""
    say: Callable[[str], None] = (lambda s: None) if options.quiet else (lambda s: print(s, file=stream, flush=True))
    out = options.out_dir
    out.mkdir(parents=True, exist_ok=True)
    providers = options.providers or demo_providers(out, options.prometheus_port)
    for line in providers.descriptions:
        say(f"exporting {line}")
    page_spans = CollectedSpans(providers.tracer_provider)  # the page's copy of what the runs export
    strong = ScriptedChatModel(script=[], model_name="strong-1")
    store = InMemoryPatternStore(load_default_library())
    store.add_e1_pattern(DEMO_LESSON, pattern_id="e1-demo-session-keyerror")
    rb = ReasonBlocks(
        pattern_store=store,
        tracer_provider=providers.tracer_provider,
        meter_provider=providers.meter_provider,
        logger_provider=providers.logger_provider,
        model_routing={"SLOW": strong, "SKIP": strong},
    )
    results: list[RunResult] = []
    page = ""
    try:
        for round_ in range(options.repeat):
            for name in options.scenarios:
                scenario = SCENARIOS[name]()
                strong.script = scenario.script  # the routed model continues the same conversation
                model = ScriptedChatModel(script=scenario.script, model_name="agent-1")
                started = time.perf_counter()
                say(f"[{round_ + 1}/{options.repeat}] running {name}: {scenario.description} ...")
                result = _run_scenario(rb, scenario, model)
                say(
                    f"    {len(result.steps)} model calls in {time.perf_counter() - started:.2f} s, "
                    f"outcome {result.outcome}"
                )
                if round_ == 0:
                    results.append(result)
                    say(format_table(result))
            if round_ == 0:  # the page shows the first round; later rounds and the experiment are not kept
                rb.flush()  # the runs' batched span ends, before the page reads them
                page = _page(page_spans, results)
                page_spans.stop()
        if options.experiment_units:
            rb.flush()  # the experiment reads its runs back from the spans exported so far
            run_experiment(rb, providers.traces_so_far(), units=options.experiment_units, say=say)
        report = write_atomically(out / "report.html", page)
        _write_step_logs(out / "steplogs.jsonl", results)
        say(f"report: {report}  step logs: {out / 'steplogs.jsonl'}")
        if options.hold_seconds > 0:
            say(f"serving metrics for {options.hold_seconds:.0f} s more ...")
            time.sleep(options.hold_seconds)
    finally:
        rb.flush()
        if options.providers is None:
            providers.shutdown()
    if os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        say(f"spans and metrics sent to {os.environ['OTEL_EXPORTER_OTLP_ENDPOINT']}")
    elif options.providers is None:
        say(f"spans: {out / 'traces.jsonl'}  metrics: {out / 'metrics.jsonl'} (OTLP-JSON lines)")
    return results
