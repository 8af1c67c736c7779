"""Shared baseline stores for the pilot: SQLite for several processes on one machine, Redis for several machines.

Both implement :class:`~rb_otel.steering.pilot.baselines.SummaryStore` and are found by URL scheme through the
``rb_otel.baseline_stores`` entry points (``sqlite``, ``redis``, ``rediss``), so the core never imports them:
``PilotScorer(baselines="sqlite:///var/lib/agents/baselines.db")``, ``ReasonBlocks(scorer="pilot",
baselines="redis://cache:6379/0")``, or ``RB_OTEL_PILOT_BASELINES``. ``docs/fleet.md`` says which when.
"""
