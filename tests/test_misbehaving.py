"""Nothing lost when a process or a store misbehaves: SIGTERM, worker pools, a hung or flapping store, someone
else's database, passwords in URLs. Real processes, a real ``redis-server``, real SQLite files; the faults are
real too (signals, SIGSTOP, a socket that never answers, bytes overwritten), nothing is mocked."""

from __future__ import annotations

import contextlib
import glob
import hashlib
import json
import logging
import os
import signal
import socket
import sqlite3
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from components import RedisServer, free_port, wait_until

from rb_otel.backends.baselines.cache import BaselineCache
from rb_otel.backends.baselines.errors import SummaryStoreError
from rb_otel.backends.baselines.opening import open_summary_store
from rb_otel.backends.baselines.redis_store import RedisSummaryStore
from rb_otel.backends.baselines.sqlite_store import SqliteSummaryStore
from rb_otel.steering.agent_keys import agent_key
from rb_otel.steering.pilot.baselines import RunSummary
from rb_otel.telemetry.batch import HANDOVER_BOUND_MS
from rb_otel.telemetry.otlp_json import read_spans
from rb_otel.urls import display_url

TESTS = Path(__file__).resolve().parent
KEY = agent_key("coder", "@google/Gemini-3-Pro")
#: A password holding every character that breaks a naive URL parser; its pieces must never be printed.
SECRET = "Sekr1t#Qx7z/Wv4m?Yy9r"
PIECES = ("Sekr1t", "Qx7z", "Wv4m", "Yy9r")


def _python(script: str, *args: str, **kwargs: Any) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(TESTS / script), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        **kwargs,
    )


def _rows(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip().startswith("{")]


# -- SIGTERM --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("order", ["provider-first", "rb-first"])
@pytest.mark.parametrize(
    ("processor", "handler"), [("simple", "none"), ("batch", "configure"), ("batch", "call"), ("simple", "call")]
)
def test_sigterm_loses_none_of_the_spans_that_had_ended(
    tmp_path: Path, processor: str, handler: str, order: str
) -> None:
    traces = tmp_path / "traces.jsonl"
    proc = _python("sigterm_worker.py", str(traces), "--processor", processor, "--order", order, "--handler", handler)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"  # 3 chat and 2 execute_tool spans ended; a tool and the run open
    time.sleep(HANDOVER_BOUND_MS / 1000 + 0.3)
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=120)  # a hang guard (a loaded machine exits slowly)
    assert proc.returncode == -signal.SIGTERM, stderr  # the default action still ends the process
    spans = read_spans(traces) if traces.exists() else []
    names = sorted(s["name"] for s in spans)
    assert names.count("chat scripted-1") == 3 and names.count("execute_tool add") == 2, names
    if handler == "none":
        assert len(spans) == 5  # a simple processor exported each as it was handed over; the open ones are lost
        return
    (run,) = [s for s in spans if s["name"].startswith("invoke_agent")]
    attributes = {a["key"]: next(iter(a["value"].values())) for a in run["attributes"]}
    assert run["status"]["code"] in (2, "STATUS_CODE_ERROR") and attributes["error.type"] == "SIGTERM"
    assert attributes["rb.outcome"] == "failure: SIGTERM"
    assert "execute_tool block" in names and len(spans) == 7  # the open tool span ended with the run


def test_handle_sigterm_chains_to_the_handler_already_installed(tmp_path: Path) -> None:
    code = f"""
import signal, sys, time
sys.path.insert(0, {str(TESTS)!r})
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
import rb_otel
from rb_otel.telemetry.otlp_json import OtlpJsonSpanExporter
from rb_otel.testing import ScriptedChatModel
from conftest import add, calc_script
from langchain.agents import create_agent
signal.signal(signal.SIGTERM, lambda signum, frame: (print("theirs", flush=True), sys.exit(3)))
provider = TracerProvider()
provider.add_span_processor(BatchSpanProcessor(OtlpJsonSpanExporter({str(tmp_path / "t.jsonl")!r})))
rb = rb_otel.ReasonBlocks(tracer_provider=provider)
assert rb_otel.handle_sigterm() and rb_otel.handle_sigterm()  # idempotent
agent = create_agent(ScriptedChatModel(script=calc_script(2)), [add], middleware=[rb.middleware(agent_name="c")])
agent.invoke({{"messages": [("user", "add")]}})
print("ready", flush=True)
time.sleep(60)
"""
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=120)  # a hang guard
    assert proc.returncode == 3 and "theirs" in out, err  # the application's own handler still ran, after ours
    assert len([s for s in read_spans(tmp_path / "t.jsonl") if s["name"].startswith("invoke_agent")]) == 1


