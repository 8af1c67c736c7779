"""rb-api over HTTP: the client, the monitor and pattern backends, and the optional run exporter."""

from rb_otel.backends.rb_api.backends import HttpMonitorBackend, HttpPatternStore
from rb_otel.backends.rb_api.client import RbApiClient, RemoteConfig, RemoteError
from rb_otel.backends.rb_api.connection import Connection, connect
from rb_otel.backends.rb_api.runs import RbApiRunExporter

__all__ = [
    "Connection",
    "HttpMonitorBackend",
    "HttpPatternStore",
    "RbApiClient",
    "RbApiRunExporter",
    "RemoteConfig",
    "RemoteError",
    "connect",
]
