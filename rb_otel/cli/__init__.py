"""The ``rb-otel`` command, one module per command group: ``runs`` (``demo``, ``replay``, ``evaluate``), ``reports``
(``report``, ``ab-report``), ``pilot`` (``train``, ``baselines``); ``main`` builds the parser and runs a command."""

from rb_otel.cli.main import build_parser, main

__all__ = ["build_parser", "main"]
