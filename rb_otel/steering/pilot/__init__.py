"""The pilot: an offline scorer whose score is a calibrated probability that the run is failing.

A run's features against its agent's baseline (``run``: :class:`PilotRun`), the model file that weighs them
(``model``: :class:`PilotModel`), the hashed text tokens a fitted model also reads (``text``), and the per-agent
baselines it compares with (``baselines``: the value types, the :class:`SummaryStore` protocol and the in-memory
store). The scorer that keeps a fleet's baselines in a shared store is runtime machinery:
:class:`rb_otel.backends.pilot.PilotScorer`.
"""

from rb_otel.steering.pilot.baselines import (
    AgentBaseline,
    BaselineSource,
    MemorySummaryStore,
    RunSummary,
    SummaryStore,
)
from rb_otel.steering.pilot.model import (
    FEATURES,
    FEATURES_V1,
    PILOT_NAME,
    PILOT_SIZE,
    PILOT_V2,
    PILOT_V3,
    PilotModel,
    TextWeights,
)
from rb_otel.steering.pilot.run import THOUGHT_VIEW, PilotRun, StepView, pilot_fsm_thresholds
from rb_otel.steering.pilot.text import TextScore, step_tokens

__all__ = [
    "FEATURES",
    "FEATURES_V1",
    "PILOT_NAME",
    "PILOT_SIZE",
    "PILOT_V2",
    "PILOT_V3",
    "THOUGHT_VIEW",
    "AgentBaseline",
    "BaselineSource",
    "MemorySummaryStore",
    "PilotModel",
    "PilotRun",
    "RunSummary",
    "StepView",
    "SummaryStore",
    "TextScore",
    "TextWeights",
    "pilot_fsm_thresholds",
    "step_tokens",
]
