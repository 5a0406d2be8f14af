"""Strict CSV parsing against a column dictionary. No silent coercion.

Every cell is read as text and converted explicitly, so a bad cell is reported
with its file, data row (1-based; the header is line 1, data row r is line r+1)
and column.
"""

from __future__ import annotations

import csv
import io
import math
import re
from pathlib import Path
from typing import Any

import pandas as pd

from gradsched.errors import InputError
from gradsched.io import read_text
from gradsched.limits import MAX_BYTES, MAX_RANKS, MAX_SECONDS
from gradsched.traces.columns import Column

_INT_LIMIT = 2**62
"""Largest magnitude of an integer cell: sums of such cells stay inside int64."""

UNIT_MAXIMUM: dict[str, float] = {"s": MAX_SECONDS, "bytes": MAX_BYTES,
                                  "elements": MAX_BYTES, "ranks": MAX_RANKS,
                                  "nodes": MAX_RANKS}
"""Upper bound of a number by its column's unit (without it a 1e300 s layer or an
8e18-byte tensor would pass validation and overflow the sums of the replay)."""

_INT_TEXT = re.compile(r"[+-]?[0-9]+", re.ASCII)
_FLOAT_TEXT = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?"
                         r"|[+-]?(nan|inf|infinity)", re.ASCII | re.IGNORECASE)
"""The only spellings of numbers a cell may hold: ASCII digits, no ``_`` separators
(``int``/``float`` would read ``1_6`` as 16 and full-width digits as ASCII ones: text that
another CSV reader takes for a string). ``nan``/``inf`` match so that they are refused as
not finite, by name."""



def strict_float(text: str) -> float:
    """``float(text)`` for the spellings of :data:`_FLOAT_TEXT` only (``ValueError`` for
    ``1_0``, full-width digits, surrounding spaces): the number parser of the importers."""
    if not _FLOAT_TEXT.fullmatch(text):
        raise ValueError(f"not a number: {text!r}")
    return float(text)


_TRUE = {"1", "true", "True", "TRUE"}
_FALSE = {"0", "false", "False", "FALSE"}


def read_csv_text(path: str | Path) -> pd.DataFrame:
    """Read a CSV with every cell as a string (empty cells stay empty strings)."""
    path = Path(path)
    if not path.is_file():
        raise InputError("file not found", path=path)
    text = read_text(path)  # unreadable or not UTF-8: an InputError naming the file
    _check_cell_counts(text, path)
    try:
        frame = pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False,
                            skipinitialspace=False)
    except pd.errors.EmptyDataError as exc:
        raise InputError("file is empty (no header)", path=path) from exc
    except pd.errors.ParserError as exc:
        raise InputError(f"not a well-formed CSV: {exc}", path=path) from exc
    if frame.empty:
        raise InputError("no data rows", path=path)
    return frame


def _check_cell_counts(text: str, path: Path) -> None:
    """Every row has as many cells as the header: pandas would read a first row with one
    cell more as an index column and shift every field by one (a misleading error)."""
    rows = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(rows, None)
        if header is None:
            return
        for number, row in enumerate(rows, start=1):
            if row and len(row) != len(header):
                line = rows.line_num
                raise InputError(f"{len(row)} cells, but the header has {len(header)}",
                                 path=path, line=line, row=number)
    except csv.Error as exc:  # a bare carriage return inside a cell, a NUL byte
        raise InputError(f"not a well-formed CSV: {exc}", path=path,
                         line=rows.line_num or None) from None


def check_header(frame: pd.DataFrame, columns: tuple[Column, ...], path: str | Path) -> None:
    """Reject missing required columns and unknown columns."""
    known = {c.name for c in columns}
    for col in columns:
        if col.required and col.name not in frame.columns:
            raise InputError("required column is missing", path=path, line=1, field=col.name)
    for name in frame.columns:
        if name not in known:
            raise InputError(
                "unknown column (see traces/README.md for the column dictionary)",
                path=path, line=1, field=str(name),
            )
    dupes = [c for c in frame.columns if str(c).endswith(".1")]
    if dupes:
        raise InputError("duplicate column", path=path, line=1, field=dupes[0][:-2])


def _text_cell(raw: str, col: Column, where: dict[str, Any]) -> str:
    """A text cell: no NUL byte (the csv module reads one; no name or label holds one, and
    a name cut at it in C code would be another name), one of the column's choices."""
    if "\x00" in raw:
        raise InputError(f"a NUL byte (offset {raw.index(chr(0))}) in a text cell", **where)
    if col.choices and raw not in col.choices:
        raise InputError(f"{raw!r} is not one of {', '.join(col.choices)}", **where)
    return raw


