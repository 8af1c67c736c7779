"""Steering state a fleet shares: the pilot's baselines in SQLite (one machine) and Redis (several), with real
worker processes (``fleet_worker.py``: scripted LangChain agents), a real ``redis-server``, ``kill -9`` and
outages. Nothing is mocked."""

from __future__ import annotations

import json
import logging
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from components import RedisServer, wait_until
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rb_otel import ReasonBlocks
from rb_otel.backends.baselines.cache import BaselineCache
from rb_otel.backends.baselines.errors import SummaryStoreError
from rb_otel.backends.baselines.redis_store import RedisSummaryStore
from rb_otel.backends.baselines.sqlite_store import SqliteSummaryStore
from rb_otel.backends.pilot import PilotScorer
from rb_otel.steering.agent_keys import agent_key, normalise_model
from rb_otel.steering.pilot.baselines import MAX_RUNS, AgentBaseline, MemorySummaryStore, RunSummary
from rb_otel.steering.scoring import ScorerStep

WORKER = Path(__file__).resolve().parent / "fleet_worker.py"
KEY = agent_key("coder", "@google/Gemini-3-Pro")


def _worker(url: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(WORKER), url, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def _finish(procs: list[subprocess.Popen[str]], timeout: float = 120) -> list[tuple[list[dict[str, Any]], str]]:
    out = []
    for proc in procs:
        stdout, stderr = proc.communicate(timeout=timeout)
        assert proc.returncode == 0, stderr
        out.append(([json.loads(line) for line in stdout.splitlines() if line.strip()], stderr))
    return out


def _runs_of(store: Any, key: str = KEY) -> int:
    return {a.agent: a.runs for a in store.agents()}.get(key, 0)


def _fleet(url: str, store: Any) -> None:
    """8 processes x 25 runs of one agent: 200 runs recorded; a 9th process's first run reads all 200."""
    results = _finish([_worker(url, "--runs", "25") for _ in range(8)])
    assert all(len([r for r in rows if "run" in r]) == 25 for rows, _ in results)
    assert all(rows[-1] == {"done": True, "errors": 0} for rows, _ in results)
    assert _runs_of(store) == 200
    assert store.recent(KEY).runs == 200 and len(store.recent(KEY).recent) == 200
    [(ninth, _)] = _finish([_worker(url, "--runs", "1")])
    assert ninth[0]["known"] == 200 and ninth[0]["relative"] is True  # scored against all 200, its own thresholds
    assert _runs_of(store) == 201


# -- SQLite -------------------------------------------------------------------------------------------------


def test_sqlite_fleet_of_processes_shares_one_baseline(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path / 'baselines.db'}"
    store = SqliteSummaryStore(tmp_path / "baselines.db")
    _fleet(url, store)
    with sqlite3.connect(tmp_path / "baselines.db") as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_sqlite_keeps_the_newest_400_runs_of_an_agent(tmp_path: Path) -> None:
    url = str(tmp_path / "long.db")  # a plain path means SQLite
    _finish([_worker(url, "--runs", "150") for _ in range(3)])
    store = SqliteSummaryStore(Path(url))
    assert _runs_of(store) == 450
    recent = store.recent(KEY)
    assert recent.runs == 450 and len(recent.recent) == MAX_RUNS
    newest = max(a.newest or 0.0 for a in store.agents())
    assert max(s.finished_at for s in recent.recent) == newest  # the newest kept, the oldest 50 gone


def test_a_killed_worker_loses_nothing_it_had_finished(tmp_path: Path) -> None:
    path = tmp_path / "kill.db"
    proc = _worker(str(path), "--runs", "100000", "--pace", "0.02")
    assert proc.stdout is not None
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, "")), daemon=True)  # type: ignore[union-attr]
    reader.start()
    deadline = time.monotonic() + 300  # a hang guard: a loaded machine starts a worker in tens of seconds
    while len(lines) < 15 and time.monotonic() < deadline:
        time.sleep(0.05)
    settled = len(lines)  # finished at least 0.5 s before the kill: written by then (the writer takes ms)
    time.sleep(0.5)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)  # hang guards
    reader.join(timeout=60)
    finished = len(lines)
    assert settled >= 15
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    stored = _runs_of(SqliteSummaryStore(path))
    assert settled <= stored <= finished + 1  # everything it had finished; at most the run it was in


