"""Errors of the replay's predictions against the re-executed plans.

Input: the CSV of :func:`gradsched.reexec.predict.collect` (one row per algorithm and
case, plus PyTorch DDP itself and the compute-only control). For every plan row (the
planners' plans and ``ddp-native-<cap>``; the control is left out: it calibrates the
compute scale and is predicted exactly by construction):

* ``error_pct`` = 100 x (predicted - measured) / measured, for the prediction without
  interference (``predicted_s``), with it (``predicted_interference_s``), of the raw
  committed trace (``predicted_raw_s``) and with interference but the algorithms' dynamic
  issue order instead of the executor's (``predicted_dynamic_s``, when present);
* per case: median |error|, the worst error (largest |error|, signed, and its plan), and
  Kendall's tau-b (``scipy.stats.kendalltau``) between the predicted and the measured
  iteration times of the case's distinct executions (algorithms that ran the same plan
  count once), i.e. how well the replay orders the plans;
* per case, the order of the plans that the measurement can tell apart: of the pairs of
  distinct executions whose measured p10-p90 ranges are disjoint (``n_distinguishable``),
  the share the prediction orders the same way (``order_ok_pct``; a tie in the
  prediction counts as half). Tau also scores pairs within the noise, whose measured
  order is a coin toss; this one does not;
* per case, the noise floor: ``median_spread_pct``, the median over plans of the
  measured half p10-p90 range relative to the median, and ``ddp_executor_vs_native_pct``,
  gradsched's executor running the ``ddp`` plan vs PyTorch DDP itself at 25 MiB (the same
  buckets, so ideally 0);
* per case: whether the plan of ``best`` (the replay's pick) measured at least as fast as
  PyTorch DDP with its default 25 MiB buckets (``ddp-native-25``), and whether the
  difference is beyond the spread of the measurements (p10-p90 ranges disjoint).

Summary rows per network (``case = all-<network>``) and over everything (``all``) pool
the errors; their tau is the median of the cases' taus.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from gradsched.errors import InputError
from gradsched.intermediates import ITERATIONS, MEASURED, read_intermediate
from gradsched.reexec.best_versus import best_versus_table
from gradsched.reexec.items import ddp_default_label
from gradsched.reexec.stock_ddp import stock_ddp_comparison
from gradsched.reexec.uncertainty import LEVEL, N_BOOT, case_uncertainty

PREDICTIONS = {"": "predicted_s", "_int": "predicted_interference_s", "_raw": "predicted_raw_s",
               "_dyn": "predicted_dynamic_s"}
REQUIRED = ("case", "bandwidth", "world_size", "algorithm", "kind", "predicted_s",
            "predicted_interference_s", "predicted_raw_s", "measured_s", "measured_p10_s",
            "measured_p90_s")
STATS_COLUMNS = (
    "case", "bandwidth", "world_size", "n_plans", "compute_scale", "load_avg",
    "median_abs_err_pct", "worst_err_pct", "worst_algorithm", "tau", "tau_p",
    "median_abs_err_int_pct", "worst_err_int_pct", "worst_int_algorithm", "tau_int",
    "tau_int_p", "median_abs_err_raw_pct", "tau_raw", "median_abs_err_dyn_pct", "tau_dyn",
    "n_distinguishable", "order_ok_pct", "order_ok_int_pct", "order_ok_dyn_pct",
    "best_measured_s", "ddp25_measured_s", "best_vs_ddp25_pct", "best_at_least_as_fast",
    "best_vs_ddp25_beyond_spread", "median_spread_pct", "ddp_executor_vs_native_pct",
    # with the per-iteration data (reexec/uncertainty.py): 95 % bootstrap intervals
    "n_runs", "tau_int_lo", "tau_int_hi", "n_pairs", "n_separated_pairs", "order_ok_separated_pct",
    "tau_separated", "predicted_spread_pct", "noise_pct", "spread_to_noise", "tuned_ddp",
    "best_vs_ddp_default_speedup", "best_vs_ddp_default_speedup_lo",
    "best_vs_ddp_default_speedup_hi", "best_vs_ddp_tuned_speedup",
    "best_vs_ddp_tuned_speedup_lo", "best_vs_ddp_tuned_speedup_hi",
    "foreign_cpu_cores_max", "n_flagged_runs", "bound_s", "ddp_default_over_bound_pct",
    "best_over_bound_pct",
)
_INTERVAL_NAMES = {"tau": "tau_int", "tau_lo": "tau_int_lo", "tau_hi": "tau_int_hi"}
INTERVAL_COLUMNS = ("measured_lo_s", "measured_hi_s", "error_lo_pct", "error_hi_pct")


def load(path: str | Path) -> pd.DataFrame:
    """Read and check a measured.csv."""
    path = Path(path)
    if not path.is_file():
        raise InputError("file not found", path=path)
    frame = read_intermediate(path, (MEASURED,), named_errors=True)
    missing = [c for c in REQUIRED if c not in frame.columns]
    if missing:
        raise InputError(f"missing column(s) {missing}", path=path)
    for name in NUMERIC_REQUIRED:
        _check_numeric(frame, name, path)
    return frame


NUMERIC_REQUIRED = ("world_size", "predicted_s", "predicted_interference_s",
                    "predicted_raw_s", "measured_s", "measured_p10_s", "measured_p90_s")
"""Columns of a measured.csv that every row fills with a number."""


def _check_numeric(frame: pd.DataFrame, name: str, path: Path) -> None:
    """Refuse an empty or non-numeric cell of ``name`` (text made the errors fail with an
    internal TypeError; an empty cell was a silent NaN in every statistic)."""
    column = frame[name]
    numeric = pd.api.types.is_numeric_dtype(column) and not pd.api.types.is_bool_dtype(column)
    bad = column.isna() if numeric else ~column.astype(str).str.fullmatch(
        r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")
    if bad.any():
        row = int(bad.to_numpy().nonzero()[0][0]) + 1
        cell = column.iloc[row - 1]
        what = "empty" if pd.isna(cell) else f"{cell!r} is not a number"
        raise InputError(what, path=path, row=row, line=row + 1, field=name)


def plan_errors(frame: pd.DataFrame) -> pd.DataFrame:
    """Plan rows with ``error_pct``, ``error_int_pct`` and ``error_raw_pct``."""
    rows = frame.loc[frame["kind"] != "control"].copy()
    for suffix, col in PREDICTIONS.items():
        if col in rows:  # predicted_dynamic_s is absent from data collected before it
            rows[f"error{suffix}_pct"] = (100.0 * (rows[col] - rows["measured_s"])
                                          / rows["measured_s"])
    return rows.reset_index(drop=True)


def kendall(pred: pd.Series, meas: pd.Series) -> tuple[float, float]:
    """Kendall's tau-b and its p-value (NaN for fewer than 3 plans or constant input)."""
    from scipy.stats import kendalltau

    if len(pred) < 3 or pred.nunique() < 2 or meas.nunique() < 2:
        return math.nan, math.nan
    res = kendalltau(pred.to_numpy(), meas.to_numpy())
    return float(res.statistic), float(res.pvalue)


