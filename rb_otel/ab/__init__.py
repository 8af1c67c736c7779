"""A/B experiments: is steering paying for itself? Arms, the experiment report from exported traces, the statistics.

``rb.ab_middleware(experiment_id, unit_id, on_fraction)`` puts runs in an arm; every run span then carries
``rb.experiment.id`` / ``.arm`` / ``.unit``. :func:`report` (``rb-otel ab-report``) reads the OTLP/JSON trace files
the runs were exported to and answers with success rates, their difference with Newcombe's interval, tokens and
cost per run, the sample-ratio check and caveats; :func:`format_report` prints it as a table.
"""

from rb_otel.ab.assign import ARMS, Arm, assign_arm
from rb_otel.ab.experiment_report import ExperimentNotFound, report
from rb_otel.ab.prices import Prices, load_prices
from rb_otel.ab.stats import SrmResult, newcombe_diff_ci, srm_check, wilson_interval
from rb_otel.ab.table import format_report

__all__ = [
    "ARMS",
    "Arm",
    "ExperimentNotFound",
    "Prices",
    "SrmResult",
    "assign_arm",
    "format_report",
    "load_prices",
    "newcombe_diff_ci",
    "report",
    "srm_check",
    "wilson_interval",
]
