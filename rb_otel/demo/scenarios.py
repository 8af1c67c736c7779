"""The demo's scenarios: real ``create_agent`` agents driven by deterministic scripted models.

Nothing here decides a state or a score: the scripts only supply what a model would say and which tools it
calls; scoring, the FSM, monitors, guidance and routing are the real pipeline's doing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage
from langchain_core.tools import BaseTool, tool

from rb_otel.telemetry.names import OUTCOME_SUCCESS
from rb_otel.testing import tool_call

__all__ = ["GAVE_UP", "SCENARIOS", "Scenario", "demo_tools"]

#: The outcome of a run whose agent gave up on its task (``rb.outcome``; the demo's experiment marks its own so).
GAVE_UP = "failure: gave up"


@tool
def read_file(path: str) -> str:
    """Read a file of the (simulated) repository."""
    return f"# {path}\ndef handler(request):\n    return session.get(request.cookie)\n"


@tool
def search(query: str) -> str:
    """Search the (simulated) repository."""
    return f"3 matches for {query!r}: src/auth.py:12, src/session.py:40, tests/test_auth.py:7"


@tool
def edit_file(path: str, patch: str) -> str:
    """Apply a patch to a file."""
    return f"patched {path} ({len(patch)} chars)"


@tool
def run_tests(target: str) -> str:
    """Run the test suite."""
    return f"FAILED {target}::test_login - KeyError: 'session_id'\n1 failed, 12 passed"


@tool
def deploy(environment: str) -> str:
    """Deploy the service (fails in the demo)."""
    raise ConnectionError(f"deploy to {environment} refused: cluster unreachable")


def demo_tools() -> list[BaseTool]:
    return [read_file, search, edit_file, run_tests, deploy]


@dataclass(frozen=True)
class Scenario:
    """One demo run: what the scripted model says, step by step."""

    name: str
    description: str
    task: str
    script: list[AIMessage]
    expects_error: bool = False
    routing: dict[str, str] = field(default_factory=dict)
    #: The run's ``rb.outcome`` when the agent answers: the task's own verdict on the answer (an agent that gives
    #: up has failed its task, however cleanly its run ended).
    outcome: str = OUTCOME_SUCCESS


def _easy() -> list[AIMessage]:
    files = [
        "README.md",
        "setup.cfg",
        "docs/index.md",
        "src/app.py",
        "src/util.py",
        "src/cli.py",
        "tests/a.py",
        "tests/b.py",
        "CHANGELOG.md",
    ]
    script = [tool_call("read_file", {"path": f}, f"e{i}", content=f"Reading {f} next.") for i, f in enumerate(files)]
    return [*script, AIMessage("All files listed; the summary is ready.")]


_HARD = (
    "Hmm, maybe the KeyError traceback in {f} is not the real error; I am not sure. The test failed again "
    "with the same exception, perhaps because session.get fails or the cookie parser is broken."
)


def _struggling() -> list[AIMessage]:
    first = "The same test keeps failing with the same KeyError after my edits; let me search for the session code."
    script: list[AIMessage] = [tool_call("search", {"query": "session timeout"}, "s0", content=first)]
    for i in range(11):
        f = ["src/auth.py", "src/session.py"][i % 2]
        if i % 3 == 2:
            script.append(tool_call("edit_file", {"path": f, "patch": f"fix {i}"}, f"s{i + 1}", _HARD.format(f=f)))
        else:
            script.append(tool_call("run_tests", {"target": "tests/test_auth.py"}, f"s{i + 1}", _HARD.format(f=f)))
    script.append(AIMessage("Done: the timeout handling in src/auth.py is fixed."))
    return script


_STALLED = (
    "Hmm, not sure. Maybe the error is in src/auth.py or src/session.py or lib/cookies.py, maybe in "
    "app/middleware.py; the traceback failed again with KeyError and TypeError exceptions. Perhaps "
    "config/settings.py, tests/test_auth.py, tests/conftest.py, docs/auth.md or utils/time.py. I might "
    "reconsider: the exception could be a ValidationError from models/user.py, not sure, hmm, maybe the "
    "failed import broke it, or the crash in the fixture; possibly an error in the build, error again. "
    "I keep going around in circles: every attempt ends in the same failure, the same traceback, the same "
    "KeyError from session.get, and I still cannot tell which of these files is responsible, so maybe I "
    "should look at every one of them again, although I already did that twice and nothing changed at all."
)


def _stalled() -> list[AIMessage]:
    tools = ["run_tests", "read_file", "search"]
    script: list[AIMessage] = []
    for i in range(44):
        name = tools[i % 3]
        args: dict[str, Any] = (
            {"target": "tests/"}
            if name == "run_tests"
            else ({"path": "src/auth.py"} if name == "read_file" else {"query": "KeyError session"})
        )
        script.append(tool_call(name, args, f"k{i}", content=_STALLED + f" (attempt {i})"))
    return [*script, AIMessage("I could not find the cause; giving up.")]


def _tool_error() -> list[AIMessage]:
    return [
        tool_call("read_file", {"path": "deploy.yaml"}, "d0", content="Checking the deploy config."),
        tool_call("deploy", {"environment": "staging"}, "d1", content="Config looks right; deploying to staging."),
        AIMessage("Deployed."),
    ]


SCENARIOS: dict[str, Callable[[], Scenario]] = {
    "easy": lambda: Scenario(
        "easy", "a plain survey of the repository: calm thoughts, reaches FAST", "summarise the repository", _easy()
    ),
    "struggling": lambda: Scenario(
        "struggling",
        "hedging and errors: reaches SLOW, routed to the strong model, monitors fire",
        "fix the session timeout bug in src/auth.py",
        _struggling(),
    ),
    "stalled": lambda: Scenario(
        "stalled",
        "44 calls of confusion: SLOW, then SKIP after 35 hard steps; the agent gives up, a failed task",
        "fix the KeyError in the login flow",
        _stalled(),
        outcome=GAVE_UP,
    ),
    "tool-error": lambda: Scenario(
        "tool-error",
        "a tool raises: the run ends as a failure, spans closed",
        "deploy the service to staging",
        _tool_error(),
        expects_error=True,
    ),
}
