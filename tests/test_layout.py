"""The layout of the second house round (docs/architecture.md): the core's scoring and pilot as subpackages, their
old module paths still working with a warning that points at the caller, the public names listed once in the
package's stub, and deprecations that all read the same."""

from __future__ import annotations

import ast
import importlib
import warnings
from pathlib import Path

import pytest

import rb_otel
from rb_otel.deprecation import REMOVED_IN, deprecated, moved_module
from rb_otel.lazy_names import names_in_stub

STEERING = Path(rb_otel.__file__).parent / "steering"

#: Old module path -> where its contents live now.
MOVED_MODULES = {
    "rb_otel.steering.scorers": "rb_otel.steering.scoring.scorers",
    "rb_otel.steering.scorer_protocol": "rb_otel.steering.scoring.protocol",
    "rb_otel.steering.step_scoring": "rb_otel.steering.scoring.steps",
    "rb_otel.steering.judge": "rb_otel.steering.scoring.judge",
    "rb_otel.steering.pilot_model": "rb_otel.steering.pilot.model",
    "rb_otel.steering.pilot_text": "rb_otel.steering.pilot.text",
    "rb_otel.steering.baselines": "rb_otel.steering.pilot.baselines",
}


def _public(module: str) -> list[str]:
    return list(importlib.import_module(module).__all__)


@pytest.mark.parametrize(("old", "new"), sorted(MOVED_MODULES.items()))
def test_every_name_of_a_moved_module_resolves_to_the_same_object_with_a_warning_at_the_callers_line(
    old: str, new: str
) -> None:
    shim = importlib.import_module(old)
    for name in _public(new):
        with pytest.warns(DeprecationWarning, match=rf"{old}\.{name} moved: use {new}\.{name}; .* {REMOVED_IN}") as w:
            value = getattr(shim, name)
        assert value is getattr(importlib.import_module(new), name)
        assert w[0].filename == __file__  # the user's line, not rb_otel's


@pytest.mark.parametrize("old", sorted(MOVED_MODULES))
def test_a_name_a_moved_module_never_had_is_an_attribute_error_without_a_warning(old: str) -> None:
    shim = importlib.import_module(old)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(AttributeError, match=rf"module '{old}' has no attribute 'no_such_name'"):
            shim.no_such_name  # noqa: B018
        assert not hasattr(shim, "__wrapped__")


def test_the_scoring_and_pilot_packages_keep_the_old_modules_public_names_and_warn_for_the_rest() -> None:
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
    with pytest.warns(DeprecationWarning, match=r"rb_otel\.steering\.scoring\._count_hits moved: use .*heuristic"):
        from rb_otel.steering.scoring import _count_hits  # noqa: F401
    with pytest.warns(DeprecationWarning, match=r"rb_otel\.steering\.pilot\.PilotScorer moved: use rb_otel\.backends"):
        from rb_otel.steering.pilot import PilotScorer  # noqa: F401


def test_the_cores_folder_shows_its_parts() -> None:
    # scoring and the pilot are subpackages; at the top of steering/ every module is the engine's, or a deprecated
    # path that holds nothing but its docstring and the forwarding __getattr__
    assert (STEERING / "scoring" / "__init__.py").is_file() and (STEERING / "pilot" / "__init__.py").is_file()
    for path in sorted(STEERING.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        doc = ast.get_docstring(tree) or ""
        if doc.startswith("Deprecated path"):
            kinds = [type(node).__name__ for node in tree.body]
            assert kinds == ["Expr", "ImportFrom", "Assign"], path.name
    top = {p.stem for p in STEERING.glob("*.py")}
    assert not {"scoring", "pilot"} & top
    assert not [name for name in top if name.startswith(("pilot_", "scorer")) and name not in _shim_names()]


def _shim_names() -> set[str]:
    return {module.rsplit(".", 1)[1] for module in MOVED_MODULES}


def test_a_deprecation_raised_deep_inside_the_package_points_at_the_users_line() -> None:
    # ReasonBlocks(score_fn=...) warns three calls deep; the warning still names this file (no fixed stacklevel)
    with pytest.warns(DeprecationWarning, match=rf"score_fn=fn\) is deprecated: use scorer=fn.*{REMOVED_IN}") as w:
        rb_otel.ReasonBlocks(score_fn=len, telemetry_enabled=False)
    assert w[0].filename == __file__


def test_deprecated_and_moved_messages_read_the_same_way() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        deprecated("thing()", instead="other()")
        deprecated("knob=", because="does nothing", advice="remove it")
        moved_module("old.module", "rb_otel.files")("write_atomically")
    assert all(w.category is DeprecationWarning for w in caught)
    assert [str(w.message) for w in caught] == [
        f"thing() is deprecated: use other(); it is removed in rb-otel {REMOVED_IN}",
        f"knob= does nothing and is deprecated: remove it; it is removed in rb-otel {REMOVED_IN}",
        f"old.module.write_atomically moved: use rb_otel.files.write_atomically; the old name is removed in rb-otel "
        f"{REMOVED_IN}",
    ]


# -- the public names, listed once --------------------------------------------------------------------------------


def test_a_stub_line_that_would_not_re_export_its_name_is_refused_with_its_place(tmp_path: Path) -> None:
    stub = tmp_path / "__init__.pyi"
    stub.write_text("from typing import Any\n\nfrom pkg.a import A as A\nfrom pkg.b import B\n", encoding="utf-8")
    with pytest.raises(ValueError, match=rf"{stub}:4: write 'from pkg\.b import B as B'"):
        names_in_stub(stub, "pkg")


def test_a_stub_face_loads_each_name_on_first_use_and_hands_the_rest_to_its_fallback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "face_probe"
    package.mkdir()
    (package / "__init__.py").write_text(
        "from rb_otel.lazy_names import stub_face\n"
        "__getattr__, __dir__, __all__ = stub_face(__name__, __file__, fallback=lambda name: f'<{name}>')\n",
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
        assert face.Any == "<Any>"  # typing's names are the stub's own, not public: the fallback answers
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
