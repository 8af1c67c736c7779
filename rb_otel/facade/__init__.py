"""The facade, :class:`ReasonBlocks` (``reasonblocks``), and its parts: the constructor's argument checks and old
argument names (``arguments``), what the scoring arguments resolve to (``scoring``), the adapter methods beyond the
LangChain middleware (``adapters``)."""
