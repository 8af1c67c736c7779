"""LangChain 1.x integration: ``ReasonBlocksMiddleware`` and its helpers."""

from rb_otel.integrations.langchain.middleware import ON_SKIP, ReasonBlocksMiddleware, stop_message, was_stopped
from rb_otel.integrations.langchain.routing import ModelRouter
from rb_otel.integrations.langchain.state import RBState, StatefulReasonBlocksMiddleware

__all__ = [
    "ON_SKIP",
    "ModelRouter",
    "RBState",
    "ReasonBlocksMiddleware",
    "StatefulReasonBlocksMiddleware",
    "stop_message",
    "was_stopped",
]
