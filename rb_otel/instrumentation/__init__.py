"""rb-otel with no code change, the OpenTelemetry way: ``opentelemetry-instrument python app.py`` (the
``opentelemetry_instrumentor`` entry point ``rb_otel``) gives every agent built with LangChain's ``create_agent``
rb-otel's middleware, configured by the ``RB_OTEL_*`` variables (:mod:`.environment_variables`) and recording to
the providers the OpenTelemetry distro set up. Needs the ``instrument`` extra (``opentelemetry-instrumentation``;
the command itself comes with ``opentelemetry-distro``). docs/telemetry.md, "No code change".
"""

from rb_otel.instrumentation.instrumentor import ReasonBlocksInstrumentor

__all__ = ["ReasonBlocksInstrumentor"]
