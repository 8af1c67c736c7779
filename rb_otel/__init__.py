"""rb_otel: ReasonBlocks-style steering for LLM agents, exported as OpenTelemetry.

What users build with: :class:`ReasonBlocks` (every adapter is a method of it: ``rb.middleware()``,
``rb.chat_model()``, ``rb.anthropic_loop()``, ``rb.openai_model()``, ``rb.openai_hooks()``, ``rb.claude_agent()``,
``rb.session()``), its configuration and value types, the scorers, the companion middleware, and the library
functions behind every command (:func:`configure`, :func:`replay`, :func:`evaluate`, :func:`train`,
:func:`render_report`, :func:`ab_report`). The engine (``SteeringSession``, ``DifficultyFSM``, the injections,
monitors and pattern stores) lives in :mod:`rb_otel.steering`.

The public names are listed once, in ``__init__.pyi`` beside this file: type checkers read it, and each name is
imported from the module it names on first use (PEP 562), so ``import rb_otel`` stays cheap and never touches
LangChain or OpenTelemetry until a name that needs them is used. Importing never installs any provider. Names moved
in this release still work from here, with a ``DeprecationWarning`` naming their new home.
"""

from rb_otel._version import __version__ as __version__
from rb_otel.deprecation import Moved, moved_names
from rb_otel.lazy_names import stub_face

#: Names that lived here in the previous release: what to use instead.
_MOVED: dict[str, Moved] = {
    **{
        name: Moved("rb_otel.steering", name)
        for name in (
            "BaseInjection",
            "DifficultyFSM",
            "E1Injection",
            "E2Injection",
            "E3Injection",
            "HashingEmbeddings",
            "InMemoryPatternStore",
            "LocalMonitorBackend",
            "MonitorBackend",
            "MonitorSteeringInjection",
            "Pattern",
            "PatternStore",
            "SteeringSession",
            "TraceStateManager",
            "clear_caches",
            "create_injections",
            "render_pattern",
            "score_step",
        )
    },
    **{
        name: Moved("rb_otel.types", name)
        for name in ("ETrace", "MonitorEvaluation", "PendingInjection", "StepRecord", "TraceState")
    },
    "ReasonBlocksMiddleware": Moved(
        "rb_otel.integrations.langchain",
        "ReasonBlocksMiddleware",
        "rb.middleware() (the class: rb_otel.integrations.langchain.ReasonBlocksMiddleware)",
    ),
    "build_steps_from_messages": Moved("rb_otel.integrations.langchain.token_saving", "build_steps_from_messages"),
    "compress_tool_output": Moved("rb_otel.steering.token_saving", "compress_tool_output"),
    "loop_signals": Moved("rb_otel.steering.token_saving", "loop_signals"),
    "run_messages_agent_loop": Moved(
        "rb_otel.integrations.anthropic",
        "run_messages_agent_loop",
        "rb.anthropic_loop(client, ...)",
    ),
    "arun_messages_agent_loop": Moved(
        "rb_otel.integrations.anthropic",
        "arun_messages_agent_loop",
        "await rb.anthropic_loop_async(client, ...)",
    ),
    "claude_agent_telemetry": Moved(
        "rb_otel.integrations.claude_agent",
        "claude_agent_telemetry",
        "rb.claude_agent(query(...), ...)",
    ),
}

__getattr__, __dir__, __all__ = stub_face(__name__, __file__, fallback=moved_names(__name__, _MOVED))
