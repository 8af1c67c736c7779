"""The chaos fleet's machinery: the real components, the workers, and the faults done to them.

* the receiver: ``otlp_receiver.py``, its own process, writing what arrives to a small tmpfs;
* the Collector: rotel through ``collector/rotel-fleet.sh`` (the settings under test), forwarding to the receiver;
  or (``collector="otelcol-rb"``) otelcol-rb with ``collector/otelcol-persistent-queue.yaml``, stopped by kill -9;
* Redis (Debian's ``redis-server``) holding the pilot's baselines of most workers; every ``sqlite_every``-th worker
  keeps them in a SQLite store on a second small tmpfs instead (one machine's workers sharing one file);
* the workers: ``chaos_worker.py`` in processes forked from a preloaded forkserver; with ``spool=True`` they share
  one export spool (``RB_OTEL_EXPORT_SPOOL=<run folder>/spool``): what a worker could not hand over at its end is
  sent by the workers started after it, and what is left once all have ended by one more process
  (:meth:`Fleet.drain_spool`), with the Collector up.

Every fault is recorded as a :class:`Fault` (what, when it began and ended, wall clock) for ``chaos_count.py``.
Every process started here carries ``RB_OTEL_CHAOS_RUN=<run folder>`` in its environment, so what is left behind
after :meth:`Fleet.close` can be found in ``/proc``.
"""

from __future__ import annotations

import contextlib
import errno
import json
import multiprocessing
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BENCHMARKS = Path(__file__).resolve().parent
ROOT = BENCHMARKS.parent
sys.path.insert(0, str(BENCHMARKS))

from chaos_worker import PRELOAD, WorkerConfig, drain, work  # noqa: E402

MARKER = "RB_OTEL_CHAOS_RUN"


class Unavailable(RuntimeError):
    """A component the fleet needs cannot be had here (the message says which and why)."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for(check: Any, *, timeout: float, what: str, interval: float = 0.1) -> Any:
    """Poll ``check`` until it is truthy; a bounded wait that says what it gave up on."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError, ValueError):
            value = check()
            if value:
                return value
        time.sleep(interval)
    raise TimeoutError(f"gave up after {timeout:.0f} s waiting for {what}")


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


@dataclass
class Fault:
    """One fault done to the fleet: ``kind`` (kill, sigterm, collector, redis, disk-sqlite, disk-receiver, refuse),
    a label for the table, when it began and ended (``time.time()``), and what it hit."""

    kind: str
    label: str
    start: float
    end: float = 0.0
    detail: dict[str, Any] = field(default_factory=dict)


class Tmpfs:
    """A small tmpfs mounted at ``path`` (root only), filled to ENOSPC and freed again on demand."""

    def __init__(self, path: Path, size_mb: int) -> None:
        self.path = path
        path.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size_mb}m,mode=0755", "tmpfs", str(path)],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise Unavailable(f"the full-disk faults need a tmpfs and mounting one failed: {done.stderr.strip()}")
        self.filler = path / "filler"

    def fill(self) -> int:
        """Write a filler file until the filesystem refuses (ENOSPC); the bytes written."""
        chunk = b"\0" * (1 << 20)
        written = 0
        with self.filler.open("ab", buffering=0) as out:
            while True:
                try:
                    written += out.write(chunk)
                except OSError as exc:
                    if exc.errno != errno.ENOSPC:
                        raise
                    small = b"\0" * 4096
                    with contextlib.suppress(OSError):
                        while True:
                            written += out.write(small)
                    return written

    def free(self) -> None:
        self.filler.unlink(missing_ok=True)

    def unmount(self) -> None:
        for args in (["umount", str(self.path)], ["umount", "-l", str(self.path)]):
            if subprocess.run(args, capture_output=True, check=False).returncode == 0:
                return


