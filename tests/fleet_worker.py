"""A worker of a fleet test: scripted LangChain agent runs steered by the pilot, baselines in a shared store.

    python tests/fleet_worker.py URL --runs 25 [--agent coder] [--model m] [--pace 0.02] [--fresh-agents]
                                     [--no-close] [--until-file PATH]

Prints one JSON line per finished run (``run``, ``agent``, ``known``: how many runs the baseline it started
with held, ``relative``: whether its FSM thresholds were the agent's own, ``seconds``: the whole run) and
``{"done": ...}`` at the end; rb-otel's warnings go to standard error.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from conftest import add, calc_script
from langchain.agents import create_agent

from rb_otel import ReasonBlocks
from rb_otel.backends.pilot import PilotScorer
from rb_otel.steering.agent_keys import agent_key
from rb_otel.steering.pilot import pilot_fsm_thresholds
from rb_otel.testing import ScriptedChatModel


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("--runs", type=int, default=25)
    parser.add_argument("--agent", default="coder")
    parser.add_argument("--model", default="@google/Gemini-3-Pro")
    parser.add_argument("--pace", type=float, default=0.0, help="seconds between runs")
    parser.add_argument("--fresh-agents", action="store_true", help="every run a new agent name (a first read)")
    parser.add_argument("--no-close", action="store_true", help="exit without ReasonBlocks.close()")
    parser.add_argument("--until-file", default=None, help="keep running (up to --runs) until this file exists")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    rb = ReasonBlocks(scorer="pilot", baselines=args.url)
    assert isinstance(rb.scorer, PilotScorer)
    preset = pilot_fsm_thresholds(rb.scorer.model)
    for i in range(args.runs):
        if args.until_file and Path(args.until_file).exists():
            break
        name = f"{args.agent}-{i}" if args.fresh_agents else args.agent
        started = time.perf_counter()
        probe = rb.scorer.start_run(agent_key(name, args.model))  # what this run's start reads
        known, relative = probe.baseline.known, probe.fsm_thresholds() != preset
        model = ScriptedChatModel(script=calc_script(3, thought=f"Adding the numbers, pass {i % 5}."))
        agent = create_agent(model, [add], middleware=[rb.middleware(agent_name=name, model=args.model)])
        agent.invoke({"messages": [("user", "add them")]})
        record = {"run": i, "agent": name, "known": known, "relative": relative}
        print(json.dumps({**record, "seconds": time.perf_counter() - started, "at": time.time()}), flush=True)
        if args.pace:
            time.sleep(args.pace)
    if not args.no_close:
        rb.close()
    print(json.dumps({"done": True, "errors": rb.scorer.baselines.errors}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