def _parse_cell(text: str, col: Column, path: str | Path, row: int) -> object:
    where = {"path": path, "row": row, "line": row + 1, "field": col.name}
    raw = text.strip()
    if raw != text:
        raise InputError(f"value {text!r} has surrounding spaces", **where)
    if raw == "":
        raise InputError("empty value", **where)
    if col.kind == "str":
        return _text_cell(raw, col, where)
    if col.kind == "bool":
        if raw in _TRUE:
            return True
        if raw in _FALSE:
            return False
        raise InputError(f"{raw!r} is not a boolean (use 0 or 1)", **where)
    if col.kind == "int":
        if not _INT_TEXT.fullmatch(raw):
            raise InputError(f"{raw!r} is not an integer (ASCII digits only, no '_')",
                             **where)
        number: float = int(raw)
    else:
        if not _FLOAT_TEXT.fullmatch(raw):
            raise InputError(f"{raw!r} is not a number (ASCII digits only, no '_')", **where)
        number = float(raw)
        if not math.isfinite(number):
            raise InputError(f"{raw!r} is not a finite number", **where)
    maximum = UNIT_MAXIMUM.get(col.unit)
    if maximum is not None and number > maximum:
        raise InputError(f"{raw} {col.unit} is beyond the physical range (at most "
                         f"{maximum:g} {col.unit})", **where)
    if abs(number) > _INT_LIMIT:
        raise InputError(f"{raw} is too large (|value| <= 2**62)", **where)
    if col.positive and number <= 0:
        raise InputError(f"{raw} must be greater than zero", **where)
    if col.minimum is not None and number < col.minimum:
        raise InputError(f"{raw} must be at least {col.minimum:g}", **where)
    return number


_ASCII_SPACES = "".join(c for c in map(chr, range(128)) if c.isspace())
"""What ``int``/``float`` strip from a cell, in ASCII."""


def _valid_column(cells: list[str], col: Column) -> list[object] | None:
    """The values :func:`_parse_cell` gives the cells of ``col`` when every one is valid,
    checked a column at a time (one regular expression over the joined column, C-level
    ``map``, ``min`` and ``max``); ``None`` when some cell is not, for the per-cell parse to
    name it. Calling :func:`_parse_cell` per cell took 90 % of loading a 45k-tensor trace.

    A number column is valid text when it is ASCII without ``_`` or white space and ``int``
    (``float``) reads every cell: ``int``/``float`` read exactly :data:`_INT_TEXT`
    (:data:`_FLOAT_TEXT`) once ``_`` separators, non-ASCII digits and surrounding white
    space are ruled out (Python's grammar of ``int``/``float`` literals;
    tests/traces/test_validate_columns.py checks the two verdicts agree on random text)."""
    if "" in cells:
        return None
    if col.kind == "str":
        if list(map(str.strip, cells)) != cells or any("\x00" in c for c in cells):
            return None  # the per-cell parse names a NUL byte (:func:`_text_cell`)
        if col.choices and not set(cells) <= set(col.choices):
            return None
        return list(cells)
    if col.kind == "bool":
        if not set(cells) <= _TRUE | _FALSE:
            return None
        return list(map(_TRUE.__contains__, cells))
    joined = "".join(cells)
    if not joined.isascii() or "_" in joined or any(c in joined for c in _ASCII_SPACES):
        return None
    try:
        numbers: list[float] = list(map(int if col.kind == "int" else float, cells))
    except ValueError:
        return None
    if col.kind == "float" and not all(map(math.isfinite, numbers)):
        return None
    low, high = min(numbers), max(numbers)
    maximum = UNIT_MAXIMUM.get(col.unit)
    if ((maximum is not None and high > maximum) or max(high, -low) > _INT_LIMIT
            or (col.positive and low <= 0) or (col.minimum is not None and low < col.minimum)):
        return None
    return list(numbers)


def parse_frame(
    frame: pd.DataFrame, columns: tuple[Column, ...], path: str | Path
) -> pd.DataFrame:
    """Convert a string frame to typed columns, raising on the first bad cell."""
    check_header(frame, columns, path)
    typed: dict[str, list[object]] = {}
    for col in columns:
        if col.name not in frame.columns:
            continue
        cells = frame[col.name].tolist()
        values = _valid_column(cells, col)
        if values is None:  # a bad cell: the per-cell parse names the first one
            values = [_parse_cell(cell, col, path, i + 1) for i, cell in enumerate(cells)]
        typed[col.name] = values
    out = pd.DataFrame(typed)
    for col in columns:
        if col.name not in out.columns:
            continue
        dtype = {"str": "object", "int": "int64", "float": "float64", "bool": "bool"}[col.kind]
        out[col.name] = out[col.name].astype(dtype)
    return out


def check_frame_values(
    frame: pd.DataFrame, columns: tuple[Column, ...], path: str | Path
) -> pd.DataFrame:
    """Validate an in-memory typed frame (before saving) the same way as a loaded one."""
    as_text = frame.copy()
    for name in as_text.columns:
        series = as_text[name]
        if series.dtype == bool:
            as_text[name] = series.map(lambda v: "1" if v else "0")
        elif pd.api.types.is_float_dtype(series):
            as_text[name] = series.map(repr)
        else:
            as_text[name] = series.map(str)
    return parse_frame(as_text, columns, path)
