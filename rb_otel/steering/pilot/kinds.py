"""Kinds of agent: the pilot has a default per kind (``scorer="pilot"`` chooses the one for the run's kind), and
agents are held out within their kind when it is measured (docs/signal.md, "A default pilot per kind").

A run's kind is the one its agent is given (``agent_kind=``), else the one its tools say: an agent with a shell or
a file-editing tool is a **coding** agent; any other (tools that look up and change a domain's records, or none)
is a **customer-service** agent, the tool-use kind. The same rule reads the tools an agent declares (live, at its
first model call) and the tools a recorded run called (replay and training), so a run is one kind wherever it is
scored. Pure: names in, a kind out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["AGENT_KINDS", "CODING", "CUSTOMER_SERVICE", "checked_kind", "infer_agent_kind", "is_coding_tool"]

CODING = "coding"
CUSTOMER_SERVICE = "customer_service"
#: The kinds ``agent_kind=`` accepts.
AGENT_KINDS = (CODING, CUSTOMER_SERVICE)

#: Tools that run shell commands or code (a tool *named* so; mini-swe-agent's bash blocks are imported as ``bash``).
_SHELL = re.compile(
    r"^(?:bash|sh|zsh|shell|terminal|powershell|cmd|run_shell(?:_command)?|run_command|run_terminal(?:_cmd)?|"
    r"execute_(?:bash|command|shell)|exec(?:_command)?|(?:local_)?shell_tool|computer_terminal|"
    r"python|ipython|execute_ipython_cell|run_python|code_interpreter|jupyter)$"
)
#: Tools that edit files: an editor, a patch, or a writing verb on a file.
_EDITING = re.compile(
    r"editor|str_replace|apply_patch|^patch$|"
    r"^(?:write|edit|create|replace|insert|append|delete|remove|modify|overwrite|save)_?(?:to_)?files?\b|"
    r"_files?_(?:write|edit|create|replace)$"
)


def is_coding_tool(name: str) -> bool:
    """A shell or file-editing tool (the module docstring's rule), by its name."""
    lowered = name.strip().lower().replace("-", "_")
    return bool(_SHELL.match(lowered) or _EDITING.search(lowered))


def infer_agent_kind(tool_names: Iterable[str]) -> str:
    """:data:`CODING` when any of ``tool_names`` is a shell or file-editing tool, else :data:`CUSTOMER_SERVICE`."""
    return CODING if any(is_coding_tool(name) for name in tool_names if name) else CUSTOMER_SERVICE


def checked_kind(kind: str | None) -> str | None:
    """``kind`` when it is one of :data:`AGENT_KINDS` (or ``None``/empty: infer it); ``ValueError`` otherwise."""
    if not kind:
        return None
    if kind not in AGENT_KINDS:
        raise ValueError(f"agent_kind must be one of {', '.join(map(repr, AGENT_KINDS))}, got {kind!r}")
    return kind
