"""The configuration files' JSON schemas (package data) and the one check of a parsed
configuration against them: a value that breaks a schema is a
:class:`~gradsched.errors.ConfigFileError` naming the file and the field. The schemas are
YAML read through the input gate (:func:`gradsched.io.read_yaml`)."""

from __future__ import annotations

import functools
import importlib.resources
import math
from pathlib import Path
from typing import Any

import jsonschema

from gradsched.errors import ConfigFileError
from gradsched.io import read_yaml

SCHEMA_FOLDER = "schemas"
"""Where the configuration files' JSON schemas (written in YAML) live: package data,
installed with the package (``pyproject.toml``, ``[tool.setuptools.package-data]``) and
read with :mod:`importlib.resources`, so an installed gradsched needs no source checkout.
``workflow/schemas/`` holds links to the same files, with which
``workflow/rules/common.smk`` validates the workflow's copies."""


def _strict_types() -> Any:
    """JSON Schema's type checker with ``integer`` an int (not a float such as ``3.0``, not
    a bool) and ``number`` a finite int or float: a NaN passes every ``minimum`` and
    ``maximum`` comparison, so it must fail the type."""
    checker = jsonschema.Draft202012Validator.TYPE_CHECKER
    return checker.redefine_many({
        "integer": lambda _, value: isinstance(value, int) and not isinstance(value, bool),
        "number": lambda _, value: (isinstance(value, int | float)
                                    and not isinstance(value, bool) and math.isfinite(value)),
    })


@functools.cache
def schema_validator(name: str) -> Any:
    """The checked validator of the packaged schema ``name`` (loaded once per process)."""
    resource = importlib.resources.files("gradsched") / SCHEMA_FOLDER / name
    with importlib.resources.as_file(resource) as path:
        schema = read_yaml(path, missing="configuration schema not found in the installed "
                           "package (gradsched/schemas/); reinstall gradsched")
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    strict = jsonschema.validators.extend(cls, type_checker=_strict_types())
    return strict(schema)


def schema_field(parts: Any) -> str:
    """``cases[2].name`` of a place in a document (keys and list positions)."""
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out.lstrip(".")


def check_schema(data: Any, name: str, path: str | Path, *, part: Any = None,
                 field: str = "") -> None:
    """Check ``data``, read from ``path``, against the schema file ``name`` (or, with
    ``part``, against that sub-schema of it, e.g. ``{"$ref": "#/$defs/settings"}``). A
    mismatch raises :class:`~gradsched.errors.ConfigFileError` naming the file and the
    field (``field`` is the place of ``data`` in its file): a missing field is named
    itself, and a wrong value gets the schema's description of its field when it has one."""
    validator = schema_validator(name)
    if part is not None:
        validator = validator.evolve(schema=part)
    error = jsonschema.exceptions.best_match(validator.iter_errors(data))
    if error is None:
        return
    parts = [*([field] if field else []), *error.absolute_path]
    message, missing = _schema_message(error)
    raise ConfigFileError(message, path=path, field=schema_field([*parts, *missing]) or None)


def _schema_message(error: Any) -> tuple[str, list[str]]:
    """The message of a schema violation, and the missing field it is about (if any)."""
    instance = error.instance if isinstance(error.instance, dict) else {}
    if error.validator == "required":
        missing = [n for n in error.validator_value if n not in instance][:1]
        return "missing (a required field)", missing
    known = error.schema.get("properties") if isinstance(error.schema, dict) else None
    if error.validator == "additionalProperties" and isinstance(known, dict):
        unknown = [n for n in instance if n not in known][:1]
        return f"unknown field; known: {', '.join(sorted(known))}", unknown
    alternatives = list(error.context or ())
    if error.validator in ("anyOf", "oneOf") and alternatives and all(
            alt.validator == "required" for alt in alternatives):
        names = [n for alt in alternatives for n in alt.validator_value if n not in instance]
        return f"needs {' or '.join(repr(n) for n in names)}", []
    description = error.schema.get("description") if isinstance(error.schema, dict) else None
    if description and error.absolute_path and error.validator in (
            "oneOf", "anyOf", "type", "enum", "pattern", "minLength"):
        return f"{error.message} (expected {' '.join(description.split())})", []
    return error.message, []
