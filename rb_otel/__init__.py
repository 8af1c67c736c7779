"""rb_otel: ReasonBlocks-style steering for LLM agents, exported as OpenTelemetry.

What users build with: :class:`ReasonBlocks` (every adapter is a method of it: ``rb.middleware()``,
``rb.chat_model()``, ``rb.anthropic_loop()``, ``rb.openai_model()``, ``rb.openai_hooks()``, ``rb.claude_agent()``,
``rb.session()``), its configuration and value types, the scorers, the companion middleware, and the library
functions behind every command (:func:`configure`, :func:`replay`, :func:`evaluate`, :func:`train`,
:func:`render_report`, :func:`ab_report`). The engine (``SteeringSession``, ``DifficultyFSM``, the injections,
monitors and pattern stores) lives in :mod:`rb_otel.steering`.

The public names are listed once, in ``__init__.pyi`` beside this file: type checkers read it, and each name is
imported from the module it names on first use (PEP 562), so ``import rb_otel`` stays cheap and never touches
LangChain or OpenTelemetry until a name that needs them is used. Importing never installs any provider.
"""

from rb_otel._version import __version__ as __version__
from rb_otel.lazy_names import stub_face

__getattr__, __dir__, __all__ = stub_face(__name__, __file__)
