"""Per-agent baselines: what a normal run of each agent looks like, learned from its finished runs.

No outcomes are involved. When a run ends the pilot writes a label-free :class:`RunSummary` of it (what it added
up to, the peaks its score sustained, its per-step rates) under its agent's key (:func:`agent_key`); a run that
starts reads its agent's :class:`AgentBaseline`, built from the agent's newest :data:`MAX_RUNS` summaries.

Where the summaries live is a :class:`SummaryStore`: recording is an *append*, never a read-modify-write of the
whole state, so concurrent writers cannot lose each other's runs. :class:`MemorySummaryStore` (one process, the
default) is here; SQLite (several processes on one machine) and Redis (several machines) are in
:mod:`rb_otel.backends.baselines`, found through the ``rb_otel.baseline_stores`` entry points by
:func:`open_summary_store`. The pilot reaches a store through :class:`~rb_otel.steering.baseline_cache.BaselineStore`,
which keeps it off the step's path.
"""

from __future__ import annotations

import inspect
import logging
import math
import re
import threading
import time
from bisect import bisect_left, insort
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, Protocol, runtime_checkable
from urllib.parse import quote, unquote, urlsplit

__all__ = [
    "COLUMNS",
    "ENTRY_POINT_GROUP",
    "MAX_AGENTS",
    "MAX_RUNS",
    "MAY_BE_UNKNOWN",
    "RATES",
    "RELATIVE_AFTER",
    "TOTALS",
    "AgentBaseline",
    "AgentInfo",
    "AgentRuns",
    "BaselineStoreError",
    "MemorySummaryStore",
    "RunSummary",
    "StoreUnavailable",
    "SummaryStore",
    "agent_key",
    "display_url",
    "elide_password",
    "encoded_credentials",
    "normalise_model",
    "open_summary_store",
    "password_of",
    "scrub",
    "summary_now",
]

_log = logging.getLogger("rb_otel.baselines")

MAX_RUNS = 400  # runs kept per agent for the distributions (the newest)
MAX_AGENTS = 256  # agents kept per store; the least recently recorded are dropped beyond it
#: Runs an agent needs before its SLOW/SKIP thresholds are its own (before: the model's fixed preset).
RELATIVE_AFTER = 20
#: What a run adds up (the pilot's ``overrun_*`` features compare them with the agent's earlier runs).
TOTALS: tuple[str, ...] = ("steps", "chars", "context", "hedges", "errors")
#: The distributions kept: the totals and the peaks a run's score sustained over the FSM's SLOW and SKIP windows.
COLUMNS = (*TOTALS, "peak_slow", "peak_skip")
#: Per-step rates, averaged over the kept runs.
RATES = ("log_cps", "error_rate", "repeat_rate", "hedging", "log_tps")
MAY_BE_UNKNOWN = frozenset({"context"})  # 0 tokens: the harness reports none
#: The entry-point group of store openers: ``name = "module:function"``, ``function(url) -> SummaryStore``.
ENTRY_POINT_GROUP = "rb_otel.baseline_stores"


class BaselineStoreError(ValueError):
    """A baseline store that cannot be used as given: the message names the URL (password elided) and why."""


class StoreUnavailable(OSError):
    """The store did not answer (down, unreachable, locked past the timeout); the message names the URL."""


@dataclass(frozen=True, slots=True)
class RunSummary:
    """What one finished run of an agent added up to: named numbers, no outcome, no content.

    ``values`` holds at least :data:`COLUMNS` and :data:`RATES`; a store keeps every name it is given, so a later
    pilot can read more of them. ``finished_at`` is the wall-clock time the run ended (seconds since the epoch).
    ``run_id`` names the finished run (unique per run): a store records a summary with an id at most once, so a
    write that is retried after a timeout (and had in fact been applied) cannot count the run twice; ``""`` (a
    summary of an older release) is never deduplicated.
    """

    finished_at: float
    values: Mapping[str, float]
    run_id: str = ""

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"t": self.finished_at, "v": dict(self.values)}
        if self.run_id:
            data["id"] = self.run_id
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunSummary:
        """The inverse of :meth:`as_dict`; ``ValueError`` for anything else."""
        try:
            values = {str(k): float(v) for k, v in data["v"].items()}
            return cls(float(data["t"]), values, str(data.get("id") or ""))
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            raise ValueError(f"not a run summary ({exc})") from None


@dataclass(frozen=True, slots=True)
class AgentRuns:
    """An agent's record in a store: how many runs it ever recorded, and the newest :data:`MAX_RUNS` of them,
    oldest first."""

    runs: int
    recent: tuple[RunSummary, ...]


