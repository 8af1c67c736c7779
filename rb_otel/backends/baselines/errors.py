"""What baseline stores raise: a store that cannot be used as given, and one that did not answer."""

from __future__ import annotations

__all__ = ["StoreUnavailable", "SummaryStoreError"]


class SummaryStoreError(ValueError):
    """A summary store that cannot be used as given (raised by :func:`~rb_otel.backends.baselines.opening.
    open_summary_store` and the stores' constructors): the message names the URL (password elided) and why."""


class StoreUnavailable(OSError):
    """The store did not answer (down, unreachable, locked past the timeout); the message names the URL."""
