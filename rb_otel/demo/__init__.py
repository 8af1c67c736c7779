"""The demo behind `rb-otel demo`: scripted agents through the real pipeline."""
