"""Importers: other harnesses' records replayed as the same OpenTelemetry traces and metrics.

``replay(path, format="auto", rescore=False, tracer_provider=None, meter_provider=None)`` reads ReasonBlocks step
logs, io_harness SQLite stores, agy_bridge Step streams, SWE-agent and mini-swe-agent (1.x and 2.x) trajectories,
OpenHands event histories, OpenAI-style message lists, tau-bench and tau2-bench results, Claude Code's stream-json
(a JSON-lines file or a terminal recording of it), and rb-otel's own traces; a directory with its subfolders
(docs/importers.md).
"""

from rb_otel.importers.detect import FORMATS, detect
from rb_otel.importers.model import ImportProblem, RecordError, ReplayResult
from rb_otel.importers.replay import replay

__all__ = ["FORMATS", "ImportProblem", "RecordError", "ReplayResult", "detect", "replay"]
