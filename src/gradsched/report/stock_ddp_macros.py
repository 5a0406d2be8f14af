"""Prose macros of stock PyTorch DDP running gradsched's per-bucket caps
(``ddp-list-contiguous_optimum``, :mod:`gradsched.reexec.stock_ddp`), from the committed
re-execution data.

A ratio counts as a gain only where its 95 % bootstrap interval lies above 1, as a loss
only where it lies below 1 ("matches" = the interval contains 1). Communication-bound
cases are those on the emulated cluster (not loopback).
"""

from __future__ import annotations

import pandas as pd

from gradsched.reexec.stock_ddp import stock_ddp_comparison
from gradsched.report.macro_text import NA, number

AIM_OVER_DEFAULT = 1.05
"""The speed-up over DDP's default the per-bucket caps aim at (a target, not a result)."""
KEYS = ("StockDdpCases", "StockDdpCommCases", "StockDdpMatchCases",
        "StockDdpListVsDefaultMin", "StockDdpListVsDefaultMax",
        "StockDdpListAimCases", "StockDdpListVsTunedMin", "StockDdpListVsTunedMax",
        "StockDdpListNotSlowerTunedCommCases", "StockDdpListFasterTunedCases",
        "StockDdpBestVsListMin", "StockDdpBestVsListMax", "StockDdpAimPct")


def stock_ddp_macros(measured: pd.DataFrame | None,
                     iterations: pd.DataFrame | None) -> dict[str, str]:
    """Counts and ranges of the stock-DDP comparison; ``n/a`` without list items."""
    out = dict.fromkeys(KEYS, NA)
    out["StockDdpAimPct"] = number(100 * (AIM_OVER_DEFAULT - 1), 0)
    if measured is None or not len(measured):
        return out
    table = stock_ddp_comparison(measured, iterations)
    rows = table.loc[table["list_algorithm"].astype(str) != ""]
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
