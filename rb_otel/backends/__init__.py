"""What talks to the outside world for the steering core: rb-api over HTTP, and Qdrant.

Each backend implements one of the core's protocols (``MonitorBackend``, ``PatternStore``, ``StepEmitter``), so
the core never imports an I/O client: ``rb_otel.backends.rb_api`` (httpx) and ``rb_otel.backends.qdrant``
(``qdrant-client``, the ``[qdrant]`` extra).
"""
