"""The fleet summary: SKIP rate, outcomes, steps and tokens per run, and steps and time in each FSM state, by
agent and day, computed where the spans are.

One definition, written twice and tested to agree:

* :func:`fleet_sql` is what runs in the store (a ClickHouse server, or chdb on files or a folder): two
  aggregate queries over ``otel_traces`` (:mod:`rb_otel.analysis.schema`), the filters pushed into their
  ``WHERE`` clauses; Python receives one row per agent and day (and FSM state), never the spans;
* :func:`summarise_spans` is the plain definition over span rows in Python (what the files path computes, and
  what the test compares the store's answer with).

A *run* is every ``invoke_agent`` span sharing an ``rb.run_id`` (the parts of a resumed run joined): its agent is
the first part's ``gen_ai.agent.name``, its day the UTC date of its first part's start, its outcome the last
part's ``rb.outcome``, its steps and tokens the sums of the parts' ``rb.steps`` and ``rb.tokens``, and it is a
SKIP run when any part has ``rb.entered_skip``. A run's *steps in a state* are its ``chat`` spans (in the traces of
its parts) by their ``rb.fsm_state``, with their summed durations. The time window (``since`` inclusive, ``until``
exclusive), agent and service filters select run spans; a run's steps follow its parts.
"""

from __future__ import annotations

import datetime
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rb_otel.report.traces import RunSpanFilter

__all__ = ["FleetFilter", "FleetRow", "fleet_sql", "format_summary", "quote", "rows_from_store", "run_filter",
           "run_predicates", "starts_at_or_after", "summarise_spans"]  # fmt: skip

_OUTCOMES = ("success", "failure", "stopped")


@dataclass(frozen=True, slots=True)
class FleetFilter:
    """What a summary covers: run spans starting in ``[since, until)`` (UTC), of ``agent``, of ``service``."""

    since: datetime.datetime | None = None
    until: datetime.datetime | None = None
    agent: str | None = None
    service: str | None = None


@dataclass(slots=True)
class FleetRow:
    """One agent on one day."""

    agent: str
    day: str  # YYYY-MM-DD (UTC)
    runs: int = 0
    skip_runs: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)  # success, failure (any "failure: ..."), stopped, other
    steps: int = 0
    tokens: int = 0
    state_steps: dict[str, int] = field(default_factory=dict)
    state_ns: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        runs = max(self.runs, 1)
        return {
            "agent": self.agent,
            "day": self.day,
            "runs": self.runs,
            "skip_runs": self.skip_runs,
            "skip_rate": round(self.skip_runs / runs, 6),
            "outcomes": dict(sorted(self.outcomes.items())),
            "steps_per_run": round(self.steps / runs, 6),
            "tokens_per_run": round(self.tokens / runs, 6),
            "state_steps": dict(sorted(self.state_steps.items())),
            "state_seconds": {k: round(v / 1e9, 6) for k, v in sorted(self.state_ns.items())},
        }


def outcome_kind(outcome: str) -> str:
    """``success``, ``failure`` (``failure`` or ``failure: ...``), ``stopped``, or ``other``."""
    if outcome.startswith("failure"):
        return "failure"
    return outcome if outcome in _OUTCOMES else "other"


def quote(text: str) -> str:
    """``text`` as a ClickHouse string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _time(moment: datetime.datetime) -> str:
    if moment.tzinfo is not None:
        moment = moment.astimezone(datetime.UTC).replace(tzinfo=None)
    return f"toDateTime64({quote(moment.isoformat(sep=' '))}, 9, 'UTC')"


def starts_at_or_after(moment: datetime.datetime) -> str:
    """The ``WHERE`` term of spans starting at or after ``moment`` (UTC when it has no zone)."""
    return f"Timestamp >= {_time(moment)}"


def run_predicates(where: FleetFilter, *, operation: bool = True) -> list[str]:
    """The ``WHERE`` terms that select run spans (``invoke_agent``; with ``operation``, also by
    ``gen_ai.operation.name``) under ``where``; the time bounds, when given, come right after the span's kind."""
    out = ["startsWith(SpanName, 'invoke_agent')"]
    if operation:
        out.append("SpanAttributes['gen_ai.operation.name'] = 'invoke_agent'")
    if where.since is not None:
        out.append(starts_at_or_after(where.since))
    if where.until is not None:
        out.append(f"Timestamp < {_time(where.until)}")
    if where.service is not None:
        out.append(f"ServiceName = {quote(where.service)}")
    if where.agent is not None:
        out.append(f"SpanAttributes['gen_ai.agent.name'] = {quote(where.agent)}")
    return out


