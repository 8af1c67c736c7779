"""The rb-api pieces an API key brings: the client, its monitor and pattern backends, the run exporter."""

from __future__ import annotations

from dataclasses import dataclass

from rb_otel.backends.rb_api.backends import HttpMonitorBackend, HttpPatternStore
from rb_otel.backends.rb_api.client import RbApiClient, RemoteConfig
from rb_otel.backends.rb_api.runs import RbApiRunExporter
from rb_otel.steering.etraces.store import PatternStore
from rb_otel.steering.monitors.local import MonitorBackend

__all__ = ["Connection", "connect"]


@dataclass(frozen=True, slots=True)
class Connection:
    """What :func:`connect` made; every field ``None`` (the backends: the caller's) without a key."""

    client: RbApiClient | None
    run_exporter: RbApiRunExporter | None
    monitor_backend: MonitorBackend | None
    pattern_store: PatternStore | None

    @property
    def base_url(self) -> str | None:
        return self.client.config.base_url if self.client is not None else None


def connect(
    api_key: str | None,
    base_url: str | None,
    export_runs: bool,
    monitor_backend: MonitorBackend | None = None,
    pattern_store: PatternStore | None = None,
) -> Connection:
    """With ``api_key``: a client for ``base_url`` (the default one when empty), the HTTP backends for whichever
    of ``monitor_backend`` and ``pattern_store`` the caller did not give, and a run exporter when
    ``export_runs``. Without a key, the caller's backends and nothing else."""
    if not api_key:
        return Connection(None, None, monitor_backend, pattern_store)
    client = RbApiClient(RemoteConfig(api_key=api_key, base_url=base_url or ""))
    return Connection(
        client=client,
        run_exporter=RbApiRunExporter(client) if export_runs else None,
        monitor_backend=monitor_backend or HttpMonitorBackend(client),
        pattern_store=pattern_store or HttpPatternStore(client),
    )
