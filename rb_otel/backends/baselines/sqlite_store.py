"""The SQLite baseline store: several processes on one machine share one database file.

One row per finished run (an append, in a ``BEGIN IMMEDIATE`` transaction, so concurrent writers never lose each
other's runs), WAL journal (readers never wait for a writer; a crashed writer loses nothing it committed), each
agent trimmed to its newest :data:`~rb_otel.steering.pilot.baselines.MAX_RUNS` runs, the store to
:data:`~rb_otel.steering.pilot.baselines.MAX_AGENTS` agents (the least recently recorded dropped). Connections are per
thread and per process (a forked worker opens its own).

URL: ``sqlite:///abs/path.db`` (the path is everything after ``sqlite://``) or a plain path. A path holding a
baselines JSON file of the previous release (``rb-otel baselines/1``) is imported once: the JSON is kept beside
it as ``<name>.v1.json`` and the path becomes the database (one log line says so).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sqlite3
import threading
import time
from collections import defaultdict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rb_otel.backends.baselines.errors import StoreUnavailable, SummaryStoreError
from rb_otel.backends.baselines.models import StoredModel
from rb_otel.backends.baselines.rows import StoredRows
from rb_otel.steering.pilot.baselines import (
    COLUMNS,
    MAX_AGENTS,
    MAX_RUNS,
    RATES,
    AgentInfo,
    AgentRuns,
    RunSummary,
    agent_key,
)

__all__ = ["FORMAT", "SqliteSummaryStore", "open_store"]

_log = logging.getLogger("rb_otel.baselines")

#: The format this module writes (kept in the database's ``rb_baselines_meta`` table).
FORMAT = "rb-otel baselines/2"
_LEGACY_FORMAT = "rb-otel baselines/1"
_SQLITE_MAGIC = b"SQLite format 3\x00"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS rb_baselines_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS rb_baselines_agents (
    agent TEXT PRIMARY KEY, runs INTEGER NOT NULL, newest REAL, last_id INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS rb_baselines_runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT, agent TEXT NOT NULL, summary TEXT NOT NULL, run_id TEXT
);
CREATE INDEX IF NOT EXISTS rb_baselines_runs_by_agent ON rb_baselines_runs (agent, id);
CREATE INDEX IF NOT EXISTS rb_baselines_agents_by_use ON rb_baselines_agents (last_id);
CREATE TABLE IF NOT EXISTS rb_baselines_models (agent TEXT PRIMARY KEY, record TEXT NOT NULL);
"""
#: A finished run is recorded once: a retried append of the same run id inserts nothing (NULL ids, from summaries
#: of the previous release, are never equal, so they are all kept).
_ONCE = "CREATE UNIQUE INDEX IF NOT EXISTS rb_baselines_runs_once ON rb_baselines_runs (agent, run_id)"
_OURS = frozenset({"rb_baselines_meta", "rb_baselines_agents", "rb_baselines_runs", "rb_baselines_models"})


def path_of(url: str) -> Path:
    """The file a ``sqlite://`` URL or a plain path names."""
    return Path(url[len("sqlite://") :] if url.lower().startswith("sqlite://") else url).expanduser()


def open_store(url: str, *, max_agents: int = MAX_AGENTS, create: bool = True) -> SqliteSummaryStore:
    """The entry point: the store at ``url`` (created when the file does not exist, unless ``create=False``)."""
    return SqliteSummaryStore(path_of(url), url=url, max_agents=max_agents, create=create)


