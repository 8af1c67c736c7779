"""The benchmark scripts still run, and the concurrency benchmark's correctness checks hold on a small scale.

Timings are printed by the scripts, never asserted here.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def _run(script: str, *args: str, timeout: float = 300) -> str:
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / script), *args],
        cwd=BENCHMARKS,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_many_threads_through_one_middleware_keep_runs_apart(tmp_path: Path) -> None:
    report = tmp_path / "scale.json"
    _run("bench_scale.py", "--runs", "40", "--threads", "1,8,40", "--json", str(report))
    result = json.loads(report.read_text())
    assert [row["threads"] for row in result["rows"]] == [1, 8, 40]
    for row in result["rows"]:
        assert row["isolation"].startswith("40/40 runs with their own root, 0 with wrong steps, 400 spans")
        assert row["rb_otel_runs_per_s"] > 0 and row["bare_runs_per_s"] > 0
    assert result["runs_active_after"] == 0


def test_memory_benchmark_reports_its_samples(tmp_path: Path) -> None:
    report = tmp_path / "memory.json"
    _run(
        "bench_memory.py",
        *("--runs", "40", "--warmup", "10", "--every", "20", "--drain", "10", "--concurrent", "8", "--rounds", "2"),
        *("--json", str(report)),
    )
    result = json.loads(report.read_text())
    assert [n for n, _ in result["sequential_mb"]] == [0, 20, 40]
    assert len(result["concurrent_mb"]) == 2 and all(mb > 0 for mb in result["concurrent_mb"])


def test_steering_benchmark_reports_every_run_length(tmp_path: Path) -> None:
    report = tmp_path / "steering.json"
    _run("bench_steering.py", "--rounds", "1", "--evict-mb", "4", "--json", str(report))
    result = json.loads(report.read_text())
    for n in ("10", "100", "1000", "10000"):
        row = result[n]
        assert 0 < row["best_round_median_us"] <= row["median_us"] and row["p90_us"] >= row["median_us"]
    assert result["store_query_1000_patterns"]["mean_us"] > 0
    assert result["cold_caches_100_steps"]["median_us"] > 0 and result["cold_caches_100_steps"]["evict_mb"] == 4


def test_floors_benchmark_measures_each_floor_with_the_spans_it_claims(tmp_path: Path) -> None:
    report = tmp_path / "floors.json"
    _run("bench_floors.py", "--runs", "4", "--warmup", "2", "--seconds", "0.2", "--json", str(report))
    result = json.loads(report.read_text())
    spans = {row["variant"]: row["spans_per_run"] for row in result["agent"]}
    # The hook and the wrapper record nothing, nor does rb-otel with no-op providers; with the SDK, with or without
    # steering, rb-otel records the contract's 10 spans per run.
    assert spans == {
        "empty hook + run guard": 0,
        "model wrapper + run guard": 0,
        "no steering, no-op OTel": 0,
        "no steering, SDK": 10,
        "rb-otel (full)": 10,
        "rb-otel model wrapper (full)": 10,
    }
    assert all(row["bare_ms"] > 0 and row["variant_ms"] > 0 for row in result["agent"])
    assert result["sdk_chat_spans_per_s"] > 0


def test_peer_worker_answers_turns_and_reports_spans_and_memory() -> None:
    """compare.py's worker protocol, with the variants that need no peer package (bare, rb-otel)."""
    for variant, spans in (("bare", 0), ("rb-otel", 10), ("rb-otel-wrapper", 10), ("rb-otel-unsteered", 10)):
        done = subprocess.run(
            [sys.executable, str(BENCHMARKS / "peer_run.py"), variant, "--warmup", "2"],
            input="5 3\n1 2\nquit\n",
            cwd=BENCHMARKS,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        ready, five, one, end = (json.loads(line) for line in done.stdout.strip().splitlines())
        calls = ready.pop("calls_per_run")
        layers = ready.pop("layers")
        assert ready == {"ready": True, "variant": variant, "spans_per_run": spans}
        # where the 5-call run's calls go, by layer: every call of the profile in one layer
        assert "LangChain and LangGraph" in layers and all(v["calls"] > 0 for v in layers.values())
        assert any(name.startswith("rb-otel:") for name in layers) == variant.startswith("rb-otel")
        assert set(calls) == {"5", "1"} and calls["5"] > calls["1"] > 1000  # Python calls per run of each workload
        assert len(five) == 3 and len(one) == 2 and all(t > 0 for t in five + one)
        assert set(end) == {"rss_growth_mb"}


def test_compare_starts_its_workers_one_after_another_and_drives_them() -> None:
    """compare.py's and growth.py's workers (``peer_workers.py``): each started once the one before is ready, its
    ready reply kept, then asked for runs and told to quit."""
    peer_workers = _module("peer_workers")
    workers = peer_workers.started(Path(sys.executable), ["bare", "rb-otel"], ("--warmup", "1"))
    try:
        assert [w.info["variant"] for w in workers.values()] == ["bare", "rb-otel"]
        for worker in workers.values():
            assert len(worker.runs(1, 2)) == 2 and len(worker.runs(5, 4, 2)) == 1
    finally:
        for worker in workers.values():
            assert worker.finish() is not None


def test_the_long_reasoning_variants_run(tmp_path: Path) -> None:
    report = tmp_path / "long.json"
    out = _run(
        "bench_steering.py",
        *("--rounds", "1", "--evict-mb", "0", "--thought-chars", "50000", "--lengths", "10,100"),
        *("--scorer", "pilot", "--json", str(report)),
    )
    assert "thoughts: 50,000 characters each" in out
    assert set(json.loads(report.read_text())) >= {"10", "100"}
    middleware = tmp_path / "middleware.json"
    out = _run(
        "bench_middleware.py", "--runs", "3", "--passes", "1", "--reasoning-chars", "5000", "--json", str(middleware)
    )
    assert "reasoning: 5,000 characters per model turn" in out
    assert set(json.loads(middleware.read_text())["summary"]) == {"middleware", "wrapper"}


def _module(name: str) -> Any:
    """A benchmark script as a module (they are scripts, not a package), its sibling modules importable as they
    are when it runs from ``benchmarks/``."""
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCHMARKS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    sys.path.insert(0, str(BENCHMARKS))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(BENCHMARKS))
    return module