def fleet_sql(table: str, where: FleetFilter) -> tuple[str, str]:
    """The two queries (runs by agent and day; steps by agent, day and FSM state) over ``table``."""
    predicates = " AND ".join(run_predicates(where))
    runs = f"""
        SELECT SpanAttributes['rb.run_id'] AS run_id,
               argMin(SpanAttributes['gen_ai.agent.name'], Timestamp) AS agent,
               toString(toDate(min(Timestamp), 'UTC')) AS day,
               argMax(SpanAttributes['rb.outcome'], Timestamp) AS outcome,
               max(SpanAttributes['rb.entered_skip'] = 'true') AS skipped,
               sum(toInt64OrZero(SpanAttributes['rb.steps'])) AS steps,
               sum(toInt64OrZero(SpanAttributes['rb.tokens'])) AS tokens,
               groupArray(TraceId) AS traces
        FROM {table} WHERE {predicates} GROUP BY run_id"""
    by_run = f"""
        SELECT agent, day, count() AS runs, sum(skipped) AS skip_runs,
               countIf(outcome = 'success') AS success, countIf(startsWith(outcome, 'failure')) AS failure,
               countIf(outcome = 'stopped') AS stopped,
               countIf(outcome != 'success' AND NOT startsWith(outcome, 'failure') AND outcome != 'stopped') AS other,
               sum(steps) AS steps, sum(tokens) AS tokens
        FROM ({runs}) GROUP BY agent, day ORDER BY agent, day"""
    chat = "startsWith(SpanName, 'chat') AND SpanAttributes['rb.fsm_state'] != ''"
    if where.since is not None:  # a step starts after its run: the same lower bound prunes the scan
        chat += f" AND Timestamp >= {_time(where.since)}"
    by_state = f"""
        SELECT r.agent AS agent, r.day AS day, c.state AS state, sum(c.n) AS steps, sum(c.ns) AS ns
        FROM (SELECT agent, day, arrayJoin(traces) AS trace FROM ({runs})) AS r
        INNER JOIN (SELECT TraceId, SpanAttributes['rb.fsm_state'] AS state, count() AS n, sum(Duration) AS ns
                    FROM {table} WHERE {chat} GROUP BY TraceId, state) AS c ON c.TraceId = r.trace
        GROUP BY agent, day, state ORDER BY agent, day, state"""
    return by_run, by_state


def rows_from_store(by_run: Iterable[Sequence[Any]], by_state: Iterable[Sequence[Any]]) -> list[FleetRow]:
    """The :class:`FleetRow` list from the two queries' result rows (in their column order)."""
    rows: dict[tuple[str, str], FleetRow] = {}
    for agent, day, runs, skip_runs, success, failure, stopped, other, steps, tokens in by_run:
        counts = {"success": success, "failure": failure, "stopped": stopped, "other": other}
        rows[(agent, day)] = FleetRow(str(agent), str(day), int(runs), int(skip_runs),
                                      {k: int(v) for k, v in counts.items() if v}, int(steps), int(tokens))  # fmt: skip
    for agent, day, state, steps, ns in by_state:
        row = rows[(agent, day)]
        row.state_steps[str(state)] = int(steps)
        row.state_ns[str(state)] = int(ns)
    return [rows[k] for k in sorted(rows)]


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        return 0


