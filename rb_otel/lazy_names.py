"""A package's public names, loaded on first use (PEP 562) from the one list of them: the package's stub.

The stub (``__init__.pyi``) is what type checkers read; each public name is one ``from module import name as
name`` line there. :func:`stub_face` reads the same lines at import time, so the names type checkers see, the names
loaded at run time and ``__all__`` cannot drift apart (the convention of Scientific Python's
lazy-loading proposal).
"""

from __future__ import annotations

import ast
import importlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["StubFace", "names_in_stub", "stub_face"]

StubFace = tuple[Callable[[str], Any], Callable[[], list[str]], list[str]]


def names_in_stub(stub: Path, package: str) -> dict[str, str]:
    """``name -> module`` for every ``from module import name as name`` in ``stub`` whose module is in ``package``
    (``typing`` and the like are the stub's own). Raises ``ValueError`` naming the line of an import of the package
    that would not re-export its name."""
    tree = ast.parse(stub.read_text(encoding="utf-8"), filename=str(stub))
    names: dict[str, str] = {}
    for node in tree.body:
        if not isinstance(node, ast.ImportFrom) or node.level or not node.module:
            continue
        if node.module != package and not node.module.startswith(package + "."):
            continue
        for alias in node.names:
            if alias.asname != alias.name:
                raise ValueError(
                    f"{stub}:{node.lineno}: write 'from {node.module} import {alias.name} as {alias.name}' (a stub "
                    "re-exports only names imported as themselves)"
                )
            names[alias.name] = node.module
    return names


def stub_face(package: str, init_file: str) -> StubFace:
    """``(__getattr__, __dir__, __all__)`` for ``package`` from the stub beside its ``__init__.py``: a public name
    is imported from its module on first use and kept in the package; any other name is an ``AttributeError``."""
    stub = Path(init_file).with_suffix(".pyi")
    try:
        homes = names_in_stub(stub, package)
    except FileNotFoundError:
        raise ImportError(
            f"{stub} is missing: {package}'s public names are listed there (reinstall the package, or include the "
            "file when bundling it)",
            name=package,
        ) from None
    public = sorted(homes)

    def __getattr__(name: str) -> Any:
        module = homes.get(name)
        if module is not None:
            value = getattr(importlib.import_module(module), name)
            setattr(sys.modules[package], name, value)  # found once: later uses are plain attribute reads
            return value
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return list(public)

    return __getattr__, __dir__, public
