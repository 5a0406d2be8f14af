"""A measured case folder's ``meta.json``, read back: by ``reexec collect`` (the case, the
settings, which item each row is) and by the sharded re-execution (the iterations per
round of folders written before the ``round`` column).

The file passes the input gate (:func:`gradsched.io.read_json`: size bound, UTF-8, one
parser, an object) and then the checks of :mod:`gradsched.readback`: no NaN or infinity
anywhere, every time (a top-level ``*_s``) a duration from 0 to
:data:`~gradsched.limits.MAX_SECONDS`, load averages and busy cores finite and not
negative, counts positive integers; for an all-reduce case the ``case`` mapping matches the
configuration's schema (``workflow/schemas/reexec.schema.yaml``), every label of
``item_of`` is a plain name (it names a plan file) and every ``ddp_rebuilt_buckets``
record says true or false. A meta.json cut short or edited ends with one
:class:`~gradsched.errors.InputError` naming the file and the field.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gradsched.errors import InputError
from gradsched.io import read_json
from gradsched.limits import MAX_RANKS
from gradsched.names import plain_name
from gradsched.readback import count, finite_tree, mapping, number, seconds, sequence, text
from gradsched.reexec.config import SCHEMA, Case, case_of
from gradsched.schema_check import check_schema

META = "meta.json"
CASE_SCHEMA = {"$ref": "#/$defs/case"}
COUNTS = ("iters", "rounds", "threads_per_rank")
"""Top-level counts (at least 1) of the sharded re-execution's meta.json."""
MAX_LOAD = 1e6
"""Largest load average taken as read."""


def read_meta(folder: str | Path) -> dict[str, Any]:
    """The ``meta.json`` of the measured case folder ``folder``, checked (module
    docstring); a folder without one is not a measured case folder."""
    path = Path(folder) / META
    if not path.is_file():
        raise InputError("no meta.json: not a measured case folder", path=folder)
    meta = read_json(path)
    finite_tree(meta, path)
    for key, value in meta.items():
        if key.endswith("_s"):
            seconds(value, path, key)
        elif key.startswith("load_average_"):
            for i, load in enumerate(sequence(value, path, key)):
                number(load, path, f"{key}[{i}]", high=MAX_LOAD)
    number(meta.get("busy_cores_before"), path, "busy_cores_before", high=MAX_RANKS,
           optional=True)
    for key in COUNTS:
        if key in meta:
            count(meta[key], path, key, low=1)
    if "warmup" in meta:
        count(meta["warmup"], path, "warmup")
    return meta


def case_meta(folder: str | Path) -> tuple[dict[str, Any], Case]:
    """``(meta, case)`` of an all-reduce case folder (``reexec run``): :func:`read_meta`
    plus the case, the items and the rebuilt-bucket records."""
    path = Path(folder) / META
    meta = read_meta(folder)
    raw = mapping(meta.get("case"), path, "case")
    # asdict() writes the defaults the configuration leaves out as null
    check_schema({k: v for k, v in raw.items() if v is not None}, SCHEMA, path,
                 part=CASE_SCHEMA, field="case")
    plain_name(raw.get("name"), path=path, field="case.name")  # written by every run
    mapping(meta.get("settings"), path, "settings")  # checked by parse_settings
    for label, item in mapping(meta.get("item_of"), path, "item_of").items():
        plain_name(label, path=path, field="item_of")
        text(item, path, f"item_of.{label}")
    rebuilt = meta.get("ddp_rebuilt_buckets") or {}
    for label, record in mapping(rebuilt, path, "ddp_rebuilt_buckets").items():
        match = mapping(record, path, f"ddp_rebuilt_buckets.{label}").get("buckets_match_plan")
        if not isinstance(match, bool):
            raise InputError(f"{match!r} is not true or false", path=path,
                             field=f"ddp_rebuilt_buckets.{label}.buckets_match_plan")
    return meta, case_of(raw)


__all__ = ["CASE_SCHEMA", "COUNTS", "META", "case_meta", "read_meta"]