# -- worker pools ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "pool"),
    [
        ("fork", "multiprocessing"),
        ("forkserver", "multiprocessing"),
        ("spawn", "multiprocessing"),
        ("fork", "executor"),
    ],
)
def test_pool_workers_store_every_run_and_export_every_span(tmp_path: Path, method: str, pool: str) -> None:
    store = tmp_path / "pool.db"
    proc = _python("pool_driver.py", str(tmp_path), str(store), "--method", method, "--pool", pool, "--runs", "20")
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert len(json.loads(out)) >= 1
    exported = [s for f in glob.glob(str(tmp_path / "spans-*.jsonl")) for s in read_spans(f)]
    assert len([s for s in exported if s["name"].startswith("invoke_agent")]) == 20
    assert {a.agent: a.runs for a in SqliteSummaryStore(store).agents()} == {agent_key("pooled", "m"): 20}


# -- a store that hangs, refuses or flaps ----------------------------------------------------------------------


class _Silent:
    """A TCP server on 127.0.0.1 that accepts connections and never answers (a hung Redis)."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.held: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                self.held.append(self.sock.accept()[0])

    def close(self) -> None:
        for held in self.held:
            held.close()
        self.sock.close()


@pytest.fixture
def silent() -> Iterator[_Silent]:
    server = _Silent()
    try:
        yield server
    finally:
        server.close()


def _worker(url: str, *args: str) -> subprocess.Popen[str]:
    return _python("fleet_worker.py", url, *args)


def _run_seconds(proc: subprocess.Popen[str]) -> tuple[list[float], str]:
    """Each run's seconds, as a ``fleet_worker.py`` that has ended printed them, and its stderr."""
    out, err = proc.communicate(timeout=300)  # a hang guard: a loaded machine starts a worker in tens of seconds
    assert proc.returncode == 0, err
    return [r["seconds"] for r in _rows(out) if "run" in r], err


@pytest.mark.serial  # a ratio to a reference worker run beside it: steadier alone than beside other workers
def test_a_redis_that_never_answers_costs_one_run_start(silent: _Silent) -> None:
    args = ("--runs", "20", "--fresh-agents", "--no-close")
    proc = _worker(f"redis://127.0.0.1:{silent.port}/0", *args)
    beside = _worker("memory://", *args)  # the same runs, at the same time, with no store to wait on
    runs, err = _run_seconds(proc)
    reference, _ = _run_seconds(beside)
    assert len(runs) == len(reference) == 20
    # The first start waits its 200 ms; the store is down for every later one, so those run as the reference's
    # do (3 times theirs, for the noise of two processes sharing a loaded machine). A start that waited on the
    # silent store each time (19 x 200 ms) fails this on an idle machine.
    assert sum(runs[1:]) < 3 * sum(reference[1:]), (runs, reference)
    assert err.count("the store failed") == 1, err


def test_a_refusing_store_is_retried_with_backoff(tmp_path: Path) -> None:
    stop = tmp_path / "stop"
    proc = _worker(
        f"redis://127.0.0.1:{free_port()}/0", "--runs", "100000", "--pace", "0.01", "--until-file", str(stop)
    )
    assert proc.stdout is not None and proc.stderr is not None
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, "")), daemon=True)  # type: ignore[union-attr]
    reader.start()
    # the window starts at the first run (its start read was refused): a loaded machine starts a worker slowly
    wait_until(lambda: lines, timeout=300, interval=0.05, what="the worker's first run")
    first = time.monotonic()
    wait_until(lambda: len(lines) > 11, timeout=300, interval=0.05, what="runs going on")
    time.sleep(max(0.0, first + 10 - time.monotonic()))  # 10 s of runs at least
    stop.touch()
    assert proc.wait(timeout=120) == 0, proc.stderr.read()  # a hang guard
    window = time.monotonic() - first
    reader.join(timeout=60)
    err = proc.stderr.read()
    rows = _rows("".join(lines))
    assert len([r for r in rows if "run" in r]) > 10  # runs went on
    # 0.25 s doubling to 5 s: tries at about 0, 0.25, 0.75, 1.75, 3.75, 7.75 s (+ the first run start's read), then
    # one each 5 s: at most 10 in the first 10 s, and one more each 5 s that a loaded machine stretches the window
    assert rows[-1]["errors"] <= 10 + max(0.0, window - 10) / 5, (rows[-1], window)
    assert err.count("the store failed") == 1, err


