"""Names that come from data, and what they may select (``docs/errors.md``).

Data never selects code, and a name read from a file never leaves its folder:

* :func:`plain_name` -- a name from a configuration file that becomes a path component
  (re-execution case names, capture labels, topology names, output stems) is letters, digits
  and ``._-``, not starting with ``.``: no ``/``, no ``..``, no absolute path.
* :func:`registry_model` -- a model named by a configuration file or a trace's sidecar is a
  name of the model zoo (:mod:`gradsched.workloads`), never ``package.module:attr``; a user
  model is accepted only from an explicit command-line option.
* :func:`package_task` -- a rank's task (``gradsched.distributed.worker --task``) is a
  function of this package.
* :func:`drop_implicit_cwd` and :func:`user_import_path` -- the working folder that Python
  puts first on the import path (``python -m``, ``python -c``, an interactive session) is
  never searched: a file planted there cannot shadow a module or be loaded as a user model.
  A folder named explicitly in ``PYTHONPATH`` still is.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

from gradsched.errors import ConfigError, InputError

PLAIN_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*")
"""A plain name: letters, digits, ``.``, ``_`` and ``-``, not starting with ``.`` or ``-``
(a case folder ``--list`` would read as an option to every tool given it)."""

MAX_NAME_CHARS = 200
"""A path component longer than this is refused (file systems stop at 255 bytes)."""

PACKAGE = "gradsched"


def is_plain_name(value: object) -> bool:
    """Whether ``value`` is a string that is a plain name."""
    return (isinstance(value, str) and len(value) <= MAX_NAME_CHARS
            and PLAIN_NAME.fullmatch(value) is not None)


def plain_name(value: object, *, path: str | Path | None = None,
               field: str | None = None) -> str:
    """``value`` if it is a plain name (it may become a file or folder name); else an
    :class:`~gradsched.errors.InputError` naming the file and the field."""
    if is_plain_name(value):
        return str(value)
    raise InputError(
        f"{value!r} is not a plain name: it becomes a file or folder name, so it must be "
        f"letters, digits, '.', '_' and '-' only, not start with '.' or '-', and be at most "
        f"{MAX_NAME_CHARS} characters (no '/', no '..', no absolute path)",
        path=path, field=field)


def table_name(text: str) -> str:
    """argparse type of an option whose value becomes a label in trace cells and tables
    (``import nccl-tests --backend``): printable, no path separator, not starting with
    ``-``, at most :data:`MAX_NAME_CHARS` characters. A newline in it would split the row
    of every table it reaches."""
    bad = next((c for c in text if not c.isprintable() or c in "/\\"), None)
    if not text or bad is not None or text.startswith("-") or len(text) > MAX_NAME_CHARS \
            or text != text.strip():
        why = (f"holds {bad!r}" if bad is not None else "is empty" if not text
               else "starts with '-'" if text.startswith("-") else "has surrounding spaces"
               if text != text.strip() else f"is longer than {MAX_NAME_CHARS} characters")
        raise argparse.ArgumentTypeError(
            f"{text!r} {why}: a label written into tables must be printable, without '/' or "
            "'\\', and not start with '-'")
    return text


def is_user_model(name: str) -> bool:
    """Whether ``name`` is the ``package.module:attr`` form of a user model."""
    return ":" in name


def registry_model(value: object, *, path: str | Path | None = None,
                   field: str | None = None) -> str:
    """A model name read from data (a config file, a trace sidecar): a plain name, never
    ``package.module:attr`` (the zoo then refuses a name it does not hold)."""
    if isinstance(value, str) and is_user_model(value):
        raise InputError(
            f"model {value!r} names code (package.module:attr); models named in configuration "
            "files and trace sidecars are looked up only in the model zoo "
            "(gradsched.workloads). To run your own model, give it on the command line "
            "(--model package.module:attr) from an installed module or one on PYTHONPATH",
            path=path, field=field)
    return plain_name(value, path=path, field=field)


def package_task(task: str) -> str:
    """``task`` if it is ``gradsched.<module>:<function>``; a ConfigError otherwise (a
    rank runs only this package's code)."""
    module, sep, attr = task.partition(":")
    if (not sep or not attr.isidentifier()
            or not (module == PACKAGE or module.startswith(PACKAGE + "."))
            or not all(part.isidentifier() for part in module.split("."))):
        raise ConfigError(
            f"task {task!r} refused: a rank runs only a function of the gradsched package "
            "(gradsched.<module>:<function>); write your own task as a module of the "
            "package")
    return task


def _explicit_path() -> set[str]:
    """The folders named in ``PYTHONPATH`` (absolute)."""
    return {os.path.abspath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
            if p}


def _implicit(entry: str, cwd: str, explicit: set[str]) -> bool:
    if entry == "":
        return True
    full = os.path.abspath(entry)
    return full == cwd and full not in explicit


def drop_implicit_cwd() -> None:
    """Remove the working folder that ``python -m``/``-c`` put first on ``sys.path`` (not
    one named in ``PYTHONPATH``; nothing to do under ``python -P``)."""
    if sys.flags.safe_path or not sys.path:
        return
    if _implicit(sys.path[0], os.getcwd(), _explicit_path()):
        del sys.path[0]


def user_import_path() -> list[str]:
    """``sys.path`` without the working folder (``''`` or the folder itself), unless
    ``PYTHONPATH`` names it: the path a user model is imported from."""
    cwd, explicit = os.getcwd(), _explicit_path()
    return [p for p in sys.path if not _implicit(p, cwd, explicit)]
