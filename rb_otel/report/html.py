"""A self-contained HTML page for any runs read from OTLP/JSON (``rb-otel report``): per run a timeline with
durations, difficulty over steps coloured by FSM state, and a drill-down per step. Plain SVG, no scripts."""

from __future__ import annotations

import html
import math
from collections.abc import Sequence

from rb_otel.report.traces import ReportRun, ReportStep

__all__ = ["STATE_COLOURS", "render_report"]

STATE_COLOURS = {
    "INIT": "#9e9e9e",
    "FAST": "#2e7d32",
    "NORMAL": "#1565c0",
    "SLOW": "#ef6c00",
    "SKIP": "#c62828",
    "": "#607d8b",  # imported steps that were not rescored
}
_TOOL = "#8d6e63"
_ERROR = "#c62828"
_WIDTH, _LEFT, _RIGHT = 960, 70, 20

_CSS = """
body{font-family:system-ui,sans-serif;margin:2rem;max-width:1040px;color:#212121}
h2{margin-top:2.5rem;border-top:1px solid #ddd;padding-top:1rem}
.meta{color:#555}.failure{color:#c62828;font-weight:600}.success{color:#2e7d32;font-weight:600}
.legend span{display:inline-block;margin-right:1rem}.swatch{display:inline-block;width:.9rem;height:.9rem;
vertical-align:middle;margin-right:.3rem;border-radius:2px}
details{margin:.2rem 0;padding:.2rem .5rem;border-left:4px solid #ccc}details.error{border-left-color:#c62828}
summary{cursor:pointer}pre{white-space:pre-wrap;background:#f7f7f7;padding:.4rem;margin:.3rem 0;font-size:.85rem}
.err{color:#c62828;font-weight:600}.muted{color:#777}svg text{font-size:11px;fill:#444}
"""


def _e(value: object) -> str:
    return html.escape(str(value))


def _ticks(span: float, target: int = 6) -> list[float]:
    """Round tick values from 0 to ``span``."""
    if span <= 0:
        return [0.0]
    raw = span / target
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)
    return [i * step for i in range(int(span / step) + 1)]


def _timeline(run: ReportRun) -> str:
    """Model calls on one lane coloured by state, tools on a second (red when they failed), on a time axis."""
    duration = max(run.end - run.start, 1e-6)
    inner = _WIDTH - _LEFT - _RIGHT

    def x(t: float) -> float:
        return _LEFT + (t - run.start) / duration * inner

    parts = [f'<svg width="{_WIDTH}" height="96" role="img" aria-label="timeline of run {_e(run.run_id)}">']
    parts.append('<text x="4" y="26">model calls</text><text x="4" y="56">tools</text>')
    for step in run.steps:
        width = max(x(step.end) - x(step.start), 1.5)
        colour = _ERROR if step.error else STATE_COLOURS.get(step.state, STATE_COLOURS[""])
        parts.append(
            f'<rect x="{x(step.start):.1f}" y="14" width="{width:.1f}" height="18" fill="{colour}">'
            f"<title>step {step.index} {_e(step.state)} {(step.end - step.start) * 1000:.0f} ms</title></rect>"
        )
        for tool in step.tools:
            tool_width = max(x(tool.end) - x(tool.start), 1.5)
            parts.append(
                f'<rect x="{x(tool.start):.1f}" y="44" width="{tool_width:.1f}" height="18" '
                f'fill="{_ERROR if tool.error else _TOOL}"><title>{_e(tool.name)} '
                f"{(tool.end - tool.start) * 1000:.0f} ms</title></rect>"
            )
    parts.append(f'<line x1="{_LEFT}" y1="70" x2="{_WIDTH - _RIGHT}" y2="70" stroke="#999"/>')
    for tick in _ticks(duration):
        parts.append(
            f'<line x1="{x(run.start + tick):.1f}" y1="70" x2="{x(run.start + tick):.1f}" y2="74" stroke="#999"/>'
            f'<text x="{x(run.start + tick):.1f}" y="86" text-anchor="middle">{tick:g}</text>'
        )
    parts.append(f'<text x="{_WIDTH - _RIGHT}" y="96" text-anchor="end">seconds since the run started</text></svg>')
    return "".join(parts)


