"""LangChain 1.x integration: ``ReasonBlocksMiddleware`` and its helpers."""

from rb_otel.integrations.langchain.middleware import ReasonBlocksMiddleware
from rb_otel.integrations.langchain.routing import ModelRouter
from rb_otel.integrations.langchain.state import RBState, StatefulReasonBlocksMiddleware

__all__ = ["ModelRouter", "RBState", "ReasonBlocksMiddleware", "StatefulReasonBlocksMiddleware"]