@pytest.mark.real
def test_a_paused_redis_records_each_run_once(redis_server: RedisServer, tmp_path: Path) -> None:
    stop = tmp_path / "stop"
    proc = _worker(redis_server.url, "--runs", "100000", "--pace", "0.05", "--until-file", str(stop))
    time.sleep(3)
    redis_server.pause()  # writes hang past their 5 s timeout and are retried; the first attempt lands on resume
    time.sleep(6.5)
    redis_server.resume()
    time.sleep(4)
    stop.touch()
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    finished = len([r for r in _rows(out) if "run" in r])
    store = RedisSummaryStore(redis_server.url)
    recorded = store.recent(KEY)
    ids = [s.run_id for s in recorded.recent]
    assert len(ids) == len(set(ids)), "a run recorded twice"
    assert recorded.runs == finished and all(ids)


def _exit_seconds(proc: subprocess.Popen[str], after: int = 0, then: Any = None) -> float:
    """How long a ``fleet_worker.py`` took to exit after its ``done`` line (``then()`` called after ``after``
    lines); stderr is left in its pipe (a warning or two)."""
    assert proc.stdout is not None
    done = None
    for seen, line in enumerate(iter(proc.stdout.readline, ""), 1):
        if seen == after and then is not None:
            then()
        if '"done"' in line:
            done = time.monotonic()
    assert proc.wait(timeout=300) == 0  # a hang guard
    assert done is not None
    return time.monotonic() - done


@pytest.mark.serial  # a bound with a reference worker run beside it: steadier alone than beside other workers
@pytest.mark.real
def test_exit_with_a_hung_redis_waits_at_most_the_bound(redis_server: RedisServer) -> None:
    from rb_otel.process_exit import EXIT_TIMEOUT_S

    args = ("--runs", "30", "--pace", "0.1", "--no-close")
    proc = _worker(redis_server.url, *args)
    beside = _worker("memory://", *args)  # exits as fast as this machine lets a worker exit just now
    reference: list[float] = []
    reader = threading.Thread(target=lambda: reference.append(_exit_seconds(beside)), daemon=True)
    reader.start()
    try:  # the last runs' summaries are queued; the exit hook's writes hang
        exited = _exit_seconds(proc, after=5, then=redis_server.pause)
    finally:
        redis_server.resume()
    reader.join(timeout=300)
    assert reference, "the reference worker did not end"
    # the exit hook's bound, and interpreter shutdown: 0.6 s on an idle machine, 3 times the reference's on a
    # loaded one. Waiting out the writes' own 5 s timeout, or hanging, would fail it.
    assert exited < EXIT_TIMEOUT_S + 0.6 + 3 * reference[0], (exited, reference)


def test_a_corrupted_sqlite_store_warns_once_not_per_run(tmp_path: Path) -> None:
    path = tmp_path / "corrupt.db"
    stop = tmp_path / "stop"
    procs = [
        _worker(str(path), "--runs", "100000", "--pace", "0.01", "--fresh-agents", "--until-file", str(stop))
        for _ in range(2)
    ]
    lines: list[list[str]] = [[] for _ in procs]
    readers = [
        threading.Thread(target=lambda p=p, out=out: out.extend(iter(p.stdout.readline, "")), daemon=True)  # type: ignore[union-attr]
        for p, out in zip(procs, lines, strict=True)
    ]
    for reader in readers:
        reader.start()
    # both workers running and recording into the store (one started later would refuse the damaged file)
    wait_until(lambda: all(len(out) >= 5 for out in lines), timeout=120, interval=0.1, what="both workers' runs")
    size = path.stat().st_size
    with path.open("r+b") as handle:  # every page after the first overwritten: the header still says SQLite
        handle.seek(4096)
        handle.write(os.urandom(max(size - 4096, 8192)))
    wal = tmp_path / "corrupt.db-wal"
    if wal.exists():
        wal.write_bytes(os.urandom(wal.stat().st_size))
    before = [len(out) for out in lines]
    corrupted = time.monotonic()
    # runs going on after the corruption, however slowly a loaded machine runs them; and 8 s of them at least
    wait_until(lambda: all(len(out) > had + 10 for out, had in zip(lines, before, strict=True)), timeout=300,
               interval=0.1, what="runs after the corruption")  # fmt: skip
    time.sleep(max(0.0, corrupted + 8 - time.monotonic()))
    stop.touch()
    for proc, reader, out, had in zip(procs, readers, lines, before, strict=True):
        proc.wait(timeout=60)  # stdout is the reader's; stderr holds a warning or two
        reader.join(timeout=60)
        assert proc.stderr is not None
        err = proc.stderr.read()
        assert proc.returncode == 0, err
        assert len(out) > had + 10  # runs went on after the corruption
        assert err.count("the store failed") <= 1 and err.count("answers again") <= 1, err