def distinct_runs(group: pd.DataFrame) -> pd.DataFrame:
    """One row per distinct execution (the first algorithm of each measured item)."""
    if "item" not in group:
        return group
    return group.drop_duplicates(subset=["case", "item"], keep="first")


def ordered_pairs(pred: pd.Series, runs: pd.DataFrame) -> tuple[int, float]:
    """``(pairs, percent)``: among pairs of runs whose measured p10-p90 ranges are
    disjoint, the share whose predicted order matches (ties predicted count half)."""
    p = pred.to_numpy(dtype=float)
    m = runs["measured_s"].to_numpy(dtype=float)
    lo = runs["measured_p10_s"].to_numpy(dtype=float)
    hi = runs["measured_p90_s"].to_numpy(dtype=float)
    pairs, score = 0, 0.0
    for i in range(len(p)):
        for j in range(i + 1, len(p)):
            if not (hi[i] < lo[j] or hi[j] < lo[i]):
                continue
            pairs += 1
            agree = np.sign(p[i] - p[j]) * np.sign(m[i] - m[j])
            score += 1.0 if agree > 0 else 0.5 if agree == 0 else 0.0
    return pairs, (100.0 * score / pairs if pairs else math.nan)


def _worst(errors: pd.Series, names: pd.Series) -> tuple[float, str]:
    if errors.empty:
        return math.nan, ""
    i = int(np.argmax(errors.abs().to_numpy()))
    return float(errors.iloc[i]), str(names.iloc[i])


