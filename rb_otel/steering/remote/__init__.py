"""rb-api over HTTP: the client, the monitor and pattern backends, and the optional run exporter."""

from rb_otel.steering.remote.backends import HttpMonitorBackend, HttpPatternStore
from rb_otel.steering.remote.client import RbApiClient, RemoteConfig, RemoteError
from rb_otel.steering.remote.runs import RbApiRunExporter

__all__ = ["HttpMonitorBackend", "HttpPatternStore", "RbApiClient", "RbApiRunExporter", "RemoteConfig", "RemoteError"]
