"""Deprecated path: the baseline cache moved to :mod:`rb_otel.backends.baselines.cache` (it is runtime machinery:
threads, exit hooks), where ``BaselineStore`` is ``BaselineCache``.

Every name still works from here, with a ``DeprecationWarning``, until 0.3.0."""

from rb_otel.deprecation import moved_names

__getattr__ = moved_names(
    __name__,
    {
        "BaselineStore": "rb_otel.backends.baselines.cache:BaselineCache",
        "BASELINES_ENV": "rb_otel.backends.baselines.cache:BASELINES_ENV",
        "BaselineEvent": "rb_otel.backends.baselines.cache:BaselineEvent",
    },
)
