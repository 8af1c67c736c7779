"""``rb-otel report``: a self-contained HTML page for any run in OTLP/JSON trace files.

``load_runs(paths) -> (runs, problems)`` reads the files (live runs through the Collector's ``file`` exporter, the
demo's ``out/traces.jsonl``, replays); ``render_report(runs)`` draws them.
"""

from rb_otel.report.html import render_report
from rb_otel.report.traces import ReportRun, ReportStep, ReportTool, load_runs

__all__ = ["ReportRun", "ReportStep", "ReportTool", "load_runs", "render_report"]
