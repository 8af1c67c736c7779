"""Console table and self-contained HTML report of demo runs, drawn from real step logs."""

from __future__ import annotations

import html
import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from rb_otel.report.html import STATE_COLOURS  # one palette for both reports
from rb_otel.types import StepLogEntry

__all__ = ["RunResult", "format_table", "html_report"]

_SOURCE_SHORT = {
    "MonitorSteeringInjection": "M",
    "E1Injection": "E1",
    "E2Injection": "E2",
    "E3Injection": "E3",
}


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
    return "\n".join(lines)


def _timeline_svg(steps: Sequence[StepLogEntry], width: int = 900, height: int = 220) -> str:
    left, right, top, bottom = 40, 10, 18, 40
    plot_w, plot_h = width - left - right, height - top - bottom
    n = max(len(steps) - 1, 1)

    def x(i: int) -> float:
        return left + plot_w * i / n

    def y(v: float) -> float:
        return top + plot_h * (1 - v)

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img">',
        f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="#fafafa" stroke="#ddd"/>',
    ]
    for level, label in ((0.2, "FAST < 0.2"), (0.6, "SLOW > 0.6"), (0.85, "SKIP > 0.85")):
        parts.append(
            f'<line x1="{left}" x2="{left + plot_w}" y1="{y(level):.1f}" y2="{y(level):.1f}" '
            f'stroke="#bbb" stroke-dasharray="4 3"/>'
            f'<text x="{left + plot_w - 4}" y="{y(level) - 3:.1f}" font-size="10" text-anchor="end" '
            f'fill="#888">{label}</text>'
        )
    scored = [(i, e) for i, e in enumerate(steps) if e.difficulty is not None]
    for (i0, a), (i1, b) in itertools.pairwise(scored):
        assert a.difficulty is not None
        assert b.difficulty is not None
        parts.append(
            f'<line x1="{x(i0):.1f}" y1="{y(a.difficulty):.1f}" x2="{x(i1):.1f}" '
            f'y2="{y(b.difficulty):.1f}" stroke="{STATE_COLOURS.get(b.fsm_state, "#555")}" '
            f'stroke-width="2"/>'
        )
    for i, e in enumerate(steps):
        colour = STATE_COLOURS.get(e.fsm_state, "#555")
        value = 0.0 if e.difficulty is None else e.difficulty
        title = html.escape(
            f"step {e.step}: {e.fsm_state}, difficulty "
            f"{'-' if e.difficulty is None else f'{e.difficulty:.3f}'}, monitors "
            f"{', '.join(e.monitors_fired) or '-'}, injections {_injections(e)}, "
            f"model {e.model_id or '(agent)'}"
        )
        parts.append(
            f'<circle cx="{x(i):.1f}" cy="{y(value):.1f}" r="4" fill="{colour}"><title>{title}</title></circle>'
        )
        if e.monitors_fired:
            parts.append(f'<path d="M{x(i):.1f} {top - 2} l-4 -7 h8 z" fill="#6a1b9a"><title>{title}</title></path>')
        if e.injection_sources:
            parts.append(
                f'<rect x="{x(i) - 3:.1f}" y="{top + plot_h + 6}" width="6" height="6" fill="#00838f">'
                f"<title>{html.escape(_injections(e))}</title></rect>"
            )
        if e.model_id:
            parts.append(
                f'<rect x="{x(i) - 4:.1f}" y="{top + plot_h + 15}" width="8" height="5" fill="#ef6c00">'
                f"<title>routed to {html.escape(e.model_id)}</title></rect>"
            )
        if i % max(1, len(steps) // 12) == 0:
            parts.append(
                f'<text x="{x(i):.1f}" y="{height - 4}" font-size="10" text-anchor="middle" fill="#666">{e.step}</text>'
            )
    parts.append("</svg>")
    return "".join(parts)


def html_report(results: Sequence[RunResult], *, title: str = "rb-otel demo") -> str:
    """One self-contained HTML page: a timeline picture and a step table per run."""
    legend = " ".join(f'<span style="color:{c}">&#9679; {s}</span>' for s, c in STATE_COLOURS.items() if s)
    sections = []
    for r in results:
        rows = "".join(
            f"<tr><td>{e.step}</td><td style='color:{STATE_COLOURS.get(e.fsm_state, '#555')}'>{e.fsm_state}</td>"
            f"<td>{'-' if e.difficulty is None else f'{e.difficulty:.3f}'}</td>"
            f"<td>{html.escape(e.model_id or '(agent)')}</td>"
            f"<td>{html.escape(', '.join(e.monitors_fired) or '-')}</td><td>{html.escape(_injections(e))}</td>"
            f"<td>{e.tokens}</td></tr>"
            for e in r.steps
        )
        # The states in the order the run first reached them: "max state NORMAL" read wrong beside a chart ending
        # in FAST (FAST is the calmer state, so it never is the "max").
        reached = list(dict.fromkeys(e.fsm_state for e in r.steps if e.fsm_state))
        summary = (
            f"{len(r.steps)} model calls, states reached {', '.join(reached) or '-'}, outcome "
            f"<b>{html.escape(r.outcome)}</b>"
        )
        trace = f" &middot; trace <code>{html.escape(r.trace_id)}</code>" if r.trace_id else ""
        sections.append(
            f"<section><h2>{html.escape(r.name)}</h2><p>{html.escape(r.description)}</p>"
            f"<p>run <code>{html.escape(r.run_id)}</code>{trace} &middot; {summary}</p>"
            f"{_timeline_svg(r.steps)}<details><summary>steps</summary><table><tr><th>step</th><th>state</th>"
            f"<th>difficulty</th><th>model</th><th>monitors</th><th>injections</th><th>tokens</th></tr>{rows}"
            f"</table></details></section>"
        )
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title><style>"
        "body{font-family:system-ui,sans-serif;margin:2em;color:#222}section{margin-bottom:2.5em}"
        "table{border-collapse:collapse;font-size:13px}td,th{border-bottom:1px solid #eee;padding:2px 8px;"
        "text-align:left}code{background:#f3f3f3;padding:0 3px}</style></head><body>"
        f"<h1>{html.escape(title)}</h1><p>Difficulty per model call, coloured by FSM state. {legend}. "
        "<span style='color:#6a1b9a'>&#9660;</span> monitors fired, "
        "<span style='color:#00838f'>&#9632;</span> guidance injected, "
        "<span style='color:#ef6c00'>&#9644;</span> routed to another model.</p>" + "".join(sections) + "</body></html>"
    )
