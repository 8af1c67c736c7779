"""Kinds of agent: the pilot has a default per kind (``scorer="pilot"`` chooses the one for the run's kind), and
agents are held out within their kind when it is measured (docs/signal.md, "A default pilot per kind").

A run's kind is the one its agent is given (``agent_kind=``), else the one its tools say:

- an agent with a tool that acts on a machine or its code is a **coding** agent: a shell or code runner
  (``bash``, ``terminal``, ``execute_code``, a Python REPL, a computer-use tool), a file editor or writer
  (``str_replace_editor``, ``Edit``, ``write_file``, ``apply_patch``, ``search_replace``), or a tool that reads or
  searches a code base (``read_file``, ``Read``, ``list_dir``, ``Glob``, ``grep``, ``find_file``, ``search_dir``);
- an agent whose tools are all others (tools that look up and change a domain's records, web search, ``think``)
  is a **customer-service** agent, the tool-use kind;
- an agent with **no tools** has no kind that can be told (``""``, :data:`UNKNOWN`): the pilot's generic default
  (pilot/1) scores it. An agent that edits code without tool calls (aider's edit formats, written in the reply's
  text) is such an agent: pass ``agent_kind="coding"`` for it.

``file_search`` is not a coding tool: the OpenAI Agents SDK's hosted ``FileSearchTool`` searches a vector store
of documents (LangChain's file-management tool of that name comes with ``read_file`` and ``write_file``, which
are). The same rule reads the tools an agent declares (live, at its first model call) and the tools a recorded
run called (replay and training), so a run is one kind wherever it is scored. Pure: names (or tool objects and
schemas, :func:`tool_names`) in, a kind out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

__all__ = [
    "AGENT_KINDS",
    "CODING",
    "CUSTOMER_SERVICE",
    "UNKNOWN",
    "checked_kind",
    "infer_agent_kind",
    "is_coding_tool",
    "tool_names",
]

CODING = "coding"
CUSTOMER_SERVICE = "customer_service"
#: The kind of an agent whose tools say nothing (it has none): the generic pilot scores it.
UNKNOWN = ""
#: The kinds ``agent_kind=`` accepts.
AGENT_KINDS = (CODING, CUSTOMER_SERVICE)

#: Tools that run shell commands or code, or drive a computer (a tool *named* so; mini-swe-agent's bash blocks are
#: imported as ``bash``; Claude Code's ``Bash``, ``BashOutput`` and ``KillShell``; LangChain's shell tool is
#: ``terminal``, its Python REPLs ``Python_REPL`` and ``python_repl_ast``; the OpenAI Agents SDK's ``shell``,
#: ``local_shell`` and ``computer_use_preview``).
_SHELL = re.compile(
    r"^(?:bash|sh|zsh|shell|terminal|powershell|cmd|run_shell(?:_command)?|run_command|run_terminal(?:_cmd)?|"
    r"terminal_run|run_in_terminal|bash_tool|bash_output|bashoutput|kill_?shell|"
    r"execute_(?:bash|command|shell|code|python)|exec(?:_command)?|(?:local_)?shell(?:_tool)?|computer_terminal|"
    r"python|ipython|execute_ipython_cell|run_python|run_code|code_execution|code_interpreter|jupyter|"
    r"python_repl(?:_ast)?|computer(?:_use(?:_preview)?)?)$"
)
#: Tools that edit files: an editor, a patch, a search-and-replace, or a writing verb on a file (Claude Code's
#: ``Edit``, ``MultiEdit``, ``Write`` and ``NotebookEdit``; LangChain's ``write_file``, ``copy_file``,
#: ``move_file`` and ``file_delete``).
_EDITING = re.compile(
    r"editor|str_replace|search_replace|apply_patch|^patch$|^(?:write|edit|multi_?edit|notebook_?edit)$|"
    r"^(?:write|edit|create|replace|insert|append|delete|remove|modify|overwrite|save|copy|move|rename)_?(?:to_)?"
    r"files?\b|_files?_(?:write|edit|create|replace|delete)$|^file_(?:write|edit|delete)$"
)
#: Tools that read or search a code base (SWE-agent's ``find_file``, ``search_dir`` and ``search_file``; Claude
#: Code's ``Read``, ``Glob``, ``Grep`` and ``LS``; LangChain's ``read_file`` and ``list_directory``).
_READING = re.compile(
    r"^(?:read|read_files?|view_file|open_file|cat|ls|list_dir|list_directory|list_files|glob|grep|ripgrep|rg|"
    r"find_files?|search_dir|search_files?|search_code|codebase_search|notebook_?read)$"
)


def is_coding_tool(name: str) -> bool:
    """A shell, code-running, file-editing or code-reading tool (the module docstring's rule), by its name."""
    lowered = name.strip().lower().replace("-", "_")
    return bool(_SHELL.match(lowered) or _EDITING.search(lowered) or _READING.match(lowered))


def infer_agent_kind(names: Iterable[str]) -> str:
    """:data:`CODING` when any of the tool ``names`` is a coding tool (:func:`is_coding_tool`), :data:`UNKNOWN`
    when there is no name at all, else :data:`CUSTOMER_SERVICE`."""
    given = [name for name in names if name]
    if not given:
        return UNKNOWN
    return CODING if any(is_coding_tool(name) for name in given) else CUSTOMER_SERVICE


def tool_names(tools: Iterable[Any]) -> list[str]:
    """The names of ``tools`` as frameworks give them: names, tool objects (a ``name`` attribute: LangChain's
    ``BaseTool``, the OpenAI Agents SDK's tools), schemas (``{"name"}``: Anthropic's; ``{"function": {"name"}}``:
    OpenAI's chat tools) and plain functions or classes (their ``__name__``, as tool-binding names them). What
    has no name is left out; a single name is one tool. ``TypeError`` for what is no collection of tools."""
    if isinstance(tools, str):
        tools = [tools]
    elif not isinstance(tools, Iterable) or isinstance(tools, dict):
        raise TypeError(f"tools must be a list of tools, tool schemas or tool names, got {type(tools).__name__}")
    out = []
    for tool in tools:
        if isinstance(tool, str):
            name: Any = tool
        elif isinstance(tool, dict):
            function = tool.get("function")
            name = tool.get("name") or (function.get("name") if isinstance(function, dict) else None)
        else:
            name = getattr(tool, "name", None)
            if not isinstance(name, str):
                name = getattr(tool, "__name__", None)
        if isinstance(name, str) and name:
            out.append(name)
    return out


def checked_kind(kind: str | None) -> str | None:
    """``kind`` when it is one of :data:`AGENT_KINDS` (or ``None``/empty: infer it); ``ValueError`` otherwise."""
    if not kind:
        return None
    if kind not in AGENT_KINDS:
        raise ValueError(f"agent_kind must be one of {', '.join(map(repr, AGENT_KINDS))}, got {kind!r}")
    return kind
