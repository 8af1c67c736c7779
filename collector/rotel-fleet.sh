#!/usr/bin/env bash
# rotel (PyPI) as the local Collector in front of a fleet of workers, set up for outages of its backend: a batch
# the backend refuses (down, 503, 429, a full disk behind it) is retried every 1 s doubling to 5 s for up to 300 s,
# held in rotel's memory meanwhile. rotel (0.0.1a15) has no persistent queue: what it holds is lost if it is itself
# stopped during such an outage (docs/failure-handling.md; collector/otelcol-persistent-queue.yaml carries that
# too). benchmarks/chaos.py starts the Collector through this script, so `make chaos` tests these settings.
#
#   RB_OTEL_FORWARD_ENDPOINT=http://127.0.0.1:4318 collector/rotel-fleet.sh
#
# Variables: ROTEL_GRPC (127.0.0.1:4317), ROTEL_HTTP (127.0.0.1:4318), RB_OTEL_FORWARD_ENDPOINT (where to send,
# OTLP/HTTP), RB_OTEL_FORWARD_RETRY (300s: how long a refused batch is retried); rotel's own ROTEL_* variables
# (ROTEL_LOG_FILE, ROTEL_PID_FILE, ...) pass through.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
[ -x "$PY" ] || PY=python3
"$PY" -c "import rotel" 2>/dev/null || "$PY" -m pip install --quiet 'rotel>=0.0.1a15'
AGENT=$("$PY" -c "import importlib.resources as r; print(r.files('rotel') / 'rotel-agent')")
exec "$AGENT" start \
  --otlp-grpc-endpoint "${ROTEL_GRPC:-127.0.0.1:4317}" \
  --otlp-http-endpoint "${ROTEL_HTTP:-127.0.0.1:4318}" \
  --exporter otlp \
  --otlp-exporter-endpoint "${RB_OTEL_FORWARD_ENDPOINT:?set RB_OTEL_FORWARD_ENDPOINT}" \
  --otlp-exporter-protocol http \
  --otlp-exporter-retry-initial-backoff 1s \
  --otlp-exporter-retry-max-backoff 5s \
  --otlp-exporter-retry-max-elapsed-time "${RB_OTEL_FORWARD_RETRY:-300s}"
