"""Real external components for tests: find or install them, run them on 127.0.0.1, stop them.

A component that cannot be had makes the test skip with the reason; under RB_OTEL_REQUIRE_REAL=1 (CI) that skip
is turned into a failure by the hook in conftest.py.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def debian_binary(binary: str, package: str) -> str:
    """The path of ``binary``, installing Debian's ``package`` (services not started) when root can."""
    found = shutil.which(binary)
    if found:
        return found
    if os.geteuid() == 0 and shutil.which("apt-get"):
        policy = Path("/usr/sbin/policy-rc.d")
        created = not policy.exists()
        if created:
            policy.write_text("#!/bin/sh\nexit 101\n")
            policy.chmod(0o755)
        try:
            env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
            subprocess.run(
                ["apt-get", "install", "-y", "-qq", "--no-install-recommends", package],
                env=env,
                check=False,
                capture_output=True,
                timeout=600,
            )
        finally:
            if created:
                policy.unlink(missing_ok=True)
        found = shutil.which(binary)
        if found:
            return found
    pytest.skip(f"{binary} (Debian package {package}) is not installed and could not be installed here")


def rotel_agent() -> str:
    try:
        from importlib import resources

        import rotel  # noqa: F401
    except ImportError:
        pytest.skip("rotel is not installed (pip install rotel, part of the dev extra on linux x86_64)")
    path = Path(str(resources.files("rotel") / "rotel-agent"))
    if not path.exists():
        pytest.skip("the rotel package has no rotel-agent binary for this platform")
    return str(path)


def http_json(url: str, data: bytes | None = None, timeout: float = 5.0) -> Any:
    request = urllib.request.Request(url, data=data)
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.loads(response.read())


def data_path(relative: str = "") -> Path:
    """``relative`` under the development records' data root (``RB_OTEL_DATA``, else ``../shared/data`` beside the
    repository, else the repository's ``data/`` from ``make data``); skip with the reason when it is not there (a
    failure under RB_OTEL_REQUIRE_REAL=1)."""
    from rb_otel.datasets import DataNotFound, data_root

    try:
        path = data_root() / relative
    except DataNotFound as exc:
        pytest.skip(str(exc))
    if not path.exists():
        pytest.skip(f"{path} is not in the data root; run `make data`")
    return path


def signal_source(name: str) -> Path:
    """The folder of development source ``signal/<name>`` (its archive unpacked into the cache outside the
    repository); skip with the reason when the data root lacks it."""
    from rb_otel.datasets import DataNotFound, source_folder

    try:
        return source_folder(f"signal/{name}")
    except DataNotFound as exc:
        pytest.skip(str(exc))


def wait_until(check: Any, *, timeout: float, interval: float = 0.25, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    last_error: BaseException | None = None
    while time.monotonic() < deadline:
        try:
            value = check()
            if value:
                return value
        except (OSError, urllib.error.URLError, ValueError, KeyError) as exc:
            last_error = exc
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what} (last error: {last_error!r})")


@contextlib.contextmanager
def process(args: list[str], log: Path, env: dict[str, str] | None = None) -> Iterator[subprocess.Popen[bytes]]:
    """Run ``args`` with output to ``log``; terminate (then kill) it on exit."""
    with log.open("wb") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        try:
            yield proc
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)


def python_module(*args: str) -> list[str]:
    return [sys.executable, "-m", *args]


class OtlpSink(BaseHTTPRequestHandler):
    """A real OTLP/HTTP receiver: decodes the protobuf trace requests (``received``), log requests
    (``received_logs``) and metric requests (``received_metrics``) it is sent."""

    received: ClassVar[list[Any]] = []
    received_logs: ClassVar[list[Any]] = []
    received_metrics: ClassVar[list[Any]] = []

    def do_POST(self) -> None:
        from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
        from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.headers.get("Content-Encoding") == "gzip":
            import gzip

            body = gzip.decompress(body)
        if self.path.endswith("/v1/traces"):
            request = ExportTraceServiceRequest()
            request.ParseFromString(body)
            self.received.append(request)
        elif self.path.endswith("/v1/logs"):
            logs = ExportLogsServiceRequest()
            logs.ParseFromString(body)
            self.received_logs.append(logs)
        elif self.path.endswith("/v1/metrics"):
            metrics = ExportMetricsServiceRequest()
            metrics.ParseFromString(body)
            self.received_metrics.append(metrics)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def otlp_sink() -> Iterator[tuple[int, list[Any]]]:
    OtlpSink.received = []
    OtlpSink.received_logs = []
    OtlpSink.received_metrics = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), OtlpSink)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1], OtlpSink.received
    server.shutdown()


