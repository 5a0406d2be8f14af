"""Atomic file writes: write to a temporary file in the same folder, then rename.

An interrupted run therefore never leaves a half-written output behind. Also the one
JSON reader (:func:`read_json`) whose errors name the file and line.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any


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
    target.parent.mkdir(parents=True, exist_ok=True)
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


def read_json(path: str | Path, missing: str = "file not found") -> Any:
    """Parse the JSON file ``path``; a missing file or invalid JSON raises
    :class:`~gradsched.errors.InputError` naming the file (and the line)."""
    from gradsched.errors import InputError

    path = Path(path)
    if not path.is_file():
        raise InputError(missing, path=path)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise InputError(f"not valid JSON: {exc.msg}", path=path, line=exc.lineno) from exc
