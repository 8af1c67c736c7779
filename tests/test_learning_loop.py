"""The learning loop end to end, every part real: a worker process records its runs and their outcomes
(``rb.record_outcome``) over OTLP to a real receiver; what the receiver got is written as OTLP/JSON files (what the
Collector's ``file`` exporter writes); ``rb-otel train --watch --store URL``, a process of its own, reads the runs
and the outcome events there and writes the agent's model to the store (SQLite, or a real Redis); the worker, never
restarted, scores its next run of that agent with it (``rb.scorer`` on the run's span), and never fits anything
itself."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from components import OtlpSink, python_module

from rb_otel.backends.baselines.models import model_store_of
from rb_otel.backends.baselines.opening import open_summary_store
from rb_otel.steering.agent_keys import agent_key
from rb_otel.telemetry import names as n

HERE = Path(__file__).resolve().parent
RUNS = 105  # the fit is judged from 100 runs and 20 failures; every third run fails


def _collected(folder: Path) -> Path:
    """What the receiver got, as the Collector's ``file`` exporter writes it: one OTLP/JSON request per line
    (traces in one file, logs in another, ids in hex)."""
    from google.protobuf.json_format import MessageToDict

    from rb_otel.telemetry.otlp_json import _hex_ids

    folder.mkdir()
    for name, requests in (("traces.jsonl", OtlpSink.received), ("logs.jsonl", OtlpSink.received_logs)):
        lines = [json.dumps(_hex_ids(MessageToDict(r, use_integers_for_enums=True))) for r in requests]
        (folder / name).write_text("\n".join(lines) + "\n")
    return folder


def _run_scorers() -> dict[str, set[str]]:
    """``rb.run_id -> the rb.scorer values on its chat spans`` (the scored steps) of every run the receiver got."""
    spans = [span for request in OtlpSink.received for resource in request.resource_spans
             for scope in resource.scope_spans for span in scope.spans]  # fmt: skip
    runs = {}
    for span in spans:
        attributes = {a.key: a.value.string_value for a in span.attributes}
        if span.name.startswith("invoke_agent") and n.RB_RUN_ID in attributes:
            runs[span.trace_id] = attributes[n.RB_RUN_ID]
    out: dict[str, set[str]] = {run: set() for run in runs.values()}
    for span in spans:
        attributes = {a.key: a.value.string_value for a in span.attributes}
        if span.name.startswith("chat") and span.trace_id in runs and attributes.get(n.RB_SCORER):
            out[runs[span.trace_id]].add(attributes[n.RB_SCORER])
    return out


def _outcome_events() -> list[str]:
    """``rb.run_id`` of every run outcome event the receiver got."""
    found = []
    for request in OtlpSink.received_logs:
        for resource in request.resource_logs:
            for scope in resource.scope_logs:
                for record in scope.log_records:
                    attributes = {a.key: a.value.string_value for a in record.attributes}
                    if record.event_name == n.EVENT_EVALUATION_RESULT:
                        found.append(attributes.get(n.RB_RUN_ID, ""))
    return found


@pytest.mark.heavy  # a fit with its permutation gate, and 120 agent runs, in processes of their own
@pytest.mark.parametrize("kind", ["sqlite", "redis"])
def test_outcomes_in_a_watcher_fits_and_the_worker_scores_its_next_run_with_the_model(
    kind: str, otlp_sink: tuple[int, list[Any]], tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    port, _ = otlp_sink
    url = f"sqlite:///{tmp_path / 'fleet.db'}" if kind == "sqlite" else request.getfixturevalue("redis_server").url
    env = {**os.environ, "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}",
           "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "OTEL_LOGS_EXPORTER": "otlp",
           "OTEL_METRICS_EXPORTER": "none", "OTEL_BSP_SCHEDULE_DELAY": "200"}  # fmt: skip
    started = tmp_path / "written"
    command = [sys.executable, str(HERE / "learning_worker.py"), url, "--runs", str(RUNS), "--until-learned", "90",
               "--start-file", str(started)]  # fmt: skip
    log = (tmp_path / "worker.log").open("w")  # its warnings: a pipe nobody reads would fill and block it
    worker = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log, text=True, env=env)
    try:
        assert worker.stdout is not None
        history = json.loads(worker.stdout.readline() or "{}").get("history")
        assert history is not None and len(history) == RUNS, (tmp_path / "worker.log").read_text()[-3000:]
        assert set(history) <= set(_outcome_events())  # the outcome events arrived
        before = _run_scorers()
        defaults = {name for r in history for name in before[r]}
        assert defaults and not any(name.startswith("pilot/agent:") for name in defaults)  # before any fit
        source = _collected(tmp_path / "collected")
        train = [*python_module("rb_otel.cli"), "train", str(source), "--watch", "--store", url, "--polls", "1"]
        watcher = subprocess.run(train, check=False, capture_output=True, text=True, timeout=900,
                                 env={**os.environ, "RB_OTEL_PILOT_BASELINES": ""})  # fmt: skip
        assert watcher.returncode == 0, watcher.stderr
        key = agent_key("coder", "scripted-1")
        store = open_summary_store(url)
        models = model_store_of(store)
        assert models is not None
        record = models.model(key)
        store.close()
        assert record is not None, watcher.stdout  # trusted: the fit reads what the agent did, not its size
        assert record.labels == RUNS and record.name == f"pilot/agent:{key}@{RUNS}"
        assert f"wrote pilot/agent:{key}@{RUNS}" in watcher.stdout
        started.touch()  # within a minute from now (30 s refreshes), without a restart
        done = json.loads(worker.stdout.readline() or "{}")
        assert worker.wait(timeout=60) == 0
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
        log.close()
    assert done["learned"] == record.name  # picked up without a restart
    after = _run_scorers()
    learned = [r for r, scorers in after.items() if r not in before and scorers == {record.name}]
    assert learned  # the next runs of the agent were scored by it, and their spans say so
    assert done["training_modules"] == []  # no refit work in the agent's process
    assert not [t for t in done["threads"] if "fit" in t.lower() or "train" in t.lower()]
