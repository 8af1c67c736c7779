"""The Redis baseline store: workers on several machines share one Redis (the ``[redis]`` extra).

Per agent, a list of run summaries (``RPUSH`` then ``LTRIM`` to the newest
:data:`~rb_otel.steering.pilot.baselines.MAX_RUNS`, with the run count and the agent index), so writers on any number
of machines only ever append; the agent index is a sorted set scored by the newest run's time, beyond
:data:`~rb_otel.steering.pilot.baselines.MAX_AGENTS` the least recently recorded agents are dropped. Keys live under a
prefix (``rb-otel:baselines:``; ``?prefix=`` in the URL changes it).

A run is recorded once: one Lua script per agent checks each summary's run id against the agent's recent ids (a
sorted set) and appends only the new ones, in one atomic step, so a write that timed out but was applied (a
paused Redis that resumes) and is then retried adds nothing. A stored row that is not a run summary, or a run
count that is not a number, is skipped with one warning naming the agent.

URL: ``redis://[[user]:password@]host[:port][/db][?prefix=...]``, ``rediss://`` for TLS. A Redis that refuses the
credentials, or holds baselines of another format under the prefix, is an error at construction; one that does
not answer is not (the pilot fails open and the writer retries).
"""

from __future__ import annotations

import contextlib
import json
import socket
import ssl
import threading
from collections import defaultdict
from collections.abc import Iterator, Sequence
from typing import Any
from urllib.parse import parse_qs, urlsplit

from rb_otel.backends.baselines.errors import StoreUnavailable, SummaryStoreError
from rb_otel.backends.baselines.models import StoredModel
from rb_otel.backends.baselines.rows import StoredRows
from rb_otel.steering.pilot.baselines import MAX_AGENTS, MAX_RUNS, AgentInfo, AgentRuns, RunSummary
from rb_otel.urls import display_url, encoded_credentials, scrub

try:
    import redis
    from redis.backoff import NoBackoff
    from redis.retry import Retry
except ImportError as exc:  # pragma: no cover - the extra is not installed
    raise ImportError("the Redis baseline store needs the redis package: pip install 'rb-otel[redis]'") from exc

__all__ = ["FORMAT", "RedisSummaryStore", "open_store"]

FORMAT = "rb-otel baselines/2"
_DEFAULT_PREFIX = "rb-otel:baselines:"
_WRITE_TIMEOUT = 5.0
#: Recent run ids kept per agent to recognise a retried write (far more than a retry can lag behind).
_IDS_KEPT = 4 * MAX_RUNS

#: KEYS: runs list, ids sorted set, counts hash, newest hash, agents sorted set, format key.
#: ARGV: agent, max runs, format, ids kept, then (run id, summary JSON, finished-at) per summary.
#: Appends the summaries whose id the agent has not seen (an empty id always); returns how many it appended.
_APPEND_ONCE = """
local added, newest, newest_text = 0, nil, nil
for i = 5, #ARGV, 3 do
  local fresh = 1
  if ARGV[i] ~= '' then fresh = redis.call('ZADD', KEYS[2], 'NX', ARGV[i + 2], ARGV[i]) end
  if fresh == 1 then
    redis.call('RPUSH', KEYS[1], ARGV[i + 1])
    added = added + 1
    local t = tonumber(ARGV[i + 2])
    if newest == nil or t > newest then newest, newest_text = t, ARGV[i + 2] end
  end
end
redis.call('SET', KEYS[6], ARGV[3])
if added > 0 then
  redis.call('LTRIM', KEYS[1], -tonumber(ARGV[2]), -1)
  redis.call('ZREMRANGEBYRANK', KEYS[2], 0, -tonumber(ARGV[4]) - 1)
  redis.call('HINCRBY', KEYS[3], ARGV[1], added)
  redis.call('HSET', KEYS[4], ARGV[1], newest_text)
  redis.call('ZADD', KEYS[5], newest, ARGV[1])
end
return added
"""


def open_store(url: str, *, max_agents: int = MAX_AGENTS) -> RedisSummaryStore:
    """The entry point for ``redis://`` and ``rediss://`` URLs."""
    return RedisSummaryStore(url, max_agents=max_agents)