def test_no_benchmark_script_imports_one_that_imports_it_back() -> None:
    """The scripts import shared code from modules of its own (``peer_workers``), never each other in a circle."""
    import ast

    local = {p.stem for p in BENCHMARKS.glob("*.py")}
    edges: dict[str, set[str]] = {}
    for path in BENCHMARKS.glob("*.py"):
        found = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                found.add(node.module.split(".")[0])
        edges[path.stem] = found & local

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        return any(n == goal or (n not in seen and reaches(n, goal, seen | {n})) for n in edges.get(start, ()))

    assert edges["compare"] >= {"growth", "peer_workers"} and "peer_workers" in edges["growth"]
    assert [name for name in sorted(edges) if reaches(name, name, set())] == []


def test_a_count_includes_the_batches_rb_otels_flusher_thread_did(monkeypatch: pytest.MonkeyPatch) -> None:
    """peer_run's counts: cProfile sees only its own thread, so a batch of finished work that rb-otel's flusher
    thread takes over (a run that outlasts the batch window) is profiled there and added; without that it is
    missed."""
    from rb_otel.telemetry.batch import Batch

    peer_run = _module("peer_run")

    def measured(value: float, attributes: Any, context: Any) -> None:  # what the SDK's record would be
        del value, attributes, context

    histogram: Any = type("Histogram", (), {"record": staticmethod(measured)})()

    def run_flushed_elsewhere() -> None:
        batch = Batch(window=60.0)
        for _ in range(3):
            batch.record(histogram, 1.0, {"gen_ai.agent.name": "a"}, None)
        flusher = threading.Thread(target=batch.flush)
        flusher.start()
        flusher.join()

    def records_counted() -> int:
        stats = peer_run.profiled(run_flushed_elsewhere, runs=2).stats
        return sum(entry[1] for func, entry in stats.items() if func[2] == "measured")

    monkeypatch.setattr(Batch, "flush", Batch.flush)  # put back after the test
    assert records_counted() == 0  # the flusher's thread is not this one
    peer_run._profile_flushes_off_the_agents_thread()
    assert records_counted() == 6
    Batch(window=60.0).flush()  # outside a count, on this thread: nothing is collected
    assert peer_run._OffThread.profiles is None