class Receiver:
    """``otlp_receiver.py`` in its own process, writing to ``out``."""

    def __init__(self, out: Path, log: Path, env: dict[str, str]) -> None:
        self.out = out
        self.proc = subprocess.Popen(
            [sys.executable, str(BENCHMARKS / "otlp_receiver.py"), str(out)],
            stdout=subprocess.PIPE,
            stderr=log.open("ab"),
            text=True,
            env=env,
            start_new_session=True,
        )
        assert self.proc.stdout is not None
        self.port = int(json.loads(self.proc.stdout.readline())["port"])
        self.url = f"http://127.0.0.1:{self.port}"

    def control(self, mode: str, retry_after: float | None = None) -> None:
        query = f"mode={mode}" + (f"&retry_after={retry_after:g}" if retry_after is not None else "")
        urllib.request.urlopen(urllib.request.Request(f"{self.url}/control?{query}", data=b""), timeout=5).read()

    def stats(self) -> dict[str, Any]:
        with urllib.request.urlopen(f"{self.url}/stats", timeout=5) as response:
            return dict(json.loads(response.read()))

    def stop(self) -> None:
        _end(self.proc)


class Collector:
    """rotel through ``collector/rotel-fleet.sh``, on fixed ports so that it can be stopped and started again."""

    def __init__(self, forward: str, folder: Path, env: dict[str, str]) -> None:
        self.grpc_port, self.http_port = free_port(), free_port()
        self.forward = forward
        self.folder = folder
        self.env = env
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self) -> None:
        self.starts += 1
        env = {
            **self.env,
            "ROTEL_GRPC": f"127.0.0.1:{self.grpc_port}",
            "ROTEL_HTTP": f"127.0.0.1:{self.http_port}",
            "RB_OTEL_FORWARD_ENDPOINT": self.forward,
            "ROTEL_PID_FILE": str(self.folder / "rotel.pid"),
            "ROTEL_LOG_FILE": str(self.folder / "rotel-agent.log"),
            "PYTHON": sys.executable,
        }
        log = (self.folder / f"rotel-{self.starts}.log").open("ab")
        self.proc = subprocess.Popen(
            [str(ROOT / "collector" / "rotel-fleet.sh")], stdout=log, stderr=subprocess.STDOUT, env=env,
            start_new_session=True,
        )  # fmt: skip
        wait_for(lambda: _listening(self.grpc_port) and _listening(self.http_port), timeout=30, what="rotel")

    def stop(self) -> None:
        """A graceful stop (SIGTERM: rotel sends what it can, then exits)."""
        if self.proc is not None:
            _end(self.proc, grace=15)
            self.proc = None

    def endpoint(self, protocol: str) -> str:
        return f"http://127.0.0.1:{self.grpc_port if protocol == 'grpc' else self.http_port}"


