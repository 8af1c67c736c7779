"""The README's first example runs as pasted and prints what the README says it prints; its links resolve."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_the_first_example_prints_what_the_readme_shows() -> None:
    code = re.findall(r"```python\n(.*?)```", README, re.S)[0]
    shown = re.findall(r"```text\n(.*?)```", README, re.S)[0]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, "README.md", "exec"), {"__name__": "readme_example"})
    assert printed.getvalue() == shown


def test_the_readme_is_short_and_its_local_links_exist() -> None:
    assert len(README.splitlines()) <= 200
    targets = re.findall(r"\]\(((?!https?:)[^)#]+)(?:#[^)]*)?\)", README)
    assert targets and all((ROOT / t).exists() for t in targets), [t for t in targets if not (ROOT / t).exists()]