@dataclass(frozen=True, slots=True)
class AgentInfo:
    """One agent of a store, as ``rb-otel baselines`` lists it."""

    agent: str
    runs: int  # every run ever recorded under the key
    kept: int  # the newest ones the distributions use (at most MAX_RUNS)
    newest: float | None  # when the newest run finished (epoch seconds)

    @property
    def relative(self) -> bool:
        """Past the first :data:`RELATIVE_AFTER` runs: its SLOW/SKIP thresholds are its own."""
        return self.kept >= RELATIVE_AFTER

    def as_dict(self) -> dict[str, Any]:
        return {
            "agent": self.agent,
            "runs": self.runs,
            "kept": self.kept,
            "newest": self.newest,
            "relative_thresholds": self.relative,
        }


class AgentBaseline:
    """What a normal run of one agent looks like: the sorted values of each of :data:`COLUMNS` over its newest
    :data:`MAX_RUNS` runs (for their empirical distribution) and the mean of each of :data:`RATES`.

    Immutable: a run reads the baseline once when it starts, and :meth:`plus` makes the next one.
    ``AgentBaseline(runs, recent)`` is the plain definition; :meth:`plus` is its incremental form (the same
    result, tested against it).
    """

    __slots__ = ("_recent", "_sorted", "error_rate", "hedging", "log_cps", "log_tps", "repeat_rate", "runs")

    def __init__(self, runs: int = 0, recent: Sequence[RunSummary] = ()) -> None:
        kept = tuple(s for s in recent if s.values.get("steps", 0.0) > 0)[-MAX_RUNS:]
        self.runs = max(int(runs), len(kept))
        self._recent = kept
        self._sorted = {name: sorted(s.values.get(name, 0.0) for s in kept) for name in COLUMNS}
        self._set_rates()

    def _set_rates(self) -> None:
        for name in RATES:  # over the runs that report it (a summary from an older release may not)
            known = [s.values[name] for s in self._recent if name in s.values]
            setattr(self, name, math.fsum(known) / len(known) if known else 0.0)

    def plus(self, summary: RunSummary) -> AgentBaseline:
        """This baseline with ``summary`` added (the oldest kept run dropped beyond :data:`MAX_RUNS`).
        A run with no steps says nothing and leaves the baseline as it is."""
        if summary.values.get("steps", 0.0) <= 0:
            return self
        new = AgentBaseline.__new__(AgentBaseline)
        new.runs = self.runs + 1
        recent = (*self._recent, summary)
        dropped = recent[0] if len(recent) > MAX_RUNS else None
        new._recent = recent[1:] if dropped is not None else recent
        new._sorted = {}
        for name in COLUMNS:
            column = list(self._sorted[name])
            insort(column, summary.values.get(name, 0.0))
            if dropped is not None:
                del column[bisect_left(column, dropped.values.get(name, 0.0))]
            new._sorted[name] = column
        new._set_rates()
        return new

    @property
    def known(self) -> int:
        """How many runs the distributions hold."""
        return len(self._recent)

    @property
    def recent(self) -> tuple[RunSummary, ...]:
        """The kept runs, oldest first."""
        return self._recent

    def share_below(self, name: str, value: float) -> float | None:
        """The share of known runs whose ``name`` was below ``value`` (runs with 0, unknown, left out);
        ``None`` when no run knows it."""
        column = self._sorted[name]
        unknown = bisect_left(column, 1e-12) if name in MAY_BE_UNKNOWN else 0
        known = len(column) - unknown
        if known <= 0:
            return None
        return max(bisect_left(column, value) - unknown, 0) / known

    def quantile(self, name: str, q: float) -> float | None:
        """The ``q`` quantile of ``name`` over the known runs (``None`` before any run)."""
        column = self._sorted[name]
        if not column:
            return None
        return column[min(int(q * len(column)), len(column) - 1)]

    def same_as(self, other: AgentBaseline) -> bool:
        """The same runs count, kept runs, distributions and rates (what a store must give back)."""
        return (
            self.runs == other.runs
            and self._recent == other._recent
            and self._sorted == other._sorted
            and all(getattr(self, r) == getattr(other, r) for r in RATES)
        )

    def __repr__(self) -> str:
        return f"AgentBaseline(runs={self.runs}, known={self.known})"


EMPTY_BASELINE = AgentBaseline()


