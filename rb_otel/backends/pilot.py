"""The pilot scorer wired to a fleet: :class:`PilotScorer` scores with the pure core's pilot
(:mod:`rb_otel.steering.pilot.run`) and keeps the agents' baselines in a :class:`~rb_otel.backends.baselines.cache.
BaselineCache` in front of the store a URL names (threads, exit hooks: the runtime side)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from rb_otel.backends.baselines.cache import BaselineCache
from rb_otel.backends.baselines.errors import SummaryStoreError
from rb_otel.backends.baselines.model_cache import ModelCache
from rb_otel.backends.baselines.models import StoredModel, model_store_of
from rb_otel.steering.checks import check_bool, expected
from rb_otel.steering.pilot import BaselineSource, PilotModel, PilotRun, SummaryStore
from rb_otel.steering.pilot.kinds import checked_kind

__all__ = ["PilotScorer"]


def _check_arguments(model: object, baselines: object, learned: object) -> None:
    """Wrong types fail here, naming the keyword (what each accepts: :class:`PilotScorer`)."""
    if model is not None and not isinstance(model, PilotModel | str | Path):
        raise expected("model", "a PilotModel, a model file (a str or Path) or None", model)
    if baselines is not None and not isinstance(baselines, str | Path | BaselineSource | SummaryStore):
        raise expected("baselines", "a baseline store URL or path, a SummaryStore, a BaselineSource or None", baselines)
    check_bool("learned", learned)


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
    (``RB_OTEL_PILOT_BASELINES``, else ``RB_OTEL_STORE``, the store ``rb-otel train --watch`` writes to, else in
    memory, this process only). Runs of one agent
    (``start_run(agent=...)``, a key from :func:`~rb_otel.steering.pilot.baselines.agent_key`) share a baseline;
    concurrent runs are safe; the store is read when a run starts and written after it ends, never on a step.

    ``learned``: with no ``model`` given and a store that keeps learned models (SQLite, Redis), a run of an agent
    that ``rb-otel train --watch`` has fitted is scored by that agent's model, picked up within a minute of being
    written (:class:`~rb_otel.backends.baselines.model_cache.ModelCache`), and its ``rb.scorer`` says so
    (``pilot/agent:<key>@<labels>``, :meth:`name_for`); its SLOW and SKIP are those its own record earned.
    """

    def __init__(
        self,
        model: PilotModel | str | Path | None = None,
        baselines: BaselineSource | SummaryStore | str | Path | None = None,
        *,
        agent_kind: str | None = None,
        learned: bool = True,
    ) -> None:
        _check_arguments(model, baselines, learned)
        self.agent_kind = checked_kind(agent_kind)
        #: The scorer picks each run's model by its kind (no model was given): integrations pass ``kind=``.
        self.chooses_by_kind = model is None
        self.model = model if isinstance(model, PilotModel) else PilotModel.load(model)
        self._by_kind: dict[str, PilotModel] = {}
        try:
            self.baselines: BaselineSource = (
                baselines
                if isinstance(baselines, BaselineSource) and not isinstance(baselines, SummaryStore)
                else BaselineCache(baselines)
            )
        except SummaryStoreError as exc:  # the URL is named already: say which argument (or variable) it came from
            raise SummaryStoreError(f"baselines: {exc}" if baselines is not None else str(exc)) from None
        self.name = self.model.version
        models = model_store_of(getattr(self.baselines, "summaries", None))
        #: The agents' learned models (``None``: a model was given, or the store keeps none). Their store is the
        #: baseline cache's, which announces its outages: this cache logs them at debug (one failure, one line).
        self.models = (
            ModelCache(models, warn=False) if learned and self.chooses_by_kind and models is not None else None
        )

    def model_for(self, kind: str = "") -> PilotModel:
        """The model a run of ``kind`` is scored with (the class docstring's order)."""
        chosen = self.agent_kind or kind
        if not self.chooses_by_kind or not chosen:
            return self.model
        model = self._by_kind.get(chosen)
        if model is None:
            model = self._by_kind.setdefault(chosen, PilotModel.default_for(chosen))
        return model

    def name_for(self, kind: str = "", agent: str = "") -> str:
        """``rb.scorer`` of a run of ``kind`` and ``agent`` starting now: its agent's learned model
        (``pilot/agent:<key>@<labels>``, or ``pilot/agent-size:...``) when there is one, else its model's version. A
        run's own name is its :class:`PilotRun`'s ``name``, read with the model that scores it (a refresh between
        the two calls cannot name a run by one model and score it with another)."""
        learned = self._learned(agent)
        return learned.name if learned is not None else self.model_for(kind).version

    def start_run(self, agent: str = "", task_id: str = "", kind: str = "") -> PilotRun:
        """A run of ``agent``: scored by its learned model when it has one, named (``name``, ``labels``) by that
        model's record, all read once; else by the model of ``kind`` (``labels`` 0)."""
        learned = self._learned(agent)
        if learned is not None and learned.pilot is not None:
            return PilotRun(learned.pilot, self.baselines, agent, name=learned.name, labels=learned.labels)
        return PilotRun(self.model_for(kind), self.baselines, agent)

    def add_model_listener(self, listener: Callable[[StoredModel], None]) -> None:
        """Tell ``listener(record)`` of each new learned model this process picks up from the store, once per
        record (the facade counts them as ``rb.models.loaded``); nothing when this scorer reads no learned
        models."""
        if self.models is not None:
            self.models.add_listener(listener)

    def _learned(self, agent: str) -> StoredModel | None:
        learned = self.models.get(agent) if self.models is not None and agent else None
        return learned if learned is not None and learned.pilot is not None else None
