"""The console table of a demo run, drawn from its real step log (the page is ``rb-otel report``'s: ``runner.py``)."""

from __future__ import annotations

from dataclasses import dataclass

from rb_otel.types import StepLogEntry

__all__ = ["RunResult", "format_table"]

_SOURCE_SHORT = {
    "MonitorSteeringInjection": "M",
    "E1Injection": "E1",
    "E2Injection": "E2",
    "E3Injection": "E3",
}

#: What the ``inj`` column's codes mean, printed under a table that shows any.
_KEY = "guidance injected: E1 lessons, E2 failure patterns, E3 standing rules, M monitor steering; xN: N of them"


@dataclass
class RunResult:
    name: str
    description: str
    run_id: str
    outcome: str
    steps: list[StepLogEntry]
    trace_id: str = ""


def _injections(entry: StepLogEntry) -> str:
    counts: dict[str, int] = {}
    for source in entry.injection_sources:
        short = _SOURCE_SHORT.get(source, source)
        counts[short] = counts.get(short, 0) + 1
    return " ".join(f"{k}x{v}" if v > 1 else k for k, v in counts.items()) or "-"


def format_table(result: RunResult) -> str:
    """A fixed-width per-step table (step, state, difficulty, model, monitors, injections, tokens)."""
    header = f"{'step':>4}  {'state':<6}  {'difficulty':>10}  {'model':<18}  {'monitors':<40}  {'inj':<8}  tokens"
    lines = [
        f"== {result.name}: {result.description}",
        f"   run {result.run_id}  outcome: {result.outcome}",
        header,
        "-" * len(header),
    ]
    for e in result.steps:
        difficulty = "-" if e.difficulty is None else f"{e.difficulty:.3f}"
        monitors = ",".join(e.monitors_fired) or "-"
        lines.append(
            f"{e.step:>4}  {e.fsm_state:<6}  {difficulty:>10}  {(e.model_id or '(agent)')[:18]:<18}  "
            f"{monitors[:40]:<40}  {_injections(e):<8}  {e.tokens}"
        )
    if any(e.injection_sources for e in result.steps):
        lines.append(f"   inj: {_KEY}")
    return "\n".join(lines)
