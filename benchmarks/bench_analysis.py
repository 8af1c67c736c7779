"""Analysis over many runs: the files path (Python) against the embedded engine (chdb), time and memory.

    python benchmarks/bench_analysis.py [--runs 10000] [--days 7] [--keep DIR]

Makes ``--runs`` runs of the project's own demo agent shapes: the demo (scripted LangChain agents through the real
pipeline, with its A/B experiment) is run once, and each of its runs is copied with new trace, span and run ids,
an agent name of eight, and a start spread over ``--days`` days, into OTLP/JSON lines files (1,000 runs a file).
Then, each in a fresh process (its peak RSS read from the operating system):

* ``files``: ``rb-otel report --summary FILES`` (Python reads every span);
* ``chdb files``: ``--engine chdb``: the files loaded by the embedded engine's SQL, then the summary's SQL;
* ``chdb folder``: the files loaded once into a chdb database folder in the exporter's schema (timed apart, as a
  Collector would have written them), then ``rb-otel report --summary chdb:///folder``: what a fleet whose traces
  are already in ClickHouse pays.

each for three commands: the fleet summary (``report --summary``), the demo experiment's answer (``ab-report
--experiment demo-experiment``) and ``train``'s dataset build (``read_dataset``: the labelled runs with their
steps, what the fit reads). Prints the seconds and peak RSS of each and checks the three answers of each command
are identical.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PER_FILE = 1000


def _demo_runs(folder: Path) -> list[list[dict[str, Any]]]:
    """The demo's runs, each a list of its spans (with their resource), from one real demo run."""
    subprocess.run([sys.executable, "-m", "rb_otel.cli", "demo", "--out", str(folder), "--experiment", "24"],
                   check=True, capture_output=True, timeout=300)  # fmt: skip
    by_trace: dict[str, list[dict[str, Any]]] = {}
    resource: dict[str, Any] = {}
    for line in (folder / "traces.jsonl").read_text().splitlines():
        for rs in json.loads(line)["resourceSpans"]:
            resource = rs["resource"]
            for ss in rs["scopeSpans"]:
                for span in ss["spans"]:
                    by_trace.setdefault(span["traceId"], []).append(span)
    runs = [spans for spans in by_trace.values() if any(s["name"].startswith("invoke_agent") for s in spans)]
    for spans in runs:
        spans.insert(0, {"__resource__": resource})
    return runs


def _copy(template: list[dict[str, Any]], i: int, rng: random.Random, start_ns: int) -> list[dict[str, Any]]:
    trace = f"{rng.getrandbits(128):032x}"
    ids: dict[str, str] = {}
    first = min(int(s["startTimeUnixNano"]) for s in template[1:])
    shift = start_ns - first
    out = []
    for span in template[1:]:
        copy = dict(span)
        copy["traceId"] = trace
        copy["spanId"] = ids.setdefault(span["spanId"], f"{rng.getrandbits(64):016x}")
        if span.get("parentSpanId"):
            copy["parentSpanId"] = ids.setdefault(span["parentSpanId"], f"{rng.getrandbits(64):016x}")
        copy["startTimeUnixNano"] = str(int(span["startTimeUnixNano"]) + shift)
        copy["endTimeUnixNano"] = str(int(span["endTimeUnixNano"]) + shift)
        replaced = {"rb.run_id": f"run-{i}", "gen_ai.agent.name": f"agent-{i % 8}"}
        copy["attributes"] = [
            {"key": a["key"], "value": {"stringValue": replaced[a["key"]]}} if a["key"] in replaced else a
            for a in span.get("attributes", [])
        ]
        out.append(copy)
    return out


