"""The workflow's intermediate CSVs, checked where they are read (``docs/errors.md``,
"Intermediates").

A replay result, a collected replay table, the fit table or a re-execution's measurements
edited by hand, cut short by a full disk or written by a broken run must stop the report,
not flow into its tables and figures. :func:`read_intermediate` reads a CSV and checks

* its shape: the last row ends with a newline (a file cut mid-row is refused) and every row
  has as many fields as the header;
* every :class:`Spec` whose columns the file has (:data:`SPECS`, recognised by their
  columns): each required cell present, of its type (text, integer, number, ``True``/
  ``False``), finite, and within its range (times non-negative);
* the physical relations between columns: an iteration is never shorter than its compute
  time or its lower bound, a median lies between its 10th and 90th percentiles.

Every refusal is an :class:`~gradsched.errors.InputError` naming the file, the data row
(1-based, the header is row 0) and the field. The checks never change a value: a frame that
passes is exactly the one ``pandas.read_csv`` returns with the same options.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from gradsched.errors import InputError
from gradsched.io import read_text

TEXT, INT, REAL, BOOL = "text", "integer", "number", "boolean"

REL_TOL = 1e-6
"""Relative slack of the physical relations: the CSVs hold 9 significant digits."""


@dataclass(frozen=True)
class Column:
    """One column: its type, whether a cell may be empty, and its smallest value."""

    name: str
    kind: str = REAL
    optional: bool = False
    minimum: float | None = None


@dataclass(frozen=True)
class Spec:
    """An intermediate's columns and the relations between them: ``at_least`` pairs
    ``(a, b)`` require ``a >= b`` in every row (both present)."""

    what: str
    columns: tuple[Column, ...]
    at_least: tuple[tuple[str, str], ...] = ()

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)


def _seconds(*names: str, optional: bool = False) -> tuple[Column, ...]:
    return tuple(Column(n, REAL, optional, 0.0) for n in names)


REPLAY = Spec("replay result", (
    Column("algorithm", TEXT), Column("world_size", INT, minimum=1),
    *_seconds("iteration_s", "compute_s", "exposed_comm_s"),
    Column("n_collectives", INT, minimum=0), Column("n_buckets", INT, minimum=0),
    *_seconds("comm_busy_s", "lower_bound_s"), Column("gap_to_lb_pct", REAL),
    Column("knobs", TEXT),
    Column("comm_below_range_pct", REAL, optional=True, minimum=0.0),
    Column("comm_above_range_pct", REAL, optional=True, minimum=0.0),
    Column("world_size_basis", TEXT, optional=True),
    Column("compute_bound_by", TEXT, optional=True),
    Column("compute_spread", REAL, optional=True, minimum=1.0),
), at_least=(("iteration_s", "compute_s"), ("iteration_s", "lower_bound_s"),
             ("iteration_s", "exposed_comm_s")))
"""A per-case replay CSV (``gradsched replay -o``; ``results/replay/**.csv``)."""

COLLECTED = Spec("collected replay table", (
    Column("trace", TEXT), Column("network", TEXT), Column("comm_file", TEXT),
    Column("nodes", INT, minimum=1), Column("family", TEXT, optional=True),
    Column("pairing", TEXT), Column("extrapolated", BOOL, optional=True),
))
"""The case columns ``gradsched report collect`` adds (its rows are replay results too)."""

FITS = Spec("fit table", (
    Column("trace", TEXT), Column("collective", TEXT), Column("backend", TEXT),
    Column("world_size", INT, minimum=1), Column("nodes", INT, minimum=1),
    Column("model", TEXT), Column("n_sizes", INT, minimum=1),
    Column("min_bytes", INT, minimum=1), Column("max_bytes", INT, minimum=1),
    Column("train_mape_pct", REAL, minimum=0.0),
    Column("heldout_mape_pct", REAL, optional=True, minimum=0.0),
    Column("heldout_max_ape_pct", REAL, optional=True, minimum=0.0),
    Column("alpha_s", REAL, optional=True), Column("beta_s_per_byte", REAL, optional=True),
    Column("n_segments", INT, optional=True, minimum=1),
), at_least=(("max_bytes", "min_bytes"), ("heldout_max_ape_pct", "heldout_mape_pct")))
"""``gradsched fit --table`` (``results/fit/fits.csv``, ``results/fit/files/*.csv``)."""

MEASURED = Spec("re-execution measurements", (
    Column("case", TEXT), Column("bandwidth", TEXT), Column("world_size", INT, minimum=1),
    Column("algorithm", TEXT), Column("kind", TEXT),
    *_seconds("predicted_s", "predicted_interference_s", "predicted_raw_s"),
    *_seconds("measured_s", "measured_p10_s", "measured_p90_s"),
), at_least=(("measured_s", "measured_p10_s"), ("measured_p90_s", "measured_s")))
"""``reexec collect``'s ``measured.csv`` (the committed ``paper/data/reexec/measured.csv``):
the median of the measured iterations lies between their 10th and 90th percentiles."""

ITERATIONS = Spec("re-execution iterations", (
    Column("case", TEXT), Column("item", TEXT), Column("round", INT, minimum=0),
    *_seconds("iteration_s"),
))
"""The re-execution's per-iteration times (``iterations.csv``)."""

ARCHITECTURE_REPLAY = Spec("architecture replay", (
    Column("algorithm", TEXT), Column("world_size", INT, minimum=1),
    *_seconds("iteration_s", "exposed_comm_s"),
), at_least=(("iteration_s", "exposed_comm_s"),))
"""The PS and topology replays (``results/ps/replay.csv``, ``results/topology/replay.csv``)."""

SPECS: tuple[Spec, ...] = (REPLAY, COLLECTED, FITS, MEASURED, ITERATIONS, ARCHITECTURE_REPLAY)
"""Every spec :func:`check_frame` applies to a frame that has all of its columns."""


def check_shape(path: str | Path, text: str, *, comment: str | None = None) -> None:
    """A CSV cut short is refused: its last row must end with a newline, and every row
    must have the header's number of fields."""
    if not text.strip():
        return
    if not text.endswith("\n"):
        line = text.count("\n") + 1
        raise InputError("truncated: the last row does not end with a newline (the file "
                         "was cut short); re-run the step that wrote it", path=path, line=line)
    lines = [ln for ln in text.splitlines(keepends=True)
             if not (comment and ln.startswith(comment))]
    rows = csv.reader(io.StringIO("".join(lines)))
    header = next(rows, None)
    if header is None:
        return
    for row, fields in enumerate(rows, start=1):
        if fields and len(fields) != len(header):
            raise InputError(f"{len(fields)} fields where the header has {len(header)} "
                             "(a row cut short or a stray comma)", path=path, row=row)


def _show(value: Any) -> str:
    """A cell as the file holds it: text quoted, numbers plain (no numpy repr)."""
    if isinstance(value, str):
        return repr(value)
    try:
        return f"{float(value):.10g}"
    except (TypeError, ValueError):
        return repr(value)


def _bad(path: str | Path, row: int, field: str, message: str) -> InputError:
    return InputError(message, path=path, row=row, field=field)


def _check_column(frame: pd.DataFrame, column: Column, path: str | Path,
                  what: str) -> pd.Series | None:
    """The column's numbers (None for text); refuses a missing, mistyped or out-of-range
    cell."""
    values = frame[column.name]
    missing = values.isna() | values.map(lambda v: isinstance(v, str) and not v.strip())
    for index in values.index[missing]:
        if not column.optional:
            raise _bad(path, int(index) + 1, column.name,
                       f"missing value (every row of a {what} has one)")
    if column.kind == TEXT:
        return None
    if column.kind == BOOL:
        for index, value in values[~missing].items():
            if str(value).strip().lower() not in ("true", "false", "1", "0"):
                raise _bad(path, int(index) + 1, column.name,
                           f"{_show(value)} is not True or False")
        return None
    numbers = pd.to_numeric(values, errors="coerce")
    for index in values.index[~missing]:
        value, number = values[index], numbers[index]
        row = int(index) + 1
        if isinstance(value, bool) or number != number:
            article = "an" if column.kind[0] in "aeiou" else "a"
            raise _bad(path, row, column.name, f"{_show(value)} is not {article} {column.kind}")
        if not math.isfinite(number):
            raise _bad(path, row, column.name, f"{_show(value)} is not finite")
        if column.kind == INT and number != int(number):
            raise _bad(path, row, column.name, f"{_show(value)} is not an integer")
        if column.minimum is not None and number < column.minimum:
            raise _bad(path, row, column.name,
                       f"{_show(value)} is below {column.minimum:g}, impossible in a {what}")
    return numbers


def _check_spec(frame: pd.DataFrame, spec: Spec, path: str | Path) -> None:
    numbers = {c.name: _check_column(frame, c, path, spec.what) for c in spec.columns}
    for big, small in spec.at_least:
        a, b = numbers[big], numbers[small]
        if a is None or b is None:
            continue
        short = (a < b - REL_TOL * b.abs()) & a.notna() & b.notna()
        for index in a.index[short]:
            raise _bad(path, int(index) + 1, big,
                       f"{_show(frame.at[index, big])} is below {small} = "
                       f"{_show(frame.at[index, small])} in the same row: impossible in a "
                       f"{spec.what} (edited or corrupted?)")


def applicable(frame: pd.DataFrame, specs: Iterable[Spec] = SPECS) -> list[Spec]:
    """The specs whose every column the frame has."""
    return [s for s in specs if set(s.names) <= set(frame.columns)]


def check_frame(frame: pd.DataFrame, path: str | Path,
                specs: Sequence[Spec] | None = None) -> pd.DataFrame:
    """``frame`` (read from ``path``) unchanged when it passes ``specs`` (default: every
    spec whose columns it has); an InputError naming file, row and field otherwise."""
    if frame.empty:
        return frame
    frame_index = frame.reset_index(drop=True) if not frame.index.equals(
        pd.RangeIndex(len(frame))) else frame
    for spec in applicable(frame_index) if specs is None else specs:
        missing = [n for n in spec.names if n not in frame_index.columns]
        if missing:
            raise InputError(f"not a {spec.what}: missing column(s) {', '.join(missing)}",
                             path=path)
        _check_spec(frame_index, spec, path)
    return frame


def read_csv_frame(path: str | Path, required: Sequence[str] = (),
                   **read_csv: Any) -> pd.DataFrame:
    """``pandas.read_csv(path, **read_csv)`` of the text :func:`gradsched.io.read_text`
    reads (the input gate): the size bound and the UTF-8 check apply and their errors name
    the file. The frame is the one ``pandas.read_csv(path, ...)`` returns (the same bytes,
    parsed the same way); pandas' own parse errors pass through unchanged. Unlike
    :func:`read_intermediate` nothing is checked beyond the ``required`` columns (an
    :class:`InputError` naming the file and the missing ones)."""
    frame = pd.read_csv(io.StringIO(read_text(path)), **read_csv)
    missing = [c for c in required if c not in frame.columns]
    if missing:
        raise InputError(f"missing column(s) {', '.join(missing)}", path=path)
    return frame


def read_intermediate(path: str | Path, specs: Sequence[Spec] | None = None, *,
                      empty_ok: bool = False, named_errors: bool = False,
                      **read_csv: Any) -> pd.DataFrame:
    """``pandas.read_csv(path, **read_csv)``, its shape and cells checked
    (:func:`check_shape`, :func:`check_frame`). ``empty_ok``: an empty file is an empty
    frame (a concatenation of nothing) instead of an error. ``named_errors``: an unreadable
    or non-UTF-8 file is an InputError (:func:`gradsched.io.read_text`), not the OS or
    decoding error. The same text read again with the same arguments in one process is not
    parsed and checked again: the caller gets a copy of the frame made before
    (:data:`READ_MEMO` kept; a batch of reports reads one result CSV per report)."""
    try:  # the input gate (size bound, UTF-8) either way
        text = read_text(path)
    except InputError as exc:
        # without named_errors a missing, unreadable or non-UTF-8 file fails as pandas
        # fails on it (the CLI names the file and exits 2); the size bound is the gate's
        if named_errors or not isinstance(exc.__cause__, OSError | UnicodeDecodeError):
            raise
        raise exc.__cause__ from None
    key = _memo_key(text, specs, empty_ok, read_csv)
    if key is not None and key in _READ:
        return _READ[key].copy()
    frame = _parse_checked(text, path, specs, empty_ok, read_csv)
    if key is not None:
        while len(_READ) >= READ_MEMO:
            _READ.pop(next(iter(_READ)))
        _READ[key] = frame.copy()
    return frame


READ_MEMO = 8
"""Checked frames :func:`read_intermediate` keeps (the latest texts read)."""
_READ: dict[tuple[Any, ...], pd.DataFrame] = {}


def _memo_key(text: str, specs: Sequence[Spec] | None, empty_ok: bool,
              read_csv: dict[str, Any]) -> tuple[Any, ...] | None:
    """What makes a parse the same parse (the frame does not depend on the path, which
    only errors name); None (not kept) where an argument is not plainly comparable."""
    if any(callable(v) for v in read_csv.values()):
        return None
    key = (text, None if specs is None else tuple(specs), empty_ok,
           tuple(sorted((k, repr(v)) for k, v in read_csv.items())))
    try:
        hash(key)
    except TypeError:
        return None
    return key


def _parse_checked(text: str, path: str | Path, specs: Sequence[Spec] | None,
                   empty_ok: bool, read_csv: dict[str, Any]) -> pd.DataFrame:
    """The frame of ``text`` (read from ``path``), checked (:func:`read_intermediate`)."""
    if not text.strip():
        if empty_ok:
            return pd.DataFrame()
        raise InputError("file is empty (no header)", path=path)
    check_shape(path, text, comment=read_csv.get("comment"))
    try:
        frame = pd.read_csv(io.StringIO(text), **read_csv)
    except pd.errors.ParserError as exc:
        raise InputError(f"not a well-formed CSV: {exc}", path=path) from exc
    return check_frame(frame, path, specs)
