"""Which options name outputs, and the one check of them all before a command runs.

An output option is declared with the argparse type :func:`output_file` or
:func:`output_folder` (both give a :class:`~pathlib.Path`), or :func:`output_prefix` for a
prefix of several files. :func:`mark_outputs` records,
on every sub-command's parser, which of its options those are; :func:`preflight` (called by
``gradsched.cli.main`` before the command's function) checks every output given:

* an existing target that is not a regular file is refused (a symbolic link, FIFO, socket,
  folder or block device), except a character device or this process's stream
  (``/dev/null``, ``/dev/stdout``), which is written through
  (:func:`gradsched.io.output_target`);
* the place must be creatable and writable (:func:`gradsched.staging.check_writable`);
* an output file may not be the same file as any input (any other option or argument
  naming an existing path, and the ``.meta.json`` sidecar of a ``.csv`` input: resolved
  paths compared, and ``os.path.samefile``, so hard links count) nor as another output.

Every refusal is one line naming the option(s); nothing has been read, measured or
written yet.
"""

from __future__ import annotations

import argparse
import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from gradsched.errors import ConfigError, InputError
from gradsched.io import output_target, remove_leftovers
from gradsched.staging import check_writable

OUTPUTS_KEY = "_gradsched_outputs"
"""The namespace attribute holding the parsed sub-command's outputs,
``([(dest, option, kind, suffixes)], {dest: option})``."""


def output_file(text: str) -> Path:
    """argparse type of an option naming an output file."""
    return Path(text)


def output_folder(text: str) -> Path:
    """argparse type of an option naming an output folder."""
    return Path(text)


def output_prefix(*suffixes: str) -> Callable[[str], str]:
    """argparse type factory of an option naming the common prefix of several output
    files, ``PREFIX<suffix>`` for each of ``suffixes`` (each checked as an output file)."""

    def parse(text: str) -> str:
        return text

    parse.__name__ = "prefix"
    parse.output_suffixes = suffixes  # type: ignore[attr-defined]
    return parse


def _option(action: argparse.Action) -> str:
    return "/".join(action.option_strings) or (action.metavar or action.dest)


def _subparsers(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            yield from dict.fromkeys(action.choices.values())  # aliases share a parser


def mark_outputs(parser: argparse.ArgumentParser) -> None:
    """Record on ``parser`` and every sub-parser below it which options are outputs, and
    the display name of every option (for the messages)."""
    outputs = []
    names = {}
    for action in parser._actions:
        names[action.dest] = _option(action)
        kind = {output_file: "file", output_folder: "folder"}.get(action.type)
        if kind is not None:
            outputs.append((action.dest, _option(action), kind, ("",)))
        suffixes = getattr(action.type, "output_suffixes", None)
        if suffixes:
            outputs.append((action.dest, _option(action), "file", tuple(suffixes)))
    parser.set_defaults(**{OUTPUTS_KEY: (outputs, names)})
    for child in _subparsers(parser):
        mark_outputs(child)


def _values(value: Any) -> Iterator[Any]:
    if isinstance(value, list | tuple):
        for item in value:
            yield from _values(item)
    elif value is not None:
        yield value


def _same(a: Path, b: Path) -> bool:
    """Whether ``a`` and ``b`` name the same file (resolved paths, or the same inode)."""
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    with contextlib.suppress(OSError):
        return os.path.samefile(a, b)
    return False


def _inputs(args: argparse.Namespace, outputs: set[str],
            names: dict[str, str]) -> list[tuple[str, Path]]:
    """Every other option or argument value that names an existing path."""
    found = []
    for dest, value in vars(args).items():
        if dest in outputs or dest.startswith("_") or dest in ("func", "command"):
            continue
        for item in _values(value):
            if not isinstance(item, str | os.PathLike) or not str(item):
                continue
            with contextlib.suppress(OSError, ValueError):
                if os.path.exists(item):
                    found.append((names.get(dest, dest), Path(item)))
                sidecar = Path(item).with_suffix(".meta.json")  # a trace's metadata
                if Path(item).suffix == ".csv" and sidecar.is_file():
                    found.append((names.get(dest, dest), sidecar))
    return found


def _check_one(option: str, path: Path, kind: str) -> bool:
    """Check one output; True when it is a file that gets replaced (not written through)."""
    try:
        if kind == "folder":
            check_writable(path, directory=True)
            return False
        through = output_target(path) == "through"
        check_writable(path)
    except InputError as exc:
        raise ConfigError(f"{option} {exc}") from exc
    if not through:  # a device's folder (/dev) is left alone
        remove_leftovers(path.parent)
    return not through


def preflight(args: argparse.Namespace) -> None:
    """Check every output of the parsed command (see the module docstring); raise
    :class:`~gradsched.errors.ConfigError` naming the option(s) at the first problem."""
    declared, names = getattr(args, OUTPUTS_KEY, ([], {}))
    given = [(option, Path(f"{value}{suffix}"), kind)
             for dest, option, kind, suffixes in declared
             for value in _values(getattr(args, dest, None)) for suffix in suffixes]
    replaced = [(option, path) for option, path, kind in given
                if _check_one(option, path, kind)]
    for option, path in replaced:
        for source, other in _inputs(args, {entry[0] for entry in declared}, names):
            if _same(path, other):
                raise ConfigError(f"{option} {path} is the same file as the input {source} "
                                  f"{other}; refusing to overwrite an input")
    for i, (option, path) in enumerate(replaced):
        for option2, path2 in replaced[i + 1:]:
            if _same(path, path2):
                raise ConfigError(f"{option} {path} and {option2} {path2} name the same "
                                  "output file; give each output its own path")
        for option2, path2, kind2 in given:
            if kind2 == "folder" and _same(path, path2):
                raise ConfigError(f"{option} {path} and {option2} {path2} name the same "
                                  "path; give each output its own path")
