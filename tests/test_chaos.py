"""A fleet under faults (``benchmarks/chaos.py``, the short plan): 10 workers running scripted LangChain agents
through rb-otel, exporting through a real Collector (rotel) to a real receiver writing to disk, baselines in a real
Redis and a SQLite store; one fault of each kind (kill -9, SIGTERM, the Collector away 5 s, Redis restarted, a
full disk under the store and under the receiver, the receiver answering 503 then 429). What arrived is counted
against every worker's ledger, and every loss must be one ``docs/failure-handling.md`` promises."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from components import wait_until

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.mark.heavy  # 10 worker processes, a Collector, Redis and a receiver of its own
@pytest.mark.real
def test_a_fleet_under_every_fault_loses_only_what_the_docs_promise(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("the full-disk faults mount a small tmpfs: root only")
    sys.path.insert(0, str(BENCHMARKS))
    import chaos
    from chaos_fleet import Unavailable

    try:
        result = chaos.run("ci", 10, tmp_path / "chaos")
    except Unavailable as exc:
        pytest.skip(str(exc))
    chaos.print_result(result)  # the table, in the test's output when it fails
    kinds = [t.kind for t in result.tallies]
    assert kinds == ["none", "kill", "sigterm", "collector", "redis", "disk-sqlite", "disk-receiver", "refuse"]
    broken = [f"{t.label}: {p}" for t in result.tallies for p in t.problems]
    assert broken == []
    for tally in result.tallies:
        assert tally.started > 0 and tally.spans_arrived > 0, f"{tally.label}: the fleet did not run through it"
        assert tally.duplicates == 0, f"{tally.label}: {tally.duplicates} spans arrived twice"
        if tally.kind not in ("none", "kill"):
            assert tally.lost_total == 0, f"{tally.label}: {dict(tally.lost)}"
            assert tally.recover_s is not None, f"{tally.label}: never recovered"
    assert sum(t.runs_lost_in_flight for t in result.tallies) <= 1  # the killed worker's run in flight, if any
    collector = next(t for t in result.tallies if t.kind == "collector")
    assert collector.overhead is not None and collector.overhead <= 1.10  # agents at most 10% slower meanwhile
    assert [b["store"] for b in result.baselines] == ["redis", "sqlite"] and all(b["held"] for b in result.baselines)
    assert result.left_behind == []


@pytest.mark.real
def test_a_full_disk_under_the_sqlite_store_is_named_and_nothing_recorded_is_lost(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("a full disk here is a small tmpfs: root only")
    from rb_otel.backends.baselines.cache import BaselineCache
    from rb_otel.steering.pilot.baselines import RunSummary

    sys.path.insert(0, str(BENCHMARKS))
    from chaos_fleet import Tmpfs, Unavailable

    try:
        disk = Tmpfs(tmp_path / "disk", 2)
    except Unavailable as exc:
        pytest.skip(str(exc))
    try:
        cache = BaselineCache(disk.path / "b.db")
        cache.record("a|m", RunSummary(1.0, {"steps": 3.0}))
        assert cache.flush(timeout=10)
        disk.fill()
        for i in range(20):
            cache.record("a|m", RunSummary(2.0 + i, {"steps": 3.0, "chars": 1e5 * i}))
        wait_until(lambda: cache.errors > 0, timeout=30, what="the write refused")
        assert not cache.flush(timeout=0.5) and cache.pending == 20  # held, not dropped
        with pytest.raises(Exception, match="database or disk is full"):  # the reason, not a ROLLBACK's complaint
            cache.summaries.append([("a|m", RunSummary(99.0, {"steps": 3.0}))])
        disk.free()
        assert cache.flush(timeout=30) and cache.pending == 0
        assert {a.agent: a.runs for a in cache.summaries.agents()} == {"a|m": 21}
        cache.close()
    finally:
        disk.unmount()
