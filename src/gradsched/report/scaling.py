"""The published-scaling check's table and macros, of the frame that
:func:`gradsched.experiments.scaling.scaling_check` returns (see there for the method)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from gradsched.intermediates import read_csv_frame
from gradsched.report.formatting import fmt
from gradsched.report.latex import camel, number, write_macros, write_table


def _comm_cell(row: pd.Series) -> str:
    how = ("ring-scaled from " + row["comm_model"].split("measured at ")[1].split(",")[0]
           if str(row["comm_model"]).startswith("EXTRAPOLATED") else "measured")
    return f"{row['comm']} ({how})"


TABLE_ROWS = (
    ("per-GPU batch (trace's own)", lambda r: f"{int(r['batch_per_gpu'])} "
                                              f"({int(r['trace_batch'])}, scaled linearly)"),
    ("comm sweep at P", _comm_cell),
    ("P [GPUs]", lambda r: str(int(r["world_size"]))),
    ("1 GPU: predicted [img/s]", lambda r: fmt(r["predicted_img_s_1"], 0)),
    ("1 GPU: published [img/s]", lambda r: fmt(r["published_img_s_1"], 0)),
    ("1 GPU: error [%]", lambda r: fmt(r["error_1_pct"], 1)),
    ("P GPUs: predicted [img/s]", lambda r: fmt(r["predicted_img_s_p"], 0)),
    ("P GPUs: published [img/s]", lambda r: fmt(r["published_img_s_p"], 0)),
    ("P GPUs: error [%]", lambda r: fmt(r["error_p_pct"], 1)),
    ("scaling: predicted [x]", lambda r: fmt(r["predicted_scaling"], 2)),
    ("scaling: published [x]", lambda r: fmt(r["published_scaling"], 2)),
    ("scaling: error [%]", lambda r: fmt(r["scaling_error_pct"], 1)),
    ("exposed comm at P [ms]", lambda r: fmt(1e3 * r["exposed_comm_p_s"], 2)),
)
"""The table's rows (one column per published system: two systems stay readable)."""


def scaling_table(frame: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """Predicted vs published images/s on 1 and P GPUs and the scaling, with errors: one
    row per quantity, one column per system."""
    if frame.empty:
        return pd.DataFrame(columns=["quantity"]), "l"
    out = pd.DataFrame({"quantity": [name for name, _ in TABLE_ROWS]})
    for _, row in frame.iterrows():
        out[str(row["system"])] = [cell(row) for _, cell in TABLE_ROWS]
    return out, "l" + "r" * len(frame)


def write_scaling_table(csv: str | Path, tex: str | Path, md: str | Path,
                        title: str = "") -> pd.DataFrame:
    """The scaling-check table of a CSV written by :func:`scaling_check`."""
    frame = read_csv_frame(csv, required=READ_COLUMNS)
    table, align = scaling_table(frame)
    write_table(table, tex, md, align=align, title=title)
    return table


READ_COLUMNS = ("key", "system", "comm", "comm_model", "trace_batch", "batch_per_gpu",
                "world_size", "predicted_img_s_1", "published_img_s_1", "error_1_pct",
                "predicted_img_s_p", "published_img_s_p", "error_p_pct", "predicted_scaling",
                "published_scaling", "scaling_error_pct", "exposed_comm_p_s")
"""The columns of the scaling-check CSV (:data:`gradsched.experiments.scaling.
SCALING_COLUMNS`) that the table and the macros read."""


MACRO_FIELDS = {
    "PredictedOne": ("predicted_img_s_1", 0), "PublishedOne": ("published_img_s_1", 0),
    "ErrorOnePct": ("error_1_pct", 1), "PredictedP": ("predicted_img_s_p", 0),
    "PublishedP": ("published_img_s_p", 0), "ErrorPPct": ("error_p_pct", 1),
    "PredictedScaling": ("predicted_scaling", 2), "PublishedScaling": ("published_scaling", 2),
    "ScalingErrorPct": ("scaling_error_pct", 1), "BatchPerGpu": ("batch_per_gpu", 0),
    "TraceBatch": ("trace_batch", 0), "WorldSize": ("world_size", 0),
}
"""Macro suffix -> (CSV column, decimals) of :func:`scaling_macros`."""


def scaling_macros(frame: pd.DataFrame) -> dict[str, str]:
    """``Scaling<Key><Quantity>`` -> number, for the paper's prose (prefix ``gs`` added by
    :func:`gradsched.report.latex.render`)."""
    out = {}
    for _, row in frame.iterrows():
        for suffix, (column, digits) in MACRO_FIELDS.items():
            out[f"Scaling{camel(str(row['key']))}{suffix}"] = number(float(row[column]), digits)
    return out


def write_scaling_macros(csv: str | Path, out: str | Path) -> dict[str, str]:
    """The macros of a scaling-check CSV, written as ``\\newcommand`` lines."""
    frame = read_csv_frame(csv, required=READ_COLUMNS)
    macros = scaling_macros(frame)
    write_macros(out, macros)
    return macros