@pytest.mark.real
def test_a_row_that_is_not_a_summary_is_skipped_with_one_warning(
    redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    store = RedisSummaryStore(redis_server.url)
    store.append(
        [(KEY, RunSummary(1.0, {"steps": 3.0, "chars": 10.0}, "a")), (KEY, RunSummary(2.0, {"steps": 2.0}, "b"))]
    )
    import redis

    client = redis.Redis.from_url(redis_server.url)
    client.rpush(f"{store.prefix}runs:{KEY}", b"not json {", b"\xff\xfe")
    cache = BaselineCache(store)
    with caplog.at_level(logging.WARNING, logger="rb_otel.baselines"):
        for _ in range(5):
            assert cache.get(KEY).known == 2
            cache._snapshot.clear()  # read it again from the store
        client.hset(f"{store.prefix}counts", KEY, "many")
        assert store.agents() == []  # the agent with a count that is not a number is skipped
    cache.close()
    messages = [r.getMessage() for r in caplog.records]
    assert len([m for m in messages if "not run summaries" in m and KEY in m]) == 1, messages
    assert len([m for m in messages if "not a number" in m and KEY in m]) == 1, messages
    assert not [m for m in messages if "the store failed" in m]  # a bad row is not an outage


# -- someone else's data ----------------------------------------------------------------------------------------


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_another_applications_database_is_left_byte_for_byte_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "shop.db"
    with contextlib.closing(sqlite3.connect(path)) as db:
        db.executescript(
            "CREATE TABLE orders (id INTEGER); CREATE TABLE users (name TEXT); INSERT INTO users VALUES ('a');"
        )
        db.commit()
    before = _sha(path)
    with pytest.raises(SummaryStoreError, match=r"not a baseline store \(a SQLite database holding orders, users\)"):
        BaselineCache(str(path))
    proc = _cli("baselines", str(path))
    assert proc.returncode == 2 and "orders, users" in proc.stderr and "Traceback" not in proc.stderr
    assert _sha(path) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["shop.db"]  # no -wal or -shm file either


def test_listing_or_forgetting_never_creates_a_store(tmp_path: Path) -> None:
    for args in (["baselines", str(tmp_path / "typo.db")], ["baselines", str(tmp_path / "typo.db"), "--forget", "x"]):
        proc = _cli(*args)
        assert proc.returncode == 2, proc.stdout
        assert "no baseline store there" in proc.stderr and "Traceback" not in proc.stderr
    assert list(tmp_path.iterdir()) == []


# -- passwords and bad input -------------------------------------------------------------------------------------


@pytest.fixture
def secured_redis(tmp_path: Path) -> Iterator[RedisServer]:
    folder = tmp_path / "redis"
    folder.mkdir()
    server = RedisServer(folder, password=SECRET)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "rb_otel.cli", *args]
    return subprocess.run(command, check=False, capture_output=True, text=True, timeout=60)


def _no_secret(*texts: str) -> None:
    for text in texts:
        for piece in PIECES:
            assert piece not in text, text


def test_display_url_elides_any_password() -> None:
    assert display_url(f"redis://:{SECRET}@h:6379/0") == "redis://:***@h:6379/0"
    assert display_url(f"redis://user:{SECRET}@h/0?prefix=x") == "redis://user:***@h/0?prefix=x"
    assert display_url("redis://h:6379/0") == "redis://h:6379/0"
    # a port that cannot be parsed: shown up to the host and the bad port, so the message names the wrong setting
    assert display_url(f"redis://:{SECRET}@h:port/0") == "redis://:***@h:port"
    assert display_url(f"redis://user:{SECRET}@127.0.0.1:abc/0?prefix=x") == "redis://user:***@127.0.0.1:abc"
    assert display_url("/var/lib/b.db") == "/var/lib/b.db"