def _summary(case: str, group: pd.DataFrame, full: pd.DataFrame, taus: dict[str, float] | None
             ) -> dict[str, Any]:
    out: dict[str, Any] = {"case": case, "bandwidth": ",".join(sorted(group["bandwidth"]
                                                                      .astype(str).unique())),
                           "world_size": ",".join(str(w) for w in
                                                  sorted(group["world_size"].unique())),
                           "n_plans": len(group)}
    if "compute_scale" in group:
        out["compute_scale"] = float(group["compute_scale"].median())
    if "load_avg" in group:
        out["load_avg"] = float(group["load_avg"].mean())
    for suffix in PREDICTIONS:
        if f"error{suffix}_pct" not in group:
            continue
        err = group[f"error{suffix}_pct"]
        out[f"median_abs_err{suffix}_pct"] = float(err.abs().median())
        if suffix in ("", "_int"):
            worst, alg = _worst(err, group["algorithm"])
            out[f"worst_err{suffix}_pct"] = worst
            out[f"worst{suffix}_algorithm" if suffix else "worst_algorithm"] = alg
        if taus is None:
            runs = distinct_runs(group)
            tau, p = kendall(runs[PREDICTIONS[suffix]], runs["measured_s"])
            if suffix != "_raw":
                n_pairs, ok = ordered_pairs(runs[PREDICTIONS[suffix]], runs)
                out["n_distinguishable"] = n_pairs
                out[f"order_ok{suffix}_pct"] = ok
        else:
            tau, p = taus.get(suffix, math.nan), math.nan
        out[f"tau{suffix}"] = tau
        if suffix in ("", "_int"):
            out[f"tau{suffix}_p"] = p
    spread = 50.0 * (group["measured_p90_s"] - group["measured_p10_s"]) / group["measured_s"]
    out["median_spread_pct"] = float(spread.median())
    if taus is None:
        own = group.loc[group["algorithm"] == "ddp"]
        default = ddp_default_label(group["algorithm"])
        native = group.loc[group["algorithm"] == default]
        if not own.empty and not native.empty:
            out["ddp_executor_vs_native_pct"] = 100.0 * (
                own.iloc[0]["measured_s"] / native.iloc[0]["measured_s"] - 1.0)
        best = group.loc[group["algorithm"] == "best"]
        ddp = group.loc[group["algorithm"] == default]
        if not best.empty and not ddp.empty:
            b, d = best.iloc[0], ddp.iloc[0]
            out["best_measured_s"] = float(b["measured_s"])
            out["ddp25_measured_s"] = float(d["measured_s"])
            out["best_vs_ddp25_pct"] = 100.0 * (b["measured_s"] / d["measured_s"] - 1.0)
            out["best_at_least_as_fast"] = bool(b["measured_s"] <= d["measured_s"])
            out["best_vs_ddp25_beyond_spread"] = bool(
                b["measured_p90_s"] < d["measured_p10_s"]
                or d["measured_p90_s"] < b["measured_p10_s"])
    return out


