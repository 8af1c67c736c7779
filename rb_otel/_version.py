"""The package version (its own module so any layer can read it without importing the public face)."""

__version__ = "0.1.0"