def _difficulty(run: ReportRun) -> str:
    """Difficulty (or risk) per step on [0, 1], each point coloured by the state after it."""
    scored = [s for s in run.steps if s.difficulty is not None]
    height, top, bottom = 170, 10, 30
    inner_h = height - top - bottom
    count = max(len(run.steps) - 1, 1)
    inner = _WIDTH - _LEFT - _RIGHT

    def x(i: int) -> float:
        return _LEFT + i / count * inner

    def y(v: float) -> float:
        return top + (1 - v) * inner_h

    parts = [f'<svg width="{_WIDTH}" height="{height}" role="img" aria-label="difficulty of run {_e(run.run_id)}">']
    for v in (0.0, 0.5, 1.0):
        parts.append(
            f'<line x1="{_LEFT}" y1="{y(v):.1f}" x2="{_WIDTH - _RIGHT}" y2="{y(v):.1f}" stroke="#eee"/>'
            f'<text x="{_LEFT - 6}" y="{y(v) + 4:.1f}" text-anchor="end">{v:g}</text>'
        )
    parts.append(f'<text x="4" y="{top + inner_h / 2:.0f}">score</text>')
    positions = {s.index: i for i, s in enumerate(run.steps)}
    points = [(x(positions[s.index]), y(float(s.difficulty or 0.0)), s) for s in scored]
    if len(points) > 1:
        path = " ".join(f"{px:.1f},{py:.1f}" for px, py, _ in points)
        parts.append(f'<polyline points="{path}" fill="none" stroke="#bbb"/>')
    for px, py, step in points:
        colour = STATE_COLOURS.get(step.state, STATE_COLOURS[""])
        parts.append(
            f'<circle cx="{px:.1f}" cy="{py:.1f}" r="4" fill="{colour}"><title>step {step.index}: '
            f"{float(step.difficulty or 0):.3f} {_e(step.state)}</title></circle>"
        )
    for i in _ticks(count, 10):
        parts.append(f'<text x="{x(int(i)):.1f}" y="{height - 14}" text-anchor="middle">{int(i)}</text>')
    parts.append(f'<text x="{_WIDTH - _RIGHT}" y="{height - 2}" text-anchor="end">step</text></svg>')
    return "".join(parts)


def _step_details(step: ReportStep, agent_model: str) -> str:
    summary = [f"step {step.index}", _e(step.state or "(not scored)")]
    if step.difficulty is not None:
        summary.append(f"{float(step.difficulty):.3f}")
    summary.append(f"{(step.end - step.start) * 1000:.0f} ms")
    if agent_model and step.model and step.model != agent_model:
        summary.append(f"routed to {_e(step.model)}")
    if step.monitors:
        summary.append("monitors: " + ", ".join(_e(m) for m, _ in step.monitors))
    if step.error:
        summary.append(f'<span class="err">error: {_e(step.error)}</span>')
    body = []
    body.append(f"<pre>{_e(step.thought)}</pre>" if step.thought else '<p class="muted">thought not captured</p>')
    for tool in step.tools:
        line = f"<b>{_e(tool.name)}</b> {(tool.end - tool.start) * 1000:.0f} ms"
        if tool.error:
            line += f' <span class="err">{_e(tool.error)}</span>'
        body.append(f"<p>{line}</p>")
        if tool.arguments is not None:
            body.append(f"<pre>arguments: {_e(tool.arguments)}</pre>")
        if tool.result is not None:
            body.append(f"<pre>result: {_e(tool.result)}</pre>")
    if step.monitors:
        scores = ", ".join(_e(m) if math.isnan(s) else f"{_e(m)} {s:.2f}" for m, s in step.monitors)
        composite = "" if step.composite is None else f" (composite {float(step.composite):.2f})"
        body.append(f"<p>monitors fired: {scores}{composite}</p>")
    if step.guidance:
        body += [f"<pre>guidance: {_e(text)}</pre>" for text in step.guidance]
    elif step.guidance_sources:
        body.append(f"<p>guidance injected: {_e(', '.join(step.guidance_sources))} (text not captured)</p>")
    model = step.routed_model or step.model
    if model:
        body.append(f'<p class="muted">model {_e(model)}</p>')
    css = ' class="error"' if step.error or any(t.error for t in step.tools) else ""
    return f"<details{css}><summary>{' · '.join(summary)}</summary>{''.join(body)}</details>"


def _legend() -> str:
    states = "".join(
        f'<span><i class="swatch" style="background:{c}"></i>{s}</span>' for s, c in STATE_COLOURS.items() if s
    )
    return (
        f'<p class="legend">{states}<span><i class="swatch" style="background:{_TOOL}"></i>tool call</span>'
        f'<span><i class="swatch" style="background:{_ERROR}"></i>error</span></p>'
        "<p class=muted>The timeline draws each model call as a bar coloured by the FSM state after it, and each "
        "tool call on the lane below; hover for durations. The chart plots each step's score (the difficulty, or "
        "the pilot's risk) on [0, 1]. Expand a step for its thought and tool calls (when content was captured), "
        "the monitors that fired with their scores, the guidance injected and the model called.</p>"
    )


def render_report(runs: Sequence[ReportRun], *, title: str = "rb-otel runs") -> str:
    sections = []
    for run in runs:
        outcome_class = "success" if run.outcome == "success" else "failure"
        states = ", ".join(run.states) or "none (not scored)"
        extra = f" · risk {float(run.risk):.2f} ({_e(run.scorer)})" if run.risk is not None else ""
        sections.append(
            f"<h2>{_e(run.agent or 'agent')} <small class=muted>{_e(run.run_id)}</small></h2>"
            f'<p class="meta">outcome <span class="{outcome_class}">{_e(run.outcome or "?")}</span> · '
            f"{len(run.steps)} model calls · {run.end - run.start:.2f} s · states reached: {_e(states)}{extra} · "
            f"trace {_e(run.trace_id)}</p>{_timeline(run)}{_difficulty(run)}"
            + "".join(_step_details(step, run.steps[0].model if run.steps else "") for step in run.steps)
        )
    return (
        f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{_e(title)}</title>"
        f"<style>{_CSS}</style></head><body><h1>{_e(title)}</h1><p>{len(runs)} runs.</p>{_legend()}"
        + "".join(sections)
        + "</body></html>\n"
    )
