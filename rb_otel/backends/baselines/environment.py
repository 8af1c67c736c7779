"""Which store the environment names for the workers' baselines and learned models.

``RB_OTEL_STORE`` is the store a fleet shares: the workers keep their baselines in it and read the models that
``rb-otel train --watch`` writes there (``--watch`` writes to it when ``--store`` is not given). The older
``RB_OTEL_PILOT_BASELINES`` names the workers' store alone and wins over it where both are set. Arguments in code
(``baselines=``, ``--store``) win over both.
"""

from __future__ import annotations

import os

__all__ = ["BASELINES_ENV", "STORE_ENV", "model_store_problem", "store_from_environment"]

#: The store ``rb-otel train --watch`` and the workers share (a URL or a path).
STORE_ENV = "RB_OTEL_STORE"
#: The workers' baseline store only (a URL or a path); wins over :data:`STORE_ENV` for the workers.
BASELINES_ENV = "RB_OTEL_PILOT_BASELINES"


def store_from_environment(*variables: str) -> tuple[str, str] | None:
    """The first of ``variables`` (default: the workers' order, :data:`BASELINES_ENV` then :data:`STORE_ENV`) set
    to something other than blanks, as ``(variable, value)``; ``None`` when none is (the caller's default)."""
    for variable in variables or (BASELINES_ENV, STORE_ENV):
        value = os.environ.get(variable, "").strip()
        if value:
            return variable, value
    return None


def model_store_problem(variable: str, value: str) -> str | None:
    """Why the store ``variable`` names (``value``) cannot hold learned models, as one line naming the variable
    (``None``: it can). Opens the store once and closes it."""
    from rb_otel.backends.baselines.errors import SummaryStoreError
    from rb_otel.backends.baselines.models import model_store_of
    from rb_otel.backends.baselines.opening import open_summary_store
    from rb_otel.urls import display_url

    try:
        store = open_summary_store(value)
    except SummaryStoreError as exc:
        return f"{variable}: {exc}"
    try:
        if model_store_of(store) is None:
            return (f"{variable}={display_url(value)}: this store keeps no models (use sqlite:///path.db or "
                    "redis://host:port/db, the store the workers' baselines are in)")  # fmt: skip
    finally:
        store.close()
    return None
