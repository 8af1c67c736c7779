"""The layout of the house (docs/architecture.md): the core's scoring and pilot as subpackages, no shim or alias
left for a name that moved (no release carries one), at most 20 flat modules in ``steering/``, the public names
listed once in the package's stub, and the ReasonBlocks compatibility warnings that all read the same."""

from __future__ import annotations

import ast
import importlib
import warnings
from pathlib import Path

import pytest

import rb_otel
from rb_otel.deprecation import deprecated
from rb_otel.lazy_names import names_in_stub

STEERING = Path(rb_otel.__file__).parent / "steering"
#: The most modules (``__init__`` included) at the top of ``steering/``; the rest live in its subpackages.
MAX_FLAT_STEERING_MODULES = 20

#: Old module path -> where its contents live (CHANGELOG.md); the old path is gone, not forwarded.
MOVED_MODULES = {
    "rb_otel.steering.scorers": "rb_otel.steering.scoring.scorers",
    "rb_otel.steering.scorer_protocol": "rb_otel.steering.scoring.protocol",
    "rb_otel.steering.step_scoring": "rb_otel.steering.scoring.steps",
    "rb_otel.steering.judge": "rb_otel.steering.scoring.judge",
    "rb_otel.steering.pilot_model": "rb_otel.steering.pilot.model",
    "rb_otel.steering.pilot_text": "rb_otel.steering.pilot.text",
    "rb_otel.steering.baselines": "rb_otel.steering.pilot.baselines",
    "rb_otel.steering.baseline_cache": "rb_otel.backends.baselines.cache",
    "rb_otel.backends.baselines.urls": "rb_otel.urls",
    "rb_otel.reasonblocks": "rb_otel.facade.reasonblocks",
}

#: Old ``package.name`` -> where the name lives: the old one is an AttributeError, with no warning first.
MOVED_NAMES = {
    "rb_otel.SteeringSession": "rb_otel.steering.SteeringSession",
    "rb_otel.DifficultyFSM": "rb_otel.steering.DifficultyFSM",
    "rb_otel.StepRecord": "rb_otel.types.StepRecord",
    "rb_otel.ReasonBlocksMiddleware": "rb_otel.integrations.langchain.ReasonBlocksMiddleware",
    "rb_otel.run_messages_agent_loop": "rb_otel.integrations.anthropic.run_messages_agent_loop",
    "rb_otel.claude_agent_telemetry": "rb_otel.integrations.claude_agent.claude_agent_telemetry",
    "rb_otel.compress_tool_output": "rb_otel.steering.token_saving.compress_tool_output",
    "rb_otel.steering.pilot.PilotScorer": "rb_otel.backends.pilot.PilotScorer",
    "rb_otel.steering.pilot.BaselineStore": "rb_otel.backends.baselines.cache.BaselineCache",
    "rb_otel.steering.scoring._count_hits": "rb_otel.steering.scoring.heuristic._count_hits",
    "rb_otel.steering.emitters.notify": "rb_otel.steering.emitters.emit",
    "rb_otel.telemetry.recorder.RunRecorder.monitor_scores": "rb_otel.telemetry.recorder.RunRecorder.step",
    "rb_otel.telemetry.recorder.RunRecorder.run_risk": "rb_otel.telemetry.recorder.RunRecorder.run_finish",
}


