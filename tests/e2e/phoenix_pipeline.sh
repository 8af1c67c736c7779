#!/usr/bin/env bash
# Runs INSIDE a private network namespace (unshare -n): Phoenix's gRPC receiver binds every interface, and in
# here the only interface is loopback. demo --OTLP gRPC--> rotel --OTLP HTTP--> Phoenix, and
# demo --OTLP HTTP--> rotel --> Phoenix; then the spans are read back over Phoenix's REST API and the trace view
# of the SKIP run is rendered by headless Chromium. Arguments: OUT_DIR PHOENIX_BIN ROTEL_AGENT PYTHON CHROMIUM
set -euo pipefail
out=$1 phoenix=$2 rotel=$3 python=$4 chromium=$5
ip link set lo up
export PHOENIX_HOST=127.0.0.1 PHOENIX_PORT=16006 PHOENIX_GRPC_PORT=14317 PHOENIX_WORKING_DIR="$out/phoenix"
export PHOENIX_TELEMETRY_ENABLED=false
mkdir -p "$PHOENIX_WORKING_DIR"
"$phoenix" serve > "$out/phoenix.log" 2>&1 &
phoenix_pid=$!
"$rotel" start --otlp-grpc-endpoint 127.0.0.1:24317 --otlp-http-endpoint 127.0.0.1:24318 --exporter otlp \
  --otlp-exporter-endpoint http://127.0.0.1:16006 --otlp-exporter-protocol http --batch-timeout 200ms \
  > "$out/rotel.log" 2>&1 &
rotel_pid=$!
trap 'kill $phoenix_pid $rotel_pid 2>/dev/null || true' EXIT
for _ in $(seq 1 120); do curl -sf -o /dev/null http://127.0.0.1:16006/v1/projects && break; sleep 1; done
curl -sf -o /dev/null http://127.0.0.1:16006/v1/projects

unset OTEL_TRACES_EXPORTER OTEL_EXPORTER_OTLP_PROTOCOL
OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:24317 OTEL_METRICS_EXPORTER=none \
  "$python" -m rb_otel.cli demo --scenario stalled --scenario tool-error --out "$out/grpc" --quiet
OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:24318 OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf \
  OTEL_METRICS_EXPORTER=none "$python" -m rb_otel.cli demo --scenario struggling --out "$out/http" --quiet

expected=$(cat "$out"/grpc/steplogs.jsonl "$out"/http/steplogs.jsonl | grep -c '"step"' || true)
# every span, page by page (the REST API caps a page at 1000)
fetch='
import json, sys, urllib.request
spans, cursor = [], None
while True:
    url = "http://127.0.0.1:16006/v1/projects/default/spans?limit=1000" + (f"&cursor={cursor}" if cursor else "")
    page = json.load(urllib.request.urlopen(url, timeout=10))
    spans += page["data"]
    cursor = page.get("next_cursor")
    if not cursor:
        break
json.dump({"data": spans}, open(sys.argv[1], "w"))
print(sum(s["name"].startswith("chat ") for s in spans))
'
for _ in $(seq 1 60); do
  got=$("$python" -c "$fetch" "$out/spans.json" 2>/dev/null || echo 0)
  [ "$got" -ge "$expected" ] && break
  sleep 1
done
curl -sf http://127.0.0.1:16006/v1/projects > "$out/projects.json"

project=$("$python" -c "import json,sys; print(json.load(open(sys.argv[1]))['data'][0]['id'])" "$out/projects.json")
trace=$("$python" -c "import json,sys; print(json.loads(open(sys.argv[1]).readline())['trace_id'])" "$out/grpc/steplogs.jsonl")
url="http://127.0.0.1:16006/projects/$project/traces/$trace"
echo "$url" > "$out/trace_url.txt"
flags=(--headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking
       --disable-component-update --disable-sync --user-data-dir="$out/chromium" --window-size=1600,1000
       --virtual-time-budget=15000)
"$chromium" "${flags[@]}" --screenshot="$out/phoenix-skip-run.png" "$url" > "$out/chromium.log" 2>&1 || true
"$chromium" "${flags[@]}" --dump-dom "$url" > "$out/trace.html" 2>> "$out/chromium.log" || true
