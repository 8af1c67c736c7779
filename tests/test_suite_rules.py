"""The suite's own rules, read from its source: a test that bounds a wall-clock duration runs alone.

`make test` runs most tests in parallel workers on whatever cores there are; on a busy machine any upper bound on
elapsed time can fail there although nothing is wrong. So a test that asserts such a bound is marked
``@pytest.mark.serial`` (or ``heavy``), which `make unit` runs one at a time after the workers, or it asserts a
ratio of two durations measured in the same test, which load scales alike.

The scan (an AST walk of every ``tests/**/*.py``) flags an upper bound: an ordering comparison (``<``, ``<=``, or
``>``/``>=`` the other way round) whose smaller side is *timed* and whose larger side is not. Timed is a call of
:mod:`time`'s clocks (``monotonic``, ``perf_counter``, ``time``, their ``_ns`` forms), a name assigned from a
timed expression in the same function, or a name, attribute or string key that says it is a duration
(``elapsed``, ``seconds``, ``duration``, ``latency``, ``took``): the figures a product reports of its own wall
time. A helper that asserts one counts for every unmarked test of its module that calls it.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

TESTS = Path(__file__).resolve().parent
#: The markers whose tests `make unit` runs one at a time, after the parallel workers.
ALONE = {"serial", "heavy"}
_CLOCKS = {"monotonic", "monotonic_ns", "perf_counter", "perf_counter_ns", "time", "time_ns"}
_DURATION_WORD = re.compile(r"elapsed|seconds|duration|latency|took", re.IGNORECASE)


@dataclass(frozen=True)
class Bound:
    file: str
    line: int
    function: str
    text: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line} in {self.function}: {self.text}"


def _is_clock_call(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    if isinstance(func, ast.Attribute) and func.attr in _CLOCKS:
        return isinstance(func.value, ast.Name) and func.value.id == "time"
    return isinstance(func, ast.Name) and func.id in _CLOCKS - {"time"}  # `from time import monotonic`


def _says_duration(node: ast.AST) -> bool:
    if isinstance(node, ast.Name):
        return bool(_DURATION_WORD.search(node.id))
    if isinstance(node, ast.Attribute):
        return bool(_DURATION_WORD.search(node.attr))
    if isinstance(node, ast.Subscript):
        key = node.slice
        return isinstance(key, ast.Constant) and isinstance(key.value, str) and bool(_DURATION_WORD.search(key.value))
    return False


def _timed(node: ast.AST, names: set[str]) -> bool:
    """Whether ``node`` holds a clock reading, a name assigned from one, or a figure named as a duration."""
    for inner in ast.walk(node):
        if _is_clock_call(inner) or _says_duration(inner):
            return True
        if isinstance(inner, ast.Name) and inner.id in names:
            return True
    return False


def _timed_names(function: ast.AST) -> set[str]:
    """The names a function assigns from a timed expression, to a fixed point (``b = a - 1`` after ``a = now``)."""
    names: set[str] = set()
    while True:
        before = len(names)
        for node in ast.walk(function):
            assigns = isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign | ast.NamedExpr)
            if assigns and node.value is not None and _timed(node.value, names):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    names |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
        if len(names) == before:
            return names


def _upper_bounds(function: ast.FunctionDef | ast.AsyncFunctionDef, source: str) -> list[tuple[int, str]]:
    names = _timed_names(function)
    found = []
    for node in ast.walk(function):
        if not isinstance(node, ast.Assert):
            continue
        for compare in (n for n in ast.walk(node.test) if isinstance(n, ast.Compare)):
            operands = [compare.left, *compare.comparators]
            for op, left, right in zip(compare.ops, operands[:-1], operands[1:], strict=True):
                if isinstance(op, ast.Lt | ast.LtE):
                    small, large = left, right
                elif isinstance(op, ast.Gt | ast.GtE):
                    small, large = right, left
                else:
                    continue
                if _timed(small, names) and not _timed(large, names):  # both timed: a ratio, which load scales
                    found.append((node.lineno, ast.get_source_segment(source, node) or ""))
                    break
    return found


def _markers(function: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    marks = set()
    for decorator in function.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        if (
            isinstance(target, ast.Attribute)
            and isinstance(target.value, ast.Attribute)
            and target.value.attr == "mark"
        ):
            marks.add(target.attr)
    return marks


def _module_markers(tree: ast.Module) -> set[str]:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets):
            return {n.attr for n in ast.walk(node.value) if isinstance(n, ast.Attribute) and n.attr in ALONE}
    return set()


def unmarked_time_bounds(path: Path, where: str) -> list[Bound]:
    """The wall-clock upper bounds in ``path`` (named ``where`` in the findings) that a test not marked serial or
    heavy asserts, itself or through a helper function of the same module that it calls."""
    source = path.read_text(encoding="utf-8")
    tree = ast.parse(source, filename=str(path))
    if _module_markers(tree) & ALONE:
        return []
    functions = [n for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    helpers = {f.name: _upper_bounds(f, source) for f in functions if not f.name.startswith("test_")}
    found = []
    for test in (f for f in functions if f.name.startswith("test_") and not _markers(f) & ALONE):
        bounds = _upper_bounds(test, source)
        called = {n.func.id for n in ast.walk(test) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
        bounds += [bound for name in sorted(called) for bound in helpers.get(name, [])]
        found += [Bound(where, line, test.name, text) for line, text in bounds]
    return found


def test_no_test_outside_the_serial_phase_asserts_a_wall_clock_bound() -> None:
    paths = sorted(TESTS.rglob("*.py"))
    found = [str(b) for path in paths for b in unmarked_time_bounds(path, path.relative_to(TESTS.parent).as_posix())]
    assert not found, "mark these @pytest.mark.serial, or assert a ratio measured in the same test:\n" + "\n".join(
        found
    )


def test_the_scan_finds_a_bound_and_lets_a_marked_one_and_a_ratio_pass(tmp_path: Path) -> None:
    probe = tmp_path / "test_probe.py"
    probe.write_text(
        "import time\n"
        "import pytest\n"
        "def test_bounded():\n"
        "    started = time.monotonic()\n"
        "    took = time.monotonic() - started\n"
        "    assert took < 30\n"
        "def test_by_helper():\n"
        "    _check()\n"
        "def _check():\n"
        "    assert 2.0 > report['seconds']\n"
        "@pytest.mark.serial\n"
        "def test_alone():\n"
        "    t0 = time.perf_counter()\n"
        "    assert time.perf_counter() - t0 < 1\n"
        "def test_ratio():\n"
        "    a = time.perf_counter()\n"
        "    b = time.perf_counter() - a\n"
        "    assert b < 3 * a and b >= 0\n"
        "def test_lower_bound_and_equality():\n"
        "    elapsed = time.monotonic()\n"
        "    assert elapsed >= 0.5 and row['duration_s'] == 1.0\n",
        encoding="utf-8",
    )
    found = unmarked_time_bounds(probe, "test_probe.py")
    assert [(b.function, b.line) for b in found] == [("test_bounded", 6), ("test_by_helper", 10)]