def test_runs_queued_at_a_normal_exit_are_written(tmp_path: Path) -> None:
    path = tmp_path / "exit.db"
    _finish([_worker(str(path), "--runs", "30", "--no-close")])  # no ReasonBlocks.close(): the exit hook writes
    assert _runs_of(SqliteSummaryStore(path)) == 30


# -- Redis --------------------------------------------------------------------------------------------------


@pytest.mark.real
def test_redis_fleet_of_processes_shares_one_baseline(redis_server: RedisServer) -> None:
    _fleet(redis_server.url, RedisSummaryStore(redis_server.url))


class _Fleet:
    """Worker processes (``fleet_worker.py``, one per URL) whose lines are read as they come, a thread per pipe."""

    def __init__(self, urls: list[str], *args: str) -> None:
        self.procs = [_worker(url, *args) for url in urls]
        self.rows: list[list[dict[str, Any]]] = [[] for _ in self.procs]
        self.errs: list[list[str]] = [[] for _ in self.procs]
        self._readers = [
            threading.Thread(target=_read, args=(pipe, into, parse), daemon=True)
            for proc, rows, errs in zip(self.procs, self.rows, self.errs, strict=True)
            for pipe, into, parse in ((proc.stdout, rows, True), (proc.stderr, errs, False))
        ]
        for reader in self._readers:
            reader.start()

    def runs(self, i: int, since: float = 0.0, until: float = float("inf")) -> list[dict[str, Any]]:
        """Worker ``i``'s runs that finished between ``since`` and ``until`` (``time.time()``)."""
        return [r for r in list(self.rows[i]) if "run" in r and since < r["at"] < until]

    def wait_for_runs(self, n: int, since: float, workers: range, what: str) -> None:
        """Until each of ``workers`` has finished ``n`` runs after ``since``: progress, not a stopwatch (a hang
        guard of minutes; a loaded machine starts the workers in tens of seconds)."""
        wait_until(lambda: all(len(self.runs(i, since)) >= n for i in workers), timeout=300, interval=0.05, what=what)

    def finish(self, stop: Path) -> list[str]:
        """Stop the workers (``--until-file``), wait for them (a hang guard), and give each one's stderr."""
        stop.touch()
        for proc in self.procs:
            proc.wait(timeout=120)
        for reader in self._readers:
            reader.join(timeout=60)
        errs = ["".join(e) for e in self.errs]
        assert all(proc.returncode == 0 for proc in self.procs), errs
        return errs


def _read(pipe: Any, into: list[Any], parse: bool) -> None:
    for line in pipe:
        if line.strip():
            into.append(json.loads(line) if parse else line)


def _newest(store: RedisSummaryStore) -> float:
    """When the newest run in ``store`` was recorded (0: none, or the store does not answer yet)."""
    try:
        return max((a.newest or 0.0) for a in store.agents())
    except Exception:
        return 0.0


def _outage_fleet(url: str, stop: Path, n: int) -> _Fleet:
    """``n`` workers on ``url`` and, last, one on ``memory://``: the pace the machine allows a run just now."""
    args = ["--runs", "100000", "--pace", "0.03", "--fresh-agents", "--until-file", str(stop)]
    return _Fleet([url] * n + ["memory://"], *args)


def _p90(runs: list[dict[str, Any]]) -> float:
    seconds = sorted(r["seconds"] for r in runs[1:])  # the first run of a process imports and warms up
    return seconds[int(0.9 * (len(seconds) - 1))]


def _kept_pace(fleet: _Fleet, since: float, until: float) -> None:
    """Each worker on the failing store ran as the one on ``memory://`` did over the same seconds: a third of its
    runs at least, and its slow runs (the 90th percentile) within 3 times the reference's plus the 200 ms a run
    start may wait. A ratio measured at once beside the reference, so load slows both alike; a start that waited
    on the store (a 2 s read, say, or the 5 s write timeout) would fail both."""
    reference = fleet.runs(len(fleet.procs) - 1)
    window = len(fleet.runs(len(fleet.procs) - 1, since, until))
    for i in range(len(fleet.procs) - 1):
        assert len(fleet.runs(i, since, until)) >= window / 3, (i, len(fleet.runs(i, since, until)), window)
        assert _p90(fleet.runs(i)) < 0.2 + 3 * _p90(reference), (i, _p90(fleet.runs(i)), _p90(reference))


