"""End to end against a real trace backend: demo -> rotel (OTLP gRPC and HTTP) -> Arize Phoenix, read back over
Phoenix's REST API and checked against the demo's own step logs; plus a headless Chromium picture of the trace.

Phoenix lives in its own virtualenv (it registers a pytest plugin) and the whole pipeline runs in a private
network namespace, where loopback is the only interface (Phoenix's gRPC receiver ignores its host setting).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from components import debian_binary, rotel_agent

#: Phoenix, rotel, the demo and Chromium, once for both tests (``make test`` runs them one at a time).
pytestmark = pytest.mark.heavy

ROOT = Path(__file__).resolve().parents[1]
PHOENIX_VENV = Path(os.environ.get("RB_OTEL_PHOENIX_VENV", ROOT / ".phoenix-venv"))
ARTIFACTS = ROOT / "out" / "e2e"


def phoenix_binary() -> str:
    binary = PHOENIX_VENV / "bin" / "phoenix"
    if not binary.exists():
        try:
            subprocess.run([sys.executable, "-m", "venv", str(PHOENIX_VENV)], check=True, timeout=120)
            subprocess.run(
                [str(PHOENIX_VENV / "bin" / "pip"), "install", "-q", "arize-phoenix"],
                check=True,
                timeout=900,
                capture_output=True,
            )
        except (subprocess.SubprocessError, OSError) as exc:
            pytest.skip(f"Arize Phoenix could not be installed into {PHOENIX_VENV}: {exc}")
    return str(binary)


def can_unshare() -> bool:
    if os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("ip"):
        return False
    return subprocess.run(["unshare", "-n", "true"], check=False).returncode == 0


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not can_unshare():
        pytest.skip("needs root with unshare and ip (a private network namespace keeps Phoenix off the network)")
    phoenix = phoenix_binary()
    rotel = rotel_agent()
    chromium = debian_binary("chromium", "chromium")
    out = tmp_path_factory.mktemp("phoenix")
    script = ROOT / "tests" / "e2e" / "phoenix_pipeline.sh"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "PYTEST"))}
    done = subprocess.run(
        ["unshare", "-n", "bash", str(script), str(out), phoenix, rotel, sys.executable, chromium],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    for name in ("phoenix-skip-run.png", "spans.json", "trace.html"):
        if (out / name).exists():
            shutil.copy(out / name, ARTIFACTS / name)
    return out


def step_logs(path: Path) -> dict[str, list[dict[str, Any]]]:
    runs: dict[str, list[dict[str, Any]]] = {}
    current = ""
    for line in path.read_text().splitlines():
        record = json.loads(line)
        if "step" not in record:
            current = record["run_id"]
            runs[current] = []
        else:
            runs[current].append(record)
    return runs


def test_every_span_arrives_with_its_tree_and_attributes(pipeline: Path) -> None:
    spans = json.loads((pipeline / "spans.json").read_text())["data"]
    by_id = {s["context"]["span_id"]: s for s in spans}
    roots = {s["attributes"]["rb.run_id"]: s for s in spans if s["name"].startswith("invoke_agent")}
    logs = {**step_logs(pipeline / "grpc" / "steplogs.jsonl"), **step_logs(pipeline / "http" / "steplogs.jsonl")}
    assert set(roots) == set(logs) and len(logs) == 3  # stalled + tool-error over gRPC, struggling over HTTP
    for run_id, entries in logs.items():
        root = roots[run_id]
        assert by_id[root["parent_id"]]["name"].startswith("demo ")  # a child of the caller's span
        children = [s for s in spans if s["parent_id"] == root["context"]["span_id"]]
        chats = sorted((s for s in children if s["name"].startswith("chat ")), key=lambda s: s["attributes"]["rb.step"])
        tools = [s for s in children if s["name"].startswith("execute_tool ")]
        assert len(chats) == len(entries)
        assert len(tools) == sum(len(e["tool_calls"]) for e in entries)
        assert all(s["context"]["trace_id"] == root["context"]["trace_id"] for s in children)
        for span, entry in zip(chats, entries, strict=True):
            a = span["attributes"]
            assert a["rb.step"] == entry["step"] and a["rb.fsm_state"] == entry["fsm_state"]
            assert a["rb.tokens"] == entry["tokens"] and list(a["rb.tool_calls"]) == entry["tool_calls"]
            assert list(a.get("rb.monitors_fired", [])) == entry["monitors_fired"]
            assert list(a.get("rb.injection_sources", [])) == entry["injection_sources"]
            assert a.get("rb.model_id", "") == entry.get("model_id", "")
            assert a.get("rb.failure_type") == entry.get("failure_type")
            assert a.get("rb.skipped_reason") == entry.get("skipped_reason")
            assert a["rb.latency_ms"] == pytest.approx(entry["latency_ms"], abs=0.06)
            if "difficulty" in entry:
                assert a["rb.difficulty"] == pytest.approx(entry["difficulty"], abs=1e-4)
            assert a["gen_ai.operation.name"] == "chat"
            assert a["gen_ai.usage.input_tokens"] + a["gen_ai.usage.output_tokens"] == entry["tokens"]
            assert a["gen_ai.request.model"] == ("strong-1" if entry.get("model_id") else "agent-1")
        assert root["attributes"]["rb.steps"] == len(entries)
        assert root["attributes"]["rb.tokens"] == sum(e["tokens"] for e in entries)
    stalled = next(r for r in roots.values() if r["attributes"]["gen_ai.agent.name"] == "demo-stalled")
    assert stalled["attributes"]["rb.max_state"] == "SKIP" and stalled["attributes"]["rb.entered_skip"] is True
    failed = next(r for r in roots.values() if r["attributes"]["gen_ai.agent.name"] == "demo-tool-error")
    assert failed["status_code"] == "ERROR" and failed["attributes"]["rb.outcome"] == "failure: ConnectionError"


def test_phoenix_trace_view_of_the_skip_run_is_rendered(pipeline: Path) -> None:
    picture = pipeline / "phoenix-skip-run.png"
    assert picture.exists() and picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert picture.stat().st_size > 20_000  # a rendered page, not a blank frame
    dom = (pipeline / "trace.html").read_text(errors="replace")
    assert "invoke_agent demo-stalled" in dom
    assert "chat " in dom and "execute_tool" in dom
