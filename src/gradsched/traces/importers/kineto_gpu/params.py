"""Parameter names and sizes: from the trace's AccumulateGrad shapes or a parameter table
(package docstring, item 7).

A trace records each gradient's shape (``Input Dims`` of its AccumulateGrad, with
``record_shapes``) and the order autograd accumulated them in, but no parameter names. A
table's rows are matched to the trace's gradients (forward order), in this order of
preference:

1. row by row, when the sizes agree in that order (a table in forward order);
2. on ``ready_order``, when the table has that column (a compute trace of the same model
   does: its rows are in the capture's order, e.g. ``class_token`` last for ViT-B/16, but
   autograd accumulates in the same order in both), each pair's sizes checked;
3. by size, when every size the table and the trace hold occurs once.

Anything else is refused with the table's row and field: a size the trace lacks, a
``ready_order`` that is not the trace's, or two same-size rows that only the order could
tell apart. Without shapes in the trace the table is taken in forward order (only the row
count is checked).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd

from gradsched.errors import InputError
from gradsched.intermediates import read_csv_frame
from gradsched.traces.importers.kineto.comm_meta import DTYPE_BYTES

ROW_BY_ROW = "row by row"
BY_READY_ORDER = "on ready_order (the autograd accumulation order both record)"
BY_SIZE = "by size (every size occurs once)"


def read_param_table(path: str | Path) -> pd.DataFrame:
    """A parameter table: ``name``, ``numel`` (and optionally ``bytes`` and ``ready_order``)
    per row (a compute trace of the same model is one)."""
    path = Path(path)
    if not path.is_file():
        raise InputError("parameter table not found", path=path)
    try:
        table = read_csv_frame(path)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise InputError(f"not a CSV table: {exc}", path=path) from None
    for column in ("name", "numel"):
        if column not in table.columns:
            raise InputError(f"no '{column}' column", path=path, row=0, field=column)
    out = pd.DataFrame({"name": table["name"].astype(str),
                        "numel": _integers(table, "numel", path, minimum=1)})
    if "bytes" in table.columns:
        out["bytes"] = pd.to_numeric(table["bytes"], errors="coerce").astype("Int64")
    if "ready_order" in table.columns:
        out["ready_order"] = _integers(table, "ready_order", path, minimum=0)
    return out


def _integers(table: pd.DataFrame, column: str, path: Path, minimum: int) -> pd.Series:
    """``column`` as integers of at least ``minimum``; the first bad row is named."""
    values = pd.to_numeric(table[column], errors="coerce")
    ok = (values >= minimum) & (values == values.round())
    bad = np.flatnonzero(~ok.to_numpy())
    if bad.size:
        what = "a positive integer" if minimum == 1 else "an integer >= 0"
        raise InputError(f"{column} must be {what}", path=path, row=int(bad[0]) + 1,
                         line=int(bad[0]) + 2, field=column)
    return values.astype(np.int64)


def _table_error(message: str, table_path: str | None, j: int, field: str) -> InputError:
    return InputError(message, path=table_path, row=j + 1, line=j + 2, field=field)


def _by_ready_order(frame: pd.DataFrame, table: pd.DataFrame, table_path: str | None
                    ) -> list[int]:
    """Table row of each trace row, joined on ``ready_order``; each pair's sizes agree."""
    rows: dict[int, int] = {}
    known = set(int(r) for r in frame["ready_order"])
    for j, ready in enumerate(table["ready_order"]):
        if int(ready) not in known or int(ready) in rows:
            kind = "occurs twice" if int(ready) in rows else "is not one of the trace's"
            raise _table_error(f"ready_order {int(ready)} {kind} (the trace's step has "
                               f"ready_order 0..{len(frame) - 1})", table_path, j,
                               "ready_order")
        rows[int(ready)] = j
    order = [rows[int(r)] for r in frame["ready_order"]]
    for mine, j in zip(frame["trace_numel"], order, strict=True):
        theirs = int(table["numel"].iloc[j])
        if int(mine) != theirs:
            raise _table_error(
                f"row {table['name'].iloc[j]!r} (ready_order {int(table['ready_order'].iloc[j])})"
                f" has {theirs} elements, the trace's gradient with that ready_order has "
                f"{int(mine)}", table_path, j, "numel")
    return order


