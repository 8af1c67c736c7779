"""The count of a chaos run: the workers' ledgers (what was started, ended, handed over, accepted) against what the
receiver wrote (what arrived), and every loss set against the promise of ``docs/failure-handling.md``.

A span that ended and never arrived is explained by one cause (and counted in the row of the fault that caused it),
or it breaks the promise:

* ``kill -9``: the process was killed with it not yet accepted by the Collector, and it ended at most
  :data:`KILL_WINDOW_S` before the kill (the 200 ms handover bound, the 1 s batch delay of ``configure()``, and
  the 4 s an export in progress may take);
* ``SIGTERM while the Collector was away``: the process exited (2 s of exit work at most) while the Collector was
  down, so the queue could not be sent;
* ``the Collector's memory``: the Collector had accepted it and was stopped while its backend refused (rotel holds
  refused batches in memory: it keeps no persistent queue).

With otelcol-rb (``collector/otelcol-persistent-queue.yaml``: the exporter's queue on disk) the third is no excuse,
and with the export spool (``spool=True``) the second is allowed only as ``SIGTERM during an export try``: a try of
the OTLP exporter was in progress when the signal came (its ledger's ``try`` line without a ``tried`` line before
the signal), and the spool cannot save what waits behind a try (docs/failure-handling.md, "The export spool"). A
span still in the spool when the count is made (the drain could not send it) is ``kept in the spool``: not arrived,
not lost.

Anything else is counted as ``unexplained`` and fails the promise. Spans that rb-otel had not yet handed to the
SDK when the process died are counted too: a run's ended spans are its ``call`` lines (and its end) or its
``span`` lines, whichever are more.
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chaos_fleet import Fault, Fleet

#: How long before a ``kill -9`` a span that ended may still be lost: rb-otel's handover bound (0.2 s), the batch
#: processor's delay in ``configure()`` (1 s) and one export's timeout (4 s), for an export in progress.
KILL_WINDOW_S = 0.2 + 1.0 + 4.0
#: rb-otel's exit work on SIGTERM is bounded by this (``rb_otel.process_exit.EXIT_TIMEOUT_S``).
EXIT_S = 2.0
#: A SIGTERM'd worker has exited within this: the exit bound plus one export timeout (the Kubernetes advice of
#: docs/failure-handling.md: the grace period above the application's own drain time plus 6 s).
SIGTERM_EXIT_S = EXIT_S + 4.0
#: The Collector retries a refused batch at most this far apart (``collector/rotel-fleet.sh``), after a 200 ms batch.
COLLECTOR_BACKOFF_S = 5.0 + 0.2
#: The agents may be this much slower while the Collector is away (issue 54), median run time.
OVERHEAD_BOUND = 1.10

#: The promise per fault kind, with rotel in front of the fleet and no spool (see :func:`promises`).
PROMISES = {
    "kill": "each killed worker's run in flight; spans ended in the 5.2 s before the kill",
    "sigterm": "nothing: runs in flight end (`failure: SIGTERM`) and arrive; exit within 6 s",
    "collector": "nothing (up to 300 s, 8,192 spans a process); agents at most 10% slower",
    "redis": "no span; baselines as the store's persistence allows",
    "disk-sqlite": "no span; no baseline summary (4,096 wait in each worker)",
    "disk-receiver": "nothing (the receiver answers 503; the Collector retries for 300 s)",
    "refuse": "nothing (the Collector retries 503 and 429 for 300 s)",
    "together": "what each fault allows, and: a SIGTERM while the Collector is away loses that worker's queue; "
    "the Collector stopped while its backend refuses loses what it held",
}


def promises(collector: str = "rotel", spool: bool = False) -> dict[str, str]:
    """The promise per fault kind for a fleet behind ``collector`` (``rotel`` or ``otelcol-rb``), with or without
    the export spool."""
    out = dict(PROMISES)
    if collector == "otelcol-rb":
        out["collector"] = "nothing (kill -9: the queue is on disk); agents at most 10% slower"
    sigterm = "loses what waited behind an export try in progress" if spool else "loses that worker's queue"
    stopped = "loses nothing (its queue is on disk)" if collector == "otelcol-rb" else "loses what it held"
    out["together"] = (
        f"what each fault allows, and: a SIGTERM while the Collector is away {sigterm}; "
        f"the Collector stopped while its backend refuses {stopped}"
    )
    return out


@dataclass
class Run:
    run: str
    proc: str
    start: float
    end: float | None = None
    seconds: float | None = None
    cpu: float | None = None
    pending: int = 0
    trace: str = ""
    calls: list[float] = field(default_factory=list)


@dataclass
class Proc:
    name: str
    slot: int
    group: str
    fate: str
    fate_at: float
    exit_s: float
    up: float = 0.0
    runs: list[Run] = field(default_factory=list)
    sigterm_seen: bool = False
    exited_clean: bool = False
    tries: list[tuple[float, float]] = field(default_factory=list)  # the OTLP exporter's tries (an open one: inf)

    def trying_at(self, t: float) -> bool:
        """Whether a try of the OTLP exporter was in progress at ``t``."""
        return any(start <= t < end for start, end in self.tries)


@dataclass
class Tally:
    """One fault window's count."""

    label: str
    kind: str
    started: int = 0
    ended: int = 0
    roots_arrived: int = 0
    runs_lost_in_flight: int = 0
    spans_ended: int = 0
    spans_arrived: int = 0
    lost: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    duplicates: int = 0
    kept_in_spool: int = 0  # ended, not arrived, still in the export spool: not lost
    recover_s: float | None = None
    overhead: float | None = None
    cpu_overhead: float | None = None
    problems: list[str] = field(default_factory=list)

    @property
    def lost_total(self) -> int:
        return sum(self.lost.values())

    @property
    def held(self) -> bool:
        return not self.problems


