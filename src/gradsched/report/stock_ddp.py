"""Stock PyTorch DDP in the re-execution: running a planner's per-bucket caps
(``ddp-list-<planner>``, :mod:`gradsched.reexec.stock_ddp`) against DDP's default, the tuned
uniform cap and ``best`` (a table and prose macros), ``best`` against PyTorch DDP and the
executor running DDP's plan (:mod:`gradsched.reexec.best_versus`), and the executor-vs-DDP
benchmark. Every frame is computed by the measuring side; this module formats it.

A ratio counts as a gain only where its 95 % bootstrap interval lies above 1, as a loss
only where it lies below 1 ("matches" = the interval contains 1). Communication-bound
cases are those on the emulated cluster (not loopback).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from gradsched.io import write_text_atomic
from gradsched.report.algorithms import algorithm_label
from gradsched.report.formatting import MISSING
from gradsched.report.latex import NA, latex_escape, number, to_latex, to_markdown
from gradsched.report.reexec_cases import (
    case_label,
    case_network_label,
    network_label,
    with_interval,
)

NOT_MEASURED = "not measured"


def _ratio_cell(row: pd.Series, name: str) -> str:
    return with_interval(row.get(name), row.get(f"{name}_lo"), row.get(f"{name}_hi"), 2)


def stock_ddp_table(comparison: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """One row per case (and ``ddp-list`` item): time ratios (> 1: the item after "/" is
    faster) with their 95 % bootstrap intervals, from
    :func:`gradsched.reexec.stock_ddp.stock_ddp_comparison`. A case without a ``ddp-list``
    item says "not measured" in the list's columns."""
    rows = []
    for _, r in comparison.iterrows():
        tuned = str(r.get("tuned_ddp") or "").removeprefix("ddp-native-")
        listed = bool(r.get("list_algorithm"))
        match = r.get("ddp_buckets_match")
        cells = [f"{case_label(str(r['case']))}, P={r['world_size']}, "
                 f"{network_label(str(r['bandwidth']))}"]
        if listed:
            cells += [algorithm_label(str(r["list_algorithm"]).removeprefix("ddp-list-")),
                      MISSING if match is None or pd.isna(match) else
                      ("yes" if bool(match) else "NO"),
                      _ratio_cell(r, "default_over_list"),
                      _ratio_cell(r, "tuned_over_list") + (f" ({tuned} MB)" if tuned else ""),
                      _ratio_cell(r, "best_over_list")]
        else:
            cells += [NOT_MEASURED] * 5
        cells += [_ratio_cell(r, "default_over_best"), _ratio_cell(r, "executor_ddp_over_best"),
                  _ratio_cell(r, "default_over_executor_ddp")]
        rows.append(cells)
    cols = ["case", "stock DDP list: plan of", "rebuilt as planned", "DDP default / list",
            "tuned cap / list (cap)", "best / list", "DDP default / best",
            "executor DDP plan / best (schedule)",
            "DDP default / executor DDP plan (implementation)"]
    return pd.DataFrame(rows, columns=cols), "ll" + "r" * (len(cols) - 2)


def write_stock_ddp_table(comparison: pd.DataFrame, *, tex: str | Path | None,
                          md: str | Path | None) -> None:
    """Write :func:`stock_ddp_table` as LaTeX and/or Markdown (atomically)."""
    table, align = stock_ddp_table(comparison)
    title = ("re-execution: stock PyTorch DDP with a plan's buckets (bucket_cap_mb_list) and "
             "best's gain split into implementation and schedule (time ratios, > 1: the "
             "second is faster; [bootstrap 95% CI])")
    if tex is not None:
        write_text_atomic(tex, to_latex(table, align, title))
    if md is not None:
        write_text_atomic(md, to_markdown(table, title))


AIM_OVER_DEFAULT = 1.05
"""The speed-up over DDP's default the per-bucket caps aim at (a target, not a result)."""


STOCK_DDP_KEYS = ("StockDdpCases", "StockDdpCommCases", "StockDdpMatchCases",
        "StockDdpListVsDefaultMin", "StockDdpListVsDefaultMax",
        "StockDdpListAimCases", "StockDdpListVsTunedMin", "StockDdpListVsTunedMax",
        "StockDdpListNotSlowerTunedCommCases", "StockDdpListFasterTunedCases",
        "StockDdpBestVsListMin", "StockDdpBestVsListMax", "StockDdpAimPct")


