"""What both baseline stores do with what they read back: stored rows as run summaries, a problem told once.

A row that is not a run summary (written by hand, by another program, or damaged) is skipped, never raised: one
bad row must not cost the agent its baseline, nor look like an outage. Each kind of problem is warned about once
per agent and store (a store is read at every run start).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from typing import Any

from rb_otel.backends.baselines.models import StoredModel
from rb_otel.steering.pilot import RunSummary

__all__ = ["StoredRows"]

_log = logging.getLogger("rb_otel.baselines")


class StoredRows:
    """Reads one store's rows; ``url`` (the password elided) names the store in warnings."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._warned: set[tuple[str, str]] = set()

    def summaries(self, agent: str, rows: Iterable[Any]) -> tuple[RunSummary, ...]:
        """The rows (JSON text or bytes) that are run summaries, in order; the others skipped, with a warning."""
        out, bad = [], 0
        for raw in rows:
            try:
                out.append(RunSummary.from_dict(json.loads(raw)))
            except (TypeError, ValueError):  # JSONDecodeError and UnicodeDecodeError are ValueErrors
                bad += 1
        if bad:
            self.warn_once(agent, "rows", f"{bad} stored run(s) of agent {agent!r} are not run summaries; skipped")
        return tuple(out)

    def model(self, agent: str, raw: Any) -> StoredModel | None:
        """The learned-model record in ``raw`` (JSON text or bytes); ``None``, with one warning, when it is not one."""
        try:
            return StoredModel.from_json(raw)
        except ValueError as exc:
            self.warn_once(agent, "model", f"the stored model of agent {agent!r} is skipped: {exc}")
            return None

    def warn_once(self, agent: str, kind: str, message: str) -> None:
        """Warn ``message`` the first time this store meets problem ``kind`` with ``agent``."""
        if (agent, kind) not in self._warned:
            self._warned.add((agent, kind))
            _log.warning("baselines %s: %s", self.url, message)
