"""The physics of what gradsched reads back from files it wrote itself: a rank's result,
a measured case's ``meta.json``, an emulated cluster's record.

Such a file passes the input gate like any input (:func:`gradsched.io.read_json`: the size
bound and ``$GRADSCHED_MAX_INPUT_BYTES``, UTF-8, the one JSON parser), and then its values
are checked where they are read, with the ranges of :mod:`gradsched.limits`: times finite
and between 0 and :data:`~gradsched.limits.MAX_SECONDS`, counts and byte sizes integers
within int64 (at most 2^62, so that sums of a few cannot wrap), ranks inside the world,
indices of steps or items that exist. A file cut short, edited or corrupted ends with one
:class:`~gradsched.errors.InputError` naming the file and the field (``runs[3].times[2]``),
never a traceback deep in the code that uses the value and never a value taken silently.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gradsched.errors import InputError
from gradsched.limits import MAX_SECONDS, in_range, is_real
from gradsched.schema_check import schema_field

MAX_COUNT = 2**62
"""Largest count or byte size read back (int64 sums of a few cannot wrap)."""


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:60] + "..."


def field_name(*parts: Any) -> str:
    """``runs[3].times[2]`` of the keys and list positions ``parts``."""
    return schema_field([p for p in parts if p != ""])


def finite_tree(doc: Any, path: str | Path, field: str = "") -> None:
    """Refuse a NaN or an infinity anywhere in the parsed JSON ``doc`` (Python's JSON
    parser reads ``NaN`` and ``Infinity``, which are not JSON), naming the field."""
    stack: list[tuple[str, Any]] = [(field, doc)]
    while stack:
        where, value = stack.pop()
        if isinstance(value, float) and not math.isfinite(value):
            raise InputError(f"{value!r} is not a finite number", path=path,
                             field=where or None)
        if isinstance(value, Mapping):
            stack += [(field_name(where, str(k)), v) for k, v in value.items()]
        elif isinstance(value, list):
            stack += [(f"{where}[{i}]", v) for i, v in enumerate(value)]


def mapping(value: Any, path: str | Path, field: str) -> Mapping[str, Any]:
    """``value`` when it is a JSON object, else an :class:`InputError` naming the field."""
    if not isinstance(value, Mapping):
        raise InputError(f"expected an object, got {_shown(value)}", path=path, field=field)
    return value


def sequence(value: Any, path: str | Path, field: str, length: int | None = None) -> list[Any]:
    """``value`` when it is a JSON array (of ``length`` items when given)."""
    if not isinstance(value, list):
        raise InputError(f"expected an array, got {_shown(value)}", path=path, field=field)
    if length is not None and len(value) != length:
        raise InputError(f"{len(value)} items where {length} belong (a file cut short or "
                         "edited?)", path=path, field=field)
    return value


def seconds(value: Any, path: str | Path, field: str, *, optional: bool = False
            ) -> float | None:
    """A duration: a number from 0 to :data:`MAX_SECONDS` (None allowed when
    ``optional``)."""
    if value is None and optional:
        return None
    if not is_real(value) or not in_range(float(value), 0.0, MAX_SECONDS):
        raise InputError(f"{_shown(value)} is not a time in seconds (a finite number from 0 "
                         f"to {MAX_SECONDS:g})", path=path, field=field)
    return float(value)


def number(value: Any, path: str | Path, field: str, *, low: float = 0.0,
           high: float = MAX_SECONDS, optional: bool = False) -> float | None:
    """A finite number in ``[low, high]`` (a load average, a monotonic clock reading)."""
    if value is None and optional:
        return None
    if not is_real(value) or not in_range(float(value), low, high):
        raise InputError(f"{_shown(value)} is not a finite number from {low:g} to {high:g}",
                         path=path, field=field)
    return float(value)


def count(value: Any, path: str | Path, field: str, *, low: int = 0, high: int = MAX_COUNT,
          optional: bool = False) -> int | None:
    """An integer (not a boolean, not ``3.0``) in ``[low, high]``: a count, a byte size, an
    index of something that exists (``high`` = how many there are, less one)."""
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InputError(f"{_shown(value)} is not an integer from {low} to {high}",
                         path=path, field=field)
    return value


def rank_in(value: Any, world: int, path: str | Path, field: str) -> int:
    """A rank of a world of ``world`` ranks: an integer from 0 to ``world - 1``."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < world:
        raise InputError(f"{_shown(value)} is not a rank of a world of {world}", path=path,
                         field=field)
    return value


def text(value: Any, path: str | Path, field: str, *, optional: bool = False) -> str | None:
    """A JSON string."""
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise InputError(f"expected a string, got {_shown(value)}", path=path, field=field)
    return value


__all__ = ["MAX_COUNT", "count", "field_name", "finite_tree", "mapping", "number", "rank_in",
           "seconds", "sequence", "text"]