def stock_ddp_macros(comparison: pd.DataFrame | None) -> dict[str, str]:
    """Counts and ranges of the stock-DDP comparison (``comparison``:
    :func:`gradsched.reexec.stock_ddp.stock_ddp_comparison`); ``n/a`` without list items."""
    out = dict.fromkeys(STOCK_DDP_KEYS, NA)
    out["StockDdpAimPct"] = number(100 * (AIM_OVER_DEFAULT - 1), 0)
    if comparison is None:
        return out
    rows = comparison.loc[comparison["list_algorithm"].astype(str) != ""]
    if not len(rows):
        return out
    comm = rows.loc[rows["bandwidth"].astype(str) != "loopback"]
    out.update({
        "StockDdpCases": str(len(rows)),
        "StockDdpCommCases": str(len(comm)),
        "StockDdpMatchCases": str(int((rows["ddp_buckets_match"] == True).sum())),  # noqa: E712
        "StockDdpListVsDefaultMin": number(rows["default_over_list"].min(), 2),
        "StockDdpListVsDefaultMax": number(rows["default_over_list"].max(), 2),
        "StockDdpListAimCases": str(int(((rows["default_over_list"] >= AIM_OVER_DEFAULT)
                                         & (rows["default_over_list_lo"] > 1)).sum())),
        "StockDdpListVsTunedMin": number(rows["tuned_over_list"].min(), 2),
        "StockDdpListVsTunedMax": number(rows["tuned_over_list"].max(), 2),
        "StockDdpListNotSlowerTunedCommCases": str(int((comm["tuned_over_list_hi"] >= 1).sum())),
        "StockDdpListFasterTunedCases": str(int((rows["tuned_over_list_lo"] > 1).sum())),
        "StockDdpBestVsListMin": number((1 / rows["best_over_list"]).min(), 2),
        "StockDdpBestVsListMax": number((1 / rows["best_over_list"]).max(), 2),
    })
    return out


VERSUS_NAMES = ("Default", "ExecDdp", "TunedCap", "ExecDdpOverDefault")
"""The comparisons of :func:`gradsched.reexec.best_versus.best_versus_table`, in the order
the prose lists them."""


def reexec_versus_macros(versus: pd.DataFrame | None) -> dict[str, str]:
    """``best`` against PyTorch DDP's default (``ReexecBestVsDefault...``) and against the
    executor running DDP's plan (``ReexecBestVsExecDdp...``) and DDP at its fastest measured
    cap (``ReexecBestVsTunedCap...``), and the executor's DDP plan
    against PyTorch DDP (``ReexecExecDdpOverDefault...``): the range of the ratios, the
    cases whose interval lies above 1 (``FasterCases``: faster beyond the noise) and below 1
    (``SlowerCases``), and each case as ``ratio [lo, hi]`` (``...List``). ``versus``:
    :func:`gradsched.reexec.best_versus.best_versus_table`."""
    names = VERSUS_NAMES
    prefix = {n: ("Reexec" if n == "ExecDdpOverDefault" else "ReexecBestVs") + n for n in names}
    out = {prefix[n] + key: NA for n in names
           for key in ("Min", "Max", "FasterCases", "SlowerCases", "List", "Cases")}
    table = versus if versus is not None else pd.DataFrame(columns=["versus"])
    for name in names:
        rows = table.loc[table["versus"] == name]
        if rows.empty:
            continue
        key = prefix[name]
        out[key + "Min"] = number(float(rows["ratio"].min()), 2)
        out[key + "Max"] = number(float(rows["ratio"].max()), 2)
        out[key + "FasterCases"] = str(int((rows["ratio_lo"] > 1.0).sum()))
        out[key + "SlowerCases"] = str(int((rows["ratio_hi"] < 1.0).sum()))
        out[key + "Cases"] = str(len(rows))
        out[key + "List"] = "; ".join(
            f"{case_network_label(r.case)}: {r.ratio:.2f} [{r.ratio_lo:.2f}, {r.ratio_hi:.2f}]"
            for r in rows.itertuples(index=False))
    return out


def executor_bench_macros(bench: dict | None) -> dict[str, str]:
    """``benchmarks/bench_executor_vs_ddp.py`` JSON: the executor running DDP's bucket plan
    vs PyTorch DDP itself, in percent (median of the paired rounds' ratios)."""
    out = {"ExecVsDdpBenchPct": NA, "ExecVsDdpBenchModel": NA, "ExecVsDdpBenchIters": NA}
    if not bench:
        return out
    out["ExecVsDdpBenchPct"] = number(100.0 * (float(bench["paired_ratio"]) - 1.0), 1)
    out["ExecVsDdpBenchModel"] = latex_escape(str(bench["model"]))
    out["ExecVsDdpBenchIters"] = str(len(bench.get("iterations", {}).get("executor", [])))
    return out
