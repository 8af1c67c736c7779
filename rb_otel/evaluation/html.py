"""The evaluation as a self-contained HTML page, with the calibration plot as an embedded PNG (matplotlib)."""

from __future__ import annotations

import base64
import html
import io
import math
from typing import TYPE_CHECKING, Any

from rb_otel.evaluation.early import percent

if TYPE_CHECKING:
    from rb_otel.evaluation.evaluate_runs import Evaluation

__all__ = ["calibration_png", "render_html", "stopping_png"]


def _pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise RuntimeError("the HTML report's plots need matplotlib: pip install 'rb-otel[evaluate]'") from None
    return plt


def _png(figure: Any, plt: Any) -> bytes:
    buffer = io.BytesIO()
    figure.tight_layout()
    figure.savefig(buffer, format="png")
    plt.close(figure)
    return buffer.getvalue()


def stopping_png(evaluation: Evaluation) -> bytes:
    """What stopping runs would save against the false stops it costs, as a stop threshold on the score (held
    for two steps) moves: steps and tokens saved and failing runs stopped, by the share of successful runs
    stopped; the FSM's own SKIP and SLOW rules marked."""
    plt = _pyplot()
    curve = evaluation.stop_curve()
    figure, axes = plt.subplots(figsize=(5.6, 4.2), dpi=110)
    if curve:
        x = [p.stopped_successful for p in curve]
        axes.plot(x, [p.stopped_failing for p in curve], color="#c0392b", label="failing runs stopped")
        axes.plot(x, [p.steps_saved for p in curve], color="#2471a3", label="steps saved")
        if not any(p.tokens_saved != p.tokens_saved for p in curve):
            axes.plot(x, [p.tokens_saved for p in curve], color="#2471a3", linestyle=":", label="tokens saved")
    for rule, marker in zip(evaluation.stopping, ("o", "s"), strict=False):
        axes.scatter([rule.stopped_successful], [rule.stopped_failing], color="#c0392b", marker=marker, zorder=3,
                     label=rule.rule)  # fmt: skip
    widest = max((p.stopped_successful for p in curve), default=0.1)
    axes.set_xlim(0, min(0.5, max(widest, 0.1)))  # the region an operator would act in
    axes.set_ylim(0, 1)
    axes.set_xlabel("successful runs stopped (false stops)")
    axes.set_ylabel("share")
    axes.set_title(f"Stopping runs as the threshold moves, scorer {evaluation.scorer}")
    axes.legend(loc="upper left", fontsize=7)
    axes.grid(alpha=0.3)
    return _png(figure, plt)


def calibration_png(evaluation: Evaluation) -> bytes:
    """Predicted run risk against the observed failure rate per bin (point size = runs), with the diagonal."""
    plt = _pyplot()
    figure, axes = plt.subplots(figsize=(5, 4.2), dpi=110)
    axes.plot([0, 1], [0, 1], linestyle="--", color="#888", label="perfectly calibrated")
    if evaluation.calibration:
        predicted, observed, runs = zip(*evaluation.calibration, strict=True)
        axes.scatter(predicted, observed, s=[20 + 3 * n for n in runs], color="#c0392b", label="runs in bin")
        axes.plot(predicted, observed, color="#c0392b", linewidth=1)
    axes.set_xlim(0, 1)
    axes.set_ylim(0, 1)
    axes.set_xlabel("predicted risk of failure (run risk)")
    axes.set_ylabel("observed failure rate")
    axes.set_title(f"Calibration, scorer {evaluation.scorer}")
    axes.legend(loc="upper left", fontsize=8)
    axes.grid(alpha=0.3)
    return _png(figure, plt)


def _signal_rows(evaluation: Evaluation) -> str:
    return "".join(
        f"<tr><td>{html.escape(s.name)}{' <em>(baseline)</em>' if s.baseline else ''}</td>"
        f"<td>{'n/a' if math.isnan(s.auroc) else f'{s.auroc:.3f}'}</td>"
        f"<td>{'n/a' if math.isnan(s.low) else f'{s.low:.2f} - {s.high:.2f}'}</td><td>{s.runs}</td></tr>"
        for s in evaluation.signals
    )


