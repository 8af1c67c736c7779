"""``rb_otel.reasonblocks.ReasonBlocks``: the facade's public module path (the class lives in
:mod:`rb_otel.facade.reasonblocks`, beside its parts)."""

from rb_otel.facade.reasonblocks import ReasonBlocks

__all__ = ["ReasonBlocks"]