class RedisSummaryStore:
    """A :class:`~rb_otel.steering.pilot.baselines.SummaryStore` in Redis (see the module docstring)."""

    def __init__(self, url: str, *, max_agents: int = MAX_AGENTS, connect_timeout: float = 0.2) -> None:
        self.url = display_url(url)
        self.max_agents = max_agents
        self._secret_url = url  # what messages are scrubbed of
        url = encoded_credentials(url)
        try:
            port = urlsplit(url).port
        except ValueError:
            raise SummaryStoreError(f"{self.url}: the port is not a number between 1 and 65535") from None
        if port == 0:
            raise SummaryStoreError(f"{self.url}: the port is not a number between 1 and 65535")
        self._raw_url, query = _split_query(url)
        self.prefix = (query.get("prefix") or [_DEFAULT_PREFIX])[0]
        self._connect_timeout = connect_timeout
        self._clients: dict[float, redis.Redis] = {}
        self._lock = threading.Lock()
        self._rows = StoredRows(self.url)
        try:
            self._append_once = self._client(_WRITE_TIMEOUT).register_script(_APPEND_ONCE)
        except ValueError as exc:  # redis-py's own URL parsing
            raise SummaryStoreError(f"{self.url}: not a Redis URL ({scrub(str(exc), url)})") from None
        self._check_server()

    # -- SummaryStore ----------------------------------------------------------------------------------

    def append(self, runs: Sequence[tuple[str, RunSummary]]) -> None:
        by_agent: dict[str, list[RunSummary]] = defaultdict(list)
        for agent, summary in runs:
            if not summary.says_nothing:
                by_agent[agent].append(summary)
        if not by_agent:
            return
        with self._answering():
            self._append(by_agent)

    def _append(self, by_agent: dict[str, list[RunSummary]]) -> None:
        client = self._client(_WRITE_TIMEOUT)
        pipe = client.pipeline(transaction=False)
        shared = [self._key("counts"), self._key("newest"), self._key("agents"), self._key("format")]
        for agent, summaries in by_agent.items():
            args: list[str | int] = [agent, MAX_RUNS, FORMAT, _IDS_KEPT]
            for summary in summaries:
                row = json.dumps(summary.as_dict(), separators=(",", ":"))
                args += [summary.run_id, row, repr(summary.finished_at)]
            self._append_once(keys=[self._runs_key(agent), self._ids_key(agent), *shared], args=args, client=pipe)
        pipe.zcard(self._key("agents"))
        replies = pipe.execute()
        if int(replies[-1]) > self.max_agents:
            self._drop_least_recent(client, int(replies[-1]) - self.max_agents)

    def recent(self, agent: str, *, timeout: float | None = None) -> AgentRuns:
        client = self._client(_WRITE_TIMEOUT if timeout is None else timeout)
        pipe = client.pipeline(transaction=False)
        pipe.hget(self._key("counts"), agent)
        pipe.lrange(self._runs_key(agent), 0, -1)
        with self._answering():
            count, rows = pipe.execute()
        if count is None:
            return AgentRuns(0, ())
        summaries = self._rows.summaries(agent, rows)
        return AgentRuns(self._count(agent, count, len(summaries)), summaries)

    def _count(self, agent: str, raw: Any, fallback: int) -> int:
        try:
            return int(raw)
        except (TypeError, ValueError):
            self._rows.warn_once(
                agent, "count", f"the run count of agent {agent!r} is not a number ({_text(raw)[:40]!r}); skipped"
            )
            return fallback

    def agents(self) -> list[AgentInfo]:
        with self._answering():
            return self._agents()

    def _agents(self) -> list[AgentInfo]:
        client = self._client(_WRITE_TIMEOUT)
        members = [_text(m) for m in client.zrevrange(self._key("agents"), 0, -1)]
        if not members:
            return []
        pipe = client.pipeline(transaction=False)
        for agent in members:
            pipe.hget(self._key("counts"), agent)
            pipe.hget(self._key("newest"), agent)
            pipe.llen(self._runs_key(agent))
        replies = pipe.execute()
        out = []
        for i, agent in enumerate(members):
            count, newest, kept = replies[3 * i : 3 * i + 3]
            try:
                runs, when = int(count or 0), None if newest is None else float(newest)
            except (TypeError, ValueError):
                self._rows.warn_once(
                    agent, "listing", f"agent {agent!r} has a run count or time that is not a number; skipped"
                )
                continue
            out.append(AgentInfo(agent, runs, int(kept), when))
        return out

    def forget(self, agent: str) -> bool:
        client = self._client(_WRITE_TIMEOUT)
        pipe = client.pipeline(transaction=True)
        pipe.zrem(self._key("agents"), agent)
        pipe.hdel(self._key("counts"), agent)
        pipe.hdel(self._key("newest"), agent)
        pipe.delete(self._runs_key(agent), self._ids_key(agent))
        with self._answering():
            return bool(pipe.execute()[0])

    # -- learned models (rb_otel.backends.baselines.models): one string key per agent ---------------------

    def put_model(self, record: StoredModel) -> None:
        """Write (or replace) ``record.agent``'s learned model."""
        with self._answering():
            self._client(_WRITE_TIMEOUT).set(self._model_key(record.agent), record.as_json())

    def model(self, agent: str, *, timeout: float | None = None) -> StoredModel | None:
        """``agent``'s learned model, ``None`` when it has none (or the key is not a record: one warning)."""
        with self._answering():
            raw = self._client(_WRITE_TIMEOUT if timeout is None else timeout).get(self._model_key(agent))
        return None if raw is None else self._rows.model(agent, raw)

    def drop_model(self, agent: str) -> bool:
        """Withdraw ``agent``'s learned model; whether it had one."""
        with self._answering():
            return bool(self._client(_WRITE_TIMEOUT).delete(self._model_key(agent)))

    def models(self) -> list[StoredModel]:
        """Every agent's learned model (keys that do not parse skipped, with a warning)."""
        client = self._client(_WRITE_TIMEOUT)
        with self._answering():
            keys = sorted(client.scan_iter(match=self._model_key("*"), count=500))
            values = client.mget(keys) if keys else []
        start = len(self._model_key(""))
        out = []
        for key, raw in zip(keys, values, strict=True):
            if raw is not None and (record := self._rows.model(_text(key)[start:], raw)) is not None:
                out.append(record)
        return out

    def _model_key(self, agent: str) -> str:
        return f"{self.prefix}model:{agent}"

    def close(self) -> None:
        with self._lock:
            clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            client.close()

    # -- internals ---------------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _answering(self) -> Iterator[None]:
        """Redis' connection, timeout and server errors as :class:`StoreUnavailable` naming the store."""
        try:
            yield
        except (redis.RedisError, OSError) as exc:
            raise StoreUnavailable(f"{self.url}: {type(exc).__name__}: {scrub(str(exc), self._secret_url)}") from None

    def _key(self, name: str) -> str:
        return f"{self.prefix}{name}"

    def _runs_key(self, agent: str) -> str:
        return f"{self.prefix}runs:{agent}"

    def _ids_key(self, agent: str) -> str:
        return f"{self.prefix}ids:{agent}"

    def _client(self, timeout: float) -> redis.Redis:
        """A client whose commands fail within ``timeout`` seconds (no retries: the caller decides)."""
        timeout = round(max(timeout, 0.01), 3)
        with self._lock:
            client = self._clients.get(timeout)
            if client is None:
                client = redis.Redis.from_url(
                    self._raw_url,
                    socket_timeout=timeout,
                    socket_connect_timeout=min(timeout, max(self._connect_timeout, 0.01)),
                    retry=Retry(NoBackoff(), 0),
                    decode_responses=False,
                )
                self._clients[timeout] = client
            return client

    def _check_server(self) -> None:
        """Credentials and the format under the prefix are checked now; an unreachable server is not an error."""
        client = self._client(max(self._connect_timeout, 0.2))
        try:
            found = client.get(self._key("format"))
        except redis.AuthenticationError as exc:
            raise SummaryStoreError(f"{self.url}: Redis refused the credentials ({self._clean(exc)})") from None
        except redis.ResponseError as exc:
            if "NOAUTH" in str(exc) or "WRONGPASS" in str(exc) or "NOPERM" in str(exc):
                raise SummaryStoreError(f"{self.url}: Redis refused the credentials ({self._clean(exc)})") from None
            raise SummaryStoreError(f"{self.url}: Redis refused the store's commands ({self._clean(exc)})") from None
        except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
            if _tls_failed(exc) or (self._raw_url.lower().startswith("rediss://") and self._plain_redis_answers()):
                raise SummaryStoreError(
                    f"{self.url}: the TLS handshake failed ({self._clean(exc)}); is the server serving TLS? "
                    "rediss:// is for TLS, redis:// for a plain connection"
                ) from None
            return  # not reachable now: the pilot fails open and the writer retries
        if found is not None and _text(found) != FORMAT:
            raise SummaryStoreError(
                f"{self.url}: the keys under {self.prefix!r} hold baselines of format {_text(found)!r}; "
                f"this release reads {FORMAT!r} (use another ?prefix=)"
            )

    def _drop_least_recent(self, client: redis.Redis, excess: int) -> None:
        old = [_text(a) for a in client.zrange(self._key("agents"), 0, excess - 1)]
        if not old:
            return
        pipe = client.pipeline(transaction=True)
        pipe.zrem(self._key("agents"), *old)
        pipe.hdel(self._key("counts"), *old)
        pipe.hdel(self._key("newest"), *old)
        pipe.delete(*(self._runs_key(a) for a in old), *(self._ids_key(a) for a in old))
        pipe.execute()

    def _clean(self, exc: BaseException) -> str:
        return scrub(str(exc), self._secret_url)

    def _plain_redis_answers(self) -> bool:
        """A TLS handshake that timed out: does the server answer a plain ``PING`` (a Redis without TLS, which
        waits for the end of a line that a TLS greeting never sends)?"""
        parts = urlsplit(self._raw_url)
        try:
            with socket.create_connection((parts.hostname or "localhost", parts.port or 6379), timeout=0.2) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(16).startswith((b"+PONG", b"-NOAUTH", b"-ERR"))
        except OSError:
            return False


def _tls_failed(exc: BaseException) -> bool:
    """The connection failed in the TLS handshake (``rediss://`` to a plain server, or a certificate refused)."""
    seen: BaseException | None = exc
    for _ in range(5):
        if seen is None:
            return False
        if isinstance(seen, ssl.SSLError) or "SSL" in str(seen):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _split_query(url: str) -> tuple[str, dict[str, list[str]]]:
    """The URL without the options redis-py does not know (``prefix``), and those options."""
    parts = urlsplit(url)
    query = parse_qs(parts.query)
    ours = {k: v for k, v in query.items() if k == "prefix"}
    rest = "&".join(f"{k}={v}" for k, values in query.items() if k != "prefix" for v in values)
    return parts._replace(query=rest).geturl(), ours


def _text(value: Any) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)