class SqliteSummaryStore:
    """A :class:`~rb_otel.steering.pilot.baselines.SummaryStore` in one SQLite file (see the module docstring).

    Raises :class:`~rb_otel.backends.baselines.errors.SummaryStoreError` at construction for a file that is not a
    baseline store (naming the file and what it holds), a folder that does not exist, a database written by
    another format, or (``create=False``) a file that does not exist. Nothing is written to a file before it is
    known to be a baseline store or empty: another application's database is refused byte for byte unchanged.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        url: str | None = None,
        max_agents: int = MAX_AGENTS,
        write_timeout: float = 10.0,
        create: bool = True,
    ) -> None:
        self.path = Path(path)
        self.url = url or f"sqlite://{self.path}"
        self.max_agents = max_agents
        self.write_timeout = write_timeout
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._rows = StoredRows(self.url)
        legacy = self._check_file(create)
        deadline = time.monotonic() + write_timeout
        while True:
            try:
                if legacy is not None:
                    self._import_legacy(legacy)
                else:
                    with self._connection() as db:
                        self._initialise(db)
                break
            except StoreUnavailable as exc:
                # Processes creating one store at once: SQLite answers "locked" at once (not after its busy
                # timeout) where waiting could deadlock, e.g. switching the journal to WAL; try again, bounded.
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise SummaryStoreError(f"not a usable baseline store ({exc})") from None
                self.close()
                time.sleep(0.05)

    # -- SummaryStore ----------------------------------------------------------------------------------

    def append(self, runs: Sequence[tuple[str, RunSummary]]) -> None:
        by_agent: dict[str, list[RunSummary]] = defaultdict(list)
        for agent, summary in runs:
            if not summary.says_nothing:
                by_agent[agent].append(summary)
        if not by_agent:
            return
        with self._connection(self.write_timeout) as db:
            db.execute("BEGIN IMMEDIATE")
            try:
                for agent, summaries in by_agent.items():
                    self._append_agent(db, agent, summaries)
                self._drop_least_recent(db)
                db.execute("COMMIT")
            except BaseException:
                # SQLite has already rolled back after some errors (a full disk: SQLITE_FULL); a second ROLLBACK
                # would raise "no transaction is active" in place of the reason
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise

    def recent(self, agent: str, *, timeout: float | None = None) -> AgentRuns:
        with self._connection(timeout) as db:
            row = db.execute("SELECT runs FROM rb_baselines_agents WHERE agent = ?", (agent,)).fetchone()
            if row is None:
                return AgentRuns(0, ())
            rows = db.execute(
                "SELECT summary FROM (SELECT id, summary FROM rb_baselines_runs WHERE agent = ? "
                "ORDER BY id DESC LIMIT ?) ORDER BY id",
                (agent, MAX_RUNS),
            ).fetchall()
        return AgentRuns(int(row[0]), self._rows.summaries(agent, [r[0] for r in rows]))

    def agents(self) -> list[AgentInfo]:
        with self._connection() as db:
            rows = db.execute(
                "SELECT a.agent, a.runs, a.newest, (SELECT count(*) FROM rb_baselines_runs r WHERE r.agent = a.agent) "
                "FROM rb_baselines_agents a ORDER BY a.last_id DESC"
            ).fetchall()
        return [AgentInfo(str(a), int(n), int(k), None if t is None else float(t)) for a, n, t, k in rows]

    def forget(self, agent: str) -> bool:
        with self._connection(self.write_timeout) as db:
            db.execute("BEGIN IMMEDIATE")
            gone = db.execute("DELETE FROM rb_baselines_agents WHERE agent = ?", (agent,)).rowcount
            db.execute("DELETE FROM rb_baselines_runs WHERE agent = ?", (agent,))
            db.execute("COMMIT")
        return bool(gone)

    # -- learned models (rb_otel.backends.baselines.models) -----------------------------------------------

    def put_model(self, record: StoredModel) -> None:
        """Write (or replace) ``record.agent``'s learned model."""
        with self._connection(self.write_timeout) as db:
            db.execute(
                "INSERT INTO rb_baselines_models (agent, record) VALUES (?, ?) "
                "ON CONFLICT (agent) DO UPDATE SET record = excluded.record",
                (record.agent, record.as_json()),
            )

    def model(self, agent: str, *, timeout: float | None = None) -> StoredModel | None:
        """``agent``'s learned model, ``None`` when it has none (or the row is not a record: one warning)."""
        with self._connection(timeout) as db:
            row = db.execute("SELECT record FROM rb_baselines_models WHERE agent = ?", (agent,)).fetchone()
        return None if row is None else self._rows.model(agent, row[0])

    def drop_model(self, agent: str) -> bool:
        """Withdraw ``agent``'s learned model; whether it had one."""
        with self._connection(self.write_timeout) as db:
            return bool(db.execute("DELETE FROM rb_baselines_models WHERE agent = ?", (agent,)).rowcount)

    def models(self) -> list[StoredModel]:
        """Every agent's learned model (records that do not parse skipped, with a warning)."""
        with self._connection() as db:
            rows = db.execute("SELECT agent, record FROM rb_baselines_models ORDER BY agent").fetchall()
        return [r for agent, raw in rows if (r := self._rows.model(str(agent), raw)) is not None]

    def close(self) -> None:
        with self._lock:
            connections, self._connections = self._connections, []
        for db in connections:
            # one made in another thread cannot be closed here: it closes when that thread's local goes
            with contextlib.suppress(sqlite3.ProgrammingError):
                db.close()
        self._local = threading.local()

    # -- internals ---------------------------------------------------------------------------------------

    def _append_agent(self, db: sqlite3.Connection, agent: str, summaries: list[RunSummary]) -> None:
        last_id = 0
        added: list[RunSummary] = []
        for summary in summaries:
            cursor = db.execute(
                "INSERT OR IGNORE INTO rb_baselines_runs (agent, run_id, summary) VALUES (?, ?, ?)",
                (agent, summary.run_id or None, json.dumps(summary.as_dict(), separators=(",", ":"))),
            )
            if cursor.rowcount == 1:  # 0: this run was recorded already (a retried write)
                last_id = int(cursor.lastrowid or 0)
                added.append(summary)
        if not added:
            return
        newest = max(s.finished_at for s in added)
        db.execute(
            "INSERT INTO rb_baselines_agents (agent, runs, newest, last_id) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (agent) DO UPDATE SET runs = runs + excluded.runs, "
            "newest = max(coalesce(newest, 0), excluded.newest), last_id = excluded.last_id",
            (agent, len(added), newest, last_id),
        )
        cutoff = db.execute(
            "SELECT id FROM rb_baselines_runs WHERE agent = ? ORDER BY id DESC LIMIT 1 OFFSET ?", (agent, MAX_RUNS)
        ).fetchone()
        if cutoff is not None:
            db.execute("DELETE FROM rb_baselines_runs WHERE agent = ? AND id <= ?", (agent, cutoff[0]))

    def _drop_least_recent(self, db: sqlite3.Connection) -> None:
        (count,) = db.execute("SELECT count(*) FROM rb_baselines_agents").fetchone()
        if count <= self.max_agents:
            return
        old = [
            r[0]
            for r in db.execute(
                "SELECT agent FROM rb_baselines_agents ORDER BY last_id LIMIT ?", (count - self.max_agents,)
            )
        ]
        db.executemany("DELETE FROM rb_baselines_agents WHERE agent = ?", [(a,) for a in old])
        db.executemany("DELETE FROM rb_baselines_runs WHERE agent = ?", [(a,) for a in old])

    @contextmanager
    def _connection(self, timeout: float | None = None) -> Iterator[sqlite3.Connection]:
        """This thread's connection (opened on first use, again after a fork), its waits bounded by ``timeout``."""
        try:
            db = self._thread_connection()
            if timeout is None:
                yield db
                return
            deadline = time.monotonic() + timeout
            db.execute(f"PRAGMA busy_timeout = {max(int(timeout * 1000), 1)}")
            db.set_progress_handler(lambda: time.monotonic() > deadline, 1000)  # a query past the deadline stops
            try:
                yield db
            finally:
                db.set_progress_handler(None, 0)
                db.execute(f"PRAGMA busy_timeout = {int(self.write_timeout * 1000)}")
        except sqlite3.DatabaseError as exc:
            raise StoreUnavailable(f"{self.url}: {exc}") from exc

    def _thread_connection(self) -> sqlite3.Connection:
        local = self._local
        db: sqlite3.Connection | None = getattr(local, "db", None)
        if db is None or getattr(local, "pid", None) != os.getpid():
            db = sqlite3.connect(self.path, timeout=self.write_timeout, isolation_level=None)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            local.db, local.pid = db, os.getpid()
            with self._lock:
                self._connections.append(db)
        return db

    def _check_file(self, create: bool) -> dict[str, Any] | None:
        """Refuse what is not a baseline store (reading only); the legacy JSON's content when the path holds one."""
        where = self.url
        if self.path.is_dir():
            raise SummaryStoreError(f"{where}: is a directory; name a database file in it")
        if not self.path.exists():
            if not create:
                raise SummaryStoreError(f"{where}: no baseline store there (the file does not exist)")
            if not self.path.parent.is_dir():
                raise SummaryStoreError(f"{where}: the folder {self.path.parent} does not exist")
            return None
        try:
            with self.path.open("rb") as handle:
                head = handle.read(len(_SQLITE_MAGIC))
        except OSError as exc:
            raise SummaryStoreError(f"{where}: cannot be read ({exc.strerror or exc})") from None
        if not head:
            if not create:
                raise SummaryStoreError(f"{where}: no baseline store there (the file is empty)")
            return None
        if head == _SQLITE_MAGIC:
            self._check_tables()
            return None
        return self._legacy_content(head)

    def _check_tables(self) -> None:
        """A SQLite file is ours, or holds no table: checked on a read-only connection, so a foreign database is
        refused before anything (a journal mode, a table) is written to it."""
        with contextlib.closing(sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro", uri=True)) as db:
            self._refuse_foreign(db)

    def _refuse_foreign(self, db: sqlite3.Connection) -> None:
        """Raise unless the database holds our tables or none (another application's is named by its tables)."""
        try:
            tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        except sqlite3.DatabaseError as exc:
            raise SummaryStoreError(f"{self.url}: not a baseline store ({exc})") from None
        others = sorted(t for t in tables - _OURS if not t.startswith("sqlite_"))
        if others and "rb_baselines_meta" not in tables:
            raise SummaryStoreError(
                f"{self.url}: not a baseline store (a SQLite database holding {', '.join(others[:5])})"
            )

    def _legacy_content(self, head: bytes) -> dict[str, Any]:
        problem = "neither a SQLite database nor a baselines JSON file"
        if head.lstrip()[:1] == b"{":
            try:
                data = json.loads(self.path.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
                raise SummaryStoreError(f"{self.url}: not a baseline store ({problem}: {exc})") from None
            if (
                isinstance(data, dict)
                and data.get("version") == _LEGACY_FORMAT
                and isinstance(data.get("agents"), dict)
            ):
                return data
            problem = f"a JSON file, but not one of {_LEGACY_FORMAT!r}"
        raise SummaryStoreError(f"{self.url}: not a baseline store ({problem})")

    def _initialise(self, db: sqlite3.Connection) -> None:
        self._refuse_foreign(db)  # again: another process may have created the file since it was checked
        db.execute("BEGIN IMMEDIATE")
        try:
            for statement in filter(str.strip, _SCHEMA.split(";")):
                db.execute(statement)
            columns = {r[1] for r in db.execute("PRAGMA table_info(rb_baselines_runs)")}
            if "run_id" not in columns:  # a store of the previous release: runs get their ids from now on
                db.execute("ALTER TABLE rb_baselines_runs ADD COLUMN run_id TEXT")
            db.execute(_ONCE)
            db.execute("INSERT OR IGNORE INTO rb_baselines_meta (key, value) VALUES ('format', ?)", (FORMAT,))
            (found,) = db.execute("SELECT value FROM rb_baselines_meta WHERE key = 'format'").fetchone()
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise
        if found != FORMAT:
            raise SummaryStoreError(f"{self.url}: a baseline store of format {found!r}; this release reads {FORMAT!r}")

    def _import_legacy(self, data: dict[str, Any]) -> None:
        """Move the legacy JSON aside, create the database at its path and import every agent's runs."""
        kept = self.path.with_name(self.path.name + ".v1.json")
        try:
            os.replace(self.path, kept)
        except FileNotFoundError:  # another process imported it first
            with self._connection() as db:
                self._initialise(db)
            return
        with self._connection() as db:
            self._initialise(db)
        stamp = kept.stat().st_mtime
        runs = 0
        for key, agent in data["agents"].items():
            name, _, model = str(key).partition("|")
            summaries = _legacy_runs(agent, stamp)
            if summaries:
                self.append([(agent_key(name, model), s) for s in summaries])
                with self._connection() as db:  # the recorded total, not only the kept runs
                    db.execute(
                        "UPDATE rb_baselines_agents SET runs = max(runs, ?) WHERE agent = ?",
                        (int(agent.get("runs", 0)), agent_key(name, model)),
                    )
                runs += len(summaries)
        _log.warning(
            "baselines %s: imported %d runs of %d agents from the JSON file of the previous release "
            "(kept as %s); the path is a SQLite baseline store now",
            self.url,
            runs,
            len(data["agents"]),
            kept,
        )


def _legacy_runs(agent: dict[str, Any], stamp: float) -> list[RunSummary]:
    """The runs a ``baselines/1`` agent kept, each with the agent's mean rates (the file kept no per-run rates)."""
    try:
        columns = [str(c) for c in agent["columns"]]
        rates = {name: float(agent.get(name, 0.0)) for name in RATES}
        out = []
        for row in agent["recent"][-MAX_RUNS:]:
            values = {c: float(v) for c, v in zip(columns, row, strict=True) if c in COLUMNS}
            out.append(RunSummary(stamp, {**values, **rates}))
        return out
    except (KeyError, TypeError, ValueError):
        return []
