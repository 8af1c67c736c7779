"""``model_routing`` validation: FSM state (enum or name) -> model; INIT and END are never routed."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rb_otel.types import FSMState

__all__ = ["model_id_of", "parse_model_routing", "routing_ids"]

_ROUTABLE = (FSMState.FAST, FSMState.NORMAL, FSMState.SLOW, FSMState.SKIP)


def parse_model_routing(routing: Mapping[Any, Any] | None) -> dict[FSMState, Any]:
    """Validate a ``model_routing`` mapping keyed by FSM state (enum or name); values are kept as given."""
    if not routing:
        return {}
    if not isinstance(routing, Mapping):
        raise TypeError(f"model_routing must be a mapping of FSM state to model, got {type(routing).__name__}")
    parsed: dict[FSMState, Any] = {}
    for key, value in routing.items():
        try:
            state = key if isinstance(key, FSMState) else FSMState(str(key).upper())
        except ValueError:
            raise ValueError(f"model_routing: unknown FSM state {key!r}; use FAST, NORMAL, SLOW or SKIP") from None
        if state not in _ROUTABLE:
            raise ValueError(f"model_routing: {state.value} cannot be routed; use FAST, NORMAL, SLOW or SKIP")
        if value is None or (isinstance(value, str) and not value.strip()):
            raise ValueError(f"model_routing[{state.value}] must be a model id or a chat model, got {value!r}")
        parsed[state] = value
    return parsed


def model_id_of(model: Any) -> str:
    """The id a session reports for a routed model: a string id as given, else the model object's own name
    (``model_id``, ``model_name`` or ``model`` attribute, else its type's name). Framework adapters that know
    their models better pass their own ids to the session instead."""
    if isinstance(model, str):
        return model.strip()
    for attribute in ("model_id", "model_name", "model"):
        value = getattr(model, attribute, None)
        if isinstance(value, str) and value:
            return value
    return type(model).__name__


def routing_ids(routing: Mapping[FSMState, Any]) -> dict[FSMState, str]:
    """State -> model id of a validated routing table (see :func:`model_id_of`)."""
    return {state: model_id_of(model) for state, model in routing.items()}
