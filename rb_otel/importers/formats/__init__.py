"""One reader per harness format; each yields ``ImportedRun`` objects."""
