"""Where a hook runs in LangGraph: the node's callback run id and the thread id, read from the runnable config."""

from __future__ import annotations

import uuid

from langgraph.config import get_config

__all__ = ["node_run_id", "thread_id_of_config"]


def node_run_id() -> uuid.UUID | None:
    """The run id of the graph node the caller runs in (``None`` outside a runnable or without callbacks)."""
    try:
        callbacks = get_config().get("callbacks")
    except RuntimeError:  # not inside a runnable
        return None
    parent = getattr(callbacks, "parent_run_id", None)
    return parent if isinstance(parent, uuid.UUID) else None


def thread_id_of_config() -> str:
    """The LangGraph ``thread_id`` of the current run (``""`` without a checkpointer thread)."""
    try:
        configurable = get_config().get("configurable") or {}
    except RuntimeError:
        return ""
    thread = configurable.get("thread_id")
    return str(thread) if thread else ""