def case_intervals(frame: pd.DataFrame, iterations: pd.DataFrame
                   ) -> tuple[pd.DataFrame, dict[str, dict[str, Any]]]:
    """Per-plan 95 % intervals (one row per algorithm) and per-case bootstrap statistics
    (:func:`gradsched.reexec.uncertainty.case_uncertainty`) of the prediction *with* the
    calibrated interference: the one the ``best`` planner scores its candidates with."""
    errors = plan_errors(frame)
    plan_rows, per_case = [], {}
    for case, group in errors.groupby("case", sort=False):
        item_of = dict(zip(group["algorithm"].astype(str), group["item"].astype(str),
                           strict=True))
        try:
            unc = case_uncertainty(distinct_runs(group), iterations, item_of,
                                   prediction=PREDICTIONS["_int"])
        except ValueError as exc:
            raise InputError(str(exc)) from None
        # the bootstrap's tau is tau_int (the prediction with interference)
        per_case[str(case)] = {_INTERVAL_NAMES.get(k, k): v for k, v in unc.stats.items()}
        by_item = unc.plans.set_index("item")
        for _, row in group.iterrows():
            plan_rows.append({"case": case, "algorithm": row["algorithm"],
                              **{c: by_item.at[row["item"], c] for c in INTERVAL_COLUMNS}})
    return pd.DataFrame(plan_rows), per_case