def summarise_spans(spans: Iterable[Mapping[str, Any]], where: FleetFilter) -> list[FleetRow]:
    """The plain definition (module docstring) over span rows with the ``otel_traces`` columns
    (``Timestamp`` in nanoseconds, ``SpanAttributes`` a string map)."""
    since = None if where.since is None else _nanos(where.since)
    until = None if where.until is None else _nanos(where.until)
    parts: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    chats: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for span in spans:
        attributes = span["SpanAttributes"]
        name = span["SpanName"]
        if name.startswith("chat") and attributes.get("rb.fsm_state", ""):
            if since is None or span["Timestamp"] >= since:
                chats[span["TraceId"]].append(span)
            continue
        if not name.startswith("invoke_agent") or attributes.get("gen_ai.operation.name") != "invoke_agent":
            continue
        if (since is not None and span["Timestamp"] < since) or (until is not None and span["Timestamp"] >= until):
            continue
        if where.service is not None and span["ServiceName"] != where.service:
            continue
        if where.agent is not None and attributes.get("gen_ai.agent.name", "") != where.agent:
            continue
        parts[attributes.get("rb.run_id", "")].append(span)
    rows: dict[tuple[str, str], FleetRow] = {}
    for run_parts in parts.values():
        first = min(run_parts, key=lambda s: s["Timestamp"])
        last = max(run_parts, key=lambda s: s["Timestamp"])
        agent = first["SpanAttributes"].get("gen_ai.agent.name", "")
        day = datetime.datetime.fromtimestamp(first["Timestamp"] // 1_000_000_000, datetime.UTC).date().isoformat()
        row = rows.setdefault((agent, day), FleetRow(agent, day))
        row.runs += 1
        row.skip_runs += any(p["SpanAttributes"].get("rb.entered_skip") == "true" for p in run_parts)
        kind = outcome_kind(last["SpanAttributes"].get("rb.outcome", ""))
        row.outcomes[kind] = row.outcomes.get(kind, 0) + 1
        row.steps += sum(_int(p["SpanAttributes"].get("rb.steps", "")) for p in run_parts)
        row.tokens += sum(_int(p["SpanAttributes"].get("rb.tokens", "")) for p in run_parts)
        for part in run_parts:
            for chat in chats.get(part["TraceId"], ()):
                state = chat["SpanAttributes"]["rb.fsm_state"]
                row.state_steps[state] = row.state_steps.get(state, 0) + 1
                row.state_ns[state] = row.state_ns.get(state, 0) + int(chat["Duration"])
    return [rows[k] for k in sorted(rows)]


def run_filter(where: FleetFilter) -> RunSpanFilter | None:
    """``where`` as the files path applies it while reading (the same terms as :func:`run_predicates`)."""
    if where == FleetFilter():
        return None
    since = None if where.since is None else _nanos(where.since)
    until = None if where.until is None else _nanos(where.until)

    def keep(attributes: dict[str, Any], start: int, service: str) -> bool:
        return (
            (since is None or start >= since)
            and (until is None or start < until)
            and (where.agent is None or attributes.get("gen_ai.agent.name", "") == where.agent)
            and (where.service is None or service == where.service)
        )

    return keep


def _nanos(moment: datetime.datetime) -> int:
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    delta = moment - datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1_000


def format_summary(rows: Sequence[FleetRow]) -> list[str]:
    """The summary as a table: an agent and day a line, then the steps and seconds in each FSM state."""
    if not rows:
        return ["no runs in the source for these filters"]
    width = max(12, *(len(r.agent) for r in rows))
    lines = [f"{'agent':<{width}} {'day':<10} {'runs':>6} {'SKIP':>6} {'SKIP %':>7} {'success':>8} {'failure':>8} "
             f"{'stopped':>8} {'steps/run':>10} {'tokens/run':>11}"]  # fmt: skip
    for r in rows:
        d = r.as_dict()
        o = r.outcomes
        lines.append(f"{r.agent:<{width}} {r.day:<10} {r.runs:>6} {r.skip_runs:>6} {d['skip_rate']:>7.1%} "
                     f"{o.get('success', 0):>8} {o.get('failure', 0):>8} {o.get('stopped', 0):>8} "
                     f"{d['steps_per_run']:>10.1f} {d['tokens_per_run']:>11.0f}")  # fmt: skip
    states = ("INIT", "FAST", "NORMAL", "SLOW", "SKIP")
    lines += ["", "steps (and seconds) in each FSM state:",
              f"{'agent':<{width}} {'day':<10} " + " ".join(f"{s:>16}" for s in states)]  # fmt: skip
    for r in rows:
        cells = [f"{r.state_steps.get(s, 0)} ({r.state_ns.get(s, 0) / 1e9:.1f}s)" for s in states]
        lines.append(f"{r.agent:<{width}} {r.day:<10} " + " ".join(f"{c:>16}" for c in cells))
    return lines
