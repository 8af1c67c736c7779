#!/usr/bin/env bash
# A local collector that runs on this machine without Docker: rotel (PyPI) receives OTLP on 127.0.0.1 and forwards
# it over OTLP to a backend (a Collector, Phoenix, Jaeger, Tempo...).
#
#   collector/rotel-local.sh                                   # receive on 127.0.0.1:4317/4318
#   RB_OTEL_FORWARD_ENDPOINT=http://127.0.0.1:6006 collector/rotel-local.sh
#
# Variables: ROTEL_GRPC (127.0.0.1:4317), ROTEL_HTTP (127.0.0.1:4318), RB_OTEL_FORWARD_ENDPOINT (where to send),
# RB_OTEL_FORWARD_PROTOCOL (grpc or http, default http).
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
  --otlp-exporter-endpoint "${RB_OTEL_FORWARD_ENDPOINT:-http://127.0.0.1:14318}" \
  --otlp-exporter-protocol "${RB_OTEL_FORWARD_PROTOCOL:-http}"
