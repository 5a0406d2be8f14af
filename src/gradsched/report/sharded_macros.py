"""Prose macros of the sharded re-execution (``gradsched shard measure``: sharded plans
run with stock FSDP2 against their blocking replay and against FSDP2's defaults).

A speed-up counts as faster (slower) only where its bootstrap interval lies above (below)
1. ``n/a`` without data.
"""

from __future__ import annotations

import pandas as pd

from gradsched.report.macro_text import NA, number

BASELINE = "fsdp2"
OPTIMUM = "sharded-optimum"
KEYS = ("ShardedMeasuredCases", "ShardedMeasuredPlans", "ShardedMedianAbsErrPct",
        "ShardedMaxAbsErrPct", "ShardedMedianAbsErrRawPct", "ShardedMaxAbsErrRawPct",
        "ShardedComputeScaleMin", "ShardedComputeScaleMax", "ShardedRawOverPredicted",
        "ShardedOptVsDefaultMin",
        "ShardedOptVsDefaultMax",
        "ShardedOptFasterCases", "ShardedOptSlowerCases", "ShardedUnitsMatchPlans")


def sharded_measured_macros(frame: pd.DataFrame | None) -> dict[str, str]:
    """Counts, error (scaled to the compute-only control, and unscaled), compute scale and
    speed-up ranges of the measured sharded plans."""
    out = dict.fromkeys(KEYS, NA)
    if frame is None or not len(frame):
        return out
    cases = frame.groupby(["model", "batch_size", "world_size", "network"]).ngroups
    err = frame["error_pct"].abs()
    raw = frame["error_raw_pct"].abs()
    opt = frame.loc[frame["algorithm"] == OPTIMUM]
    out.update({
        "ShardedMeasuredCases": str(cases),
        "ShardedMeasuredPlans": str(len(frame)),
        "ShardedMedianAbsErrPct": number(float(err.median()), 1),
        "ShardedMaxAbsErrPct": number(float(err.max()), 1),
        "ShardedMedianAbsErrRawPct": number(float(raw.median()), 1),
        "ShardedMaxAbsErrRawPct": number(float(raw.max()), 1),
        "ShardedComputeScaleMin": number(float(frame["compute_scale"].min()), 2),
        "ShardedComputeScaleMax": number(float(frame["compute_scale"].max()), 2),
        "ShardedRawOverPredicted": str(int((frame["error_raw_pct"] > 0).sum())),
        "ShardedUnitsMatchPlans": str(int(frame["units_match"].astype(str).eq("True").sum())),
    })
    if len(opt):
        out.update({
            "ShardedOptVsDefaultMin": number(float(opt["speedup_vs_fsdp2"].min()), 2),
            "ShardedOptVsDefaultMax": number(float(opt["speedup_vs_fsdp2"].max()), 2),
            "ShardedOptFasterCases": str(int((opt["speedup_low"] > 1).sum())),
            "ShardedOptSlowerCases": str(int((opt["speedup_high"] < 1).sum())),
        })
    return out