@runtime_checkable
class SummaryStore(Protocol):
    """Where finished runs' summaries are kept, by agent key. Implementations are thread-safe.

    ``append`` adds runs (one transaction where the store has them; a run with no steps is ignored) and keeps
    each agent bounded to its newest :data:`MAX_RUNS` and the store to :data:`MAX_AGENTS` agents (the least
    recently recorded dropped); ``recent`` reads one agent within ``timeout`` seconds. Any call raises
    :class:`StoreUnavailable` when the store cannot answer.
    """

    url: str  # for messages and logs, the password elided

    def append(self, runs: Sequence[tuple[str, RunSummary]]) -> None: ...

    def recent(self, agent: str, *, timeout: float | None = None) -> AgentRuns: ...

    def agents(self) -> list[AgentInfo]: ...

    def forget(self, agent: str) -> bool: ...

    def close(self) -> None: ...


class MemorySummaryStore:
    """The in-process store (the default): nothing survives the process, nothing is shared with another.

    It keeps each agent's :class:`AgentBaseline` itself, updated incrementally, so reading one costs a dict
    lookup (``baseline``).
    """

    url = "memory://"

    def __init__(self, *, max_agents: int = MAX_AGENTS) -> None:
        self.max_agents = max_agents
        self._agents: OrderedDict[str, AgentBaseline] = OrderedDict()
        self._lock = threading.Lock()

    def baseline(self, agent: str) -> AgentBaseline:
        """The agent's current baseline (an empty one for an agent with no runs)."""
        found = self._agents.get(agent)
        return EMPTY_BASELINE if found is None else found

    def append(self, runs: Sequence[tuple[str, RunSummary]]) -> None:
        with self._lock:
            for agent, summary in runs:
                if summary.values.get("steps", 0.0) <= 0:
                    continue
                old = self._agents.get(agent, EMPTY_BASELINE)
                self._agents[agent] = old.plus(summary)
                self._agents.move_to_end(agent)
            while len(self._agents) > self.max_agents:
                self._agents.popitem(last=False)

    def recent(self, agent: str, *, timeout: float | None = None) -> AgentRuns:
        baseline = self.baseline(agent)
        return AgentRuns(baseline.runs, baseline.recent)

    def agents(self) -> list[AgentInfo]:
        with self._lock:
            items = list(self._agents.items())
        return [AgentInfo(agent, b.runs, b.known, b.recent[-1].finished_at if b.recent else None) for agent, b in items]

    def forget(self, agent: str) -> bool:
        with self._lock:
            return self._agents.pop(agent, None) is not None

    def close(self) -> None:
        return None

    def __len__(self) -> int:
        return len(self._agents)


# -- agent keys ---------------------------------------------------------------------------------------------

_PROVIDER_PREFIX = re.compile(r"^[a-z0-9][a-z0-9_.\-]*:(?!\d)")  # "anthropic:", "google_genai:" (not "host:8080")
_warned_unnamed: set[str] = set()
_warn_lock = threading.Lock()


def normalise_model(model: str) -> str:
    """A model id with the spellings of one model folded together: lower case; a ``provider:`` prefix
    (LangChain's ``init_chat_model`` form), a leading ``@``, ``models/`` and any ``vendor/`` path (LiteLLM,
    OpenRouter, Vertex) dropped. ``"@google/Gemini-3-Pro"``, ``"google/gemini-3-pro"``,
    ``"models/gemini-3-pro"`` and ``"google_genai:gemini-3-pro"`` are all ``"gemini-3-pro"``."""
    text = str(model or "").strip().lower()
    text = _PROVIDER_PREFIX.sub("", text, count=1).lstrip("@")
    return text.rstrip("/").rsplit("/", 1)[-1]


def agent_key(agent_name: str, model: str = "") -> str:
    """The key an agent's baselines are kept under: its name and its normalised model, ``"name|model"``.

    Runs of one agent on one model share a baseline, whichever way the model is spelled
    (:func:`normalise_model`). An unnamed agent gets its key from the model alone, shared with every other
    unnamed agent on that model (warned about once per model: pass ``agent_name=`` to keep them apart).
    """
    name = str(agent_name or "").strip()
    model_id = normalise_model(model)
    if not name:
        with _warn_lock:
            first = model_id not in _warned_unnamed
            _warned_unnamed.add(model_id)
        if first:
            _log.warning(
                "an unnamed agent on model %r: its pilot baselines are shared with every unnamed agent on that "
                "model; pass agent_name= to give it its own",
                model_id or "(none)",
            )
    return f"{name}|{model_id}"


# -- opening a store from a URL ------------------------------------------------------------------------------


_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*)://")


