"""Atomic file writes: write to a temporary file in the same folder, then rename.

An interrupted run therefore never leaves a half-written output behind. Also the one
JSON reader (:func:`read_json`) whose errors name the file and line.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import yaml

from gradsched.errors import InputError


def _umask() -> int:
    """The process umask (read by setting and restoring it)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def readable_mode(path: str | Path, directory: bool = False) -> None:
    """Give ``path`` the mode a plain ``open``/``mkdir`` would (0666/0777 less the umask):
    ``mkstemp``/``mkdtemp`` create 0600/0700, which would leave outputs unreadable by
    others after the rename (issue 17)."""
    os.chmod(path, (0o777 if directory else 0o666) & ~_umask())


@contextmanager
def atomic_open(path: str | Path, mode: str = "w", **kwargs: Any) -> Iterator[IO[Any]]:
    """Open a temporary sibling of ``path`` for writing; rename it over ``path`` on success."""
    target = Path(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError) as exc:
        from gradsched.errors import InputError

        raise InputError(f"cannot create the output: {exc.filename} is a file, not a folder",
                         path=target) from exc
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    try:
        if "b" not in mode:
            kwargs.setdefault("encoding", "utf-8")
            kwargs.setdefault("newline", "")
        with open(tmp_name, mode, **kwargs) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        readable_mode(tmp_name)
        os.replace(tmp_name, target)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise


def write_text_atomic(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically."""
    with atomic_open(path, "w") as handle:
        handle.write(text)


def write_json_atomic(path: str | Path, obj: Any) -> None:
    """Write ``obj`` as stable, indented JSON (sorted keys, trailing newline) atomically."""
    write_text_atomic(path, json.dumps(obj, indent=2, sort_keys=True) + "\n")


def write_csv_atomic(path: str | Path, frame: Any, float_format: str = "%.9g") -> None:
    """Write a pandas DataFrame as CSV atomically, with a fixed float format for determinism."""
    with atomic_open(path, "w") as handle:
        frame.to_csv(handle, index=False, float_format=float_format, lineterminator="\n")


def read_json(path: str | Path, missing: str = "file not found", *,
              kind: type | None = dict) -> Any:
    """Parse the JSON file ``path``; a missing or unreadable file, bytes that are not
    UTF-8, invalid JSON, or a top level that is not a ``kind`` (default: an object; None
    accepts any) raise :class:`~gradsched.errors.InputError` naming the file (and the
    line): never a traceback (issue 17)."""
    from gradsched.errors import InputError

    path = Path(path)
    if not path.is_file():
        raise InputError(missing, path=path)
    text = read_text(path)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"not valid JSON: {exc.msg}", path=path, line=exc.lineno) from exc
    except RecursionError as exc:
        raise InputError("JSON nested too deeply", path=path) from exc
    if kind is not None and not isinstance(data, kind):
        want = {dict: "an object", list: "an array"}.get(kind, kind.__name__)
        raise InputError(f"the JSON top level must be {want}, not {_json_type(data)}",
                         path=path)
    return data


def _strict_yaml_loader() -> type:
    """A safe YAML loader whose plain scalars become numbers and booleans only when spelt
    as in YAML 1.2 and JSON: ``16``, ``-3``, ``2.5``, ``1e-3``, ``true``. PyYAML's YAML 1.1
    rules read ``1_6`` as 16, ``012`` as 10 (octal), ``1:30`` as 90 (base 60) and ``on``/
    ``yes`` as true: values a user did not write. Those stay strings, which the reader
    then refuses by field."""
    loader = type("StrictSafeLoader", (yaml.SafeLoader,), {})
    dropped = {"tag:yaml.org,2002:int", "tag:yaml.org,2002:float", "tag:yaml.org,2002:bool"}
    loader.yaml_implicit_resolvers = {
        first: [(tag, rx) for tag, rx in resolvers if tag not in dropped]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}
    loader.add_implicit_resolver("tag:yaml.org,2002:bool",
                                 re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
                                 list("tTfF"))
    loader.add_implicit_resolver("tag:yaml.org,2002:int",
                                 re.compile(r"^[-+]?(?:0|[1-9][0-9]*)$"),
                                 list("-+0123456789"))
    loader.add_implicit_resolver(
        "tag:yaml.org,2002:float",
        re.compile(r"^[-+]?(?:(?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?"
                   r"|[0-9]+[eE][-+]?[0-9]+)$|^[-+]?\.(?:inf|Inf|INF)$|^\.(?:nan|NaN|NAN)$"),
        list("-+0123456789."))
    return loader


def parse_yaml(text: str, path: str | Path) -> Any:
    """The YAML document ``text`` (read from ``path``) with the strict number and boolean
    spellings of :func:`_strict_yaml_loader`; invalid YAML raises
    :class:`~gradsched.errors.InputError` naming the file and line."""
    try:
        return yaml.load(text, Loader=_strict_yaml_loader())
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise InputError(f"not valid YAML: {getattr(exc, 'problem', None) or exc}",
                         path=path, line=mark.line + 1 if mark else None) from None
    except RecursionError as exc:
        raise InputError("YAML nested too deeply", path=path) from exc


def read_yaml(path: str | Path, missing: str = "file not found") -> Any:
    """Parse the YAML file ``path`` (:func:`parse_yaml`); a missing or unreadable file or
    bytes that are not UTF-8 raise :class:`~gradsched.errors.InputError` naming it."""
    path = Path(path)
    if not path.is_file():
        raise InputError(missing, path=path)
    return parse_yaml(read_text(path), path)


def _json_type(value: Any) -> str:
    """The JSON name of a parsed value's type."""
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean",
             int: "a number", float: "a number", type(None): "null"}
    return names.get(type(value), type(value).__name__)


def read_bytes(path: str | Path) -> bytes:
    """The bytes of ``path``; an unreadable file raises
    :class:`~gradsched.errors.InputError` naming it (not a bare OSError)."""
    from gradsched.errors import InputError

    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", path=path) from exc


def read_text(path: str | Path) -> str:
    """The UTF-8 text of ``path``; an unreadable file or bytes that are not UTF-8 raise
    :class:`~gradsched.errors.InputError` naming the file (and the line of the bad byte)."""
    from gradsched.errors import InputError

    raw = read_bytes(path)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        path = Path(path)
        raise InputError(f"not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset "
                         f"{exc.start}); save the file as UTF-8", path=path,
                         line=line) from exc


def read_csv_checked(path: str | Path, **kwargs: Any) -> Any:
    """``pandas.read_csv`` of ``path`` whose failures name the file: missing, unreadable,
    not UTF-8, empty or malformed CSV raise :class:`~gradsched.errors.InputError`."""
    import io

    import pandas as pd

    from gradsched.errors import InputError

    path = Path(path)
    if not path.is_file():
        raise InputError("file not found", path=path)
    text = read_text(path)
    try:
        return pd.read_csv(io.StringIO(text), **kwargs)
    except pd.errors.EmptyDataError as exc:
        raise InputError("file is empty (no header)", path=path) from exc
    except pd.errors.ParserError as exc:
        raise InputError(f"not a well-formed CSV: {exc}", path=path) from exc