class OtelcolCollector(Collector):
    """otelcol-rb (``make collector``) running ``collector/otelcol-persistent-queue.yaml``: its listeners on fixed
    free ports, its queue in the run folder, its backend the receiver. Stopped with ``kill -9`` (the worst way out:
    nothing flushed, only what is on disk survives) and started again on the same queue."""

    def __init__(self, forward: str, folder: Path, env: dict[str, str]) -> None:
        super().__init__(forward, folder, env)
        import yaml

        binary = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "rb-otel" / "bin" / "otelcol-rb"
        if not os.access(binary, os.X_OK):
            raise Unavailable(f"otelcol-rb is not built at {binary}: run `make collector`")
        self.binary = binary
        self.health_port = free_port()
        config = yaml.safe_load((ROOT / "collector" / "otelcol-persistent-queue.yaml").read_text())
        config["receivers"]["otlp"]["protocols"] = {
            "grpc": {"endpoint": f"127.0.0.1:{self.grpc_port}"},
            "http": {"endpoint": f"127.0.0.1:{self.http_port}"},
        }
        config["extensions"]["health_check"]["endpoint"] = f"127.0.0.1:{self.health_port}"
        queue = config["extensions"]["file_storage/queue"]
        queue["directory"] = queue["compaction"]["directory"] = str(folder / "otelcol-queue")
        (folder / "otelcol-queue").mkdir(parents=True, exist_ok=True)
        (exporter,) = config["service"]["pipelines"]["traces"]["exporters"]
        config["exporters"][exporter]["endpoint"] = forward
        telemetry = {"host": "127.0.0.1", "port": free_port()}
        config["service"]["telemetry"] = {"metrics": {"readers": [{"pull": {"exporter": {"prometheus": telemetry}}}]}}
        self.config = folder / "otelcol-persistent-queue.yaml"
        self.config.write_text(yaml.safe_dump(config, sort_keys=False))

    def start(self) -> None:
        self.starts += 1
        log = (self.folder / f"otelcol-{self.starts}.log").open("ab")
        self.proc = subprocess.Popen(
            [str(self.binary), f"--config={self.config}"], stdout=log, stderr=subprocess.STDOUT, env=self.env,
            start_new_session=True,
        )  # fmt: skip
        wait_for(lambda: _listening(self.grpc_port) and _listening(self.http_port), timeout=30, what="otelcol-rb")

    def stop(self) -> None:
        """``kill -9``: what the Collector had accepted survives only in its file-backed queue."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(timeout=10)
            self.proc = None


#: ``--collector``: the Collector in front of the fleet.
COLLECTORS = {"rotel": Collector, "otelcol-rb": OtelcolCollector}


def redis_binary() -> str:
    found = shutil.which("redis-server")
    if found:
        return found
    if os.geteuid() == 0 and shutil.which("apt-get"):
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", "redis-server"], env=env,
                       capture_output=True, check=False, timeout=600)  # fmt: skip
        found = shutil.which("redis-server")
        if found:
            return found
    raise Unavailable("redis-server (Debian package redis-server) is not installed and could not be installed here")


class Redis:
    """Debian's ``redis-server`` on a free port of 127.0.0.1, in ``folder``; AOF (``appendfsync everysec``, Redis'
    default) on or off at each start; stopped with SIGTERM (Redis' own shutdown: the AOF is flushed)."""

    def __init__(self, folder: Path, env: dict[str, str]) -> None:
        self.binary = redis_binary()
        self.folder = folder
        self.env = env
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen[bytes] | None = None
        self.aof = False

    def start(self, *, aof: bool) -> None:
        self.aof = aof
        args = [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.folder), "--save", "",
                "--appendonly", "yes" if aof else "no", "--protected-mode", "no"]  # fmt: skip
        log = (self.folder / "redis.log").open("ab")
        self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=self.env, start_new_session=True)
        wait_for(self._answers, timeout=30, what=f"redis-server on port {self.port}")

    def _answers(self) -> bool:
        with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(64).startswith(b"+PONG")

    def stop(self) -> None:
        if self.proc is not None:
            _end(self.proc, grace=30)
            self.proc = None


def _end(proc: subprocess.Popen[Any], grace: float = 10) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


@dataclass
class Worker:
    """A worker process in a slot of the fleet."""

    slot: int
    generation: int
    config: WorkerConfig
    process: Any  # multiprocessing.Process
    fate: str = ""  # "" (alive), "killed", "sigterm", "exited"
    fate_at: float = 0.0
    exit_s: float = 0.0  # seconds from SIGTERM to the process's end