@pytest.mark.real
def test_no_output_of_any_bad_input_holds_the_password(
    secured_redis: RedisServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    port = secured_redis.port
    good = f"redis://:{SECRET}@127.0.0.1:{port}/0"
    # the password as written, unencoded '#', '/' and '?' included: it works
    store = RedisSummaryStore(good)
    store.append([(KEY, RunSummary(1.0, {"steps": 2.0}, "r1"))])
    assert store.recent(KEY).runs == 1
    outputs: list[str] = []
    for args, code in [
        ([good], 0),
        ([good, "--json"], 0),
        ([good, "--forget", "nosuch"], 2),  # bad input: exit 2, as everywhere
        ([good, "--forget", KEY], 0),
        ([f"redis://:{SECRET}x@127.0.0.1:{port}/0"], 2),  # a wrong password
        ([f"redis://nobody:{SECRET}@127.0.0.1:{port}/0"], 2),  # a wrong user
        ([f"redis://:{SECRET}@127.0.0.1:notaport/0"], 2),  # a port that is not a number
        ([f"redis://:{SECRET}@127.0.0.1:99999/0"], 2),  # a port out of range
        ([f"rediss://:{SECRET}@127.0.0.1:{port}/0"], 2),  # TLS to a plain server
        ([f"ftp://:{SECRET}@127.0.0.1/0"], 2),  # an unknown scheme
    ]:
        done = _cli("baselines", *args)
        assert done.returncode == code, (args, done.stdout, done.stderr)
        assert "Traceback" not in done.stderr, done.stderr
        outputs += [done.stdout, done.stderr]
    assert "redis://:***@127.0.0.1" in outputs[0]
    with caplog.at_level(logging.DEBUG):
        for url in (
            f"redis://:{SECRET}@127.0.0.1:notaport/0",
            f"redis://:{SECRET}x@127.0.0.1:{port}/0",
            f"rediss://:{SECRET}@127.0.0.1:{port}/0",
        ):
            with pytest.raises(SummaryStoreError) as raised:
                BaselineCache(url)
            outputs.append(str(raised.value))
        cache = BaselineCache(f"redis://:{SECRET}@127.0.0.1:{free_port()}/0")  # unreachable: fails open, logs
        cache.get(KEY)
        cache.close(timeout=0.5)
    outputs += [r.getMessage() for r in caplog.records]
    _no_secret(*outputs)


def test_bad_input_is_one_line_naming_the_url(tmp_path: Path) -> None:
    refusing = starting = 0.0  # seconds: the commands given bad input, and the same command's own start-up
    for url, problem in [
        ("redis://127.0.0.1:notaport/0", "the port is not a number"),
        ("redis://127.0.0.1:0/0", "the port is not a number"),
        (str(tmp_path / "missing" / "b.db"), "does not exist"),
    ]:
        with pytest.raises(SummaryStoreError, match=problem) as raised:
            open_summary_store(url)
        assert str(raised.value).startswith(display_url(url)), raised.value
        if "notaport" in url:  # the host and the bad port are named (was `redis://***`)
            assert str(raised.value).startswith("redis://127.0.0.1:notaport:"), raised.value
        started = time.monotonic()
        done = _cli("baselines", url)
        refusing += time.monotonic() - started
        started = time.monotonic()
        assert _cli("baselines", "--help").returncode == 0
        starting += time.monotonic() - started
        assert done.returncode == 2 and problem in done.stderr and "Traceback" not in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    # at once: no connection waited on. A ratio to the command's start-up, measured in turn with it, so that a
    # loaded machine slows both alike (alone: about 1.0; a connect timeout would make it many times that)
    assert refusing < 4 * starting, (refusing, starting)


@pytest.mark.real
@pytest.mark.serial  # a bound measured in turn with a reference: steadier alone than beside other workers
def test_tls_to_a_plain_redis_is_a_clear_error_at_once(redis_server: RedisServer) -> None:
    url = redis_server.url.replace("redis://", "rediss://")
    refusing = reference = 0.0
    for _ in range(3):
        started = time.monotonic()
        with pytest.raises(SummaryStoreError, match="TLS handshake failed"):
            BaselineCache(url)
        refusing += time.monotonic() - started
        started = time.monotonic()  # the same work done right: a TLS context made, a plain store opened
        ssl.create_default_context()
        BaselineCache(redis_server.url).close()
        reference += time.monotonic() - started
    # At once: the handshake's 200 ms connect timeout and the 200 ms plain PING that tells why, twice over, and the
    # work the reference does, 4 times over (so a loaded machine, which slows both, cannot fail it). Waiting a
    # read timeout (seconds) or retrying would.
    assert refusing < 3 * 2 * (0.2 + 0.2) + 4 * reference, (refusing, reference)
