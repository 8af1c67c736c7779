"""Deprecated path: store URLs as people see them moved to :mod:`rb_otel.urls` (every store uses them, not only
the baseline stores); these names work, with a ``DeprecationWarning``, until 0.3.0."""

from rb_otel.deprecation import moved_module

__getattr__ = moved_module(__name__, "rb_otel.urls")
