"""A fleet under faults, counted (``make chaos``): what arrives when workers are killed, the Collector or the store
goes away, a disk fills or the backend refuses, against what ``docs/failure-handling.md`` promises.

N worker processes (default 50; ``chaos_worker.py``) run scripted LangChain agents through rb-otel's middleware
(``create_agent``, the pilot on, baselines in a real Redis; every fifth worker in a SQLite store on its own small
disk) and export OTLP through ``rb_otel.configure()`` to a real Collector (rotel, ``collector/rotel-fleet.sh``; or
with ``--collector otelcol-rb``, ``make collector``'s build running ``collector/otelcol-persistent-queue.yaml``, its
queue on disk, stopped with ``kill -9``) that forwards to a real OTLP receiver writing what arrives to a small disk
(``otlp_receiver.py``). Each worker keeps a ledger of what it started, ended, handed to the SDK and had accepted;
the count (``chaos_count.py``) sets it against what the receiver wrote. The faults, one after another, then all
together:

* ``kill -9`` of random workers mid-run, and rolling SIGTERM restarts (each worker replaced);
* the Collector stopped for 5 s, 30 s and 120 s and started again;
* Redis restarted without persistence, then with its AOF;
* the disk under the SQLite store full, then the disk under the receiver's output;
* the receiver answering 503, then 429 with ``Retry-After``.

With ``--spool`` the workers share one export spool (``RB_OTEL_EXPORT_SPOOL=<run folder>/spool``): what a worker
could not hand over at its end is sent by the workers started after it, and what is left at the end by one more
process, before the count. The ``persist`` plan is the two losses a persistent Collector and the spool remove, on
their own: the Collector stopped while its backend refuses, a worker stopped by SIGTERM while the Collector is away.

    python benchmarks/chaos.py [--workers 50] [--plan full|ci|persist] [--collector rotel|otelcol-rb] [--spool]
                               [--folder DIR] [--json FILE] [--keep]

It prints, per fault, runs started / ended / whose root arrived, spans ended / arrived / lost / duplicated, the
recovery time and the agents' slowdown, with the promise beside each; the exit status is 1 when a loss breaks its
promise or a process is left behind. Needs root (the full disks are tmpfs mounts) and redis-server (installed
from Debian when missing).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from chaos_count import Count, Tally, promises
from chaos_fleet import Fleet


def _after(delay: float, action: Callable[[], Any]) -> threading.Thread:
    def run() -> None:
        time.sleep(delay)
        action()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def full_plan(fleet: Fleet, gap: float = 15.0) -> None:
    """Every fault on its own, then all together (about ten minutes with 50 workers)."""
    time.sleep(gap)
    fleet.kill9(max(fleet.n // 5, 1), every_s=1.0)
    time.sleep(gap)
    fleet.sigterm_rolling(max(fleet.n // 5, 1))
    time.sleep(gap)
    for seconds in (5, 30, 120):
        fleet.collector_away(seconds)
        time.sleep(gap + 5)
    fleet.redis_restart(aof_after=True)  # without persistence: the store comes back empty (and with AOF from now)
    time.sleep(gap)
    fleet.redis_restart(aof_after=True)  # with AOF: the store comes back whole
    time.sleep(gap)
    fleet.disk_full("store", 20)
    time.sleep(gap)
    fleet.disk_full("receiver", 20)
    time.sleep(gap + 5)
    fleet.refuse(15, 15, retry_after=5)
    time.sleep(gap + 5)
    with fleet.together("all together"):
        parts = [
            _after(0, lambda: fleet.refuse(15, 15, retry_after=5)),
            _after(5, lambda: fleet.disk_full("store", 30)),
            _after(10, lambda: fleet.collector_away(30)),
            _after(12, lambda: fleet.kill9(3, every_s=1.0)),
            _after(16, lambda: fleet.sigterm_rolling(3)),
            _after(20, lambda: fleet.redis_restart(aof_after=True)),
            _after(45, lambda: fleet.disk_full("receiver", 10)),
        ]
        for part in parts:
            part.join()
    time.sleep(gap + 15)


def ci_plan(fleet: Fleet, gap: float = 4.0) -> None:
    """One fault of each kind, short (the test suite's version: 10 workers in well under 90 s)."""
    time.sleep(gap)
    fleet.kill9(1)
    time.sleep(gap)
    fleet.sigterm_rolling(1)
    time.sleep(gap)
    fleet.collector_away(5)
    time.sleep(gap + 2)
    fleet.redis_restart(aof_after=True, down_s=2)
    time.sleep(gap)
    fleet.disk_full("store", 5)
    time.sleep(gap)
    fleet.disk_full("receiver", 5)
    time.sleep(gap)
    fleet.refuse(3, 4, retry_after=3)
    time.sleep(gap + 4)


def persist_plan(fleet: Fleet, gap: float = 4.0) -> None:
    """The Collector stopped while its backend refuses, and a worker stopped by SIGTERM while the Collector is away,
    then the Collector and its backend back (the test suite's check of a persistent Collector and the spool)."""
    time.sleep(gap)
    with fleet.together("Collector stopped while its backend refuses, SIGTERM meanwhile"):
        parts = [
            _after(0, lambda: fleet.refuse(16, 0, retry_after=1)),
            _after(3, lambda: fleet.collector_away(8)),
            _after(8, lambda: fleet.sigterm_rolling(1)),  # past a first try's 4 s: the spool's case
        ]
        for part in parts:
            part.join()
    time.sleep(gap + 8)


PLANS = {"full": full_plan, "ci": ci_plan, "persist": persist_plan}


@dataclass
class Result:
    """What a chaos run measured."""

    workers: int
    seconds: float
    tallies: list[Tally]
    baselines: list[dict[str, Any]]
    left_behind: list[str]
    faults: list[dict[str, Any]] = field(default_factory=list)
    collector: str = "rotel"
    spool: bool = False
    drained: dict[str, int] = field(default_factory=dict)  # what the spool's last sender sent and left

    @property
    def held(self) -> bool:
        return all(t.held for t in self.tallies) and all(b["held"] for b in self.baselines) and not self.left_behind


def run(plan: str, workers: int, folder: Path, **fleet_options: Any) -> Result:
    """Start the fleet in ``folder``, do ``plan``'s faults, stop, count. Always unmounts what it mounted."""
    started = time.monotonic()
    fleet = Fleet(folder, workers, redis_aof=plan == "ci", **fleet_options)
    try:
        fleet.open()
    except BaseException:
        fleet.abort()
        raise
    try:
        PLANS[plan](fleet)
    finally:
        try:
            fleet.close()
            count = Count(fleet)
            tallies = count.tallies()
            baselines = count.baselines(fleet.stored)
        finally:
            fleet.unmount()
    left = fleet.left_behind()
    faults = [{"kind": f.kind, "label": f.label, "start": f.start - fleet.started_at,
               "seconds": f.end - f.start, **f.detail} for f in fleet.faults]  # fmt: skip
    return Result(workers, time.monotonic() - started, tallies, baselines, left, faults, fleet.collector_kind,
                  fleet.spool is not None, fleet.drained)  # fmt: skip


def _figure(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{value:+.0f}%"


def print_result(result: Result) -> None:
    promise = promises(result.collector, result.spool)
    print(f"Collector: {result.collector}; export spool: {'on' if result.spool else 'off'}")
    head = (
        f"{'fault':<44} {'runs':>5} {'ended':>5} {'root':>5} {'spans':>6} {'arrived':>7} {'lost':>5} {'dup':>4}"
        f" {'recover s':>9} {'slower':>6} {'cpu':>5}  promise"
    )
    print(head)
    print("-" * len(head))
    for t in result.tallies:
        slower = None if t.overhead is None else 100 * (t.overhead - 1)
        cpu = None if t.cpu_overhead is None else 100 * (t.cpu_overhead - 1)
        print(
            f"{t.label[:44]:<44} {t.started:>5} {t.ended:>5} {t.roots_arrived:>5} {t.spans_ended:>6}"
            f" {t.spans_arrived:>7} {t.lost_total:>5} {t.duplicates:>4} {_figure(t.recover_s, '9.1f'):>9}"
            f" {_percent(slower):>6} {_percent(cpu):>5}  {promise.get(t.kind, '-')}"
        )
        for cause, n in sorted(t.lost.items()):
            if n:
                print(f"{'':<44}   lost {n} ({cause})")
        if t.kept_in_spool:
            print(f"{'':<44}   kept in the spool {t.kept_in_spool} (not sent by the end; not lost)")
        for problem in t.problems:
            print(f"{'':<44}   BROKEN: {problem}")
    print()
    for row in result.baselines:
        scope = " since the restart without persistence" if row["since_wipe"] else ""
        print(
            f"baselines in {row['store']}: {row['ended']} runs ended{scope}, {row['stored']} in the store,"
            f" {row['lost']} lost (promised at most {row['allowed']}: what killed workers had not yet written)"
            f" {'held' if row['held'] else 'BROKEN'}"
        )
    if result.spool:
        d = result.drained
        print(f"export spool at the end: {d.get('sent', 0)} spans sent from {d.get('files', 0)} files,"
              f" {d.get('left', 0)} files left")  # fmt: skip
    print(f"processes left behind: {len(result.left_behind)}" + "".join(f"\n  {p}" for p in result.left_behind))
    total = sum(t.lost_total for t in result.tallies)
    print(
        f"{result.workers} workers, {len(result.faults)} faults, {sum(t.started for t in result.tallies)} runs,"
        f" {sum(t.spans_ended for t in result.tallies)} spans ended, {total} lost,"
        f" {sum(t.duplicates for t in result.tallies)} duplicated, in {result.seconds:.0f} s:"
        f" {'every loss within its promise' if result.held else 'A PROMISE IS BROKEN'}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=50)
    parser.add_argument("--plan", choices=sorted(PLANS), default="full")
    parser.add_argument("--protocol", choices=["grpc", "http/protobuf"], default="grpc")
    parser.add_argument(
        "--collector",
        choices=["rotel", "otelcol-rb"],
        default="rotel",
        help="the Collector in front of the fleet: rotel (collector/rotel-fleet.sh, retries from memory) or otelcol-rb"
        " (make collector; collector/otelcol-persistent-queue.yaml, a file-backed queue; stopped with kill -9)",
    )
    parser.add_argument(
        "--spool",
        action="store_true",
        help="the workers share one export spool (RB_OTEL_EXPORT_SPOOL=<folder>/spool), sent before the count",
    )
    parser.add_argument("--pace", type=float, default=1.0, help="mean seconds between a worker's runs")
    parser.add_argument("--folder", type=Path, help="where everything goes (default: a temporary folder)")
    parser.add_argument("--json", type=Path, help="write the figures here")
    parser.add_argument("--keep", action="store_true", help="keep the folder (ledgers, logs, what arrived)")
    args = parser.parse_args()
    folder = args.folder or Path(tempfile.mkdtemp(prefix="rb-otel-chaos-"))
    result = run(args.plan, args.workers, folder, protocol=args.protocol, pace_s=args.pace, collector=args.collector,
                 spool=args.spool)  # fmt: skip
    print_result(result)
    if args.json:
        rows = [{**t.__dict__, "lost": dict(t.lost), "held": t.held} for t in result.tallies]
        args.json.write_text(json.dumps({"workers": result.workers, "seconds": result.seconds, "tallies": rows,
                                         "collector": result.collector, "spool": result.spool,
                                         "drained": result.drained,
                                         "baselines": result.baselines, "left_behind": result.left_behind,
                                         "faults": result.faults}, indent=1))  # fmt: skip
    if args.keep or args.folder:
        print(f"kept: {folder}")
    else:
        shutil.rmtree(folder, ignore_errors=True)
    return 0 if result.held else 1


if __name__ == "__main__":
    sys.exit(main())
