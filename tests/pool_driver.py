"""Runs ``pool_tasks.one_run`` in a process pool and exits normally (a fresh interpreter per test).

    python tests/pool_driver.py FOLDER STORE --method fork|forkserver|spawn --pool multiprocessing|executor
                                --runs 20

Prints the worker pids as JSON.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import multiprocessing
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import pool_tasks


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("folder")
    parser.add_argument("store")
    parser.add_argument("--method", choices=["fork", "forkserver", "spawn"], default="fork")
    parser.add_argument("--pool", choices=["multiprocessing", "executor"], default="multiprocessing")
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    context = multiprocessing.get_context(args.method)
    jobs = [(args.folder, args.store, i) for i in range(args.runs)]
    if args.pool == "executor":
        with concurrent.futures.ProcessPoolExecutor(2, mp_context=context) as executor:
            pids = list(executor.map(pool_tasks.one_run, jobs))
    else:
        pool = context.Pool(2)
        pids = pool.map(pool_tasks.one_run, jobs, chunksize=1)
        pool.close()  # a normal exit of the workers (a `with` block would terminate them)
        pool.join()
    print(json.dumps(sorted(set(pids))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
