"""Learned models in the baseline store: one record per agent, written by ``rb-otel train --watch``.

A record (:class:`StoredModel`) holds the agent's pilot model (the JSON ``rb-otel train`` writes), how many
labelled runs it was fitted on, when, and which of SLOW and SKIP its own cross-fitted record earned. The watcher
writes a record for a trusted fit, or, before one is trusted, for the agent's size oriented by its labelled runs
(``trained["basis"]`` :data:`ORIENTED_SIZE`; neither SLOW nor SKIP), and withdraws it when a later fit publishes
neither; workers read it off the step path (:mod:`rb_otel.backends.baselines.model_cache`).

Where it lives: SQLite, a row of the ``rb_baselines_models`` table (one per agent); Redis, the string key
``<prefix>model:<agent>`` (``rb-otel:baselines:model:<agent>`` by default) holding the record's JSON. A store
without models (``memory://``, a third-party store) is not a :class:`ModelStore`: workers there keep the default
pilot.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from rb_otel.steering.pilot import PilotModel

__all__ = ["MODEL_RECORD", "ORIENTED_SIZE", "ModelStore", "StoredModel", "model_store_of", "scorer_name"]

#: ``trained["basis"]`` of a model that is the agent's oriented size (the training module's ``BASIS``; named here
#: so a worker reads it without importing training code).
ORIENTED_SIZE = "oriented size"
#: The format of a stored model record.
MODEL_RECORD = "rb-otel agent model/1"


def scorer_name(agent: str, labels: int, *, oriented_size: bool = False) -> str:
    """``rb.scorer`` of a run scored by the model learned for ``agent`` on ``labels`` labelled runs:
    ``pilot/agent:<agent>@<labels>`` for a trusted fit, ``pilot/agent-size:<agent>@<labels>`` for the agent's size
    oriented by its labelled runs (no fit trusted yet: :mod:`rb_otel.training.oriented_size`)."""
    return f"pilot/agent{'-size' if oriented_size else ''}:{agent}@{labels}"


@dataclass(frozen=True, slots=True)
class StoredModel:
    """An agent's learned model as the store keeps it. ``slow`` / ``skip``: whether the fit's cross-fitted
    record earned them (the model's thresholds already say so: an unearned state's threshold is 1.0)."""

    agent: str
    model: dict[str, Any]  # the pilot model's JSON mapping (PilotModel.as_dict)
    labels: int
    fitted_at: float  # epoch seconds
    slow: bool
    skip: bool
    pilot: PilotModel | None = field(default=None, compare=False)  # parsed once, by whoever reads it

    @property
    def name(self) -> str:
        """``rb.scorer`` of the runs it scores (:func:`scorer_name`)."""
        trained = self.model.get("trained")
        size = isinstance(trained, dict) and trained.get("basis") == ORIENTED_SIZE
        return scorer_name(self.agent, self.labels, oriented_size=size)

    def as_json(self) -> str:
        return json.dumps(
            {
                "format": MODEL_RECORD,
                "agent": self.agent,
                "labels": self.labels,
                "fitted_at": self.fitted_at,
                "slow": self.slow,
                "skip": self.skip,
                "model": self.model,
            },
            separators=(",", ":"),
        )

    @classmethod
    def from_json(cls, raw: str | bytes) -> StoredModel:
        """The record ``raw`` holds, its model parsed; ``ValueError`` naming the problem for anything else."""
        try:
            data = json.loads(raw)
            if not isinstance(data, dict) or data.get("format") != MODEL_RECORD:
                raise ValueError(f"not a record of {MODEL_RECORD!r}")
            model = data["model"]
            pilot = PilotModel.from_mapping(model, source=f"the model of agent {data['agent']!r}")
            return cls(str(data["agent"]), dict(model), int(data["labels"]), float(data["fitted_at"]),
                       bool(data["slow"]), bool(data["skip"]), pilot)  # fmt: skip
        except (KeyError, TypeError, ValueError) as exc:  # JSONDecodeError, UnicodeDecodeError are ValueErrors
            raise ValueError(f"not a stored agent model ({exc})") from None


@runtime_checkable
class ModelStore(Protocol):
    """A baseline store that keeps learned models too (SQLite, Redis). Every call may raise
    :class:`~rb_otel.backends.baselines.errors.StoreUnavailable`; ``model`` answers within ``timeout`` seconds."""

    url: str

    def put_model(self, record: StoredModel) -> None: ...

    def model(self, agent: str, *, timeout: float | None = None) -> StoredModel | None: ...

    def drop_model(self, agent: str) -> bool: ...

    def models(self) -> list[StoredModel]: ...


def model_store_of(store: object) -> ModelStore | None:
    """``store`` when it keeps models, else ``None``."""
    return store if isinstance(store, ModelStore) else None
