"""A self-contained HTML page for any runs read from OTLP/JSON (``rb-otel report``, and the demo's ``report.html``):
per run a timeline with durations, the score over steps coloured by FSM state with the steps where monitors fired,
guidance was injected or the call was routed, and a drill-down per step. Plain SVG, no scripts.

Every mark a chart draws has its key in the legend at the top of the page, and no mark is drawn over a label:
``tests/test_report.py`` checks both in headless Chromium.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence

from rb_otel.report.traces import ReportRun, ReportStep

__all__ = ["GUIDANCE_NAMES", "MARK_COLOURS", "STATE_COLOURS", "render_report"]

STATE_COLOURS = {
    "INIT": "#9e9e9e",
    "FAST": "#2e7d32",
    "NORMAL": "#1565c0",
    "SLOW": "#ef6c00",
    "SKIP": "#c62828",
    "": "#607d8b",  # imported steps that were not rescored
}
#: The colours of the other marks, each with its legend entry.
MARK_COLOURS = {
    "tool call": "#8d6e63",
    "error": "#212121",  # not red: SKIP is red, and a failed call is not a state
    "monitors fired": "#6a1b9a",
    "guidance injected": "#00838f",
    "routed to another model": "#ad1457",
}
#: The short names the page gives guidance sources (``rb.injection_sources``), explained in the legend.
GUIDANCE_NAMES = {
    "E1Injection": "E1",
    "E2Injection": "E2",
    "E3Injection": "E3",
    "MonitorSteeringInjection": "monitor steering",
}
_TOOL, _ERROR = MARK_COLOURS["tool call"], MARK_COLOURS["error"]
_MONITORS, _GUIDANCE, _ROUTED = (
    MARK_COLOURS["monitors fired"],
    MARK_COLOURS["guidance injected"],
    MARK_COLOURS["routed to another model"],
)
_WIDTH, _LEFT, _RIGHT = 960, 70, 20

_CSS = """
body{font-family:system-ui,sans-serif;margin:2rem;max-width:1040px;color:#212121}
h2{margin-top:2.5rem;border-top:1px solid #ddd;padding-top:1rem}
.meta{color:#555}.failure{color:#c62828;font-weight:600}.success{color:#2e7d32;font-weight:600}
.other{color:#ef6c00;font-weight:600}
.legend{display:flex;flex-wrap:wrap;gap:.3rem 1.1rem;margin:.6rem 0}.key svg{vertical-align:middle;margin-right:.3rem}
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
    """Model calls on one lane coloured by state, tools on a second (black when they failed), on a time axis."""
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


def _routed(step: ReportStep, agent_model: str) -> str:
    """The model a step was routed to, ``""`` when it called the agent's own."""
    return step.model if agent_model and step.model and step.model != agent_model else ""


def _guidance(step: ReportStep) -> str:
    return ", ".join(GUIDANCE_NAMES.get(s, s) for s in dict.fromkeys(step.guidance_sources))


# The score chart, top to bottom: the monitors lane, the plot on [0, 1], the guidance and routing lanes, the steps.
_SCORE_HEIGHT, _PLOT_TOP, _PLOT_HEIGHT = 214, 26, 120
_GUIDANCE_Y = _PLOT_TOP + _PLOT_HEIGHT + 12
_ROUTED_Y = _GUIDANCE_Y + 17


def _score(run: ReportRun) -> str:
    """The score per step (difficulty, or the pilot's risk) on [0, 1], each point coloured by the state after it;
    above the plot a mark where monitors fired, below it where guidance was injected and where the call was
    routed to another model."""
    count = max(len(run.steps) - 1, 1)
    inner = _WIDTH - _LEFT - _RIGHT
    agent_model = run.steps[0].model if run.steps else ""

    def x(i: int) -> float:
        return _LEFT + i / count * inner

    def y(v: float) -> float:
        return _PLOT_TOP + (1 - v) * _PLOT_HEIGHT

    parts = [
        f'<svg width="{_WIDTH}" height="{_SCORE_HEIGHT}" role="img" aria-label="score of run {_e(run.run_id)}">',
        f'<text x="4" y="{_PLOT_TOP - 8}">monitors</text>',
        f'<text x="4" y="{_PLOT_TOP + _PLOT_HEIGHT / 2 + 4:.0f}">score</text>',
        f'<text x="4" y="{_GUIDANCE_Y + 8}">guidance</text><text x="4" y="{_ROUTED_Y + 8}">routed</text>',
    ]
    for v in (0.0, 0.25, 0.5, 0.75, 1.0):
        parts.append(
            f'<line x1="{_LEFT}" y1="{y(v):.1f}" x2="{_WIDTH - _RIGHT}" y2="{y(v):.1f}" stroke="#eee"/>'
            f'<text x="{_LEFT - 8}" y="{y(v) + 4:.1f}" text-anchor="end">{v:g}</text>'
        )
    scored = [(x(i), y(float(s.difficulty)), s) for i, s in enumerate(run.steps) if s.difficulty is not None]
    if len(scored) > 1:
        path = " ".join(f"{px:.1f},{py:.1f}" for px, py, _ in scored)
        parts.append(f'<polyline points="{path}" fill="none" stroke="#bbb"/>')
    for px, py, step in scored:
        colour = STATE_COLOURS.get(step.state, STATE_COLOURS[""])
        parts.append(
            f'<circle cx="{px:.1f}" cy="{py:.1f}" r="4" fill="{colour}"><title>step {step.index}: '
            f"{float(step.difficulty or 0):.3f} {_e(step.state)}</title></circle>"
        )
    for i, step in enumerate(run.steps):
        if step.monitors:
            names = ", ".join(m for m, _ in step.monitors)
            parts.append(
                f'<path d="M{x(i) - 4:.1f} {_PLOT_TOP - 16} h8 l-4 7 z" fill="{_MONITORS}">'
                f"<title>step {step.index}: monitors fired: {_e(names)}</title></path>"
            )
        if step.guidance_sources:
            parts.append(
                f'<rect x="{x(i) - 3.5:.1f}" y="{_GUIDANCE_Y}" width="7" height="7" fill="{_GUIDANCE}">'
                f"<title>step {step.index}: guidance injected: {_e(_guidance(step))}</title></rect>"
            )
        routed = _routed(step, agent_model)
        if routed:
            parts.append(
                f'<rect x="{x(i) - 4:.1f}" y="{_ROUTED_Y + 1}" width="8" height="5" fill="{_ROUTED}">'
                f"<title>step {step.index}: routed to {_e(routed)}</title></rect>"
            )
    for tick in _ticks(count, 10):
        parts.append(f'<text x="{x(int(tick)):.1f}" y="{_SCORE_HEIGHT - 16}" text-anchor="middle">{int(tick)}</text>')
    parts.append(f'<text x="{_WIDTH - _RIGHT}" y="{_SCORE_HEIGHT - 2}" text-anchor="end">step</text></svg>')
    return "".join(parts)


def _tokens(count: int | None) -> str:
    """A token count as the page shows it; ``None``: the model reported no usage (unknown, not 0)."""
    return "tokens not reported" if count is None else f"{count:,} tokens"


def _usage(step: ReportStep) -> str:
    """The step's tokens, with the input and output its call reported when it did."""
    split = (
        f" (in {step.input_tokens:,}, out {step.output_tokens:,})" if step.input_tokens or step.output_tokens else ""
    )
    return _tokens(step.tokens) + split


def _step_details(step: ReportStep, agent_model: str) -> str:
    summary = [f"step {step.index}", _e(step.state or "(not scored)")]
    if step.difficulty is not None:
        summary.append(f"{float(step.difficulty):.3f}")
    summary.append(f"{(step.end - step.start) * 1000:.0f} ms")
    summary.append(_usage(step))
    routed = _routed(step, agent_model)
    if routed:
        summary.append(f"routed to {_e(routed)}")
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
    if step.guidance_sources:
        captured = "" if step.guidance else " (text not captured)"
        body.append(f"<p>guidance injected: {_e(_guidance(step))}{captured}</p>")
    model = step.routed_model or step.model
    if model:
        body.append(f'<p class="muted">model {_e(model)}</p>')
    css = ' class="error"' if step.error or any(t.error for t in step.tools) else ""
    return f"<details{css}><summary>{' · '.join(summary)}</summary>{''.join(body)}</details>"


def _key(label: str, colour: str, shape: str = "square") -> str:
    """One legend entry: the mark as the charts draw it, and its name."""
    mark = {
        "square": f'<rect x="1" y="1" width="12" height="12" rx="2" fill="{colour}"/>',
        "triangle": f'<path d="M1 2 h12 l-6 10 z" fill="{colour}"/>',
        "bar": f'<rect x="1" y="5" width="12" height="5" fill="{colour}"/>',
    }[shape]
    return f'<span class="key"><svg width="14" height="14" aria-hidden="true">{mark}</svg>{_e(label)}</span>'


def _legend() -> str:
    states = [_key(s, c) for s, c in STATE_COLOURS.items() if s]
    marks = [
        _key("not scored", STATE_COLOURS[""]),
        _key("tool call", _TOOL),
        _key("error", _ERROR),
        _key("monitors fired", _MONITORS, "triangle"),
        _key("guidance injected", _GUIDANCE),
        _key("routed to another model", _ROUTED, "bar"),
    ]
    return (
        f'<div class="legend">{"".join(states + marks)}</div>'
        "<p class=muted>The timeline draws each model call as a bar coloured by the FSM state after it, and each "
        "tool call on the lane below; hover for durations. The chart plots each step's score (the difficulty, or "
        "the pilot's risk) on [0, 1], with a mark above it where monitors fired and below it where guidance was "
        "injected and where the call was routed to another model. Guidance comes from E1 (lessons from earlier "
        "sessions), E2 (patterns for the failure the monitors see), E3 (standing rules) and monitor steering (what "
        "the monitors that fired advise). Expand a step for its thought and tool calls (when content was "
        "captured), the monitors that fired with their scores, the guidance injected and the model called.</p>"
    )


def _outcome_class(outcome: str) -> str:
    if outcome == "success":
        return "success"
    return "failure" if outcome.startswith("failure") else "other"  # stopped, interrupted, unknown


def _total(runs: Sequence[ReportRun]) -> str:
    """The page's tokens: the sum over the runs that reported usage, saying how many did not."""
    known = [run.tokens for run in runs if run.tokens is not None]
    unknown = len(runs) - len(known)
    return f"{sum(known):,} tokens" + (f" ({unknown} run(s) reported no usage)" if unknown else "")


def render_report(
    runs: Sequence[ReportRun], *, title: str = "rb-otel runs", descriptions: Mapping[str, str] | None = None
) -> str:
    """The page for ``runs``; ``descriptions`` (run id -> a sentence) are shown under each run's heading. Tokens
    are shown per step (``rb.tokens``, as the demo's table has them), per run in its header (``rb.tokens`` of the
    run, as the fleet summary counts them) and for the page."""
    sections = []
    for run in runs:
        states = ", ".join(run.states) or "none (not scored)"
        extra = f" · risk {float(run.risk):.2f} ({_e(run.scorer)})" if run.risk is not None else ""
        about = (descriptions or {}).get(run.run_id)
        sections.append(
            f"<h2>{_e(run.agent or 'agent')} <small class=muted>{_e(run.run_id)}</small></h2>"
            + (f"<p>{_e(about)}</p>" if about else "")
            + f'<p class="meta">outcome <span class="{_outcome_class(run.outcome)}">{_e(run.outcome or "?")}</span>'
            f" · {len(run.steps)} model calls · {_tokens(run.tokens)} · {run.end - run.start:.2f} s"
            f" · states reached: {_e(states)}{extra} · "
            f"trace {_e(run.trace_id)}</p>{_timeline(run)}{_score(run)}"
            + "".join(_step_details(step, run.steps[0].model if run.steps else "") for step in run.steps)
        )
    return (
        f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{_e(title)}</title>"
        f"<style>{_CSS}</style></head><body><h1>{_e(title)}</h1><p>{len(runs)} runs, {_total(runs)}.</p>{_legend()}"
        + "".join(sections)
        + "</body></html>\n"
    )