def _by_size(frame: pd.DataFrame, table: pd.DataFrame, table_path: str | None) -> list[int]:
    """Table row of each trace row, paired by size; every size must occur once. A size the
    trace lacks (or holds fewer times) is named before an ambiguous one."""
    mine = Counter(int(v) for v in frame["trace_numel"])
    sizes = [int(v) for v in table["numel"]]
    seen: Counter[int] = Counter()
    for j, numel in enumerate(sizes):
        seen[numel] += 1
        if seen[numel] > mine[numel]:
            held = f"only {mine[numel]} of" if mine[numel] else "none of"
            raise _table_error(f"row {table['name'].iloc[j]!r} has {numel} elements: {held} "
                               "the trace's gradients have that size", table_path, j, "numel")
    first: dict[int, int] = {}
    for j, numel in enumerate(sizes):
        if mine[numel] > 1:
            other = next(k for k in range(len(sizes)) if sizes[k] == numel and k != j)
            raise _table_error(
                f"row {table['name'].iloc[j]!r} has {numel} elements, as has row "
                f"{table['name'].iloc[other]!r} ({mine[numel]} gradients of the trace have "
                "that size), and the table is not in the trace's forward order: the trace "
                "records no parameter names, so same-size parameters cannot be told apart; "
                "give the table a ready_order column (a compute trace of the same model has "
                "one) or list it in forward order", table_path, j, "numel")
        first[numel] = j
    return [first[int(v)] for v in frame["trace_numel"]]


def match_table(frame: pd.DataFrame, table: pd.DataFrame, table_path: str | None
                ) -> tuple[list[int], str]:
    """For each trace row (forward order) the table row that names it, and how they were
    matched (see the module docstring)."""
    mine = [int(v) for v in frame["trace_numel"]]
    if mine == [int(v) for v in table["numel"]]:
        return list(range(len(frame))), ROW_BY_ROW
    if "ready_order" in table.columns:
        return _by_ready_order(frame, table, table_path), BY_READY_ORDER
    return _by_size(frame, table, table_path), BY_SIZE


def param_sizes(frame: pd.DataFrame, table: pd.DataFrame | None, label: str,
                table_path: str | None) -> tuple[list[str], list[int], list[int], str]:
    """Names, element counts, bytes of the rows and where they came from."""
    n = len(frame)
    from_trace = frame["trace_numel"].notna().all()
    if table is not None and len(table) != n:
        raise InputError(f"the parameter table has {len(table)} rows, the trace's step has "
                         f"{n} gradients", path=table_path, field="name")
    if table is None and not from_trace:
        raise InputError("the trace records no parameter shapes (no 'Input Dims' on "
                         "AccumulateGrad; profile with record_shapes=True) and no parameter "
                         "table was given (params)", path=label, field="params")
    if table is not None:
        order, how = (match_table(frame, table, table_path) if from_trace
                      else (list(range(n)), ROW_BY_ROW))
        rows = table.iloc[order].reset_index(drop=True)
        numel = [int(v) for v in rows["numel"]]
        names = list(rows["name"])
        if "bytes" in rows.columns and rows["bytes"].notna().all():
            nbytes = [int(v) for v in rows["bytes"]]
        else:
            nbytes = [v * _elem(frame, i) for i, v in enumerate(numel)]
        checked = ("checked row by row" if how == ROW_BY_ROW
                   else f"matched {how} and checked")
        where = (f"names and sizes from the parameter table, {checked} against the trace's "
                 "AccumulateGrad shapes" if from_trace else
                 "names and sizes from the parameter table (the trace records no shapes; "
                 "only the gradient count is checked against it)")
        return names, numel, nbytes, where
    numel = [int(v) for v in frame["trace_numel"]]
    names = [f"layer{int(layer):03d}.p{k}" for layer, k in
             zip(frame["layer"], frame.groupby("layer").cumcount(), strict=True)]
    nbytes = [v * _elem(frame, i) for i, v in enumerate(numel)]
    return names, numel, nbytes, ("sizes from the AccumulateGrad ops' Input Dims; names are "
                                  "synthetic (layerNNN.pK: K-th parameter of the forward op)")


def _elem(frame: pd.DataFrame, i: int) -> int:
    """Element size of row ``i`` from the AccumulateGrad's Input type (fp32 if absent)."""
    return DTYPE_BYTES.get(str(frame["trace_dtype"].iloc[i]), 4)
