"""The metric instruments of the telemetry contract, created once per meter."""

from __future__ import annotations

import threading

from opentelemetry import metrics

from rb_otel.steering.agent_keys import agent_name_of
from rb_otel.telemetry import names as n
from rb_otel.telemetry.sums import SummedCounter

__all__ = ["Instruments"]


Counter = SummedCounter | metrics.Counter | metrics.UpDownCounter


class Instruments:
    """Every instrument of ``telemetry.md``; label sets are small and fixed (never a run id).

    ``summed`` (the default) keeps the counters as in-process sums exported through observable instruments
    (``sums.py``: the same exported data, no SDK call per add, no counter exemplars); ``summed=False`` is the plain
    definition, the SDK's synchronous counters.
    """

    def __init__(self, meter: metrics.Meter, *, summed: bool = True) -> None:
        self._meter = meter
        self._summed = summed
        self.steps = self._counter(n.METRIC_STEPS, unit="{step}", description="Model calls by FSM state")
        self.difficulty = meter.create_histogram(
            n.METRIC_STEP_DIFFICULTY,
            unit="1",
            description="Difficulty score of each scored step",
            explicit_bucket_boundaries_advisory=list(n.DIFFICULTY_BUCKETS),
        )
        self.transitions = self._counter(n.METRIC_FSM_TRANSITIONS, unit="{transition}", description="FSM state changes")
        self.runs = self._counter(n.METRIC_RUNS, unit="{run}", description="Finished runs")
        self.runs_active = self._counter(
            n.METRIC_RUNS_ACTIVE, unit="{run}", description="Runs in flight, by current FSM state", monotonic=False
        )
        self.runs_skip = self._counter(n.METRIC_RUNS_SKIP, unit="{run}", description="Runs that entered SKIP")
        self.monitor_fired = self._counter(n.METRIC_MONITOR_FIRED, unit="{firing}", description="Monitor firings")
        self.injections = self._counter(n.METRIC_INJECTIONS, unit="{injection}", description="Injections")
        self.steering_duration = meter.create_histogram(
            n.METRIC_STEERING_DURATION,
            unit="s",
            description="Time rb_otel spent steering one model call",
            explicit_bucket_boundaries_advisory=list(n.STEERING_DURATION_BUCKETS),
        )
        self.token_usage = meter.create_histogram(
            n.METRIC_TOKEN_USAGE,
            unit="{token}",
            description="Tokens used per model call",
            explicit_bucket_boundaries_advisory=list(n.TOKEN_USAGE_BUCKETS),
        )
        self.operation_duration = meter.create_histogram(
            n.METRIC_OPERATION_DURATION,
            unit="s",
            description="Model call duration",
            explicit_bucket_boundaries_advisory=list(n.OPERATION_DURATION_BUCKETS),
        )
        self.invoke_agent_duration = meter.create_histogram(
            n.METRIC_INVOKE_AGENT_DURATION,
            unit="s",
            description="Agent run duration",
            explicit_bucket_boundaries_advisory=list(n.INVOKE_AGENT_DURATION_BUCKETS),
        )
        self.execute_tool_duration = meter.create_histogram(
            n.METRIC_EXECUTE_TOOL_DURATION,
            unit="s",
            description="Tool call duration",
            explicit_bucket_boundaries_advisory=list(n.OPERATION_DURATION_BUCKETS),
        )
        self.run_tokens = meter.create_histogram(
            n.METRIC_RUN_TOKENS,
            unit="{token}",
            description="Tokens per finished run",
            explicit_bucket_boundaries_advisory=list(n.TOKEN_USAGE_BUCKETS),
        )
        self.token_saving_chars = self._counter(
            n.METRIC_TOKEN_SAVING_CHARS, unit="{char}", description="Characters TokenSavingMiddleware removed"
        )
        self.baselines_errors = self._counter(
            n.METRIC_BASELINES_ERRORS,
            unit="{error}",
            description="Failed reads and writes of the pilot's shared baseline store (the runs went on)",
        )
        self.baselines_dropped = self._counter(
            n.METRIC_BASELINES_DROPPED,
            unit="{run}",
            description="Run summaries dropped unwritten from the baseline store's full queue",
        )
        # the learning loop's two ends: a learned model reached this worker, an outcome was recorded for the learner
        loaded, recorded = "Learned models picked up from the store", "Run outcomes recorded after the runs"
        self.models_loaded = self._counter(n.METRIC_MODELS_LOADED, unit="{model}", description=loaded)
        self.outcomes_recorded = self._counter(n.METRIC_OUTCOMES_RECORDED, unit="{outcome}", description=recorded)
        self._skip_initialised: set[str] = set()
        self._experiments: set[str] = set()
        self._lock = threading.Lock()

    def _counter(self, name: str, *, unit: str, description: str, monotonic: bool = True) -> Counter:
        if self._summed:
            return SummedCounter.of(self._meter, name, unit=unit, description=description, monotonic=monotonic)
        if monotonic:
            return self._meter.create_counter(name, unit=unit, description=description)
        return self._meter.create_up_down_counter(name, unit=unit, description=description)

    def experiment_label(self, experiment_id: str) -> str:
        """The ``rb.experiment.id`` label value: the id itself for the first ``MAX_EXPERIMENT_LABELS`` distinct ids
        this process sees, ``EXPERIMENT_OTHER`` after that (label cardinality stays bounded; spans keep the id)."""
        if experiment_id in self._experiments:
            return experiment_id
        with self._lock:
            if len(self._experiments) < n.MAX_EXPERIMENT_LABELS:
                self._experiments.add(experiment_id)
                return experiment_id
        return n.EXPERIMENT_OTHER

    def baseline_event(self, kind: str, count: int) -> None:
        """A baseline store's failure (``kind`` ``read`` or ``write``) or drop (``dropped``), counted."""
        if kind == "dropped":
            self.baselines_dropped.add(count)
        else:
            self.baselines_errors.add(count, {n.RB_BASELINES_OPERATION: kind})

    def model_loaded(self, agent_key: str, scorer: str) -> None:
        """A new learned model of the agent keyed ``agent_key`` was picked up (``rb.models.loaded``); labelled by
        the agent's name (the key's name part, as every metric names agents) and the model's ``rb.scorer``."""
        self.models_loaded.add(1, {n.GEN_AI_AGENT_NAME: agent_name_of(agent_key), n.RB_SCORER: scorer})

    def outcome_recorded(self, outcome: str, agent_name: str = "") -> None:
        """An outcome (``success``/``failure``) was recorded for a run of ``agent_name`` (``""``: not known in this
        process, as for every metric) (``rb.outcomes.recorded``)."""
        self.outcomes_recorded.add(1, {n.GEN_AI_AGENT_NAME: agent_name, n.RB_OUTCOME: outcome})

    def init_skip_series(self, agent_name: str) -> None:
        """``add(0)`` once per agent name so ``increase()`` sees the first SKIP run (telemetry.md)."""
        if agent_name in self._skip_initialised:
            return
        with self._lock:
            if agent_name not in self._skip_initialised:
                self._skip_initialised.add(agent_name)
                self.runs_skip.add(0, {n.GEN_AI_AGENT_NAME: agent_name})
