"""The workflow's configuration files, each read once and checked against its schema.

``workflow/rules/common.smk`` passes Snakemake's ``snakemake.utils.validate`` in as
``validate`` (so that this package does not import Snakemake); it fills in the schema's
defaults. A file that does not match stops the workflow with a :class:`ConfigError` naming
the file, the place in it and the key.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from gradsched.errors import ConfigError, InputError
from gradsched.io import read_yaml
from gradsched.names import plain_name

Validate = Callable[[Any, str], Any]


def _where(error: BaseException) -> str:
    """``capture.compute[2]`` of a jsonschema error's place in the document."""
    out = ""
    for part in getattr(error, "absolute_path", ()):
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out.lstrip(".")


def _reason(exc: Exception) -> str:
    """The schema violation behind Snakemake's WorkflowError (its ``__context__``)."""
    cause = exc.__context__ if exc.__context__ is not None else exc
    message = getattr(cause, "message", None)
    if message is None:
        return str(exc).strip().splitlines()[-1]
    where = _where(cause)
    return f"{where}: {message}" if where else message


def check_mapping(data: Any, path: str | Path, schema: str, validate: Validate) -> Any:
    """``data`` (read from ``path``) validated against ``schema``, defaults filled in."""
    try:
        validate(data, schema)
    except Exception as exc:  # Snakemake's WorkflowError wraps the jsonschema error
        raise ConfigError(f"{path}: {_reason(exc)}") from None
    return data


def load_checked(path: str | Path, schema: str, validate: Validate) -> dict[str, Any]:
    """The YAML mapping of ``path`` validated against ``schema`` ({} when the file does not
    exist: the stage it configures then has nothing to do)."""
    path = Path(path)
    if not path.is_file():
        return {}
    data = read_yaml(path) or {}  # duplicate keys and YAML 1.1 spellings refused
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping, got {type(data).__name__}")
    return check_mapping(data, path, schema, validate)


NAMED_MAPPINGS: tuple[str, ...] = ("compute", "networks", "topologies")
"""Mappings of ``config/config.yaml`` whose keys become file and folder names of the
results (``results/replay/<compute>/<network>/...``, the topology CSVs)."""


def check_names(data: Any, path: str | Path, keys: tuple[str, ...] = NAMED_MAPPINGS) -> Any:
    """``data`` when every key of its mappings ``keys`` and every case's ``family`` is a
    plain name (:func:`gradsched.names.plain_name`); a ConfigError naming the file and the key
    otherwise (a ``../`` would write outside the results folder)."""
    named: list[tuple[object, str]] = []
    for key in keys:
        mapping = data.get(key) if isinstance(data, dict) else None
        named += [(name, f"{key}.{name}")
                  for name in ((mapping or {}) if isinstance(mapping, dict) else ())]
    cases = data.get("cases") if isinstance(data, dict) else None
    for i, case in enumerate(cases if isinstance(cases, list) else []):
        if isinstance(case, dict) and "family" in case:  # a figure and a table per family
            named.append((case["family"], f"cases[{i}].family"))
    for name, field in named:
        try:
            plain_name(name, path=path, field=field)
        except InputError as exc:
            raise ConfigError(str(exc)) from None
    return data
