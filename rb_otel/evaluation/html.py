"""The evaluation as a self-contained HTML page, with the calibration plot as an embedded PNG (matplotlib)."""

from __future__ import annotations

import base64
import html
import io
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rb_otel.evaluation import Evaluation

__all__ = ["calibration_png", "render_html"]


def calibration_png(evaluation: Evaluation) -> bytes:
    """Predicted run risk against the observed failure rate per bin (point size = runs), with the diagonal."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise RuntimeError(
            "the HTML report's calibration plot needs matplotlib: pip install 'rb-otel[evaluate]'"
        ) from None
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
    buffer = io.BytesIO()
    figure.tight_layout()
    figure.savefig(buffer, format="png")
    plt.close(figure)
    return buffer.getvalue()


def render_html(evaluation: Evaluation) -> str:
    rows = "".join(
        f"<tr><td>{html.escape(s.name)}{' <em>(baseline)</em>' if s.baseline else ''}</td>"
        f"<td>{s.auroc:.3f}</td><td>{s.low:.2f} - {s.high:.2f}</td><td>{s.runs}</td></tr>"
        for s in evaluation.signals
    )
    states = "".join(
        f"<tr><td>{html.escape(outcome)}</td><td>"
        + ", ".join(f"{html.escape(state)}: {n}" for state, n in counts.items())
        + "</td></tr>"
        for outcome, counts in evaluation.states.items()
    )
    png = base64.b64encode(calibration_png(evaluation)).decode("ascii")
    failed = sum(r.failed for r in evaluation.runs)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>rb-otel evaluation</title>
<style>body{{font-family:system-ui,sans-serif;margin:2rem;max-width:60rem}}table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:.3rem .6rem;text-align:left}}</style></head><body>
<h1>rb-otel evaluation</h1>
<p>{len(evaluation.runs)} labelled runs, {failed} failed; scorer <code>{html.escape(evaluation.scorer)}</code>.
AUROC: the chance a failed run scores above a successful one (0.5 = no signal); intervals are 95% bootstrap,
by task when tasks repeat.</p>
<table><tr><th>signal</th><th>AUROC</th><th>95% interval</th><th>runs</th></tr>{rows}</table>
<h2>Most severe state reached</h2><table>{states}</table>
<h2>Calibration</h2>
<img alt="calibration plot: predicted risk against observed failure rate" src="data:image/png;base64,{png}">
</body></html>
"""
