"""Deprecated path: the scorers and their resolution moved to :mod:`rb_otel.steering.scoring.scorers`.

Every name still works from here, with a ``DeprecationWarning``, until 0.3.0."""

from rb_otel.deprecation import moved_module

__getattr__ = moved_module(__name__, "rb_otel.steering.scoring.scorers")