def generate(folder: Path, runs: int, days: int) -> tuple[list[Path], int]:
    templates = _demo_runs(folder / "demo")
    resource = templates[0][0]["__resource__"]
    rng = random.Random(7)
    base = int(time.time() - days * 86_400) * 1_000_000_000
    files, spans = [], 0
    for f in range(0, runs, PER_FILE):
        path = folder / f"traces-{f // PER_FILE:03d}.jsonl"
        with path.open("w", encoding="utf-8") as out:
            for i in range(f, min(f + PER_FILE, runs)):
                start = base + rng.randrange(days * 86_400) * 1_000_000_000
                copy = _copy(templates[i % len(templates)], i, rng, start)
                spans += len(copy)
                scope = {"scope": {"name": "rb_otel"}, "spans": copy}
                request = {"resourceSpans": [{"resource": resource, "scopeSpans": [scope]}]}
                out.write(json.dumps(request, separators=(",", ":")) + "\n")
        files.append(path)
    return files, spans


#: ``train``'s dataset build in a fresh process: the labelled runs, with a digest of their steps, as JSON.
DATASET = (
    "import hashlib, json, sys; from rb_otel.training.dataset import read_dataset; "
    "args = sys.argv[2:]; engine = 'chdb' if '--engine' in args else 'python'; "
    "d = read_dataset([a for a in args if a not in ('--engine', 'chdb')], engine=engine); "
    "rows = sorted([r.run_id, r.failed, len(r.steps), sum(r.tokens), "
    "hashlib.sha256(repr(r.steps).encode()).hexdigest()] for r in d.runs); "
    "open(sys.argv[1], 'w').write(json.dumps({'runs': rows}))"
)


def _command(what: str, args: list[str], out: Path) -> list[str]:
    cli = [sys.executable, "-m", "rb_otel.cli"]
    if what == "report":
        return [*cli, "report", *args, "--summary", "--json", str(out)]
    if what == "ab-report":
        return [*cli, "ab-report", *args, "--experiment", "demo-experiment", "--json", str(out)]
    return [sys.executable, "-c", DATASET, str(out), *args]


def _answer(path: Path) -> Any:
    """A command's JSON answer without the field that names where it read the runs (it differs by source)."""
    answer = json.loads(path.read_text())
    if isinstance(answer, dict):
        answer.pop("source", None)
    return answer


def timed(command: list[str]) -> tuple[float, float]:
    """Seconds and peak RSS (MB) of ``command`` in a fresh process."""
    code = (
        "import resource, subprocess, sys, time; t = time.perf_counter(); "
        f"r = subprocess.run({command!r},"
        " capture_output=True, text=True); "
        "assert r.returncode == 0, r.stderr; "
        "print(time.perf_counter() - t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    seconds, rss = done.stdout.split()
    return float(seconds), float(rss)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--days", type=int, default=7)
    parser.add_argument("--keep", type=Path, default=None, help="keep the generated files in this folder")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="rb-otel-analysis-")) if args.keep is None else args.keep
    folder.mkdir(parents=True, exist_ok=True)
    try:
        started = time.perf_counter()
        files, spans = generate(folder, args.runs, args.days)
        size = sum(f.stat().st_size for f in files) / 1e6
        print(f"{args.runs:,} runs, {spans:,} spans in {len(files)} files ({size:,.0f} MB), made in "
              f"{time.perf_counter() - started:.1f} s")  # fmt: skip
        names = [str(f) for f in files]
        store = folder / "chdb"
        started = time.perf_counter()
        from rb_otel.analysis.sources import ChdbSource

        ChdbSource(folder=str(store.mkdir() or store), files=files).close()
        print(f"loaded into a chdb folder (the exporter's schema) in {time.perf_counter() - started:.1f} s")
        sources = (("files", names), ("chdb files", [*names, "--engine", "chdb"]), ("chdb folder", [f"chdb://{store}"]))
        all_same = True
        for what in ("report", "ab-report", "dataset"):
            print(what)
            answers = []
            for name, source in sources:
                out = folder / f"{what}-{name.replace(' ', '-')}.json"
                seconds, rss = timed(_command(what, source, out))
                answers.append(_answer(out))
                print(f"  {name:<12} {seconds:7.2f} s   peak RSS {rss:7.0f} MB")
            same = answers[0] == answers[1] == answers[2]
            all_same = all_same and same
            print(f"  identical answers: {same}")
        return 0 if all_same else 1
    finally:
        if args.keep is None:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
