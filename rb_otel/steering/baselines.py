"""Deprecated path: the per-agent baselines moved to :mod:`rb_otel.steering.pilot.baselines`, and the stores'
errors, URLs and opening to :mod:`rb_otel.backends.baselines` (these names work, with a ``DeprecationWarning``,
until 0.3.0)."""

from rb_otel.deprecation import moved_names

__getattr__ = moved_names(
    __name__,
    {
        "BaselineStoreError": "rb_otel.backends.baselines.errors:SummaryStoreError",
        "StoreUnavailable": "rb_otel.backends.baselines.errors:StoreUnavailable",
        "ENTRY_POINT_GROUP": "rb_otel.backends.baselines.opening:ENTRY_POINT_GROUP",
        "open_summary_store": "rb_otel.backends.baselines.opening:open_summary_store",
        "display_url": "rb_otel.urls:display_url",
        "elide_password": "rb_otel.urls:display_url",
        "encoded_credentials": "rb_otel.urls:encoded_credentials",
        "password_of": "rb_otel.urls:password_of",
        "scrub": "rb_otel.urls:scrub",
    },
    rest_in="rb_otel.steering.pilot.baselines",
)
