"""LangChain 1.x integration: ``ReasonBlocksMiddleware`` and its helpers."""

from rb_otel.integrations.langchain.middleware import RBState, ReasonBlocksMiddleware, StatefulReasonBlocksMiddleware
from rb_otel.integrations.langchain.routing import ModelRouter

__all__ = ["ModelRouter", "RBState", "ReasonBlocksMiddleware", "StatefulReasonBlocksMiddleware"]
