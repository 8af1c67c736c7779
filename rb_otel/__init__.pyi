"""The public face of rb_otel: one line per public name, read by type checkers and, at import time, by
``rb_otel/__init__.py``, which loads each name from its module on first use (:mod:`rb_otel.lazy_names`). To add a
public name, add its line here; ``__all__`` follows."""

# The lines are grouped by what they are for, as the README introduces them, not sorted.
# isort: skip_file

from typing import Any

from rb_otel._version import __version__ as __version__

# the facade and its configuration
from rb_otel.facade.reasonblocks import ReasonBlocks as ReasonBlocks
from rb_otel.config import ReasonBlocksConfig as ReasonBlocksConfig
from rb_otel.assembly import build_middleware as build_middleware

# value types
from rb_otel.types import FSMState as FSMState
from rb_otel.types import RunFields as RunFields
from rb_otel.types import StepDecision as StepDecision
from rb_otel.types import StepLogEntry as StepLogEntry

# scorers
from rb_otel.steering.scoring import JudgeScorer as JudgeScorer
from rb_otel.backends.pilot import PilotScorer as PilotScorer
from rb_otel.steering.scoring import Scorer as Scorer
from rb_otel.steering.scoring import ScorerStep as ScorerStep
from rb_otel.steering.agent_keys import agent_key as agent_key

# companions
from rb_otel.integrations.langchain.general_monitor import GeneralMonitorMiddleware as GeneralMonitorMiddleware
from rb_otel.integrations.langchain.token_saving import TokenSavingMiddleware as TokenSavingMiddleware
from rb_otel.integrations.langchain.token_saving import TokenSavingStats as TokenSavingStats
from rb_otel.backends.anthropic_classifier import make_anthropic_classifier as make_anthropic_classifier
from rb_otel.integrations.langchain.stopping import was_stopped as was_stopped
from rb_otel.ab.assign import assign_arm as assign_arm

# the library functions behind the commands
from rb_otel.telemetry.setup import configure as configure
from rb_otel.process_exit import handle_sigterm as handle_sigterm
from rb_otel.importers.replay import replay as replay
from rb_otel.evaluation import evaluate as evaluate
from rb_otel.training import train as train
from rb_otel.report import render_report as render_report
from rb_otel.ab.experiment_report import ab_report as ab_report

__all__: list[str]  # these names, __version__ included

def __getattr__(name: str) -> Any: ...  # each name above, loaded on first use