class Fleet:
    """The fleet and its components under ``folder``; :meth:`open` starts everything, :meth:`close` ends it."""

    def __init__(
        self,
        folder: Path,
        workers: int,
        *,
        protocol: str = "grpc",
        model_sleep_s: float = 0.05,
        pace_s: float = 1.0,
        sqlite_every: int = 5,
        redis_aof: bool = False,
        seed: int = 0,
        collector: str = "rotel",
        spool: bool = False,
    ) -> None:
        self.folder = folder
        self.collector_kind = collector
        self.spool = folder / "spool" if spool else None
        self.drained: dict[str, int] = {}  # what drain_spool sent: sent, files, left
        self.n = workers
        self.protocol = protocol
        self.model_sleep_s = model_sleep_s
        self.pace_s = pace_s
        self.sqlite_every = sqlite_every
        self.redis_aof_at_start = redis_aof
        self.rng = random.Random(seed)
        self.faults: list[Fault] = []
        self.workers: dict[int, Worker] = {}
        self.retired: list[Worker] = []
        self.env = {**os.environ, MARKER: str(folder)}
        self.stop_file = folder / "stop"
        self.ledgers = folder / "ledgers"
        self.arrived = folder / "arrived.jsonl"  # the receiver's output, copied off its disk at the end
        self.started_at = 0.0
        self._mounts: list[Tmpfs] = []
        self._ctx: Any = None
        self._lock = threading.RLock()
        self.within: Fault | None = None
        self.stored: dict[str, int] = {}

    # -- start and stop ---------------------------------------------------------------------------------

    def open(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        self.ledgers.mkdir(exist_ok=True)
        (self.folder / "logs").mkdir(exist_ok=True)
        self.receiver_disk = self._mount("receiver-disk", 256)
        self.store_disk = self._mount("store-disk", 16)
        self.receiver = Receiver(self.receiver_disk.path / "out", self.folder / "logs" / "receiver.log", self.env)
        self.collector = COLLECTORS[self.collector_kind](f"{self.receiver.url}", self.folder / "logs", self.env)
        self.collector.start()
        redis_dir = self.folder / "redis"
        redis_dir.mkdir(exist_ok=True)
        self.redis = Redis(redis_dir, self.env)
        self.redis.start(aof=self.redis_aof_at_start)
        self.sqlite_url = f"sqlite://{self.store_disk.path / 'baselines.db'}"
        os.environ[MARKER] = str(self.folder)  # the forkserver (and so every worker) carries it
        self._ctx = multiprocessing.get_context("forkserver")
        self._ctx.set_forkserver_preload(PRELOAD)
        self.started_at = time.time()
        for slot in range(self.n):
            self._start(slot)
        wait_for(lambda: all(self._ran(w) for w in self.workers.values()), timeout=60 + 3 * self.n,
                 what=f"{self.n} workers to finish a first run", interval=0.25)  # fmt: skip

    def _mount(self, name: str, size_mb: int) -> Tmpfs:
        disk = Tmpfs(self.folder / name, size_mb)
        self._mounts.append(disk)
        return disk

    def group(self, slot: int) -> str:
        """``sqlite`` or ``redis``: where the slot's worker keeps its baselines."""
        return "sqlite" if self.sqlite_every and slot % self.sqlite_every == self.sqlite_every - 1 else "redis"

    def _start(self, slot: int) -> Worker:
        generation = sum(1 for w in self.retired if w.slot == slot)
        name = f"w{slot:03d}-{generation}"
        group = self.group(slot)
        config = WorkerConfig(
            slot=slot,
            ledger=str(self.ledgers / f"{name}.jsonl"),
            log=str(self.folder / "logs" / f"{name}.log"),
            endpoint=self.collector.endpoint(self.protocol),
            protocol=self.protocol,
            baselines=self.sqlite_url if group == "sqlite" else self.redis.url,
            agent=f"chaos-{group}",
            stop_file=str(self.stop_file),
            model_sleep_s=self.model_sleep_s,
            pace_s=self.pace_s,
            spool=str(self.spool or ""),
        )
        process = self._ctx.Process(target=work, args=(config,), name=name, daemon=False)
        process.start()
        worker = self.workers[slot] = Worker(slot, generation, config, process)
        return worker

    @staticmethod
    def _ran(worker: Worker) -> bool:
        path = Path(worker.config.ledger)
        return path.exists() and b'"e":"end"' in path.read_bytes()

    def close(self, drain_s: float = 60) -> None:
        """Stop the workers (a normal exit: they flush), let the Collector deliver, then stop everything."""
        self.stop_file.touch()
        deadline = time.monotonic() + 60
        for worker in self.workers.values():
            worker.process.join(max(deadline - time.monotonic(), 0.1))
            if worker.process.is_alive():
                worker.process.kill()
                worker.process.join(10)
                worker.fate, worker.fate_at = "killed at close", time.time()
            else:
                worker.fate, worker.fate_at = "exited", time.time()
        if self.spool is not None:
            self.drain_spool(drain_s)
        self.wait_quiet(drain_s)
        self.stored = self._stored()
        self.collector.stop()
        self.redis.stop()
        self.receiver.stop()
        for disk in self._mounts:
            disk.free()
        shutil.copyfile(self.receiver.out / "spans.jsonl", self.arrived)  # kept after the unmount
        self._stop_forkserver()

    def drain_spool(self, timeout: float) -> None:
        """Send what the export spool still holds (a process of the forkserver's, configured with the spool, its
        sender waited for up to ``timeout``), the Collector up; :attr:`drained` says what it sent and left."""
        report = self.folder / "spool-drain.json"
        args = (self.collector.endpoint(self.protocol), self.protocol, str(self.spool), str(report), timeout)
        process = self._ctx.Process(target=drain, args=args, name="spool-drain", daemon=False)
        process.start()
        process.join(timeout + 30)
        if process.is_alive():
            process.kill()
            process.join(10)
        with contextlib.suppress(OSError, ValueError):
            self.drained = dict(json.loads(report.read_text()))

    def _stop_forkserver(self) -> None:
        """End the forkserver and multiprocessing's resource tracker this fleet started (they outlive the workers
        otherwise). Through multiprocessing's own stop functions where it has them, else by their process ids."""
        from multiprocessing import forkserver, resource_tracker

        for helper in (getattr(forkserver, "_forkserver", None), getattr(resource_tracker, "_resource_tracker", None)):
            stop = getattr(helper, "_stop", None)
            if stop is not None:
                with contextlib.suppress(Exception):
                    stop()

    def abort(self) -> None:
        """After a failed :meth:`open`: end whatever had started (the workers killed), unmount the disks."""
        for worker in self.workers.values():
            if worker.process.is_alive():
                worker.process.kill()
                worker.process.join(10)
        for name in ("collector", "redis", "receiver"):
            component = getattr(self, name, None)
            if component is not None:
                with contextlib.suppress(Exception):
                    component.stop()
        if self._ctx is not None:
            self._stop_forkserver()
        self.unmount()

    def _stored(self) -> dict[str, int]:
        """Runs each baseline store holds (all agents of the fleet's group)."""
        from rb_otel.backends.baselines.redis_store import RedisSummaryStore
        from rb_otel.backends.baselines.sqlite_store import SqliteSummaryStore

        counts = {}
        for group, store in (("redis", RedisSummaryStore(self.redis.url)),
                             ("sqlite", SqliteSummaryStore(self.store_disk.path / "baselines.db"))):  # fmt: skip
            with contextlib.suppress(Exception):
                counts[group] = sum(a.runs for a in store.agents())
            store.close()
        return counts

    def unmount(self) -> None:
        for disk in self._mounts:
            disk.unmount()

    def wait_quiet(self, timeout: float, quiet_s: float = 3.0) -> None:
        """Until the receiver's span count has not moved for ``quiet_s`` (at most ``timeout`` seconds)."""
        last, since = -1, time.monotonic()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            spans = int(self.receiver.stats()["spans"])
            if spans != last:
                last, since = spans, time.monotonic()
            elif time.monotonic() - since >= quiet_s:
                return
            time.sleep(0.25)

    def left_behind(self) -> list[str]:
        """Processes still alive that this fleet started (their environment carries the marker)."""
        needle = f"{MARKER}={self.folder}".encode()
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            with contextlib.suppress(OSError):
                if needle in (entry / "environ").read_bytes().split(b"\0"):
                    command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                    found.append(f"{entry.name} {command[:80]}")
        return found

    # -- faults --------------------------------------------------------------------------------------------

    def _fault(self, kind: str, label: str, **detail: Any) -> Fault:
        fault = Fault(kind, label, time.time(), detail=detail)
        if self.within is not None:
            fault.detail["within"] = self.within.label
            fault.label = f"{self.within.label}: {label}"
        with self._lock:
            self.faults.append(fault)
        return fault

    @contextlib.contextmanager
    def together(self, label: str = "all together") -> Iterator[Fault]:
        """Faults done inside the block (from threads too) are parts of one: a row of their own in the table."""
        umbrella = self._fault("together", label)
        self.within = umbrella
        try:
            yield umbrella
        finally:
            self.within = None
            umbrella.end = time.time()

    def _alive(self) -> list[Worker]:
        return [w for w in self.workers.values() if w.process.is_alive()]

    def _retire(self, worker: Worker, fate: str, at: float) -> None:
        worker.fate, worker.fate_at = fate, at
        self.retired.append(worker)

    def kill9(self, count: int, every_s: float = 1.0, label: str = "kill -9") -> Fault:
        """``kill -9`` of ``count`` random workers mid-run, one every ``every_s``; each replaced at once."""
        fault = self._fault("kill", label, workers=[])
        for i in range(count):
            with self._lock:
                victim = self.rng.choice(self._alive())
                at = time.time()
                os.kill(victim.process.pid, signal.SIGKILL)
                victim.process.join(10)
                self._retire(victim, "killed", at)
                fault.detail["workers"].append(Path(victim.config.ledger).stem)
                self._start(victim.slot)
            if i + 1 < count:
                time.sleep(every_s)
        fault.end = time.time()
        return fault

    def sigterm_rolling(self, count: int, label: str = "SIGTERM, rolling") -> Fault:
        """SIGTERM ``count`` workers one after another, each replaced once it has exited (a rolling restart)."""
        fault = self._fault("sigterm", label, workers=[], exit_s=[], exitcodes=[])
        for _ in range(count):
            with self._lock:
                victim = self.rng.choice(self._alive())
                self._retire(victim, "sigterm", time.time())
            os.kill(victim.process.pid, signal.SIGTERM)
            victim.process.join(30)
            victim.exit_s = time.time() - victim.fate_at
            if victim.process.is_alive():  # never expected: the handler's work is bounded by 2 s
                victim.process.kill()
                victim.process.join(10)
            fault.detail["workers"].append(Path(victim.config.ledger).stem)
            fault.detail["exit_s"].append(round(victim.exit_s, 2))
            fault.detail["exitcodes"].append(victim.process.exitcode)
            with self._lock:
                self._start(victim.slot)
        fault.end = time.time()
        return fault

    def collector_away(self, seconds: float, label: str = "") -> Fault:
        fault = self._fault("collector", label or f"Collector away {seconds:g} s")
        self.collector.stop()
        fault.detail["stopped"] = time.time()
        time.sleep(max(seconds - (time.time() - fault.start), 0))
        self.collector.start()
        fault.end = time.time()
        return fault

    def redis_restart(self, *, aof_after: bool, down_s: float = 3.0, label: str = "") -> Fault:
        """Redis stopped and started again (``aof_after``: with AOF on); the data survives only if AOF was on."""
        kept = self.redis.aof
        fault = self._fault("redis", label or f"Redis restarted ({'AOF' if kept else 'no persistence'})", aof=kept)
        self.redis.stop()
        time.sleep(down_s)
        self.redis.start(aof=aof_after)
        fault.end = time.time()
        return fault

    def disk_full(self, which: str, seconds: float, label: str = "") -> Fault:
        """Fill the tmpfs under the SQLite store (``store``) or the receiver's output (``receiver``)."""
        disk = self.store_disk if which == "store" else self.receiver_disk
        kind = "disk-sqlite" if which == "store" else "disk-receiver"
        fault = self._fault(kind, label or f"full disk under the {'SQLite store' if which == 'store' else 'receiver'}")
        fault.detail["filled_mb"] = round(disk.fill() / 2**20, 1)
        time.sleep(max(seconds - (time.time() - fault.start), 0))
        disk.free()
        fault.end = time.time()
        return fault

    def refuse(self, seconds_503: float, seconds_429: float, retry_after: float, label: str = "") -> Fault:
        """The receiver answers 503 for a while, then 429 with ``Retry-After``, then serves again."""
        label = label or f"receiver 503 {seconds_503:g} s, then 429 {seconds_429:g} s"
        fault = self._fault("refuse", label, retry_after=retry_after)
        self.receiver.control("503")
        time.sleep(seconds_503)
        self.receiver.control("429", retry_after)
        time.sleep(seconds_429)
        self.receiver.control("ok")
        fault.end = time.time()
        return fault
