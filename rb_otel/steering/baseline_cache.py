"""Moved: the baseline cache is runtime machinery (threads, exit hooks), in :mod:`rb_otel.backends.baselines.cache`.
The old names work for this release, with a ``DeprecationWarning``."""

from rb_otel.deprecation import moved_names

__getattr__ = moved_names(
    __name__,
    {
        "BaselineStore": "rb_otel.backends.baselines.cache:BaselineCache",
        "BASELINES_ENV": "rb_otel.backends.baselines.cache:BASELINES_ENV",
        "BaselineEvent": "rb_otel.backends.baselines.cache:BaselineEvent",
    },
)