def _in_sample(evaluation: Evaluation) -> str:
    """The figures on the runs the scoring model was fitted on, when some of the runs were (apart: they flatter)."""
    inside = evaluation.in_sample
    if inside is None:
        return ""
    failed = sum(r.failed for r in inside.runs)
    return (f"<h2>In-sample: the {len(inside.runs)} runs in the model's fit</h2><p>{failed} failed. The model was "
            "fitted on these runs (or on runs of their tasks), so its figures on them flatter it.</p>"
            "<table><tr><th>signal</th><th>AUROC</th><th>95% interval</th><th>runs</th></tr>"
            f"{_signal_rows(inside)}</table>")  # fmt: skip


def render_html(evaluation: Evaluation) -> str:
    rows = _signal_rows(evaluation)
    caveats = "".join(f"<li>{html.escape(c)}</li>" for c in evaluation.caveats)
    sample = f" ({html.escape(evaluation.sample)})" if evaluation.sample else ""
    states = "".join(
        f"<tr><td>{html.escape(outcome)}</td><td>"
        + ", ".join(f"{html.escape(state)}: {n}" for state, n in counts.items())
        + "</td></tr>"
        for outcome, counts in evaluation.states.items()
    )
    png = base64.b64encode(calibration_png(evaluation)).decode("ascii")
    stops = base64.b64encode(stopping_png(evaluation)).decode("ascii")
    early = "".join(
        f"<tr><td>{r.k}</td><td>{r.runs}</td><td>{r.score:.3f}</td><td>{r.chars:.3f}</td>"
        f"<td>{'n/a' if r.prompt_tokens != r.prompt_tokens else f'{r.prompt_tokens:.3f}'}</td></tr>"
        for r in evaluation.early
    )
    stopping = "".join(
        f"<tr><td>{html.escape(s.rule)}</td>"
        + "".join(f"<td>{percent(v)}</td>" for v in (s.stopped_failing, s.stopped_successful, s.steps_saved))
        + f"<td>{percent(s.tokens_saved)}</td></tr>"
        for s in evaluation.stopping
    )
    failed = sum(r.failed for r in evaluation.runs)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>rb-otel evaluation</title>
<style>body{{font-family:system-ui,sans-serif;margin:2rem;max-width:60rem}}table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:.3rem .6rem;text-align:left}}</style></head><body>
<h1>rb-otel evaluation</h1>
<p>{len(evaluation.runs)} labelled runs{sample}, {failed} failed; scorer <code>{html.escape(evaluation.scorer)}</code>.
AUROC: the chance a failed run scores above a successful one (0.5 = no signal); intervals are 95% bootstrap,
by task when tasks repeat.</p>
{f"<h2>Caveats</h2><ul>{caveats}</ul>" if caveats else ""}
<table><tr><th>signal</th><th>AUROC</th><th>95% interval</th><th>runs</th></tr>{rows}</table>
<h2>Early warning</h2>
<p>Over the runs still going at step k, beside the baselines a live run has from the same first k steps.</p>
<table><tr><th>step</th><th>runs</th><th>score</th><th>characters so far</th><th>prompt tokens so far</th></tr>
{early}</table>
<h2>Stopping runs</h2>
<table><tr><th>rule</th><th>failing runs stopped</th><th>successful runs stopped</th><th>steps saved</th>
<th>tokens saved</th></tr>{stopping}</table>
<img alt="savings against false stops as the stop threshold moves" src="data:image/png;base64,{stops}">
<h2>Most severe state reached</h2><table>{states}</table>
<h2>Calibration</h2>
<img alt="calibration plot: predicted risk against observed failure rate" src="data:image/png;base64,{png}">
{_in_sample(evaluation)}
</body></html>
"""
