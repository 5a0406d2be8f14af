"""The project's one bootstrap: intervals of every measured time and ratio of times.

Every measured item (a plan through the executor, PyTorch DDP at one cap or a cap list, an
FSDP2 plan, the control; timed by :mod:`gradsched.runtime.rounds`) has ``rounds x iters``
timed iterations. The all-reduce re-execution, the sharded one
(:mod:`gradsched.reexec.sharded`), the stock-DDP comparison
(:mod:`gradsched.reexec.stock_ddp`), ``gradsched advise --validate``
(:mod:`gradsched.reexec.validate`) and the report's macros all take their intervals
from :func:`bootstrap_medians`. A case's statistics are functions of the items'
*median* iteration times, so their uncertainty is estimated by the bootstrap (Efron &
Tibshirani, *An Introduction to the Bootstrap*, 1993, ch. 6 and 13: percentile
intervals): each replicate resamples every item's iterations with replacement *within
each round* (the rounds are the experiment's strata: a round's iterations share that
round's machine state), takes the medians again and recomputes the statistic. The 2.5th
and 97.5th percentiles of :data:`N_BOOT` replicates are the 95 % interval. The random
generator is seeded from :data:`SEED` and the case's items, so intervals are a pure
function of the committed iterations (byte-identical re-runs).

What is resampled is the measurement; the prediction of each plan is held fixed (its
compute scale comes from the control's median, whose own noise the intervals leave out).

Statistics (per case, over its distinct executions: algorithms that ran the same plan
count once; the control is left out):

* each plan's median with its interval; the prediction error with its interval;
* Kendall's tau-b of predicted vs measured medians, with its interval;
* the pairs the measurement *separates* (95 % intervals disjoint) and, on those, the
  share the prediction orders the same way and ``tau_separated`` = (agreeing -
  disagreeing) / pairs (a tie in the prediction counts as neither);
* ``spread_to_noise``: the predicted spread between plans (max - min over the median
  prediction) over the noise (the median over plans of the half interval relative to the
  median); below ~1 the experiment cannot rank the plans whatever the model;
* the speed-up of ``best`` over PyTorch DDP at its default cap and at the best cap
  measured (the tuned baseline), as ratios of medians with intervals.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from gradsched.reexec.kendall import tau_b_columns

N_BOOT = 2000
SEED = 16
LEVEL = 95.0


@dataclass(frozen=True)
class Replicates:
    """Bootstrap replicates of the median of every item: ``medians[item]`` has
    :data:`N_BOOT` values; ``point[item]`` is the median of all its iterations."""

    point: Mapping[str, float]
    medians: Mapping[str, np.ndarray]

    def interval(self, item: str) -> tuple[float, float]:
        return percentile_interval(self.medians[item])


def ratio_interval(reps: Replicates, numerator: str, denominator: str
                   ) -> tuple[float, float, float]:
    """median(numerator) / median(denominator) over all iterations, and the percentile
    interval of the ratio recomputed in every replicate."""
    lo, hi = percentile_interval(reps.medians[numerator] / reps.medians[denominator])
    return reps.point[numerator] / reps.point[denominator], lo, hi


def percentile_interval(values: np.ndarray) -> tuple[float, float]:
    """The central :data:`LEVEL` % percentile interval of replicate ``values``."""
    tail = (100.0 - LEVEL) / 2.0
    lo, hi = np.percentile(values, [tail, 100.0 - tail])
    return float(lo), float(hi)


def _rng(case: str, items: Sequence[str]) -> np.random.Generator:
    digest = hashlib.sha256("\n".join([case, *items]).encode()).digest()
    return np.random.default_rng([SEED, int.from_bytes(digest[:8], "little")])


def bootstrap_medians(iterations: pd.DataFrame, case: str, items: Sequence[str],
                      n_boot: int = N_BOOT) -> Replicates:
    """Median replicates of ``items`` of ``case`` from per-iteration rows (columns
    ``case``, ``item``, ``round``, ``iteration_s``), resampled within rounds."""
    rows = iterations.loc[iterations["case"] == case]
    ordered = sorted(set(items))
    rng = _rng(case, ordered)
    point: dict[str, float] = {}
    medians: dict[str, np.ndarray] = {}
    for item in ordered:
        mine = rows.loc[rows["item"] == item]
        if mine.empty:
            raise ValueError(f"case {case!r}: no iterations of item {item!r}")
        strata = [g["iteration_s"].to_numpy(dtype=float)
                  for _, g in mine.groupby("round", sort=True)]
        draws = [s[rng.integers(0, len(s), size=(n_boot, len(s)))] for s in strata]
        medians[item] = np.median(np.concatenate(draws, axis=1), axis=1)
        point[item] = float(np.median(np.concatenate(strata)))
    return Replicates(point, medians)


def kendall_tau(pred: np.ndarray, meas: np.ndarray) -> float:
    """Kendall's tau-b (NaN for fewer than 3 values or a constant input)."""
    return float(tau_b_columns(pred, meas)[0])


def separated_pairs(lo: np.ndarray, hi: np.ndarray) -> list[tuple[int, int]]:
    """Index pairs whose intervals ``[lo, hi]`` are disjoint."""
    n = len(lo)
    return [(i, j) for i in range(n) for j in range(i + 1, n) if hi[i] < lo[j] or hi[j] < lo[i]]