@pytest.mark.serial  # an outage as long as 15 runs of a reference worker: steadier alone than beside other workers
@pytest.mark.real
def test_redis_stopped_mid_run_fails_open_and_recovers_without_a_restart(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    stop = tmp_path / "stop"
    fleet = _outage_fleet(redis_server.url, stop, 3)
    fleet.wait_for_runs(5, 0.0, range(4), "the workers running")
    stopped = time.time()
    redis_server.stop()  # down while runs are in flight: connections refused
    fleet.wait_for_runs(15, stopped, range(3, 4), "15 reference runs during the outage")
    time.sleep(max(0.0, stopped + 3 - time.time()))  # and 3 s at least: past the first retries' backoff
    restarted = time.time()
    redis_server.start()  # empty (no persistence), the same port
    store = RedisSummaryStore(redis_server.url)
    wait_until(lambda: _newest(store) > restarted + 1, timeout=300, what="runs recorded again by the same workers")
    fleet.wait_for_runs(3, restarted + 1, range(4), "runs after the restart")
    errs = fleet.finish(stop)
    _kept_pace(fleet, stopped, restarted)
    for i, stderr in enumerate(errs[:-1]):
        assert fleet.rows[i][-1]["done"] is True  # every run finished normally
        assert fleet.runs(i, stopped, restarted), "no run during the outage"
        assert fleet.runs(i, restarted + 1), "no run after the restart"
        assert stderr.count("the store failed") == 1, stderr  # loudly, once per process
        assert stderr.count("the store answers again") == 1, stderr


@pytest.mark.serial  # a hang as long as 15 runs of a reference worker: steadier alone than beside other workers
@pytest.mark.real
def test_a_hung_redis_costs_a_run_start_at_most_the_timeout(redis_server: RedisServer, tmp_path: Path) -> None:
    stop = tmp_path / "stop"
    fleet = _outage_fleet(redis_server.url, stop, 2)
    fleet.wait_for_runs(5, 0.0, range(3), "the workers running")
    paused = time.time()
    redis_server.pause()  # SIGSTOP: connections open, nothing answers
    fleet.wait_for_runs(15, paused, range(2, 3), "15 reference runs while Redis hangs")
    time.sleep(max(0.0, paused + 3 - time.time()))
    resumed = time.time()
    redis_server.resume()
    fleet.wait_for_runs(3, resumed, range(3), "runs after the resume")
    errs = fleet.finish(stop)
    _kept_pace(fleet, paused + 0.3, resumed)  # hung reads are cut at the 200 ms timeout
    for i, stderr in enumerate(errs[:-1]):
        assert len(fleet.runs(i, paused + 0.3, resumed)) > 5, "runs stopped while Redis hung"
        assert stderr.count("the store failed") == 1, stderr


# -- threads ------------------------------------------------------------------------------------------------


def _scored_runs(scorer: PilotScorer, n: int, agent: str) -> None:
    steps = [ScorerStep(thought=f"step {i}", action="bash", action_input=f"ls {i}", tokens=100 * i) for i in range(5)]
    for _ in range(n):
        run = scorer.start_run(agent)
        for step in steps:
            run.score(step)
        run.finish()


def _threads(url: str, caplog: pytest.LogCaptureFixture) -> BaselineCache:
    scorer = PilotScorer(baselines=url)
    with caplog.at_level(logging.WARNING, logger="rb_otel"):
        threads = [threading.Thread(target=_scored_runs, args=(scorer, 150, "t|m")) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert scorer.baselines.flush(timeout=30)
    assert scorer.baselines.errors == 0 and scorer.baselines.dropped == 0
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []
    return scorer.baselines


def test_four_threads_on_sqlite_record_every_run(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    store = _threads(f"sqlite://{tmp_path / 't.db'}", caplog)
    assert _runs_of(store.summaries, "t|m") == 600 and len(store.summaries.recent("t|m").recent) == MAX_RUNS


@pytest.mark.real
def test_four_threads_on_redis_record_every_run(redis_server: RedisServer, caplog: pytest.LogCaptureFixture) -> None:
    store = _threads(redis_server.url, caplog)
    assert _runs_of(store.summaries, "t|m") == 600 and len(store.summaries.recent("t|m").recent) == MAX_RUNS


# -- the same baseline from every store ---------------------------------------------------------------------


def _summary(t: int, steps: float, chars: float, peak: float, rate: float) -> RunSummary:
    values = {"steps": steps, "chars": chars, "context": 0.0, "hedges": 1.0, "errors": 0.0, "peak_slow": peak,
              "peak_skip": peak / 2, "log_cps": rate, "error_rate": rate / 10, "repeat_rate": 0.0,
              "hedging": rate / 100}  # fmt: skip
    return RunSummary(float(t), values)


summaries = st.builds(
    _summary,
    st.integers(1_700_000_000, 1_800_000_000),
    st.integers(0, 40).map(float),
    st.floats(0, 1e6, allow_nan=False),
    st.floats(0, 1, allow_nan=False),
    st.floats(0, 10, allow_nan=False),
)
runs_strategy = st.lists(st.tuples(st.sampled_from(["a|m", "b|m", "c|n"]), summaries), max_size=40)


@pytest.fixture(scope="module")
def shared_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    folder = tmp_path_factory.mktemp("redis")
    server = RedisServer(folder)
    server.start()
    yield server
    server.stop()


@pytest.mark.real
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(runs=runs_strategy, batch=st.integers(1, 7))
def test_sqlite_and_redis_give_the_in_memory_baseline(
    runs: list[tuple[str, RunSummary]], batch: int, tmp_path_factory: pytest.TempPathFactory, shared_redis: RedisServer
) -> None:
    memory = MemorySummaryStore()
    sqlite = SqliteSummaryStore(tmp_path_factory.mktemp("prop") / "b.db")
    prefix = f"p{time.monotonic_ns()}:"
    redis = RedisSummaryStore(f"{shared_redis.url}?prefix={prefix}")
    for store in (memory, sqlite, redis):
        for i in range(0, len(runs), batch):
            store.append(runs[i : i + batch])
    for agent in ("a|m", "b|m", "c|n"):
        expected = memory.baseline(agent)
        for store in (sqlite, redis):
            got = store.recent(agent)
            assert AgentBaseline(got.runs, got.recent).same_as(expected), (store.url, agent)
    assert {a.agent: a.runs for a in sqlite.agents()} == {a.agent: a.runs for a in memory.agents()}
    assert {a.agent: a.runs for a in redis.agents()} == {a.agent: a.runs for a in memory.agents()}
    sqlite.close()
    redis.close()


@settings(max_examples=60, deadline=None)
@given(runs=st.lists(summaries, max_size=30))
def test_the_incremental_baseline_is_the_plain_one(runs: list[RunSummary]) -> None:
    incremental = AgentBaseline()
    for summary in runs:
        incremental = incremental.plus(summary)
    assert incremental.same_as(AgentBaseline(len([s for s in runs if s.values["steps"] > 0]), runs))


def test_the_plain_and_incremental_baselines_agree_past_the_bound() -> None:
    runs = [RunSummary(float(i), {"steps": 1.0 + i % 7, "chars": float(i * 37 % 101), "log_cps": i / 9}) for i in
            range(MAX_RUNS + 55)]  # fmt: skip
    incremental = AgentBaseline()
    for summary in runs:
        incremental = incremental.plus(summary)
    assert incremental.known == MAX_RUNS and incremental.runs == MAX_RUNS + 55
    assert incremental.same_as(AgentBaseline(MAX_RUNS + 55, runs))


def test_agents_beyond_the_bound_drop_the_least_recently_recorded(tmp_path: Path) -> None:
    sqlite = SqliteSummaryStore(tmp_path / "few.db", max_agents=3)
    memory = MemorySummaryStore(max_agents=3)
    one = RunSummary(1.0, {"steps": 3.0})
    for store in (sqlite, memory):
        for agent in ("a", "b", "c", "a", "d"):
            store.append([(agent, one)])
        assert sorted(a.agent for a in store.agents()) == ["a", "c", "d"]  # "b" was the least recently recorded


# -- bad input: one clear error each, naming the URL -----------------------------------------------------------


def test_a_file_that_is_not_a_baseline_store_is_refused(tmp_path: Path) -> None:
    text = tmp_path / "notes.txt"
    text.write_text("hello")
    with pytest.raises(SummaryStoreError, match=r"notes\.txt: not a baseline store \(neither a SQLite database"):
        PilotScorer(baselines=str(text))
    other = tmp_path / "app.db"
    with sqlite3.connect(other) as db:
        db.execute("CREATE TABLE users (id INTEGER)")
    with pytest.raises(SummaryStoreError, match=r"app\.db: not a baseline store \(a SQLite database holding users\)"):
        ReasonBlocks(scorer="pilot", baselines=f"sqlite://{other}")
    with pytest.raises(SummaryStoreError, match=r"the folder .*missing does not exist"):
        PilotScorer(baselines=str(tmp_path / "missing" / "b.db"))


def test_an_unknown_scheme_is_refused_with_the_known_ones() -> None:
    with pytest.raises(SummaryStoreError, match=r"postgres://u:\*\*\*@db/x: unknown baseline store scheme 'postgres'"):
        ReasonBlocks(scorer="pilot", baselines="postgres://u:hunter2@db/x")
    with pytest.raises(ValueError, match="baselines= is where scorer='pilot' keeps"):
        ReasonBlocks(baselines="sqlite:///tmp/x.db")


@pytest.mark.real
def test_a_redis_that_refuses_the_credentials_is_refused(tmp_path: Path) -> None:
    server = RedisServer(tmp_path, password="right-password")
    server.start()
    try:
        wrong = f"redis://:wrong-password@127.0.0.1:{server.port}/0"
        with pytest.raises(SummaryStoreError, match=r"redis://:\*\*\*@127\.0\.0\.1:\d+/0: Redis refused the cred") as e:
            PilotScorer(baselines=wrong)
        assert "wrong-password" not in str(e.value)
        with pytest.raises(SummaryStoreError, match="Redis refused the credentials"):
            PilotScorer(baselines=server.url)  # no password at all
        assert PilotScorer(baselines=f"redis://:right-password@127.0.0.1:{server.port}/0").baselines.url.count("***")
    finally:
        server.stop()


def _timed_runs(scorer: PilotScorer, n: int, agent: str) -> float:
    started = time.perf_counter()
    _scored_runs(scorer, n, agent)
    return time.perf_counter() - started


@pytest.mark.serial  # a ratio of run times measured in turn: steadier alone than beside other workers
def test_an_unreachable_redis_at_start_fails_open(caplog: pytest.LogCaptureFixture) -> None:
    from components import free_port

    scorer = PilotScorer(baselines=f"redis://127.0.0.1:{free_port()}/0")  # nobody listens: not an error
    in_memory = PilotScorer(baselines="memory://")
    reference = _timed_runs(in_memory, 10, "x|m")  # the same runs with no store to wait on, before and after
    with caplog.at_level(logging.WARNING, logger="rb_otel"):
        unreachable = _timed_runs(scorer, 10, "x|m")
    reference += _timed_runs(in_memory, 10, "y|m")
    # The first start may wait its 200 ms (twice that, for a loaded scheduler); the later ones not at all: a
    # start that waited on the store each time (10 x 200 ms) fails this on an idle machine and on a loaded one.
    assert unreachable < 2 * 0.2 + 5 * reference, (unreachable, reference)
    assert scorer.baselines.errors >= 1
    assert sum("the store failed" in r.getMessage() for r in caplog.records) == 1  # once, not per run
    assert not scorer.baselines.flush(timeout=0.3)  # still down: it says so and gives up, bounded
    scorer.baselines.close(timeout=0.2)


# -- keys, the environment, the previous release's file, the operator's command -------------------------------


def test_agent_keys_fold_the_spellings_of_one_model(caplog: pytest.LogCaptureFixture) -> None:
    spellings = ["google/gemini-3-pro", "@google/gemini-3-pro", "models/gemini-3-pro", "google_genai:gemini-3-pro",
                 "Gemini-3-Pro", "openrouter/google/gemini-3-pro"]  # fmt: skip
    assert {normalise_model(m) for m in spellings} == {"gemini-3-pro"}
    assert agent_key("coder", "anthropic:claude-sonnet-4-5") == "coder|claude-sonnet-4-5"
    assert normalise_model("localhost:8080/v1/llama") == "llama"
    with caplog.at_level(logging.WARNING, logger="rb_otel"):
        assert agent_key("", "x/unnamed-model-7") == agent_key("", "@x/unnamed-model-7") == "|unnamed-model-7"
    warned = [r.getMessage() for r in caplog.records if "unnamed agent" in r.getMessage()]
    assert len(warned) == 1 and "shared with every unnamed agent" in warned[0]


def test_the_environment_names_the_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RB_OTEL_PILOT_BASELINES", f"sqlite://{tmp_path / 'env.db'}")
    rb = ReasonBlocks(scorer="pilot")
    assert isinstance(rb.scorer, PilotScorer) and rb.scorer.baselines.url.endswith("env.db")
    explicit = ReasonBlocks(scorer="pilot", baselines="memory://")  # the argument wins
    assert isinstance(explicit.scorer, PilotScorer) and explicit.scorer.baselines.url == "memory://"


def test_the_previous_releases_json_file_is_imported_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "baselines.json"
    row = [6.0, 1200.0, 900.0, 1.0, 0.0, 0.3, 0.1]
    legacy = {"version": "rb-otel baselines/1", "agents": {"coder|@google/x": {"runs": 31, "columns": ["steps",
              "chars", "context", "hedges", "errors", "peak_slow", "peak_skip"], "recent": [row] * 25,
              "log_cps": 5.0, "error_rate": 0.1, "repeat_rate": 0.0, "hedging": 0.01}}}  # fmt: skip
    path.write_text(json.dumps(legacy))
    with caplog.at_level(logging.WARNING, logger="rb_otel"):
        scorer = PilotScorer(baselines=path)
    assert [r for r in caplog.records if "imported 25 runs of 1 agents" in r.getMessage()]
    assert (tmp_path / "baselines.json.v1.json").exists()
    baseline = scorer.baselines.get("coder|x")
    assert baseline.runs == 31 and baseline.known == 25 and baseline.log_cps == 5.0
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="rb_otel"):
        again = PilotScorer(baselines=path)  # a SQLite store now: nothing imported again
    assert not caplog.records and again.baselines.get("coder|x").runs == 31


def test_the_baselines_command_lists_and_forgets(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from rb_otel.cli import main

    url = f"sqlite://{tmp_path / 'cli.db'}"
    scorer = PilotScorer(baselines=url)
    _scored_runs(scorer, 21, "coder|m")
    _scored_runs(scorer, 3, "helper|m")
    scorer.baselines.close()
    assert main(["baselines", url]) == 0
    table = capsys.readouterr().out
    assert "coder|m" in table and "its own" in table and "needs 17 more runs" in table
    assert main(["baselines", url, "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert {a["agent"]: (a["runs"], a["relative_thresholds"]) for a in listed["agents"]} == {
        "coder|m": (21, True),
        "helper|m": (3, False),
    }
    assert main(["baselines", url, "--forget", "helper|m"]) == 0
    capsys.readouterr()
    assert main(["baselines", url, "--json", str(tmp_path / "out.json")]) == 0
    assert [a["agent"] for a in json.loads((tmp_path / "out.json").read_text())["agents"]] == ["coder|m"]
    assert main(["baselines", url, "--forget", "nobody"]) == 2  # bad input, as everywhere
    assert main(["baselines", "ftp://x"]) == 2
    assert "unknown baseline store scheme" in capsys.readouterr().err


def test_store_failures_are_counted_as_metrics(otel: Any) -> None:
    from components import free_port

    rb = ReasonBlocks(
        scorer="pilot",
        baselines=f"redis://127.0.0.1:{free_port()}/0",
        tracer_provider=otel.tracer_provider,
        meter_provider=otel.meter_provider,
    )
    assert isinstance(rb.scorer, PilotScorer)
    _scored_runs(rb.scorer, 2, "x|m")
    assert otel.metric_sum("rb.baselines.errors", rb__baselines__operation="read") >= 1
    rb.scorer.baselines.close(timeout=0.2)


def test_a_full_queue_drops_the_oldest_and_counts_it(otel: Any) -> None:
    from components import free_port

    store = BaselineCache(f"redis://127.0.0.1:{free_port()}/0", queue_size=3)
    events: list[tuple[str, int]] = []
    store.add_listener(lambda kind, n: events.append((kind, n)))
    for i in range(5):
        store.record("q|m", RunSummary(float(i), {"steps": 2.0}))
    deadline = time.monotonic() + 5
    while store.dropped < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.3)  # and no more than that
    assert store.dropped == 2 and sum(n for kind, n in events if kind == "dropped") == 2
    store.close(timeout=0.2)
