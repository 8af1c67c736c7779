# rb-otel developer commands. Every target sets itself up in one .venv: `make demo` (and `make data`) with what
# they need (the package and its [demo] extra), the rest with the test and tool stack as well (the [dev] extra).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.rb-otel-installed
DEMO_STAMP := $(VENV)/.rb-otel-demo-installed

.PHONY: data readme-image docs mutate pilot1-weights train-pilot half-split held-out demo test lint typecheck unit bench bench-floors bench-scale bench-growth bench-memory chaos profile wheel clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# the package and what the demo needs (a venv of about 210 MB)
$(DEMO_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[demo]"
	@touch $(DEMO_STAMP)

# the package and everything the tests, the docs and the tools need (a venv of about 2.1 GB)
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	@touch $(STAMP)

## demo: run the scripted agents through the real pipeline; writes out/traces.jsonl, out/metrics.jsonl, out/report.html
## (then `.venv/bin/rb-otel`, or `. .venv/bin/activate` to have `rb-otel` on the PATH)
demo: $(DEMO_STAMP)
	$(BIN)/rb-otel demo --out out --experiment 24

## readme-image: the pictures of the page in README.md (docs/images/demo-report.png) and docs/report.md
## (run-report.png, one step opened), made from the demo's page (its struggling and stalled runs, content captured)
## by headless Chromium (Debian: apt-get install chromium), so they show the page as it is
IMAGES   ?= docs/images
PAGE_DIR ?= build/readme-image
CHROMIUM ?= chromium
SHOT      = $(CHROMIUM) --headless --no-sandbox --disable-gpu --disable-background-networking \
	--disable-component-update --disable-sync --no-first-run --hide-scrollbars --log-level=3 \
	--user-data-dir=$(abspath $(PAGE_DIR))/chromium-profile-$(1) --window-size=1100,$(2) \
	--screenshot=$(abspath $(IMAGES))/$(1).png file://$(abspath $(PAGE_DIR))/$(3)
readme-image: $(STAMP)
	@command -v $(CHROMIUM) >/dev/null || { echo "readme-image: no $(CHROMIUM) here (apt-get install chromium)" >&2; exit 2; }
	rm -rf $(PAGE_DIR)
	OTEL_TRACES_EXPORTER=none OTEL_METRICS_EXPORTER=none OTEL_LOGS_EXPORTER=none \
	OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true \
	  $(BIN)/rb-otel demo --quiet --scenario struggling --scenario stalled --out $(PAGE_DIR)
	$(call SHOT,demo-report,1000,report.html)
	sed 's|<details><summary>step 7 |<details open><summary>step 7 |' $(PAGE_DIR)/report.html > $(PAGE_DIR)/step.html
	grep -q '<details open>' $(PAGE_DIR)/step.html
	$(call SHOT,run-report,1500,step.html)

## test: lint, type-check, build the docs (links checked) and run the whole test suite
test: lint typecheck docs unit

## data: fetch the development records (other projects' published runs) from their pinned origins into data/,
## each file checked against rb_otel/datasets/manifest.json; resumable (docs/development.md, "Development records")
data: $(DEMO_STAMP)
	$(BIN)/python -m rb_otel.datasets fetch

## docs: the documentation site (mkdocs, strict: a broken link or anchor fails) -> site/
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

lint: $(STAMP)
	$(BIN)/ruff check rb_otel tests benchmarks grafana research
	$(BIN)/ruff format --check rb_otel tests benchmarks grafana research

typecheck: $(STAMP)
	$(BIN)/mypy

# The suite in 4 workers (most tests wait on processes and servers, so more workers than cores pays), then, one
# at a time, the tests that assert a time bound (marked `serial`) and those that bring their own processes
# (marked `heavy`). The second phase runs whatever the first gave, so one run shows every failure; the target
# fails at the end if either phase did. pytest exits 5 when it collects no test; that is reported, not hidden as a
# pass.
unit: $(STAMP)
	@$(BIN)/python -m pytest -n 4 -m "not serial and not heavy"; parallel=$$?; \
	if [ $$parallel -eq 5 ]; then echo "pytest collected no tests"; fi; \
	$(BIN)/python -m pytest -m "serial or heavy"; alone=$$?; \
	if [ $$alone -eq 5 ]; then echo "pytest collected no serial or heavy tests"; fi; \
	echo "unit: parallel phase exit $$parallel, serial and heavy phase exit $$alone"; \
	if [ $$parallel -ne 0 ]; then exit $$parallel; fi; exit $$alone

## pilot1-weights: reproduce the shipped pilot/1 weights from the development records (research/pilot1_weights.py); writes
## rb_otel/steering/pilot/pilot_weights.json and research/pilot_report.json (out-of-sample figures). Your own pilot: rb-otel train
pilot1-weights: $(STAMP)
	$(BIN)/python research/pilot1_weights.py

train-pilot: pilot1-weights  # the previous name of pilot1-weights

## half-split: docs/signal.md's measured table: each development source fitted on half its task groups, tested on
## the other half (seeds 5-9); writes research/half_split_report.json (about 15 minutes on two cores)
half-split: $(STAMP)
	$(BIN)/python research/half_split.py --json research/half_split_report.json

## held-out: docs/signal.md's cold start: every development harness left out in turn within its kind, the floor per
## left-out agent and the kinds' size defaults (rb_otel/steering/pilot/pilot_size_<kind>.json), then
## every agent held out within its kind and the converged coding runs; writes research/leave_one_harness_out_report.json
## and research/leave_one_agent_out_report.json (about 30 minutes on two cores; the data root: make data)
held-out: $(STAMP)
	cd research && ../$(BIN)/python leave_one_harness_out.py --json leave_one_harness_out_report.json --write-size-models
	cd research && ../$(BIN)/python leave_one_agent_out.py --json leave_one_agent_out_report.json

## mutate: mutation testing (mutmut) of redaction, the FSM, the heuristic and the new importers; docs/mutation.md has the score
mutate: $(STAMP)
	$(BIN)/python -m pip install --quiet "mutmut>=3.3"
	rm -rf mutants
	$(BIN)/mutmut run; $(BIN)/mutmut results

## bench: steering core (short and long-reasoning thoughts), middleware overhead (both), floors, and rb-otel vs peers in fresh processes (numbers, not assertions)
bench: $(STAMP)
	$(BIN)/python benchmarks/bench_steering.py
	$(BIN)/python benchmarks/bench_steering.py --scorer pilot --evict-mb 0
	$(BIN)/python benchmarks/bench_steering.py --scorer pilot --evict-mb 0 --baselines redis
	for chars in 5000 50000; do for scorer in heuristic pilot; do \
	  $(BIN)/python benchmarks/bench_steering.py --thought-chars $$chars --scorer $$scorer --evict-mb 0 || exit 1; done; done
	$(BIN)/python benchmarks/bench_pilot.py
	$(BIN)/python benchmarks/bench_middleware.py
	for chars in 5000 50000; do $(BIN)/python benchmarks/bench_middleware.py --reasoning-chars $$chars --passes 3 || exit 1; done
	$(BIN)/python benchmarks/bench_floors.py
	$(BIN)/python benchmarks/bench_export.py
	$(BIN)/python benchmarks/compare.py
	$(BIN)/python benchmarks/ab_release.py

## bench-floors: what the framework and the OpenTelemetry SDK cost before any steering
bench-floors: $(STAMP)
	$(BIN)/python benchmarks/bench_floors.py

## bench-scale: 1,000 runs on up to 1,000 threads through one middleware (throughput, isolation)
bench-scale: $(STAMP)
	$(BIN)/python benchmarks/bench_scale.py

## bench-growth: each variant's overhead per step at 10 and 100 steps, and per run with 200 runs at once, side by side
bench-growth: $(STAMP)
	$(BIN)/python benchmarks/growth.py

## bench-memory: RSS across 5,000 sequential runs and rounds of 200 concurrent runs
bench-memory: $(STAMP)
	$(BIN)/python benchmarks/bench_memory.py

## chaos: 50 worker processes under faults (kill -9, rolling SIGTERM, the Collector away 5/30/120 s, Redis restarted,
## full disks, 503 then 429), what arrived counted against docs/failure-handling.md's promises (about 10 minutes; root;
## CHAOS_ARGS="--json FILE --keep" to keep the figures and the ledgers, "--collector otelcol-rb --spool" for otelcol-rb)
chaos: $(STAMP)
	$(BIN)/python benchmarks/chaos.py $(CHAOS_ARGS)

## collector / jaeger: build otelcol-rb (rb-otel's Collector distribution, collector/otelcol-rb.builder.yaml) or Jaeger v2
## (collector/jaeger/go.mod) from source into ~/.cache/rb-otel/bin; needs Go; rebuilt only when its module changes;
## the last line printed is the binary's path (docs/operators.md)
.PHONY: collector jaeger
collector:
	@collector/build.sh otelcol-rb
jaeger:
	@collector/build.sh jaeger

## profile: py-spy flame graph and summary of the hot path -> benchmarks/profiles/
profile: $(STAMP)
	$(BIN)/python benchmarks/profile_hot_path.py --threads 256

wheel: $(STAMP)
	$(BIN)/python -m pip wheel --no-deps --wheel-dir dist .

clean:
	rm -rf $(VENV) .phoenix-venv out dist build .pytest_cache .mypy_cache .ruff_cache .hypothesis
