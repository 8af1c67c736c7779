"""Model routing for LangChain: FSM state -> chat model, resolved once per id and cached (docs/steering.md, "Routing
and the [REASONBLOCKS] block")."""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from typing import Any

from langchain_core.language_models import BaseChatModel

from rb_otel.integrations.langchain._messages import identify_model
from rb_otel.steering.session import parse_model_routing
from rb_otel.types import FSMState

__all__ = ["ModelRouter"]

_log = logging.getLogger("rb_otel.integrations.langchain")


class ModelRouter:
    """Holds ``model_routing``: ids are resolved with ``init_chat_model`` on first use (then cached), instances
    are used as given. A model that cannot be built is logged once and the step keeps the agent's own model.
    """

    def __init__(self, routing: Mapping[Any, Any] | None) -> None:
        self._ids: dict[FSMState, str] = {}
        self._models: dict[str, BaseChatModel | None] = {}
        self._lock = threading.Lock()
        for state, value in parse_model_routing(routing).items():
            if isinstance(value, BaseChatModel):
                model_id = identify_model(value).model_id
                self._models[model_id] = value
            elif isinstance(value, str):
                model_id = value.strip()
            else:
                raise TypeError(
                    f"model_routing[{state.value}] must be a 'provider:model' id or a chat model, "
                    f"got {type(value).__name__}"
                )
            self._ids[state] = model_id

    @property
    def ids(self) -> dict[FSMState, str]:
        """State -> model id, the form ``SteeringSession`` reports as ``model_override``."""
        return dict(self._ids)

    def model(self, model_id: str) -> BaseChatModel | None:
        """The chat model for ``model_id`` (built once), or ``None`` if it cannot be built."""
        if model_id in self._models:
            return self._models[model_id]
        with self._lock:
            if model_id not in self._models:
                self._models[model_id] = self._build(model_id)
        return self._models[model_id]

    @staticmethod
    def _build(model_id: str) -> BaseChatModel | None:
        from langchain.chat_models import init_chat_model

        try:
            model = init_chat_model(model_id)
        except Exception as exc:  # missing provider package, missing credentials, unknown provider
            _log.warning("cannot build routed model %r (%s); keeping the agent's model", model_id, type(exc).__name__)
            return None
        return model if isinstance(model, BaseChatModel) else None