def _spool_spans(folder: Path) -> set[str]:
    """The span ids (hex) of what the export spool still holds: its files, claimed or not (never a ``.tmp``)."""
    from rb_otel.telemetry.otlp_json_spans import spans_of_lines

    ids: set[str] = set()
    for path in folder.glob("spans-*.json*") if folder.is_dir() else []:
        if path.name.endswith((".tmp", ".corrupt")):
            continue
        ids.update(format(s.context.span_id, "016x") for s in spans_of_lines(path.read_text(encoding="utf-8")))
    return ids


def _lines(path: Path) -> list[dict[str, Any]]:
    out = []
    for line in path.read_bytes().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue  # a line cut by the kill: only the last can be
    return out


class Count:
    """Reads a closed :class:`~chaos_fleet.Fleet`'s ledgers and receiver output; :meth:`tallies` does the rest."""

    def __init__(self, fleet: Fleet) -> None:
        self.fleet = fleet
        self.persists = fleet.collector_kind == "otelcol-rb"  # the Collector's queue is on disk
        self.spooled = fleet.spool is not None
        self.in_spool = _spool_spans(fleet.spool) if fleet.spool is not None else set()
        self.faults = sorted(fleet.faults, key=lambda f: f.start)  # every fault: what explains a loss
        self.windows = [f for f in self.faults if not f.detail.get("within")]  # the table's rows
        self.procs: dict[str, Proc] = {}
        self.runs: dict[str, Run] = {}
        self.handed: dict[str, tuple[str, str, float, str]] = {}  # span -> (trace, name, t, proc)
        self.acked: dict[str, float] = {}
        self.by_trace: dict[str, list[str]] = defaultdict(list)
        self.run_of_trace: dict[str, Run] = {}
        for worker in [*fleet.retired, *fleet.workers.values()]:
            name = Path(worker.config.ledger).stem
            proc = Proc(name, worker.slot, fleet.group(worker.slot), worker.fate, worker.fate_at, worker.exit_s)
            self.procs[name] = proc
            self._read(proc, Path(worker.config.ledger))
        self.arrived: dict[str, float] = {}
        self.arrivals: dict[str, int] = defaultdict(int)
        self.arrived_traces: dict[str, list[tuple[str, str]]] = defaultdict(list)
        for line in _lines(fleet.arrived):
            for trace, span, name, _run, _end in line["spans"]:
                self.arrivals[span] += 1
                if span not in self.arrived:
                    self.arrived[span] = line["t"]
                    self.arrived_traces[trace].append((span, name))

    def _read(self, proc: Proc, path: Path) -> None:
        if not path.exists():
            return
        current: dict[str, Run] = {}
        for event in _lines(path):
            kind = event["e"]
            if kind == "up":
                proc.up = event["t"]
            elif kind == "start":
                run = current[event["r"]] = self.runs[event["r"]] = Run(event["r"], proc.name, event["t"])
                proc.runs.append(run)
            elif kind == "call" and event["r"] in current:
                current[event["r"]].calls.append(event["t"])
            elif kind == "root" and event["r"] in current:
                current[event["r"]].trace = event["tr"]
                self.run_of_trace[event["tr"]] = current[event["r"]]
            elif kind == "span":
                self.handed[event["sp"]] = (event["tr"], event["n"], event["t"], proc.name)
                self.by_trace[event["tr"]].append(event["sp"])
            elif kind == "ack":
                for span in event["sp"]:
                    self.acked.setdefault(span, event["t"])
            elif kind == "end" and event["r"] in current:
                run = current[event["r"]]
                run.end, run.seconds, run.cpu, run.pending = event["t"], event["s"], event["cpu"], event["q"]
            elif kind == "try":
                proc.tries.append((event["t"], float("inf")))
            elif kind == "tried" and proc.tries:
                proc.tries[-1] = (proc.tries[-1][0], event["t"])
            elif kind == "sigterm":
                proc.sigterm_seen = True
            elif kind == "exit":
                proc.exited_clean = True

    # -- causes ---------------------------------------------------------------------------------------

    def _intervals(self, *kinds: str) -> list[tuple[float, float]]:
        return [(f.start, f.end) for f in self.faults if f.kind in kinds]

    def _collector_away(self, start: float, end: float) -> bool:
        return any(a <= end and start <= b for a, b in self._intervals("collector"))

    def _cause(self, proc: Proc, ended_at: float, acked_at: float | None) -> tuple[str, float | None]:
        """Why a span that ended at ``ended_at`` in ``proc`` never arrived (or ``unexplained``), and when what lost
        it happened (the kill, the SIGTERM, the Collector's stop; ``None`` when unexplained)."""
        if acked_at is not None:
            refusals = self._intervals("refuse", "disk-receiver")
            for fault in self.faults:
                stopped = fault.detail.get("stopped")
                held = fault.kind == "collector" and stopped and acked_at <= stopped
                if held and any(a <= stopped <= b + COLLECTOR_BACKOFF_S for a, b in refusals):
                    if self.persists:
                        return "unexplained (accepted by the Collector, whose queue is on disk)", stopped
                    return "the Collector's memory", stopped
            return "unexplained (accepted by the Collector)", None
        if proc.fate == "killed":
            if proc.fate_at - KILL_WINDOW_S <= ended_at <= proc.fate_at:
                return "kill -9", proc.fate_at
            return "unexplained (killed, ended too long before)", None
        if proc.fate == "sigterm" and self._collector_away(proc.fate_at, proc.fate_at + EXIT_S):
            if self.spooled and proc.trying_at(proc.fate_at):
                return "SIGTERM during an export try (the spool cannot save it)", proc.fate_at
            if self.spooled:
                return "unexplained (SIGTERM while the Collector was away, with the export spool)", proc.fate_at
            return "SIGTERM while the Collector was away", proc.fate_at
        return f"unexplained ({proc.fate or 'alive'}, never accepted)", None

    def _lose(self, tallies: list[Tally], proc: Proc, ended_at: float, acked_at: float | None) -> None:
        """Count a span that ended and never arrived in the row of what lost it (else of its end)."""
        cause, at = self._cause(proc, ended_at, acked_at)
        tally = tallies[(self._window(at) if at is not None else self._span_window(proc, ended_at)) + 1]
        tally.spans_ended += 1
        tally.lost[cause] += 1

    def _window(self, t: float) -> int:
        """Index of the window (a fault not inside another) that holds ``t`` (-1: before the first fault)."""
        index = -1
        for i, fault in enumerate(self.windows):
            if t >= fault.start:
                index = i
        return index

    def _span_window(self, proc: Proc, t: float) -> int:
        """A span's window: the one its end falls in, but a span that ended shortly before its process was killed
        or stopped counts where the kill or the stop does (that is what it is at risk from)."""
        if proc.fate in ("killed", "sigterm") and proc.fate_at - KILL_WINDOW_S <= t <= proc.fate_at:
            return self._window(proc.fate_at)
        return self._window(t)

    # -- the count ---------------------------------------------------------------------------------------

    def tallies(self) -> list[Tally]:
        tallies = [Tally("no fault (before the first)", "none")]
        tallies += [Tally(f.label, f.kind) for f in self.windows]
        for run in self.runs.values():
            self._count_run(run, tallies)
        for i, fault in enumerate(self.windows):
            tally = tallies[i + 1]
            tally.recover_s = self._recovery(fault)
            tally.overhead, tally.cpu_overhead = self._overhead(fault)
        for fault in self.faults:
            self._check(fault, tallies[self._window(fault.start) + 1])
        for tally in tallies:
            for cause, n in tally.lost.items():
                if cause.startswith("unexplained") and n:
                    tally.problems.append(f"{n} spans lost: {cause}")
        return tallies

    def _count_run(self, run: Run, tallies: list[Tally]) -> None:
        proc = self.procs[run.proc]
        tally = tallies[self._window(run.start) + 1]
        tally.started += 1
        spans = self.by_trace.get(run.trace, []) if run.trace else []
        arrived = {s for s, _ in self.arrived_traces.get(run.trace, [])} if run.trace else set()
        if run.end is not None:
            tally.ended += 1
        elif proc.fate == "killed":
            tally.runs_lost_in_flight += 1
        if any(n.startswith("invoke_agent") for _, n in self.arrived_traces.get(run.trace, [])):
            tally.roots_arrived += 1
        # what ended, in the agent's eyes: every call that returned, and the run itself when it ended
        said_ended = len(run.calls) + (1 if run.end is not None else 0)
        ended = max(said_ended, len(spans))
        for span in spans:
            if span not in arrived and span in self.in_spool:
                span_tally = tallies[self._span_window(proc, self.handed[span][2]) + 1]
                span_tally.spans_ended += 1
                span_tally.kept_in_spool += 1
                continue
            if span not in arrived:
                self._lose(tallies, proc, self.handed[span][2], self.acked.get(span))
                continue
            span_tally = tallies[self._span_window(proc, self.handed[span][2]) + 1]
            span_tally.spans_ended += 1
            span_tally.spans_arrived += 1
            span_tally.duplicates += self.arrivals[span] - 1
        unhanded = ended - len(spans)
        if unhanded > 0:  # ended in the agent, never handed to the SDK: only a killed process can leave these
            for t in sorted(run.calls)[-unhanded:] or [run.start]:
                self._lose(tallies, proc, t, None)

    def _check(self, fault: Fault, tally: Tally) -> None:
        if fault.kind == "kill":
            killed = [p for p in self.procs.values() if p.name in fault.detail["workers"]]
            for proc in killed:
                in_flight = [r for r in proc.runs if r.end is None]
                if len(in_flight) > 1:
                    tally.problems.append(f"{proc.name}: {len(in_flight)} runs in flight (one at a time expected)")
        if fault.kind == "sigterm":
            slow = [s for s in fault.detail["exit_s"] if s > SIGTERM_EXIT_S]
            if slow:
                tally.problems.append(f"exits slower than {SIGTERM_EXIT_S:g} s: {slow}")
            if any(code != -15 for code in fault.detail["exitcodes"]):
                tally.problems.append(f"exit codes {fault.detail['exitcodes']} (SIGTERM's own status expected)")
            for name in fault.detail["workers"]:
                proc = self.procs[name]
                orphans = [r for r in proc.runs if r.end is None and r.trace and not self._root_arrived(r)]
                if orphans and not self._collector_away(proc.fate_at, proc.fate_at + EXIT_S):
                    tally.problems.append(f"{name}: the run in flight at SIGTERM has no root span at the receiver")
        if fault.kind == "collector" and tally.overhead is not None and tally.overhead > OVERHEAD_BOUND:
            tally.problems.append(f"agents {100 * (tally.overhead - 1):.0f}% slower while the Collector was away")

    def _root_arrived(self, run: Run) -> bool:
        return any(n.startswith("invoke_agent") for _, n in self.arrived_traces.get(run.trace, []))

    def _recovery(self, fault: Fault) -> float | None:
        """Seconds from the fault's end until the fleet is whole again (see ``docs/failure-handling.md``)."""
        if fault.kind in ("kill", "sigterm"):
            # the replacements' first runs whose root arrived
            names = {f"w{int(n[1:4]):03d}-{int(n.split('-')[1]) + 1}" for n in fault.detail["workers"]}
            firsts = []
            for name in names:
                proc = self.procs.get(name)
                done = [self.arrived.get(self._root_span(r), 0.0) for r in proc.runs] if proc else []
                done = [t for t in done if t]
                if done:
                    firsts.append(min(done))
            return max(firsts) - fault.end if firsts else None
        if fault.kind in ("redis", "disk-sqlite"):
            group = "redis" if fault.kind == "redis" else "sqlite"
            back = []
            for proc in self.procs.values():
                if proc.group != group:
                    continue
                # nothing waits but the summary of the run that just ended
                after = [r.end for r in proc.runs if r.end and r.end > fault.end and r.pending <= 1]
                if after and any(r.end and fault.start <= r.end <= fault.end for r in proc.runs):
                    back.append(min(after))
            return max(back) - fault.end if back else None
        # the backlog: every span accepted or handed over before the fault ended, delivered
        backlog = [
            self.arrived[s]
            for s, (_tr, _n, t, _p) in self.handed.items()
            if fault.start - KILL_WINDOW_S <= t <= fault.end and s in self.arrived
        ]
        return max(max(backlog) - fault.end, 0.0) if backlog else None

    def _root_span(self, run: Run) -> str:
        return next((s for s, n in self.arrived_traces.get(run.trace, []) if n.startswith("invoke_agent")), "")

    def _overhead(self, fault: Fault) -> tuple[float | None, float | None]:
        """Median run time and mean CPU per run during the fault, over the same in the time around it: a window as
        long as the fault (5 to 20 s) just before it and one just after it (up to the next fault). Both sides, so
        that a machine whose load changes while the chaos runs (another suite beside it) moves the baseline with
        the fault window rather than against it."""
        length = min(max(fault.end - fault.start, 5.0), 20.0)
        later = [f.start for f in self.faults if f.start >= fault.end]
        after_end = min([fault.end + length, *later])
        during = [r for r in self.runs.values() if r.end and fault.start <= r.start and r.end <= fault.end]
        before = [
            r
            for r in self.runs.values()
            if r.end
            and (
                (fault.start - length <= r.start and r.end < fault.start)
                or (fault.end < r.start and r.end <= after_end)
            )
        ]
        if len(during) < 5 or len(before) < 5:
            return None, None
        wall = statistics.median(r.seconds or 0 for r in during) / statistics.median(r.seconds or 0 for r in before)
        cpu_before = statistics.fmean(r.cpu or 0 for r in before)
        cpu = statistics.fmean(r.cpu or 0 for r in during) / cpu_before if cpu_before else None
        return wall, cpu

    # -- baselines -----------------------------------------------------------------------------------------

    def baselines(self, stored: dict[str, int]) -> list[dict[str, Any]]:
        """Per store: runs ended by its workers, runs the store holds, and whether the difference is promised."""
        rows = []
        wipes = [f.start for f in self.faults if f.kind == "redis" and not f.detail["aof"]]
        for group in ("redis", "sqlite"):
            procs = [p for p in self.procs.values() if p.group == group]
            if not procs:
                continue
            since = max(wipes) if group == "redis" and wipes else float("-inf")
            ended = [r for p in procs for r in p.runs if r.end and r.end > since]
            allowed = 0
            for proc in procs:
                last = [r for r in proc.runs if r.end]
                if proc.fate == "killed" and proc.fate_at > since and last:
                    allowed += last[-1].pending
                if proc.fate == "sigterm" and last and self._store_down(group, proc.fate_at):
                    allowed += last[-1].pending
            before_wipe = 0
            if since > float("-inf"):
                for proc in procs:
                    last = [r for r in proc.runs if r.end and r.end <= since]
                    before_wipe += last[-1].pending if last else 0
            have = stored.get(group, 0)
            lost = len(ended) - have
            held = -before_wipe <= lost <= allowed
            rows.append({
                "store": group, "ended": len(ended), "stored": have, "lost": max(lost, 0), "allowed": allowed,
                "since_wipe": since > float("-inf"), "held": held,
            })  # fmt: skip
        return rows

    def _store_down(self, group: str, at: float) -> bool:
        kinds = ("redis",) if group == "redis" else ("disk-sqlite",)
        return any(a <= at + EXIT_S and at <= b for a, b in self._intervals(*kinds))
