"""What each ``rb-otel`` command reads and writes, declared per argument, and the check that no output is an input.

Every subcommand declares the role of each argument that takes text (:func:`declare`, stored as a parser
default): :data:`INPUT`, a file or folder it reads (or a URL naming one on this machine: ``sqlite://``,
``chdb://``); :data:`OUTPUT`, a file it writes (``-``: standard output); :data:`OUTPUT_FOLDER`, a folder it writes
files in (the command's ``outputs`` default names them); :data:`VALUE`, text that names no file. An argument that
takes a number, a date or one of fixed choices needs no role (:func:`needs_role`). So a command added later is
covered as soon as it declares its arguments, and ``tests/test_outputs_never_over_inputs.py`` fails for an
argument that takes text and declares nothing.

:func:`check_not_inputs` then refuses, before any work, an output that is one of the inputs however it is spelled
(``./``, absolute or relative, through a symbolic link, a hard link: the same ``(st_dev, st_ino)``), or a file the
command would read from an input folder.
"""

from __future__ import annotations

import argparse
import os
import stat
from collections.abc import Iterable
from pathlib import Path
from urllib.parse import unquote, urlsplit

from rb_otel.files import OutputError

__all__ = [
    "INPUT",
    "OUTPUT",
    "OUTPUT_FOLDER",
    "ROLES",
    "VALUE",
    "check_not_inputs",
    "declare",
    "input_paths",
    "needs_role",
    "output_paths",
    "roles",
]

INPUT = "input"
OUTPUT = "output"
OUTPUT_FOLDER = "output folder"
VALUE = "value"
ROLES = (INPUT, OUTPUT, OUTPUT_FOLDER, VALUE)
#: The parser default that holds a command's roles (argument dest -> role).
_DEFAULT = "argument_roles"


def declare(parser: argparse.ArgumentParser, **roles: str) -> None:
    """Declare the role of arguments of ``parser`` by their ``dest`` (added to what was declared before). An
    unknown dest or role is a programming error: ``ValueError``."""
    known = {action.dest for action in parser._actions}
    for dest, role in roles.items():
        if dest not in known:
            raise ValueError(f"{parser.prog}: no argument {dest!r} to declare")
        if role not in ROLES:
            raise ValueError(f"{parser.prog}: {dest}: {role!r} is not one of {', '.join(ROLES)}")
    declared = parser.get_default(_DEFAULT) or {}
    parser.set_defaults(**{_DEFAULT: {**declared, **roles}})


def roles(args: argparse.Namespace | argparse.ArgumentParser) -> dict[str, str]:
    """The roles a command declared (dest -> role): from its parsed ``args``, or from its parser."""
    if isinstance(args, argparse.ArgumentParser):
        return dict(args.get_default(_DEFAULT) or {})
    return dict(getattr(args, _DEFAULT, None) or {})


def needs_role(action: argparse.Action) -> bool:
    """Whether ``action`` takes text that could name a file, so that its command must declare its role: not a
    flag, nor a number, a date or a choice (their own ``type`` or ``choices`` say so), nor help or version."""
    if action.nargs == 0 or isinstance(action, argparse._SubParsersAction):
        return False
    return action.choices is None and action.type in (None, str)


def _values(args: argparse.Namespace, dest: str) -> list[str]:
    value = getattr(args, dest, None)
    if value is None:
        return []
    if isinstance(value, list | tuple):
        return [str(v) for v in value if v is not None]
    return [str(value)]


def _local(text: str) -> Path | None:
    """The path on this machine that an input names: a plain path, the file of a ``sqlite://`` URL or the folder
    of a ``chdb://`` one; ``None`` for a URL of a server (``redis://``, ``clickhouse://``)."""
    if "://" not in text:
        return Path(text).expanduser()
    scheme = text.split("://", 1)[0].lower()
    if scheme == "sqlite":
        return Path(text[len("sqlite://") :]).expanduser()
    if scheme == "chdb":
        return Path(unquote(urlsplit(text).path))
    return None


def input_paths(args: argparse.Namespace) -> list[tuple[str, Path]]:
    """``(as given, the path)`` of every input the command of ``args`` was given that is on this machine."""
    found = []
    for dest, role in roles(args).items():
        if role == INPUT:
            found += [(text, path) for text in _values(args, dest) if (path := _local(text)) is not None]
    return found


def output_paths(args: argparse.Namespace) -> list[Path]:
    """The files the :data:`OUTPUT` arguments of ``args`` were given on this machine (``-``, standard output, is
    none; a ``sqlite://`` store is its file). A default is left to the command's ``outputs``, which name it when
    this mode writes it (``report --summary`` writes no ``report.html``)."""
    parser: argparse.ArgumentParser | None = getattr(args, "command_parser", None)
    defaults = {dest: parser.get_default(dest) for dest in roles(args)} if parser is not None else {}
    given = [d for d, role in roles(args).items() if role == OUTPUT and getattr(args, d, None) != defaults.get(d)]
    return [
        path for dest in given for text in _values(args, dest) if text != "-" and (path := _local(text)) is not None
    ]


def _overlap(written: Path, output: os.stat_result, text: str, given: Path) -> str | None:
    """Why writing ``written`` (whose stat is ``output``) would replace what the command reads from the input
    ``given`` (spelled ``text``); ``None`` when it would not."""
    try:
        found = given.stat()
    except OSError:
        return None  # not there: the command says so itself
    if not stat.S_ISDIR(found.st_mode):
        return f"it is the same file as the input {text}" if os.path.samestat(found, output) else None
    if not (
        written.resolve().is_relative_to(given.resolve()) or (output.st_nlink > 1 and output.st_dev == found.st_dev)
    ):
        return None  # neither in the folder nor a hard link that may be: the folder is not walked
    from rb_otel.importers.detect import directory_files  # a folder is read as every command reads one

    for file in directory_files(given):
        try:
            if os.path.samestat(file.stat(), output):
                return f"the command reads it from the input folder {text}"
        except OSError:
            continue
    return None


def check_not_inputs(args: argparse.Namespace, outputs: Iterable[Path]) -> None:
    """Raise :class:`~rb_otel.files.OutputError` for the first of ``outputs`` that is one of the command's inputs
    or a file it reads from an input folder (module docstring); an output that does not exist yet is none."""
    given = input_paths(args)
    for output in outputs:
        try:
            found = output.stat()  # through a link: the file it names
        except OSError:
            continue
        for text, path in given:
            why = _overlap(output, found, text, path)
            if why is not None:
                raise OutputError(output, f"{why}; write the output elsewhere")
