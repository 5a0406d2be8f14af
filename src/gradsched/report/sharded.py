"""Sharded data parallelism, replayed: the table of
:func:`gradsched.experiments.sharded.optimum.compare` rows over several cases.

Per case and planner: units (besides the root), prefetch depths (forward / backward),
resharding, the iteration time, the exposed communication share, the peak of gathered
parameters and gradients in flight (MiB), the speedup over FSDP2's defaults and the gap to
the lower bound. Seconds and bytes in the input; the table shows seconds and MiB.

The sharded re-execution's prose macros (:func:`sharded_measured_macros`; ``gradsched shard
measure``: sharded plans run with stock FSDP2 against their blocking replay and against
FSDP2's defaults).

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

from gradsched.report.formatting import fmt
from gradsched.report.latex import NA, number

MIB = 2**20
LABELS = {"fsdp2": "FSDP2 default", "fsdp2-noreshard": "FSDP2 default, no reshard",
          "fsdp2-saturation": "compiler cap", "fsdp2-cap": "25 MiB units",
          "zero3": "ZeRO-3 defaults", "sharded-optimum": "optimum",
          "sharded-optimum-capped": "optimum, FSDP2's peak", "torchtitan": "torchtitan",
          "torchtitan-2024": "torchtitan (2024)"}
HEADER = ["model", "network", "P", "semantics", "plan", "units", "prefetch f/b", "reshard",
          "iteration [s]", "exposed [%]", "peak [MiB]", "vs FSDP2 [x]", "above bound [%]"]


def sharded_table(frame: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """One row per (case, planner) of a ``gradsched study sharded`` CSV."""
    align = "llrl" + "l" + "r" * (len(HEADER) - 5)
    if frame.empty:
        return pd.DataFrame(columns=HEADER), align
    out = []
    for _, case in frame.groupby(["compute", "network", "world_size", "semantics"], sort=False):
        default = case.loc[case["algorithm"] == "fsdp2", "iteration_s"]
        base = float(default.iloc[0]) if len(default) else float("nan")
        for row in case.itertuples(index=False):
            out.append([row.compute, row.network, str(row.world_size), row.semantics,
                        LABELS.get(row.algorithm, row.algorithm), str(row.n_units),
                        f"{row.forward_prefetch}/{row.backward_prefetch}",
                        str(row.reshard_after_forward).lower(), fmt(row.iteration_s, 3),
                        fmt(100 * row.exposed_comm_s / row.iteration_s, 1),
                        fmt(row.gathered_peak_bytes / MIB, 0), fmt(base / row.iteration_s, 3),
                        fmt(100 * (row.iteration_s / row.lower_bound_s - 1), 1)])
    return pd.DataFrame(out, columns=HEADER), align


MEASURED_HEADER = ["model", "network", "P", "plan", "units", "reshard", "measured [s]",
                   "p10--p90 [s]", "predicted [s]", "error [%]", "unscaled error [%]",
                   "vs FSDP2 [x]", "vs no reshard [x]", "peak pred. [MiB]",
                   "peak meas. [MiB]", "units as planned"]


def sharded_measured_table(frame: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """One row per case and plan of the sharded re-execution (``gradsched shard measure``'s
    ``measured.csv`` files, concatenated): measured median and p10--p90, the blocking
    replay's prediction on the compute trace scaled to the compute-only control and its
    error, the error of the replay on the trace as committed, the speedup over FSDP2's
    defaults and over FSDP2's default units without resharding (``fsdp2-noreshard``) with
    their bootstrap intervals, the predicted peak of gathered parameters and gradients and
    the measured peak of CPU memory allocated during an iteration (MiB; ``--`` where the
    case did not measure it), and whether FSDP2 formed the plan's units."""
    align = "llrl" + "r" * (len(MEASURED_HEADER) - 5) + "l"
    if frame.empty:
        return pd.DataFrame(columns=MEASURED_HEADER), align
    out = []
    for row in frame.to_dict("records"):
        out.append([f"{row['model']} b{row['batch_size']}", row["network"],
                    str(row["world_size"]), LABELS.get(row["algorithm"], row["algorithm"]),
                    str(row["n_units"]), str(row["reshard_after_forward"]).lower(),
                    fmt(row["measured_s"], 3),
                    f"{fmt(row['measured_p10_s'], 3)}--{fmt(row['measured_p90_s'], 3)}",
                    fmt(row["predicted_s"], 3), fmt(row["error_pct"], 1),
                    fmt(row["error_raw_pct"], 1), _interval(row, "speedup_vs_fsdp2",
                                                            "speedup_low", "speedup_high"),
                    _interval(row, "speedup_vs_noreshard", "speedup_vs_noreshard_low",
                              "speedup_vs_noreshard_high"),
                    fmt(row["predicted_peak_bytes"] / MIB, 1),
                    fmt(row.get("measured_peak_bytes", float("nan")) / MIB, 1),
                    "yes" if str(row["units_match"]) == "True" else "no"])
    return pd.DataFrame(out, columns=MEASURED_HEADER), align