class RedisServer:
    """A real ``redis-server`` (Debian's package, installed on demand) on 127.0.0.1, in a temporary directory,
    with no persistence; ``stop``/``start`` (same port), ``pause``/``resume`` (SIGSTOP: connections hang)."""

    def __init__(self, directory: Path, password: str | None = None) -> None:
        self.binary = debian_binary("redis-server", "redis-server")
        self.directory = directory
        self.password = password
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        args = [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.directory)]
        args += ["--save", "", "--appendonly", "no", "--protected-mode", "no"]
        if self.password:
            args += ["--requirepass", self.password]
        log = (self.directory / "redis.log").open("ab")
        self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        wait_until(self._answers, timeout=60, interval=0.05, what=f"redis-server on port {self.port}")

    def _answers(self) -> bool:
        with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as sock:
            sock.sendall(b"PING\r\n")
            reply = sock.recv(64)
        return reply.startswith((b"+PONG", b"-NOAUTH"))

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.proc = None

    def pause(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, 19)  # SIGSTOP

    def resume(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, 18)  # SIGCONT


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    folder = tmp_path / "redis"
    folder.mkdir()
    server = RedisServer(folder)
    server.start()
    try:
        yield server
    finally:
        if server.proc is not None:
            with contextlib.suppress(OSError):
                server.resume()
        server.stop()


def _postgres_binary(name: str) -> str:
    """``initdb`` / ``pg_ctl`` from Debian's ``postgresql`` (they live in /usr/lib/postgresql/N/bin)."""
    found = sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"))
    if found:
        return str(found[-1])
    return debian_binary(name, "postgresql")


class PostgresServer:
    """A real PostgreSQL (Debian's package) initialised by ``initdb`` in a temporary directory, served by
    ``pg_ctl`` on a free port of 127.0.0.1, stopped by :meth:`stop`. As root it runs as the ``postgres`` user
    (``initdb`` refuses root)."""

    def __init__(self) -> None:
        self.initdb = _postgres_binary("initdb")
        self.pg_ctl = _postgres_binary("pg_ctl")
        # a directory of its own: pytest's are readable by their owner only, and the server may run as postgres
        self.directory = Path(tempfile.mkdtemp(prefix="rb-otel-postgres-"))
        self.data = self.directory / "data"
        self.port = free_port()
        self.dsn = f"postgresql://postgres@127.0.0.1:{self.port}/postgres?sslmode=disable"

    def _as_owner(self, *args: str) -> list[str]:
        if os.geteuid() != 0:
            return list(args)
        return ["runuser", "-u", "postgres", "--", *args]

    def start(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            shutil.chown(self.directory, "postgres", "postgres")
        self._run(
            self._as_owner(self.initdb, "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8"), 120
        )
        options = f"-p {self.port} -c listen_addresses=127.0.0.1 -c unix_socket_directories={self.directory} -F"
        self._run(
            self._as_owner(
                self.pg_ctl,
                "-D",
                str(self.data),
                "-o",
                options,
                "-l",
                str(self.directory / "log"),
                "-w",
                "-t",
                "60",
                "start",
            ),
            90,
        )

    @staticmethod
    def _run(command: list[str], timeout: float) -> None:
        """Run one setup command; a failure says what the command printed (initdb's reason is on its stderr)."""
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
        if done.returncode != 0:
            said = (done.stderr or done.stdout).strip()[-2000:]
            raise RuntimeError(f"{' '.join(command)} failed (exit {done.returncode}): {said}")

    def stop(self) -> None:
        subprocess.run(
            self._as_owner(self.pg_ctl, "-D", str(self.data), "-m", "immediate", "-w", "-t", "30", "stop"),
            check=False,
            capture_output=True,
            timeout=60,
        )
        shutil.rmtree(self.directory, ignore_errors=True)
