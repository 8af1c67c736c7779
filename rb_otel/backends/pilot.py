"""The pilot scorer wired to a fleet: :class:`PilotScorer` scores with the pure core's pilot
(:mod:`rb_otel.steering.pilot.run`) and keeps the agents' baselines in a :class:`~rb_otel.backends.baselines.cache.
BaselineCache` in front of the store a URL names (threads, exit hooks: the runtime side)."""

from __future__ import annotations

from pathlib import Path

from rb_otel.backends.baselines.cache import BaselineCache
from rb_otel.steering.pilot import BaselineSource, PilotModel, PilotRun, SummaryStore
from rb_otel.steering.pilot.kinds import checked_kind

__all__ = ["PilotScorer"]


class PilotScorer:
    """The pilot as a :class:`~rb_otel.steering.scoring.Scorer`.

    ``model``: a :class:`PilotModel` or a path to its JSON (``rb-otel train`` writes a pilot/2 fitted to your
    agent), used for every run. Without one, each run gets the default pilot of its kind of agent
    (:meth:`PilotModel.default_for`): ``agent_kind`` (``"coding"``, ``"customer_service"``) when given, else the
    kind the integration inferred from the agent's tools (``start_run(kind=...)``), else the shipped pilot/1.
    ``baselines``: where the agents' baselines are kept: a :class:`~rb_otel.backends.baselines.cache.BaselineCache`
    (or any
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
        *,
        agent_kind: str | None = None,
    ) -> None:
        self.agent_kind = checked_kind(agent_kind)
        #: The scorer picks each run's model by its kind (no model was given): integrations pass ``kind=``.
        self.chooses_by_kind = model is None
        self.model = model if isinstance(model, PilotModel) else PilotModel.load(model)
        self._by_kind: dict[str, PilotModel] = {}
        self.baselines: BaselineSource = (
            baselines
            if isinstance(baselines, BaselineSource) and not isinstance(baselines, SummaryStore)
            else BaselineCache(baselines)
        )
        self.name = self.model.version

    def model_for(self, kind: str = "") -> PilotModel:
        """The model a run of ``kind`` is scored with (the class docstring's order)."""
        chosen = self.agent_kind or kind
        if not self.chooses_by_kind or not chosen:
            return self.model
        model = self._by_kind.get(chosen)
        if model is None:
            model = self._by_kind.setdefault(chosen, PilotModel.default_for(chosen))
        return model

    def name_for(self, kind: str = "") -> str:
        """``rb.scorer`` of a run of ``kind``: its model's version."""
        return self.model_for(kind).version

    def start_run(self, agent: str = "", task_id: str = "", kind: str = "") -> PilotRun:
        return PilotRun(self.model_for(kind), self.baselines, agent)
