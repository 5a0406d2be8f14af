"""Parameter names and sizes: from the trace's AccumulateGrad shapes or a parameter table
(package docstring, item 7)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from gradsched.errors import InputError
from gradsched.traces.importers.kineto.comm_meta import DTYPE_BYTES


def read_param_table(path: str | Path) -> pd.DataFrame:
    """A parameter table: ``name``, ``numel`` (and optionally ``bytes``) per row, in forward
    order (a compute trace of the same model is one)."""
    path = Path(path)
    if not path.is_file():
        raise InputError("parameter table not found", path=path)
    try:
        table = pd.read_csv(path)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise InputError(f"not a CSV table: {exc}", path=path) from None
    for column in ("name", "numel"):
        if column not in table.columns:
            raise InputError(f"no '{column}' column", path=path, row=0, field=column)
    numel = pd.to_numeric(table["numel"], errors="coerce")
    bad = np.flatnonzero(~(numel > 0).to_numpy())
    if bad.size:
        raise InputError("numel must be a positive integer", path=path,
                         row=int(bad[0]) + 1, line=int(bad[0]) + 2, field="numel")
    out = pd.DataFrame({"name": table["name"].astype(str), "numel": numel.astype(np.int64)})
    if "bytes" in table.columns:
        out["bytes"] = pd.to_numeric(table["bytes"], errors="coerce").astype("Int64")
    return out


def param_sizes(frame: pd.DataFrame, table: pd.DataFrame | None, label: str, table_path: str | None
           ) -> tuple[list[str], list[int], list[int], str]:
    """Names, element counts, bytes of the rows and where they came from."""
    n = len(frame)
    from_trace = frame["trace_numel"].notna().all()
    if table is not None and len(table) != n:
        raise InputError(f"the parameter table has {len(table)} rows, the trace's step has "
                         f"{n} gradients", path=table_path, field="name")
    if table is not None and from_trace:
        for i, (mine, theirs) in enumerate(zip(frame["trace_numel"], table["numel"],
                                               strict=True)):
            if int(mine) != int(theirs):
                raise InputError(f"row {table['name'].iloc[i]!r} has {theirs} elements, the "
                                 f"trace's gradient {i} (forward order) has {int(mine)}",
                                 path=table_path, row=i + 1, line=i + 2, field="numel")
    if table is None and not from_trace:
        raise InputError("the trace records no parameter shapes (no 'Input Dims' on "
                         "AccumulateGrad; profile with record_shapes=True) and no parameter "
                         "table was given (params)", path=label, field="params")
    if table is not None:
        numel = [int(v) for v in table["numel"]]
        names = list(table["name"])
        if "bytes" in table.columns and table["bytes"].notna().all():
            nbytes = [int(v) for v in table["bytes"]]
        else:
            nbytes = [v * _elem(frame, i) for i, v in enumerate(numel)]
        where = ("names and sizes from the parameter table, checked row by row against the "
                 "trace's AccumulateGrad shapes" if from_trace else
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
