"""The house rules of ``docs/architecture.md``, checked from the code's own imports (every import statement,
including function-local and ``TYPE_CHECKING`` ones), so a new back edge fails here, not in review."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "rb_otel"
#: No function or method in rb_otel is longer than this (lines, decorators and docstring included).
MAX_FUNCTION_LINES = 80

#: Third-party roots that are I/O clients or frameworks (never in the pure core).
FRAMEWORKS = ("langchain", "langchain_core", "langgraph", "anthropic", "openai", "agents", "claude_agent_sdk")
IO_CLIENTS = ("httpx", "qdrant_client", "requests", "urllib3")


@dataclass(frozen=True)
class Import:
    module: str  # the importing module, dotted
    target: str  # the imported module, dotted
    line: int


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _imports(module: str, path: Path) -> Iterator[Import]:
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(module, alias.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            submodules = [f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in MODULES]
            # `from pkg import submodule` depends on the submodule; `from pkg import name` on the package
            if len(submodules) < len(node.names):
                yield Import(module, target, node.lineno)
            for sub in submodules:
                yield Import(module, sub, node.lineno)


IMPORTS = [imp for module, path in MODULES.items() for imp in _imports(module, path)]


def _root(name: str) -> str:
    return name.split(".", maxsplit=1)[0]


def _violations(layer: str, forbidden: tuple[str, ...]) -> list[str]:
    return [
        f"{imp.module}:{imp.line} imports {imp.target}"
        for imp in IMPORTS
        if (imp.module == layer or imp.module.startswith(layer + "."))
        and any(imp.target == f or imp.target.startswith(f + ".") for f in forbidden)
    ]


#: The one door to OpenTelemetry outside telemetry: the instrumentor base class, for the ``opentelemetry-instrument``
#: entry point (``rb_otel.instrumentation``), which records nothing itself (its agents record through telemetry).
INSTRUMENTOR = ("rb_otel.instrumentation", "opentelemetry.instrumentation")


def test_only_telemetry_talks_to_opentelemetry() -> None:
    outside = [
        f"{imp.module}:{imp.line} imports {imp.target}"
        for imp in IMPORTS
        if _root(imp.target) == "opentelemetry"
        and not imp.module.startswith("rb_otel.telemetry")
        and not (imp.module.startswith(INSTRUMENTOR[0]) and imp.target.startswith(INSTRUMENTOR[1]))
    ]
    assert outside == []


#: Provider setup (the SDK and its exporters): used by the CLI, the demo and tests, never by library code paths.
SETUP_MODULES = (
    "rb_otel.telemetry.setup",
    "rb_otel.telemetry.otlp_json",
    "rb_otel.telemetry.export",
    "rb_otel.telemetry.retry",
    "rb_otel.telemetry.spool",
    "rb_otel.telemetry.otlp_json_spans",
    "rb_otel.telemetry.otlp_json_logs",
)


def test_opentelemetry_sdk_only_in_provider_setup() -> None:
    sdk = [
        f"{imp.module}:{imp.line} imports {imp.target}"
        for imp in IMPORTS
        if imp.target.startswith(("opentelemetry.sdk", "opentelemetry.exporter")) and imp.module not in SETUP_MODULES
    ]
    assert sdk == []
    # and the library's own runtime (recorder, hub, ...) never pulls setup in
    runtime = [
        f"{imp.module}:{imp.line} imports {imp.target}"
        for imp in IMPORTS
        # the public face names configure() lazily: importing rb_otel does not import setup
        if imp.target in SETUP_MODULES
        and imp.module not in (*SETUP_MODULES, "rb_otel", "rb_otel.demo.runner")
        and not imp.module.startswith("rb_otel.cli")
    ]
    assert runtime == []


def test_the_core_is_pure() -> None:
    forbidden = (
        "opentelemetry",
        *FRAMEWORKS,
        *IO_CLIENTS,
        "rb_otel.telemetry",
        "rb_otel.integrations",
        "rb_otel.importers",
        "rb_otel.backends",
        "rb_otel.facade",
        "rb_otel.evaluation",
        "rb_otel.cli",
        "rb_otel.demo",
    )
    assert _violations("rb_otel.steering", forbidden) == []
    assert _violations("rb_otel.types", (*forbidden, "rb_otel.steering")) == []


def test_telemetry_never_imports_integrations_importers_backends_or_the_facade() -> None:
    forbidden = (
        *FRAMEWORKS,
        *IO_CLIENTS,
        "rb_otel.integrations",
        "rb_otel.importers",
        "rb_otel.backends",
        "rb_otel.facade",
        "rb_otel.demo",
        "rb_otel.cli",
    )
    # one exception: the retries read Retry-After through a hook on the session the SDK's OTLP/HTTP exporter sends
    # with (requests is that exporter's own client; telemetry opens no connection of its own)
    allowed = re.compile(r"rb_otel\.telemetry\.retry:\d+ imports requests$")
    assert [v for v in _violations("rb_otel.telemetry", forbidden) if not allowed.match(v)] == []
    # the public face (rb_otel/__init__) is "everything": a layer below it never imports it
    assert [f"{i.module}:{i.line}" for i in IMPORTS if i.target == "rb_otel" and i.module != "rb_otel"] == []


def test_integrations_get_a_config_not_the_facade() -> None:
    forbidden = (
        "rb_otel.facade",
        "rb_otel.importers",
        "rb_otel.backends",
        "rb_otel.cli",
        "rb_otel.demo",
    )
    assert _violations("rb_otel.integrations", forbidden) == []


def test_backends_implement_core_protocols_only() -> None:
    forbidden = (
        "opentelemetry",
        *FRAMEWORKS,
        "rb_otel.telemetry",
        "rb_otel.integrations",
        "rb_otel.importers",
        "rb_otel.facade",
    )
    assert _violations("rb_otel.backends", forbidden) == []


def test_importers_reach_telemetry_not_frameworks() -> None:
    assert _violations("rb_otel.importers", (*FRAMEWORKS, "rb_otel.integrations", "rb_otel.facade")) == []


def _cycles() -> list[list[str]]:
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for imp in IMPORTS:
        if imp.target in MODULES and imp.target != imp.module:
            graph[imp.module].add(imp.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return found


def test_no_import_cycles() -> None:
    assert _cycles() == []


def test_the_cycle_finder_finds_cycles() -> None:
    # the checker itself can fail: a synthetic pair of modules importing each other is one cycle
    saved = dict(MODULES)
    try:
        MODULES["rb_otel._a"] = MODULES["rb_otel.types"]
        MODULES["rb_otel._b"] = MODULES["rb_otel.types"]
        IMPORTS.extend([Import("rb_otel._a", "rb_otel._b", 1), Import("rb_otel._b", "rb_otel._a", 1)])
        assert ["rb_otel._a", "rb_otel._b"] in _cycles()
    finally:
        del IMPORTS[-2:]
        MODULES.clear()
        MODULES.update(saved)


def _long_functions() -> Iterator[str]:
    for module, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                length = (node.end_lineno or node.lineno) - first + 1
                if length > MAX_FUNCTION_LINES:
                    yield f"{module}.{node.name} ({length} lines)"


def test_no_function_is_longer_than_the_limit() -> None:
    assert list(_long_functions()) == []


@pytest.mark.parametrize("layer", ["rb_otel.steering", "rb_otel.telemetry", "rb_otel.integrations"])
def test_each_layer_exists(layer: str) -> None:
    # a renamed package would make the rules above vacuous
    assert any(m == layer or m.startswith(layer + ".") for m in MODULES)


# -- every import is a declared dependency --------------------------------------------------------------------


def _declared() -> set[str]:
    """The distributions ``pyproject.toml`` declares: the core dependencies and every extra but ``dev``."""
    import re
    import tomllib

    project = tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    requirements = list(project["dependencies"])
    for extra, items in project["optional-dependencies"].items():
        if extra != "dev":
            requirements += items
    names = {re.split(r"[\[<>=!~;\s]", r, maxsplit=1)[0] for r in requirements}
    return {n.lower().replace("_", "-") for n in names}


def _distribution_of(module: str, files: dict[str, str]) -> str | None:
    """The installed distribution that provides ``module`` (the longest package path it ships)."""
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        path = "/".join(parts[:n])
        for candidate in (f"{path}/__init__.py", f"{path}.py"):
            if candidate in files:
                return files[candidate]
    return None


#: Extras the dev environment deliberately does not install: ``drift`` brings PyTorch (about 1 GB) for one
#: optional signal. An import of one of their distributions is declared (by the extra), not installed.
EXTRAS_NOT_IN_DEV = ("drift",)


def _of_an_extra_not_in_dev(module: str) -> bool:
    import re
    import tomllib

    project = tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    names = {re.split(r"[\[<>=!~;\s]", r, maxsplit=1)[0].lower().replace("_", "-")
             for extra in EXTRAS_NOT_IN_DEV for r in project["optional-dependencies"][extra]}  # fmt: skip
    return _root(module).lower().replace("_", "-") in names


def test_every_import_in_the_package_is_a_declared_dependency() -> None:
    import sys
    from importlib import metadata

    files: dict[str, str] = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"].lower().replace("_", "-")
        for file in dist.files or ():
            files.setdefault(str(file), name)
    declared = _declared() | {"rb-otel"}
    undeclared = []
    for module, line, target in _third_party_imports():
        if _root(target) in sys.stdlib_module_names or _root(target) == "rb_otel":
            continue
        dist = _distribution_of(target, files)
        if dist is None and _of_an_extra_not_in_dev(target):
            continue
        if dist is None or dist not in declared:
            undeclared.append(f"{module}:{line} imports {target} ({dist or 'not installed'})")
    assert undeclared == []


def _third_party_imports() -> Iterator[tuple[str, int, str]]:
    """``(module, line, imported module)``; ``from pkg import name`` is ``pkg.name`` (namespace packages such as
    ``opentelemetry`` are shipped by several distributions: the submodule tells which)."""
    for module, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    yield module, node.lineno, alias.name
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                for alias in node.names:
                    yield module, node.lineno, f"{node.module}.{alias.name}"


#: What the pure core never does (docs/architecture.md, "The pure core"): start threads, hook the process's exit
#: or its forks, read the environment, load entry points, open files or sockets. Module-level checks on top of
#: the import rules above.
CORE_FORBIDDEN_IMPORTS = (
    "atexit",
    "signal",
    "socket",
    "ssl",
    "sqlite3",
    "subprocess",
    "multiprocessing",
    "concurrent",
    "urllib",
    "http",
    "importlib.metadata",
    "rb_otel.process_exit",
)
CORE_FORBIDDEN_ATTRIBUTES = {
    ("os", "environ"),
    ("os", "getenv"),
    ("os", "putenv"),
    ("os", "fork"),
    ("os", "register_at_fork"),
    ("threading", "Thread"),
    ("threading", "Timer"),
    ("metadata", "entry_points"),
}
#: The core's declared exceptions, each for a reason docs/architecture.md gives: the shipped data files it reads
#: with importlib.resources, the model file a caller names, and the one name it resolves in the runtime.
CORE_FILE_READS = {"rb_otel.steering.pilot.model": 1}
CORE_RUNTIME_SEAMS = {"rb_otel.steering.scoring.scorers": 1}


def _core_modules() -> Iterator[tuple[str, ast.AST]]:
    for module, path in MODULES.items():
        if module == "rb_otel.steering" or module.startswith("rb_otel.steering."):
            yield module, ast.parse(path.read_text(encoding="utf-8"))


def test_the_core_starts_no_thread_reads_no_environment_and_opens_nothing() -> None:
    assert _violations("rb_otel.steering", CORE_FORBIDDEN_IMPORTS) == []
    found = []
    file_reads: dict[str, int] = {}
    seams: dict[str, int] = {}
    for module, tree in _core_modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                if (node.value.id, node.attr) in CORE_FORBIDDEN_ATTRIBUTES:
                    found.append(f"{module}:{node.lineno} uses {node.value.id}.{node.attr}")
                if (node.value.id, node.attr) == ("importlib", "import_module"):
                    seams[module] = seams.get(module, 0) + 1
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "open":
                found.append(f"{module}:{node.lineno} calls open()")
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                io_method = node.func.attr in ("read_text", "read_bytes", "write_text", "write_bytes", "open")
                reads_package_data = "resources" in ast.unparse(node.func.value)
                if io_method and not reads_package_data:
                    file_reads[module] = file_reads.get(module, 0) + 1
    assert found == []
    assert file_reads == CORE_FILE_READS
    assert seams == CORE_RUNTIME_SEAMS


def test_the_core_names_the_runtime_only_through_its_declared_seam() -> None:
    from rb_otel.steering.scoring import scorers

    module, _, name = scorers.FLEET_PILOT.partition(":")
    assert module.startswith("rb_otel.backends.") and name == "PilotScorer"


# -- the facade without satellites (docs/architecture.md, "House rules") -----------------------------------------


def test_no_private_module_is_imported_from_another_package() -> None:
    # a module whose name starts with "_" is its package's own: only modules of that package import it
    crossing = [
        f"{imp.module}:{imp.line} imports {imp.target}"
        for imp in IMPORTS
        if imp.target in MODULES
        and any(part.startswith("_") and part != "__init__" for part in imp.target.split(".")[1:])
        and imp.target != "rb_otel._version"
        and _package_of(imp.module) != imp.target.rpartition(".")[0]
    ]
    assert crossing == []


def test_no_module_imports_a_private_name_from_another_module() -> None:
    # a name that starts with "_" is its module's own: a module that needs it needs a public name for it, given by
    # the module that owns it
    private = [
        f"{module}:{node.lineno} imports {alias.name} from {node.module or '.' * node.level}"
        for module, path in MODULES.items()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").split(".")[0] == "rb_otel")
        for alias in node.names
        if alias.name.startswith("_") and not alias.name.startswith("__")
    ]
    assert private == []


def _package_of(module: str) -> str:
    return module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]


#: What an ``__init__.py`` may hold: its docstring, imports, and names bound to data or to a helper's result
#: (``__all__``, ``__getattr__, ... = stub_face(...)``); never a function, class or control flow.
INIT_STATEMENTS = (ast.Expr, ast.Import, ast.ImportFrom, ast.Assign, ast.AnnAssign)


def test_no_logic_in_init_files() -> None:
    logic = [
        f"{module}:{node.lineno} {type(node).__name__}"
        for module, path in MODULES.items()
        if path.name == "__init__.py"
        for node in ast.parse(path.read_text(encoding="utf-8")).body
        if not isinstance(node, INIT_STATEMENTS) or any(isinstance(n, ast.Lambda) for n in ast.walk(node))
    ]
    assert logic == []


def test_every_module_says_its_job_in_a_one_line_summary() -> None:
    # a docstring whose first sentence is the module's own: no module without one, no two with the same summary
    summaries: dict[str, str] = {}
    problems = []
    for module, path in MODULES.items():
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
        summary = doc.split("\n\n", 1)[0].strip()
        if not summary:
            problems.append(f"{module}: no docstring")
        elif summary in summaries:
            problems.append(f"{module}: the same summary as {summaries[summary]}")
        summaries.setdefault(summary, module)
    assert problems == []


def test_deprecations_go_through_the_one_helper() -> None:
    # DeprecationWarning is raised only by rb_otel/deprecation.py (one message, pointed at the user's line)
    elsewhere = [
        f"{module}:{node.lineno}"
        for module, path in MODULES.items()
        if module != "rb_otel.deprecation"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Name) and node.id in ("DeprecationWarning", "PendingDeprecationWarning")
    ]
    assert elsewhere == []


def test_code_cites_the_projects_own_docs_not_an_outside_spec() -> None:
    import re

    citation = re.compile(r"\bspec(?:ification)?\s+(?:section\s+|§\s*)?\d", re.IGNORECASE)
    cited = [
        f"{module}:{n}: {line.strip()}"
        for module, path in MODULES.items()
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if citation.search(line)
    ]
    assert cited == []


def test_every_cross_reference_in_a_docstring_names_something_that_exists() -> None:
    # a moved or renamed name leaves its old dotted path behind in prose; :class:`rb_otel...` must still resolve
    import importlib
    import re
    import warnings

    reference = re.compile(r":(?:class|func|mod|data|meth|attr|exc):`~?(rb_otel(?:\.\w+)+)`")
    stale = []
    for module, path in MODULES.items():
        for dotted in reference.findall(path.read_text(encoding="utf-8")):
            parts = dotted.split(".")
            found = next(n for n in range(len(parts), 0, -1) if ".".join(parts[:n]) in MODULES)
            target: object = importlib.import_module(".".join(parts[:found]))
            with warnings.catch_warnings():
                warnings.simplefilter("error")  # a deprecated path is stale too
                try:
                    for name in parts[found:]:
                        target = getattr(target, name)
                except (AttributeError, DeprecationWarning):
                    stale.append(f"{module}: {dotted}")
    assert stale == []
