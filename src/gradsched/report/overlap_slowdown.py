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
from gradsched.report.latex import NA, camel, number, write_macros, write_table
from gradsched.traces.overlap_kernels import (
    MAX_REFERENCE_SPREAD,
    MIN_OVERLAP_FRACTION,
    MIN_REFERENCE_S,
    MIN_REFERENCES,
)

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


MACRO_FIELDS = {
    "Groups": ("groups", None, 0), "MeasuredSlowdown": ("measured_slowdown", None, 3),
    "ErrorPct": ("error_fitted", 100.0, 1), "NoEffectErrorPct": ("error_no_effect", 100.0, 1),
    "SmShareErrorPct": ("error_physical", 100.0, 1),
}
"""Macro suffix -> (summary column, scale, decimals), per generation and role."""

MACRO_GENERATIONS = ("A100", "V100")
"""The generations the paper quotes (both measured): their macros exist, ``n/a`` without
data."""


def overlap_macros(frame: pd.DataFrame | None) -> dict[str, str]:
    """``Overlap<Gen>Slowdown``, ``Overlap<Gen><Role><Quantity>`` and the method's
    thresholds (``OverlapMinReferenceUs``, ``OverlapMaxReferenceSpread``,
    ``OverlapMinFraction``, ``OverlapMinReferences``) for the paper's prose (prefix ``gs``
    added by :func:`gradsched.report.latex.render`); ``n/a`` where the summary has no row."""
    out = {"OverlapMinReferenceUs": number(MIN_REFERENCE_S * 1e6, 0),
           "OverlapMaxReferenceSpread": number(MAX_REFERENCE_SPREAD, 1),
           "OverlapMinFraction": number(MIN_OVERLAP_FRACTION, 1),
           "OverlapMinReferences": str(MIN_REFERENCES)}
    rows = {} if frame is None else {(r["generation"], r["role"]): r
                                     for r in frame.to_dict("records")}
    for gen in MACRO_GENERATIONS:
        fit = rows.get((gen, "fit"))
        out[f"Overlap{camel(gen)}Slowdown"] = NA if fit is None else number(fit["slowdown"], 3)
        for role in ("fit", "validation"):
            row = rows.get((gen, role))
            for suffix, (column, scale, digits) in MACRO_FIELDS.items():
                value = None if row is None or pd.isna(row.get(column)) else float(row[column])
                if value is not None and scale:
                    value *= scale
                out[f"Overlap{camel(gen)}{camel(role)}{suffix}"] = number(value, digits)
    return out


def write_overlap_macros(csv: str | Path, out: str | Path) -> dict[str, str]:
    """The macros of a summary CSV of ``gradsched study overlap-slowdown``."""
    macros = overlap_macros(read_csv_frame(csv, required=READ_COLUMNS))
    write_macros(out, macros)
    return macros
