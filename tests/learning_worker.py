"""A worker of the learning-loop test: scripted LangChain runs of one agent, steered by the pilot with its
baselines (and learned models) in a shared store, exporting OTLP to the endpoint in the environment, each run's
outcome recorded afterwards with ``rb.record_outcome``.

    python tests/learning_worker.py URL --runs 120 [--until-learned 90 --start-file PATH]

Prints ``{"history": [run ids]}`` once the first ``--runs`` runs and their outcomes are exported, then, with
``--until-learned S``, once ``--start-file`` exists, keeps running one run a second until a run is scored by a
learned model (at most ``S`` seconds) and prints ``{"learned": rb.scorer of that run, "runs_after": n,
"training_modules": [...], "threads": [...]}``: what this process imported and ran (it must never fit).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import threading
import time
from pathlib import Path

from langchain.agents import create_agent
from langchain_core.messages import AIMessage
from langchain_core.tools import tool

from rb_otel import ReasonBlocks
from rb_otel.backends.pilot import PilotScorer
from rb_otel.steering.agent_keys import agent_key
from rb_otel.telemetry.setup import configure
from rb_otel.testing import ScriptedChatModel, tool_call

#: The agent's name and the worker's model: a worker looks its learned model up under ``agent_key(AGENT, MODEL)``,
#: and the run span says that key (``rb.agent.key``), so the fit keys its runs the same way.
AGENT, MODEL = "coder", "scripted-1"


@tool
def bash(command: str) -> str:
    """Run a shell command."""
    if "boom" in command:
        return "Traceback (most recent call last):\nValueError: boom\nexit code: 1"
    return "ok\nexit code: 0"


def script(i: int) -> list[AIMessage]:
    """Run ``i``'s model replies: a failing run (every third) keeps repeating a command that errors and hedges;
    a successful one does not. Both have the same number of steps and thoughts of the same length, so the sizes
    say nothing of the outcome and a fit must read what the agent did."""
    rng = random.Random(i)
    failing = i % 3 == 0
    calls = []
    for k in range(rng.randint(4, 9)):
        thought = ("hmm maybe wait, not sure " if failing else "next I will check this ") + "x" * rng.randint(0, 60)
        command = "python run.py --boom" if failing and k > 0 else f"python step{k}.py --ok"
        calls.append(tool_call("bash", {"command": command}, f"c{k}", content=thought))
    return [*calls, AIMessage("done")]


def one_run(rb: ReasonBlocks, i: int) -> str:
    run_id = f"run-{i}"
    middleware = rb.middleware(agent_name=AGENT, model=MODEL, run_id=run_id, metadata={"task_id": f"t{i}"})
    agent = create_agent(ScriptedChatModel(script=script(i)), [bash], middleware=[middleware])
    agent.invoke({"messages": [("user", "fix the bug")]})
    return run_id


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("--runs", type=int, default=120)
    parser.add_argument("--until-learned", type=float, default=0.0)
    parser.add_argument("--start-file", default=None, help="wait for this file before the --until-learned clock")
    args = parser.parse_args()
    providers = configure(service_name="learning-worker", handle_sigterm=False)
    rb = ReasonBlocks(scorer="pilot", baselines=args.url, tracer_provider=providers.tracer_provider,
                      meter_provider=providers.meter_provider, logger_provider=providers.logger_provider,
                      capture_content=True)  # fmt: skip
    assert isinstance(rb.scorer, PilotScorer)  # content captured: what the fit reads of a step is its content
    history = []
    for i in range(args.runs):
        history.append(one_run(rb, i))
        rb.record_outcome(history[-1], "failure" if i % 3 == 0 else "success")
    rb.flush()  # the runs' spans and the outcome events are at the receiver before the line below
    print(json.dumps({"history": history}), flush=True)
    if args.until_learned > 0:
        key = agent_key(AGENT, MODEL)
        while args.start_file and not Path(args.start_file).exists():
            time.sleep(0.2)  # the watcher is fitting: the clock starts once the model is written
        deadline = time.monotonic() + args.until_learned
        learned, after = "", 0
        while time.monotonic() < deadline and not learned:
            name = rb.scorer.name_for("", key)
            one_run(rb, args.runs + after)
            after += 1
            learned = name if name.startswith("pilot/agent:") else ""
            time.sleep(1.0)
        rb.flush()
        print(json.dumps({
            "learned": learned,
            "runs_after": after,
            "training_modules": sorted(m for m in sys.modules if m.startswith("rb_otel.training")),
            "threads": sorted(t.name for t in threading.enumerate()),
        }), flush=True)  # fmt: skip
    rb.close()
    providers.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
