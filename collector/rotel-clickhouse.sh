#!/usr/bin/env bash
# rotel (PyPI) as the collector, writing to ClickHouse: receives OTLP on 127.0.0.1 and writes the otel_traces table
# in the exporter's schema (docs/fleet-analysis.md), without Docker. rotel does not tail-sample: every run is kept.
#
#   CLICKHOUSE_PASSWORD=... collector/rotel-clickhouse.sh
#
# Variables: ROTEL_GRPC (127.0.0.1:4317), ROTEL_HTTP (127.0.0.1:4318), CLICKHOUSE_ENDPOINT
# (http://127.0.0.1:8123), CLICKHOUSE_DATABASE (otel), CLICKHOUSE_USER (rb_otel), CLICKHOUSE_PASSWORD (from the
# environment only: rotel reads ROTEL_CLICKHOUSE_EXPORTER_PASSWORD, so it never appears in the process list).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
[ -x "$PY" ] || PY=python3
"$PY" -c "import rotel" 2>/dev/null || "$PY" -m pip install --quiet 'rotel>=0.0.1a15'
AGENT=$("$PY" -c "import importlib.resources as r; print(r.files('rotel') / 'rotel-agent')")
export ROTEL_CLICKHOUSE_EXPORTER_PASSWORD="${CLICKHOUSE_PASSWORD:?set CLICKHOUSE_PASSWORD}"
exec "$AGENT" start \
  --otlp-grpc-endpoint "${ROTEL_GRPC:-127.0.0.1:4317}" \
  --otlp-http-endpoint "${ROTEL_HTTP:-127.0.0.1:4318}" \
  --exporter clickhouse \
  --clickhouse-exporter-endpoint "${CLICKHOUSE_ENDPOINT:-http://127.0.0.1:8123}" \
  --clickhouse-exporter-database "${CLICKHOUSE_DATABASE:-otel}" \
  --clickhouse-exporter-table-prefix otel \
  --clickhouse-exporter-user "${CLICKHOUSE_USER:-rb_otel}"
