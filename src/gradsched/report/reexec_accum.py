"""Gradient accumulation and ZeRO-1 re-executed: the table and the prose macros.

Formats the frames of :func:`gradsched.reexec.accum.analyze_accum` (per case and family:
predicted and measured time per optimizer step with bootstrap intervals; per family and
number of micro-batches: the median |error| against its tolerance). Formatting only.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from gradsched.report.formatting import fmt
from gradsched.report.latex import camel, number, write_macros, write_table
from gradsched.report.reexec_cases import case_label, network_label, with_interval

TITLE = ("re-execution with gradient accumulation and ZeRO-1: time per optimizer step of k "
         "micro-batches, predicted (compute scaled to the same launch's control, with "
         "interference) and measured [bootstrap 95% CI]; errors uncalibrated and on the part "
         "above the control beside it")
SUMMARY_TITLE = ("re-execution with gradient accumulation and ZeRO-1: median |error| per "
                 "family and k against its tolerance (calibrated), and without calibration")


def accum_table(rows: pd.DataFrame) -> pd.DataFrame:
    """One line per case and family, as text."""
    return pd.DataFrame({
        "case": [f"{case_label(c)}, P={p}, {network_label(n)}" for c, p, n in zip(
            rows["case"], rows["world_size"], rows["bandwidth"], strict=True)],
        "k": rows["grad_accum"].astype(int).astype(str),
        "family": rows["family"],
        "predicted [s]": [fmt(v, 3) for v in rows["predicted_s"]],
        "measured [s]": [with_interval(v, lo, hi, 3) for v, lo, hi in zip(
            rows["measured_s"], rows["measured_lo_s"], rows["measured_hi_s"], strict=True)],
        "error %": [with_interval(v, lo, hi, 1) for v, lo, hi in zip(
            rows["error_pct"], rows["error_lo_pct"], rows["error_hi_pct"], strict=True)],
        "error % (no interference)": [fmt(v, 1) for v in rows["error_plain_pct"]],
        "error % (uncalibrated)": [fmt(v, 1) for v in rows["error_raw_pct"]],
        "error % above control": [fmt(v, 0) for v in rows["excess_error_pct"]],
    })


def summary_table(summary: pd.DataFrame) -> pd.DataFrame:
    """One line per family and k, as text."""
    return pd.DataFrame({
        "family": summary["family"], "k": summary["grad_accum"].astype(int).astype(str),
        "cases": summary["n_cases"].astype(int).astype(str),
        "median |err| %": [fmt(v, 1) for v in summary["median_abs_err_pct"]],
        "max |err| %": [fmt(v, 1) for v in summary["max_abs_err_pct"]],
        "tolerance %": [fmt(v, 0) for v in summary["tolerance_pct"]],
        "within": ["yes" if w else "no" for w in summary["within"]],
        "median |err| % uncalibrated": [fmt(v, 1) for v in summary["median_abs_err_raw_pct"]],
        "median |err| % above control": [fmt(v, 0)
                                         for v in summary["median_abs_excess_err_pct"]],
    })


def accum_macros(rows: pd.DataFrame, summary: pd.DataFrame) -> dict[str, str]:
    """``Accum<Family>K<k>MedianErr`` / ``MaxErr`` / ``Within`` per family and k, and the
    counts of cases and models (names without the ``gs`` prefix)."""
    out = {"AccumCases": str(rows["case"].nunique()),
           "AccumModels": str(rows["model"].nunique()),
           "AccumFamiliesWithin": str(int(summary["within"].sum())),
           "AccumFamilies": str(len(summary))}
    for line in summary.itertuples(index=False):
        stem = f"Accum{camel(str(line.family))}K{camel(str(int(line.grad_accum)))}"
        out[f"{stem}MedianErr"] = number(line.median_abs_err_pct, 1)
        out[f"{stem}MaxErr"] = number(line.max_abs_err_pct, 1)
        out[f"{stem}Within"] = "yes" if line.within else "no"
        out[f"{stem}MedianErrRaw"] = number(line.median_abs_err_raw_pct, 1)
        out[f"{stem}MedianExcessErr"] = number(line.median_abs_excess_err_pct, 0)
    raw, excess = summary["median_abs_err_raw_pct"], summary["median_abs_excess_err_pct"]
    out["AccumMedianErrRawMin"] = number(float(raw.min()), 1)
    out["AccumMedianErrRawMax"] = number(float(raw.max()), 1)
    out["AccumFamiliesWithinRaw"] = str(int((raw <= summary["tolerance_pct"]).sum()))
    out["AccumExcessUndefined"] = str(int(rows["excess_error_pct"].isna().sum()))
    if excess.notna().any():
        out["AccumMedianExcessErrMin"] = number(float(excess.min()), 0)
        out["AccumMedianExcessErrMax"] = number(float(excess.max()), 0)
    tol = summary.drop_duplicates("family").set_index("family")["tolerance_pct"]
    for family, value in tol.items():
        out[f"Accum{camel(str(family))}Tolerance"] = number(float(value), 0)
    return out


def write_accum(rows: pd.DataFrame, summary: pd.DataFrame, *, tex: str | Path | None = None,
                md: str | Path | None = None, summary_tex: str | Path | None = None,
                summary_md: str | Path | None = None,
                macros: str | Path | None = None) -> None:
    """Write the outputs asked for (a LaTeX table needs its Markdown twin)."""
    if tex is not None and md is not None:
        write_table(accum_table(rows), tex, md, title=TITLE)
    if summary_tex is not None and summary_md is not None:
        write_table(summary_table(summary), summary_tex, summary_md, title=SUMMARY_TITLE)
    if macros is not None:
        write_macros(macros, accum_macros(rows, summary))
