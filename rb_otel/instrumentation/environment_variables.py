"""The ``RB_OTEL_*`` variables the instrumentor reads (``opentelemetry-instrument python app.py``): how the agents it
instruments are named, scored and steered. Read once, when the instrumentor starts; an invalid value is warned about
and the default used. Code that builds its own middleware passes arguments instead (``rb.middleware(...)``).

The pilot's shared baselines keep their own variable, ``RB_OTEL_PILOT_BASELINES`` (docs/fleet.md), else
``RB_OTEL_STORE``, the store the workers share with ``rb-otel train --watch`` (docs/learning.md); rb-api's are
``REASONBLOCKS_BASE_URL`` and ``REASONBLOCKS_API_TIMEOUT`` (docs/rb-api.md).
"""

from __future__ import annotations

from typing import Final

__all__ = ["RB_OTEL_AGENT_KIND", "RB_OTEL_AGENT_NAME", "RB_OTEL_PILOT_MODEL", "RB_OTEL_SCORER", "RB_OTEL_STEERING"]

RB_OTEL_AGENT_NAME: Final = "RB_OTEL_AGENT_NAME"
"""
.. envvar:: RB_OTEL_AGENT_NAME

The ``gen_ai.agent.name`` of instrumented agents that ``create_agent(name=...)`` does not name (an agent's own name
wins: one process may build several). Default: none.
"""

RB_OTEL_SCORER: Final = "RB_OTEL_SCORER"
"""
.. envvar:: RB_OTEL_SCORER

How steps are scored: ``heuristic`` (the documented difficulty heuristic) or ``pilot`` (the pilot scorer, relative to
each agent's earlier runs; docs/signal.md). Default: ``pilot`` when :envvar:`RB_OTEL_PILOT_MODEL` is set, else
``heuristic``.
"""

RB_OTEL_PILOT_MODEL: Final = "RB_OTEL_PILOT_MODEL"
"""
.. envvar:: RB_OTEL_PILOT_MODEL

A pilot model file ``rb-otel train`` wrote, for the pilot scorer. Default: the shipped pilot.
"""

RB_OTEL_AGENT_KIND: Final = "RB_OTEL_AGENT_KIND"
"""
.. envvar:: RB_OTEL_AGENT_KIND

The kind of agent instrumented agents are (``coding`` or ``customer_service``), which picks the pilot's default model
(docs/signal.md, "A default pilot per kind"). Default: inferred per run from the agent's tools.
"""

RB_OTEL_STEERING: Final = "RB_OTEL_STEERING"
"""
.. envvar:: RB_OTEL_STEERING

``on`` (the default): steer, as ``rb.middleware()`` does (guidance, routing by state); ``observe``: score, move the
FSM and record every run, and send every model request exactly as it came (``rb.middleware(steer=False)``).
"""
