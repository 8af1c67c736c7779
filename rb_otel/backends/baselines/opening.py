"""Opening a summary store from its URL: ``memory://`` here, every other scheme through the
``rb_otel.baseline_stores`` entry points (SQLite and Redis are this package's own)."""

from __future__ import annotations

import inspect
from importlib import metadata
from pathlib import Path
from typing import Any

from rb_otel.backends.baselines.errors import SummaryStoreError
from rb_otel.steering.pilot.baselines import MAX_AGENTS, MemorySummaryStore, SummaryStore
from rb_otel.urls import display_url, scheme_of, scrub

__all__ = ["ENTRY_POINT_GROUP", "open_summary_store"]

#: The entry-point group of store openers: ``name = "module:function"``, ``function(url) -> SummaryStore``.
ENTRY_POINT_GROUP = "rb_otel.baseline_stores"


def open_summary_store(url: str | Path, *, max_agents: int = MAX_AGENTS, create: bool = True) -> SummaryStore:
    """The store ``url`` names: ``memory://``, ``sqlite:///path/baselines.db`` (or a plain path),
    ``redis://[:password@]host:port/db``, or any scheme a package registers under the
    ``rb_otel.baseline_stores`` entry points. Raises :class:`SummaryStoreError` naming the URL (password
    elided, :func:`display_url`) and the problem (an unknown scheme, a file that is not a baseline store,
    credentials the server refused, a port that is not a number). An opener is called as
    ``opener(url, max_agents=...)``, and with ``create=False`` too when it accepts it: ``create=False`` (listing,
    forgetting) never makes a store that is not there, it raises."""
    text = str(url)
    shown = display_url(text)
    scheme = scheme_of(text)
    if scheme == "memory":
        return MemorySummaryStore(max_agents=max_agents)
    openers = {ep.name: ep for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)}
    opener = openers.get(scheme)
    if opener is None:
        known = ", ".join(["memory://", *(f"{name}://" for name in sorted(openers))])
        raise SummaryStoreError(f"{shown}: unknown baseline store scheme {scheme!r}; use one of {known} or a file path")
    try:
        function = opener.load()
        options: dict[str, Any] = {"max_agents": max_agents}
        if not create and "create" in inspect.signature(function).parameters:
            options["create"] = False
        store: SummaryStore = function(text, **options)
    except SummaryStoreError as exc:
        raise SummaryStoreError(scrub(str(exc), text)) from None
    except ImportError as exc:
        raise SummaryStoreError(f"{shown}: {scrub(str(exc), text)}") from None
    except (ValueError, TypeError, OSError) as exc:  # an opener's own parsing: one line, never a traceback
        raise SummaryStoreError(f"{shown}: {scrub(str(exc), text)}") from None
    return store