def test_a_standard_library_call_counts_for_the_layer_that_made_it() -> None:
    """peer_run's attribution: a builtin, standard-library or other unlayered function is split among its callers'
    layers by how often each called it, through chains of such calls and recursion; a layer's function keeps its
    layer, and the benchmark's own code is its own."""
    peer_run = _module("peer_run")
    stdlib = "/usr/lib/python3.11"  # any path outside the layers and the benchmarks folder
    steering = ("/x/rb_otel/steering/session.py", 1, "begin_step")
    graph = ("/x/site-packages/langgraph/pregel/main.py", 1, "invoke")
    helper = (f"{stdlib}/enum.py", 1, "__get__")  # called 3 times by rb-otel, once by LangGraph
    inner = (f"{stdlib}/types.py", 1, "__get__")  # called only by helper, and by itself (recursion)
    builtin = ("~", 0, "<built-in method builtins.len>")  # called by inner
    stats = {
        steering: (1, 1, 0.0, 0.0, {}),
        graph: (1, 1, 0.0, 0.0, {}),
        helper: (4, 4, 0.0, 0.0, {steering: (3, 3, 0.0, 0.0), graph: (1, 1, 0.0, 0.0)}),
        inner: (2, 4, 0.0, 0.0, {helper: (2, 2, 0.0, 0.0), inner: (2, 2, 0.0, 0.0)}),
        builtin: (8, 8, 0.0, 0.0, {inner: (8, 8, 0.0, 0.0)}),
    }
    memo: dict[Any, dict[str, float]] = {}
    expected = {"rb-otel: steering step": 0.75, "LangChain and LangGraph": 0.25}
    for func in (helper, inner, builtin):
        assert peer_run._shares(func, stats, memo, set()) == expected
    assert peer_run._shares(graph, stats, memo, set()) == {"LangChain and LangGraph": 1.0}
    tool = (str(BENCHMARKS / "peer_run.py"), 1, "add")  # the agent's tool, called by LangGraph: the agent's
    assert peer_run._shares(tool, {tool: (1, 1, 0.0, 0.0, {graph: (1, 1, 0.0, 0.0)})}, {}, set()) == {
        "Python and the rest": 1.0
    }
    orphan = (f"{stdlib}/threading.py", 1, "run")  # no caller on record: nobody's layer
    assert peer_run._shares(orphan, {orphan: (1, 1, 0.0, 0.0, {})}, {}, set()) == {"Python and the rest": 1.0}


def test_the_floor_is_the_overhead_outside_rb_otels_own_layers() -> None:
    """compare.py's floor rows: calls above the bare agent, and those outside the ``rb-otel: `` layers, each
    against the official package's overhead."""
    compare = _module("compare")

    def layers(**calls: float) -> dict[str, dict[str, float]]:
        return {name.replace("_", " "): {"calls": n, "ms": 1.0} for name, n in calls.items()}

    table = {
        "bare": layers(framework=1000),
        "rb-otel": {**layers(framework=1100, sdk=500), "rb-otel: steering step": {"calls": 200, "ms": 1.0}},
        "otel-genai": layers(framework=1000, sdk=300, official=700),
    }
    above, floor = compare.floor_rows(table, ["bare", "rb-otel", "otel-genai"])
    assert above == "| above the bare agent (x the official's) |  | +800 (0.80x) | +1,000 (1.00x) |"
    assert floor == "| of which outside rb-otel's own code: the floor |  | +600 (0.60x) | +1,000 (1.00x) |"
    assert compare.floor_rows({"rb-otel": table["rb-otel"]}, ["rb-otel"]) == []  # no bare agent, no baseline


def test_the_growth_table_sets_concurrency_against_one_pool_thread_and_the_main_thread() -> None:
    """growth.py's table: per-step overheads at both lengths, and the 200-at-once figure against runs one at a time
    on the main thread and against the same runs through a pool of one thread (concurrency alone)."""
    growth = _module("growth")
    calls = {"bare": {"5": 100.0, "10": 200.0, "100": 2000.0}, "rb-otel": {"5": 600.0, "10": 1200.0, "100": 12000.0}}
    per_step = {"bare": {10: [], 100: []}, "rb-otel": {10: [0.7, 0.5, 0.6], 100: [0.66]}}
    per_run = {"bare": {}, "rb-otel": {"one": [3.0], "one thread": [3.2, 3.4, 3.3], "together": [3.63]}}
    table = growth._table(["bare", "rb-otel"], calls, per_step, per_run, 3)
    row = table.splitlines()[-1]
    assert row == "| rb-otel | 100 / 100 / 100 | 600 | 660 | 1.10x | 3.00 | 3.30 | 3.63 | 1.21x | 1.10x |"
    assert table.count("|---") == 10  # one separator per column