def _interval(row: dict, point: str, low: str, high: str) -> str:
    """``x [low, high]`` (two decimals: the table must fit a page at 7 pt), or the missing
    mark where the row has no such ratio (a case measured before the column existed, or
    without ``fsdp2-noreshard``)."""
    value = row.get(point, float("nan"))
    if fmt(value) == fmt(float("nan")):
        return fmt(float("nan"))
    return f"{fmt(value)} [{fmt(row[low])}, {fmt(row[high])}]"


BASELINE = "fsdp2"


NO_RESHARD = "fsdp2-noreshard"


OPTIMUM = "sharded-optimum"


CAPPED = "sharded-optimum-capped"


CASE = ["model", "batch_size", "world_size", "network"]


PLANS = {"Opt": OPTIMUM, "Capped": CAPPED, "NoReshard": NO_RESHARD}


PEAKS = {"PredPeak": "predicted_peak_bytes", "MeasPeak": "measured_peak_bytes"}


SHARDED_KEYS = ("ShardedMeasuredCases", "ShardedMeasuredPlans", "ShardedMedianAbsErrPct",
        "ShardedMaxAbsErrPct", "ShardedMedianAbsErrRawPct", "ShardedMaxAbsErrRawPct",
        "ShardedComputeScaleMin", "ShardedComputeScaleMax", "ShardedRawOverPredicted",
        "ShardedUnitsMatchPlans", "ShardedMedianAbsExcessErrPct", "ShardedMaxAbsExcessErrPct",
        "ShardedExcessUndefined",
        *(f"Sharded{p}VsDefault{k}" for p in PLANS
          for k in ("Min", "Max", "FasterCases", "SlowerCases", "Cases")),
        *(f"Sharded{p}VsNoReshard{k}" for p in ("Opt", "Capped")
          for k in ("Min", "Max", "FasterCases", "SlowerCases", "Cases")),
        *(f"Sharded{p}{q}OverDefault{k}" for p in PLANS for q in PEAKS
          for k in ("Min", "Max")))


def sharded_measured_macros(frame: pd.DataFrame | None) -> dict[str, str]:
    """Counts, error (scaled to the compute-only control, and unscaled), compute scale,
    speed-up ranges over both baselines and peak-memory ratios of the measured plans."""
    out = dict.fromkeys(SHARDED_KEYS, NA)
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
    # the error on the part of the step above the compute-only control (the scaled trace's
    # compute equals the control's median by construction, so the prediction's part above
    # it is predicted_s - compute_only_s): what FSDP2's collectives add, uncalibrated
    above = frame["measured_s"] - frame["compute_only_s"]
    excess = (100.0 * ((frame["predicted_s"] - frame["compute_only_s"]) - above)
              / above).where(above > 0).abs()
    out["ShardedExcessUndefined"] = str(int(excess.isna().sum()))
    if excess.notna().any():
        out["ShardedMedianAbsExcessErrPct"] = number(float(excess.median()), 0)
        out["ShardedMaxAbsExcessErrPct"] = number(float(excess.max()), 0)
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