def pair_agreement(pred: np.ndarray, meas: np.ndarray, pairs: Sequence[tuple[int, int]]
                   ) -> tuple[float, float]:
    """``(order_ok_pct, tau)`` on ``pairs``: the share ordered alike (a predicted tie
    counts half) and (agree - disagree) / pairs; NaN without pairs."""
    if not pairs:
        return math.nan, math.nan
    signs = np.array([np.sign(pred[i] - pred[j]) * np.sign(meas[i] - meas[j])
                      for i, j in pairs])
    ok = 100.0 * float(np.mean(np.where(signs > 0, 1.0, np.where(signs == 0, 0.5, 0.0))))
    return ok, float(np.mean(signs))


@dataclass(frozen=True)
class CaseUncertainty:
    """Per-plan intervals (``plans``: one row per distinct execution) and case-level
    statistics (``stats``)."""

    plans: pd.DataFrame
    stats: dict[str, float | int | str | bool]


def case_uncertainty(runs: pd.DataFrame, iterations: pd.DataFrame,
                     item_of: Mapping[str, str], prediction: str = "predicted_s"
                     ) -> CaseUncertainty:
    """Intervals of one case. ``runs``: its distinct executions (columns ``case``,
    ``algorithm``, ``item``, ``prediction``); ``iterations``: per-iteration rows;
    ``item_of``: every algorithm of the case -> the item it ran."""
    case = str(runs["case"].iloc[0])
    items = runs["item"].astype(str).tolist()
    reps = bootstrap_medians(iterations, case, items)
    pred = runs[prediction].to_numpy(dtype=float)
    meas = np.array([reps.point[i] for i in items])
    boot = np.stack([reps.medians[i] for i in items])  # items x N_BOOT
    lo, hi = np.percentile(boot, [(100 - LEVEL) / 2, 100 - (100 - LEVEL) / 2], axis=1)
    err_boot = 100.0 * (pred[:, None] - boot) / boot
    err_lo, err_hi = np.percentile(err_boot, [(100 - LEVEL) / 2, 100 - (100 - LEVEL) / 2],
                                   axis=1)
    plans = pd.DataFrame({
        "case": case, "algorithm": runs["algorithm"].to_numpy(), "item": items,
        "predicted_s": pred, "measured_s": meas, "measured_lo_s": lo, "measured_hi_s": hi,
        "error_pct": 100.0 * (pred - meas) / meas, "error_lo_pct": err_lo,
        "error_hi_pct": err_hi})
    stats: dict[str, float | int | str | bool] = {"case": case, "n_runs": len(items)}
    stats.update(_tau_stats(pred, meas, boot, lo, hi))
    stats.update(_noise_stats(pred, meas, lo, hi))
    stats.update(_versus_ddp(item_of, reps))
    return CaseUncertainty(plans, stats)


def _tau_stats(pred: np.ndarray, meas: np.ndarray, boot: np.ndarray, lo: np.ndarray,
               hi: np.ndarray) -> dict[str, float | int]:
    taus = tau_b_columns(pred, boot)  # one tau per bootstrap column
    finite = taus[np.isfinite(taus)]
    tau_lo, tau_hi = percentile_interval(finite) if finite.size else (math.nan, math.nan)
    pairs = separated_pairs(lo, hi)
    ok, tau_sep = pair_agreement(pred, meas, pairs)
    n = len(pred)
    return {"tau": kendall_tau(pred, meas), "tau_lo": tau_lo, "tau_hi": tau_hi,
            "n_pairs": n * (n - 1) // 2, "n_separated_pairs": len(pairs),
            "order_ok_separated_pct": ok, "tau_separated": tau_sep}


def _noise_stats(pred: np.ndarray, meas: np.ndarray, lo: np.ndarray, hi: np.ndarray
                 ) -> dict[str, float]:
    spread = 100.0 * float((pred.max() - pred.min()) / np.median(pred))
    noise = 100.0 * float(np.median((hi - lo) / 2.0 / meas))
    return {"predicted_spread_pct": spread, "noise_pct": noise,
            "spread_to_noise": spread / noise if noise > 0 else math.inf}


def _versus_ddp(by_alg: Mapping[str, str], reps: Replicates) -> dict[str, float | str]:
    """``best`` against DDP's default cap (25 MB) and against the fastest measured cap."""
    out: dict[str, float | str] = {}
    best = by_alg.get("best")
    ddp_items = {a: i for a, i in by_alg.items() if a.startswith("ddp-native-")}
    if best is None or not ddp_items:
        return out
    tuned_alg = min(ddp_items, key=lambda a: (reps.point[ddp_items[a]], a))
    out["tuned_ddp"] = tuned_alg
    default = ("ddp-native-default" if "ddp-native-default" in ddp_items
               else "ddp-native-25")
    for name, alg in (("default", default), ("tuned", tuned_alg)):
        if alg not in ddp_items:
            continue
        point, lo, hi = ratio_interval(reps, ddp_items[alg], best)
        out[f"best_vs_ddp_{name}_speedup"] = point
        out[f"best_vs_ddp_{name}_speedup_lo"] = lo
        out[f"best_vs_ddp_{name}_speedup_hi"] = hi
    return out
