"""The overlap-slowdown table: per GPU generation, the compute slowdown beside NCCL kernels
fitted on some public Kineto traces, and the error of the predicted overlapped kernel times
on those (fit) and on the others (validation), beside no effect and the zero-parameter SM-share
prediction (``gradsched study overlap-slowdown``,
:mod:`gradsched.costmodel.overlap_slowdown`). Formatting only."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from gradsched.intermediates import read_csv_frame
from gradsched.report.formatting import fmt
from gradsched.report.latex import write_table

READ_COLUMNS = ("generation", "role", "traces", "slowdown")
"""The columns of the summary CSV the table needs (the error columns are optional: the
rows of borrowed generations have none)."""


def _pct(value: object) -> str:
    return "" if pd.isna(value) else fmt(100 * float(value), 1)  # type: ignore[arg-type]


def _names(traces: object) -> str:
    """The trace files' names (not their folders), with the half used."""
    if pd.isna(traces) or not str(traces):
        return ""
    return "; ".join(Path(t.split(" (")[0]).name + (" (" + t.split(" (")[1] if " (" in t
                                                     else "")
                     for t in str(traces).split("; "))


def overlap_slowdown_table(frame: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """Rows of the table (strings) and its column alignment."""
    rows = []
    for rec in frame.to_dict("records"):
        groups = rec.get("groups")
        rows.append({
            "GPU": rec["generation"], "traces": rec["role"],
            "files": _names(rec.get("traces")),
            "kernel groups": "" if pd.isna(groups) else str(int(groups)),
            "measured s": fmt(rec.get("measured_slowdown"), 3)
            if not pd.isna(rec.get("measured_slowdown")) else "",
            "model s": fmt(rec["slowdown"], 3),
            "SM-share s": fmt(rec.get("physical_slowdown"), 3)
            if not pd.isna(rec.get("physical_slowdown")) else "",
            "error, model (%)": _pct(rec.get("error_fitted")),
            "error, none (%)": _pct(rec.get("error_no_effect")),
            "error, SM share (%)": _pct(rec.get("error_physical")),
        })
    return pd.DataFrame(rows), "lllrrrrrrr"


def write_overlap_slowdown_table(csv: str | Path, tex: str | Path, md: str | Path,
                                 title: str = "") -> pd.DataFrame:
    """The table of a summary CSV written by ``gradsched study overlap-slowdown``."""
    frame = read_csv_frame(csv, required=READ_COLUMNS)
    table, align = overlap_slowdown_table(frame)
    write_table(table, tex, md, align=align, title=title)
    return table