def case_stats(frame: pd.DataFrame, iterations: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per case, then one per network (``all-<network>``) and ``all``. With the
    per-iteration rows, the cases also get bootstrap intervals (:func:`case_intervals`)."""
    errors = plan_errors(frame)
    boot = case_intervals(frame, iterations)[1] if iterations is not None else {}
    rows = []
    per_case: dict[str, dict[str, Any]] = {}
    for case, group in errors.groupby("case", sort=False):
        s = _summary(str(case), group, errors, None) | boot.get(str(case), {})
        s.update(_flags(group))
        s.update(_headroom(group))
        per_case[str(case)] = s
        rows.append(s)

    def pooled(name: str, group: pd.DataFrame) -> dict[str, Any]:
        cases = group["case"].unique()
        taus = {suf: float(np.nanmedian([per_case[c][f"tau{suf}"] for c in cases]))
                if any(not math.isnan(per_case[c][f"tau{suf}"]) for c in cases) else math.nan
                for suf in PREDICTIONS if f"tau{suf}" in per_case[cases[0]]}
        out = _summary(name, group, errors, taus)
        n = sum(per_case[c].get("n_distinguishable", 0) for c in cases)
        out["n_distinguishable"] = n
        for suf in ("", "_int", "_dyn"):
            if f"order_ok{suf}_pct" not in per_case[cases[0]]:
                continue
            ok = sum(per_case[c].get("n_distinguishable", 0) * per_case[c][f"order_ok{suf}_pct"]
                     for c in cases if per_case[c].get("n_distinguishable", 0))
            out[f"order_ok{suf}_pct"] = ok / n if n else math.nan
        return out

    for net, group in errors.groupby("bandwidth", sort=False):
        rows.append(pooled(f"all-{net}", group))
    rows.append(pooled("all", errors))
    return pd.DataFrame(rows, columns=list(STATS_COLUMNS))


def _headroom(group: pd.DataFrame) -> dict[str, Any]:
    """The lower bound of any plan (``bound_s``, the replay's bound on the scaled trace)
    and how far above it DDP's default and ``best`` measured: a baseline within a few per
    cent of the bound leaves no schedule room to be 10 % faster."""
    if "bound_s" not in group or group["bound_s"].isna().all():
        return {}
    bound = float(group["bound_s"].iloc[0])
    out: dict[str, Any] = {"bound_s": bound}
    default = group.loc[group["algorithm"] == ddp_default_label(group["algorithm"])]
    best = group.loc[group["algorithm"] == "best"]
    if not default.empty:
        out["ddp_default_over_bound_pct"] = 100.0 * (
            float(default.iloc[0]["measured_s"]) / bound - 1.0)
    if not best.empty:
        out["best_over_bound_pct"] = 100.0 * (float(best.iloc[0]["measured_s"]) / bound - 1.0)
    return out


def _flags(group: pd.DataFrame) -> dict[str, Any]:
    """The most foreign CPU seen in the case and its flagged runs (when measured)."""
    if "foreign_cpu_cores_max" not in group:
        return {}
    return {"foreign_cpu_cores_max": float(group["foreign_cpu_cores_max"].max()),
            "n_flagged_runs": int(group.drop_duplicates("item")["n_flagged_runs"].sum())}


def load_iterations(path: str | Path) -> pd.DataFrame:
    """Read and check an iterations.csv (per timed iteration)."""
    path = Path(path)
    if not path.is_file():
        raise InputError("file not found", path=path)
    frame = read_intermediate(path, (ITERATIONS,), named_errors=True)
    missing = [c for c in ("case", "item", "round", "iteration_s") if c not in frame.columns]
    if missing:
        raise InputError(f"missing column(s) {missing}", path=path)
    bad = ~np.isfinite(frame["iteration_s"].to_numpy(dtype=float)) | (frame["iteration_s"] <= 0)
    if bad.any():
        row = int(np.flatnonzero(bad.to_numpy())[0])
        raise InputError("iteration_s must be a finite number > 0", path=path, line=row + 2,
                         field="iteration_s")
    return frame


@dataclass(frozen=True)
class Analysis:
    """The statistics of one measured.csv (:func:`analyze`); the report layer writes them
    (:func:`gradsched.report.reexec.write_analysis`)."""

    frame: pd.DataFrame
    """The measured rows as read (:func:`load`)."""
    summary: pd.DataFrame
    """:func:`case_stats`: one row per case, per network and overall."""
    intervals: pd.DataFrame | None
    """Per-plan 95 % intervals (:func:`case_intervals`); None without the per-iteration data."""
    stock_ddp: pd.DataFrame
    """Stock DDP with a planner's buckets against the baselines, and ``best`` split into
    implementation and schedule (:func:`gradsched.reexec.stock_ddp.stock_ddp_comparison`)."""

    def errors(self, intervals: bool = True) -> pd.DataFrame:
        """:func:`plan_errors`, with the per-plan intervals when there are some (and
        ``intervals``)."""
        per_plan = plan_errors(self.frame)
        if intervals and self.intervals is not None:
            per_plan = per_plan.merge(self.intervals, on=["case", "algorithm"], how="left")
        return per_plan


def analyze(path: str | Path, iterations: str | Path | None = None) -> Analysis:
    """Statistics of ``path`` (measured.csv; with ``iterations``, bootstrap intervals too)."""
    frame = load(path)
    its = load_iterations(iterations) if iterations is not None else None
    summary = case_stats(frame, its)
    intervals = case_intervals(frame, its)[0] if its is not None else None
    return Analysis(frame, summary, intervals, stock_ddp_comparison(frame, its))


@dataclass(frozen=True)
class Quoted:
    """The frames of a re-execution that the paper's prose quotes (:func:`quoted`); the
    report layer formats them (:mod:`gradsched.report.reexec`,
    :mod:`gradsched.report.stock_ddp`). ``None``: no measured rows."""

    cases: pd.DataFrame | None
    """:func:`case_stats` without the per-iteration data: errors, tau and pair order."""
    versus: pd.DataFrame
    """:func:`gradsched.reexec.best_versus.best_versus_table`: ``best`` against PyTorch DDP
    and the executor's DDP plan, with bootstrap intervals."""
    stock_ddp: pd.DataFrame | None
    """:func:`gradsched.reexec.stock_ddp.stock_ddp_comparison`."""
    level_pct: float = LEVEL
    """The confidence level of every interval, in percent."""
    replicates: int = N_BOOT
    """The bootstrap replicates behind every interval."""


def quoted(measured: pd.DataFrame | None, iterations: pd.DataFrame | None) -> Quoted:
    """The frames the prose quotes of ``measured`` (rows of measured.csv) and
    ``iterations`` (rows of iterations.csv; None: no intervals)."""
    empty = measured is None or measured.empty
    return Quoted(cases=None if empty else case_stats(measured),
                  versus=best_versus_table(measured, iterations),
                  stock_ddp=None if empty else stock_ddp_comparison(measured, iterations))