def _resolve(dotted: str) -> object:
    """The object a dotted path names: the longest importable module, then attributes."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            value: object = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attribute in parts[cut:]:
            value = getattr(value, attribute)
        return value
    raise ModuleNotFoundError(dotted)


@pytest.mark.parametrize(("old", "new"), sorted(MOVED_MODULES.items()))
def test_a_moved_modules_old_path_is_gone_and_its_new_one_imports(old: str, new: str) -> None:
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(old)
    assert importlib.import_module(new)


@pytest.mark.parametrize(("old", "new"), sorted(MOVED_NAMES.items()))
def test_a_moved_names_old_place_is_an_attribute_error_without_a_warning(old: str, new: str) -> None:
    assert _resolve(new) is not None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(AttributeError):
            _resolve(old)


def test_nothing_in_the_package_forwards_a_moved_name() -> None:
    # no module-level __getattr__ but the public face's (which loads the stub's names), no "until 0.3.0" shim
    package = Path(rb_otel.__file__).parent
    forwarding = [
        str(path.relative_to(package))
        for path in sorted(package.rglob("*.py"))
        if path != package / "__init__.py"
        for node in ast.parse(path.read_text(encoding="utf-8")).body
        if any(isinstance(t, ast.Name) and t.id == "__getattr__" for t in getattr(node, "targets", []))
        or (isinstance(node, ast.FunctionDef) and node.name == "__getattr__")
    ]
    assert forwarding == []
    assert not [p for p in package.rglob("*.py") if "0.3.0" in p.read_text(encoding="utf-8")]


def test_the_cores_folder_shows_its_parts() -> None:
    assert (STEERING / "scoring" / "__init__.py").is_file() and (STEERING / "pilot" / "__init__.py").is_file()
    top = sorted(p.stem for p in STEERING.glob("*.py"))
    assert not {"scoring", "pilot"} & set(top)
    assert not [name for name in top if name.startswith(("pilot_", "scorer"))]
    assert len(top) <= MAX_FLAT_STEERING_MODULES, top


def test_the_scoring_and_pilot_packages_export_their_parts_without_a_warning() -> None:
    from rb_otel.steering.scoring import heuristic

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        from rb_otel.steering.pilot import PilotModel, PilotRun, pilot_fsm_thresholds
        from rb_otel.steering.scoring import ERROR_TERMS, HEDGE_TERMS, score_signals, score_step

    assert (score_step, score_signals, ERROR_TERMS, HEDGE_TERMS) == (
        heuristic.score_step,
        heuristic.score_signals,
        heuristic.ERROR_TERMS,
        heuristic.HEDGE_TERMS,
    )
    assert PilotRun and PilotModel and pilot_fsm_thresholds


def test_a_compatibility_warning_raised_deep_inside_the_package_points_at_the_users_line() -> None:
    # ReasonBlocks(monitor_names=...) warns two calls deep; the warning still names this file (no fixed stacklevel)
    with pytest.warns(DeprecationWarning, match=r"monitor_names=\.\.\.\) never had an effect") as w:
        rb_otel.ReasonBlocks(monitor_names=["loop"], telemetry_enabled=False)
    assert w[0].filename == __file__


def test_compatibility_warnings_read_the_same_way() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        deprecated("thing()", instead="other()")
        deprecated("knob=", because="does nothing", advice="remove it")
    assert all(w.category is DeprecationWarning for w in caught)
    assert [str(w.message) for w in caught] == [
        "thing() is deprecated: use other() (accepted for code written for ReasonBlocks)",
        "knob= does nothing and is deprecated: remove it (accepted for code written for ReasonBlocks)",
    ]


# -- the public names, listed once --------------------------------------------------------------------------------


def test_a_stub_line_that_would_not_re_export_its_name_is_refused_with_its_place(tmp_path: Path) -> None:
    stub = tmp_path / "__init__.pyi"
    stub.write_text("from typing import Any\n\nfrom pkg.a import A as A\nfrom pkg.b import B\n", encoding="utf-8")
    with pytest.raises(ValueError, match=rf"{stub}:4: write 'from pkg\.b import B as B'"):
        names_in_stub(stub, "pkg")


def test_a_stub_face_loads_each_name_on_first_use_and_nothing_else(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "face_probe"
    package.mkdir()
    (package / "__init__.py").write_text(
        "from rb_otel.lazy_names import stub_face\n__getattr__, __dir__, __all__ = stub_face(__name__, __file__)\n",
        encoding="utf-8",
    )
    (package / "__init__.pyi").write_text(
        "from typing import Any\nfrom face_probe.parts import Part as Part\n", encoding="utf-8"
    )
    (package / "parts.py").write_text("class Part: ...\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    import sys

    try:
        face = importlib.import_module("face_probe")
        assert face.__all__ == ["Part"] and dir(face) == ["Part"]
        assert "face_probe.parts" not in sys.modules  # nothing loaded before its first use
        part = face.Part
        assert part is importlib.import_module("face_probe.parts").Part
        assert vars(face)["Part"] is part  # kept: the next read is a plain attribute
        with pytest.raises(AttributeError, match="has no attribute 'Any'"):
            face.Any  # noqa: B018 (typing's names are the stub's own, not public)
    finally:
        for name in ("face_probe", "face_probe.parts"):
            sys.modules.pop(name, None)


def test_a_missing_stub_is_a_clear_import_error(tmp_path: Path) -> None:
    from rb_otel.lazy_names import stub_face

    with pytest.raises(ImportError, match=r"__init__\.pyi is missing: probe's public names are listed there"):
        stub_face("probe", str(tmp_path / "__init__.py"))


def test_the_public_face_is_the_stubs_names_and_type_checkers_read_the_same_file() -> None:
    stub = Path(rb_otel.__file__).with_suffix(".pyi")
    assert sorted(names_in_stub(stub, "rb_otel")) == rb_otel.__all__ == dir(rb_otel)
    packaged = Path(rb_otel.__file__).parent.parent / "pyproject.toml"
    assert '"__init__.pyi"' in packaged.read_text(encoding="utf-8")  # shipped in the wheel beside py.typed
