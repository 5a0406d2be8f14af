"""Prose macros of the sharded re-execution (``gradsched shard measure``: sharded plans
run with stock FSDP2 against their blocking replay and against FSDP2's defaults).

A speed-up counts as faster (slower) only where its bootstrap interval lies above (below)
1. Baselines: FSDP2's defaults (``fsdp2``) and FSDP2's default units without resharding
(``fsdp2-noreshard``, the one-flag change); plans: the optimum without a memory cap
(``sharded-optimum``) and under a cap of FSDP2's default predicted peak
(``sharded-optimum-capped``). Peak ratios are per case, the plan's peak over FSDP2's
default's: predicted (gathered parameters and gradients, the replay) and measured (CPU
memory allocated during one iteration). ``n/a`` without data (a plan or a column a case
did not measure).
"""

from __future__ import annotations

import pandas as pd

from gradsched.report.macro_text import NA, number

BASELINE = "fsdp2"
NO_RESHARD = "fsdp2-noreshard"
OPTIMUM = "sharded-optimum"
CAPPED = "sharded-optimum-capped"
CASE = ["model", "batch_size", "world_size", "network"]
PLANS = {"Opt": OPTIMUM, "Capped": CAPPED, "NoReshard": NO_RESHARD}
PEAKS = {"PredPeak": "predicted_peak_bytes", "MeasPeak": "measured_peak_bytes"}
KEYS = ("ShardedMeasuredCases", "ShardedMeasuredPlans", "ShardedMedianAbsErrPct",
        "ShardedMaxAbsErrPct", "ShardedMedianAbsErrRawPct", "ShardedMaxAbsErrRawPct",
        "ShardedComputeScaleMin", "ShardedComputeScaleMax", "ShardedRawOverPredicted",
        "ShardedUnitsMatchPlans",
        *(f"Sharded{p}VsDefault{k}" for p in PLANS
          for k in ("Min", "Max", "FasterCases", "SlowerCases", "Cases")),
        *(f"Sharded{p}VsNoReshard{k}" for p in ("Opt", "Capped")
          for k in ("Min", "Max", "FasterCases", "SlowerCases", "Cases")),
        *(f"Sharded{p}{q}OverDefault{k}" for p in PLANS for q in PEAKS
          for k in ("Min", "Max")))


def sharded_measured_macros(frame: pd.DataFrame | None) -> dict[str, str]:
    """Counts, error (scaled to the compute-only control, and unscaled), compute scale,
    speed-up ranges over both baselines and peak-memory ratios of the measured plans."""
    out = dict.fromkeys(KEYS, NA)
    if frame is None or not len(frame):
        return out
    err = frame["error_pct"].abs()
    raw = frame["error_raw_pct"].abs()
    out.update({
        "ShardedMeasuredCases": str(frame.groupby(CASE).ngroups),
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
    for key, name in PLANS.items():
        plan = frame.loc[frame["algorithm"] == name]
        out.update(_speedups(f"Sharded{key}VsDefault", plan, "speedup_vs_fsdp2",
                             "speedup_low", "speedup_high"))
        if key != "NoReshard":
            out.update(_speedups(f"Sharded{key}VsNoReshard", plan, "speedup_vs_noreshard",
                                 "speedup_vs_noreshard_low", "speedup_vs_noreshard_high"))
        for label, column in PEAKS.items():
            ratio = _peak_ratio(frame, name, column)
            if len(ratio):
                out[f"Sharded{key}{label}OverDefaultMin"] = number(float(ratio.min()), 2)
                out[f"Sharded{key}{label}OverDefaultMax"] = number(float(ratio.max()), 2)
    return out


def _speedups(prefix: str, plan: pd.DataFrame, point: str, low: str,
              high: str) -> dict[str, str]:
    """Range of a speed-up over the cases that have it, and how many are faster or slower
    (interval above or below 1)."""
    if point not in plan.columns:
        return {}
    have = plan.loc[plan[point].notna()]
    if not len(have):
        return {}
    return {f"{prefix}Min": number(float(have[point].min()), 2),
            f"{prefix}Max": number(float(have[point].max()), 2),
            f"{prefix}FasterCases": str(int((have[low] > 1).sum())),
            f"{prefix}SlowerCases": str(int((have[high] < 1).sum())),
            f"{prefix}Cases": str(len(have))}


def _peak_ratio(frame: pd.DataFrame, name: str, column: str) -> pd.Series:
    """Per case: ``column`` of plan ``name`` over FSDP2's default's (cases with both)."""
    if column not in frame.columns:
        return pd.Series(dtype=float)
    wide = frame.pivot_table(index=CASE, columns="algorithm", values=column, aggfunc="first")
    if name not in wide.columns or BASELINE not in wide.columns:
        return pd.Series(dtype=float)
    return (wide[name] / wide[BASELINE]).dropna()