def display_url(url: str | Path) -> str:
    """``url`` as every message, log line and command output shows it: the password replaced by ``***``.

    Whatever characters the password holds (an unencoded ``#``, ``/``, ``?`` or ``@`` included): the credentials
    are everything between ``scheme://`` and the last ``@`` of the URL, and what follows their first ``:`` is
    elided. A URL whose host or port cannot be parsed is shown with everything after the scheme elided
    (``redis://***``). A plain path is shown as it is."""
    text = str(url)
    match = _SCHEME.match(text)
    if match is None:
        return text
    scheme, rest = text[: match.end()], text[match.end() :]
    user, at, host = rest.rpartition("@")
    if at and ":" in user:
        rest = f"{user.split(':', 1)[0]}:***@{host}"
    try:
        parts = urlsplit(scheme + (host if at else rest))
        parts.port  # noqa: B018  (raises ValueError for a port that is not a number)
    except ValueError:
        return f"{scheme}***"
    return scheme + rest


def elide_password(url: str) -> str:
    """The previous name of :func:`display_url` (kept: the same function)."""
    return display_url(url)


def password_of(url: str | Path) -> str:
    """The password a URL holds, as written (``""`` when none): what :func:`scrub` removes from messages."""
    match = _SCHEME.match(str(url))
    if match is None:
        return ""
    user, at, _host = str(url)[match.end() :].rpartition("@")
    return user.split(":", 1)[1] if at and ":" in user else ""


def scrub(text: str, url: str | Path) -> str:
    """``text`` (a message from a client library, which may quote what it was given) with the password of
    ``url`` removed, as written and percent-decoded."""
    secret = password_of(url)
    if not secret:
        return text
    for form in sorted({secret, unquote(secret), quote(unquote(secret), safe="")}, key=len, reverse=True):
        if form:
            text = text.replace(form, "***")
    return text


def encoded_credentials(url: str) -> str:
    """``url`` with its user and password percent-encoded (as :func:`display_url` finds them), so a client's
    URL parser reads a password holding ``#``, ``/``, ``?`` or ``@`` as the password; an encoded one stays as
    it is."""
    match = _SCHEME.match(url)
    if match is None:
        return url
    user, at, host = url[match.end() :].rpartition("@")
    if not at:
        return url
    name, colon, password = user.partition(":")
    credentials = quote(unquote(name), safe="") + (colon + quote(unquote(password), safe="") if colon else "")
    return f"{url[: match.end()]}{credentials}@{host}"


def _scheme(url: str) -> str:
    """The URL's scheme; ``"sqlite"`` for a plain path (Windows drive letters included)."""
    match = _SCHEME.match(url)
    return match.group(1).lower() if match else "sqlite"


def open_summary_store(url: str | Path, *, max_agents: int = MAX_AGENTS, create: bool = True) -> SummaryStore:
    """The store ``url`` names: ``memory://``, ``sqlite:///path/baselines.db`` (or a plain path),
    ``redis://[:password@]host:port/db``, or any scheme a package registers under the
    ``rb_otel.baseline_stores`` entry points. Raises :class:`BaselineStoreError` naming the URL (password
    elided, :func:`display_url`) and the problem (an unknown scheme, a file that is not a baseline store,
    credentials the server refused, a port that is not a number). An opener is called as
    ``opener(url, max_agents=...)``, and with ``create=False`` too when it accepts it: ``create=False`` (listing,
    forgetting) never makes a store that is not there, it raises."""
    text = str(url)
    shown = display_url(text)
    scheme = _scheme(text)
    if scheme == "memory":
        return MemorySummaryStore(max_agents=max_agents)
    openers = {ep.name: ep for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)}
    opener = openers.get(scheme)
    if opener is None:
        known = ", ".join(["memory://", *(f"{name}://" for name in sorted(openers))])
        raise BaselineStoreError(
            f"{shown}: unknown baseline store scheme {scheme!r}; use one of {known} or a file path"
        )
    try:
        function = opener.load()
        options: dict[str, Any] = {"max_agents": max_agents}
        if not create and "create" in inspect.signature(function).parameters:
            options["create"] = False
        store: SummaryStore = function(text, **options)
    except BaselineStoreError as exc:
        raise BaselineStoreError(scrub(str(exc), text)) from None
    except ImportError as exc:
        raise BaselineStoreError(f"{shown}: {scrub(str(exc), text)}") from None
    except (ValueError, TypeError, OSError) as exc:  # an opener's own parsing: one line, never a traceback
        raise BaselineStoreError(f"{shown}: {scrub(str(exc), text)}") from None
    return store


def summary_now(values: Mapping[str, float]) -> RunSummary:
    """A summary of a run finishing now."""
    return RunSummary(time.time(), dict(values))
