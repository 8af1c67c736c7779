"""The pilot scorer wired to a fleet: :class:`PilotScorer` scores with the pure core's pilot
(:mod:`rb_otel.steering.pilot.run`) and keeps the agents' baselines in a :class:`~rb_otel.backends.baselines.cache.
BaselineCache` in front of the store a URL names (threads, exit hooks: the runtime side)."""

from __future__ import annotations

from pathlib import Path

from rb_otel.backends.baselines.cache import BaselineCache
from rb_otel.steering.pilot import BaselineSource, PilotModel, PilotRun, SummaryStore

__all__ = ["PilotScorer"]


class PilotScorer:
    """The pilot as a :class:`~rb_otel.steering.scoring.Scorer`.

    ``model``: a :class:`PilotModel` or a path to its JSON (default: the shipped pilot/1 weights; ``rb-otel
    train`` writes a pilot/2 fitted to your agent). ``baselines``: where the agents' baselines are kept: a
    :class:`~rb_otel.backends.baselines.cache.BaselineCache` (or any
    :class:`~rb_otel.steering.pilot.baselines.BaselineSource`), a store URL (``sqlite:///path.db`` or a plain path
    for processes on one machine, ``redis://host:port/db`` for several machines, ``memory://``) or ``None``
    (``RB_OTEL_PILOT_BASELINES``, else in memory, this process only). Runs of one agent
    (``start_run(agent=...)``, a key from :func:`~rb_otel.steering.pilot.baselines.agent_key`) share a baseline;
    concurrent runs are safe; the store is read when a run starts and written after it ends, never on a step.
    """

    def __init__(
        self,
        model: PilotModel | str | Path | None = None,
        baselines: BaselineSource | SummaryStore | str | Path | None = None,
    ) -> None:
        self.model = model if isinstance(model, PilotModel) else PilotModel.load(model)
        self.baselines: BaselineSource = (
            baselines
            if isinstance(baselines, BaselineSource) and not isinstance(baselines, SummaryStore)
            else BaselineCache(baselines)
        )
        self.name = self.model.version

    def start_run(self, agent: str = "", task_id: str = "") -> PilotRun:
        return PilotRun(self.model, self.baselines, agent)
