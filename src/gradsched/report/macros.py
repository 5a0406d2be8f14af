r"""Prose macros: every number the paper's text quotes, as ``\newcommand`` s.

The paper never types a result by hand; it writes ``\gsMedianHeldoutMapePiecewise\,\%``
and the pipeline writes the value here, computed from the result CSVs. A missing input
gives the text ``n/a`` (never an invented number). :func:`parse_macros` reads the file
back (the tests compare it with the CSVs).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from gradsched.io import write_text_atomic
from gradsched.networks import NETWORKS
from gradsched.reexec.analysis import case_stats
from gradsched.reexec.uncertainty import LEVEL, N_BOOT, bootstrap_medians, percentile_interval
from gradsched.report.architectures import ratios
from gradsched.report.burst import burst_macros
from gradsched.report.collect import extrapolated_mask, host_bound_mask, outside_domain_mask
from gradsched.report.domain_macros import domain_count_macros, headline_domain_macros
from gradsched.report.fit_counts import fit_count_macros
from gradsched.report.gpu_generations import gpu_generation_macros
from gradsched.report.headline import MODEL_KINDS, per_model
from gradsched.report.macro_text import NA, camel, number
from gradsched.report.sharded_macros import sharded_measured_macros
from gradsched.report.stock_ddp_macros import stock_ddp_macros
from gradsched.report.tables import (
    NOT_CREDITED,
    WIDE_COLUMNS,
    algorithm_sort_key,
    latex_escape,
    replay_wide,
    tie_text,
)
from gradsched.report.trace_facts import trace_fact_macros
from gradsched.report.tuned_caps import tuned_cap_macros
from gradsched.ties import RTOL, same_time
from gradsched.traces.bundle import CommTrace, ComputeTrace

PREFIX = "gs"
_NAME_RE = re.compile(r"^[A-Za-z]+$")
_MACRO_RE = re.compile(r"^\\newcommand\{\\(?P<name>[A-Za-z]+)\}\{(?P<value>.*)\}\s*(%.*)?$")


@dataclass(frozen=True)
class Headline:
    """The case the prose singles out (world size ``None`` = the largest one replayed)."""

    trace: str | None = None
    network: str | None = None
    world_size: int | None = None


STANDARD_MODELS = ("alpha-beta", "piecewise", "interp")


def fit_macros(fits: pd.DataFrame | None) -> dict[str, str]:
    out: dict[str, str] = {"NumCommTraces": NA, "NumFittedModels": NA,
                           **fit_count_macros(None)}
    for model in STANDARD_MODELS:
        for key in ("MedianHeldoutMape", "MaxHeldoutMape", "MaxHeldoutMapeTrace", "NumFits"):
            out[key + camel(model)] = NA
    if fits is None or fits.empty:
        return out
    out["NumCommTraces"] = str(fits["trace"].nunique())
    out["NumFittedModels"] = str(fits["model"].nunique())
    out.update(fit_count_macros(fits))
    for model, group in sorted(fits.groupby("model")):
        values = group["heldout_mape_pct"].astype(float).dropna()
        key = camel(str(model))
        out[f"MedianHeldoutMape{key}"] = number(float(values.median()) if len(values) else None)
        out[f"MaxHeldoutMape{key}"] = number(float(values.max()) if len(values) else None)
        out[f"NumFits{key}"] = str(len(values))
        if len(values):
            worst = group.loc[values.idxmax(), "trace"]
            out[f"MaxHeldoutMapeTrace{key}"] = latex_escape(Path(str(worst)).stem)
    return out


def crossws_macros(cross: pd.DataFrame | None) -> dict[str, str]:
    if cross is None or cross.empty:
        return {"NumCrossWsPredictions": NA, "MedianCrossWsMape": NA, "MaxCrossWsMape": NA}
    values = cross["mape_pct"].astype(float).dropna()
    return {
        "NumCrossWsPredictions": str(len(values)),
        "MedianCrossWsMape": number(float(values.median()) if len(values) else None),
        "MaxCrossWsMape": number(float(values.max()) if len(values) else None),
    }


def mgwfbp_gaps(collected: pd.DataFrame, reference: str = "contiguous_optimum") -> pd.Series:
    """Per case: 100 (T_mgwfbp / T_reference - 1), for cases where both were replayed.
    ``contiguous_optimum`` is the exact optimum of MG-WFBP's own family; ``search`` the
    best plan found over every family."""
    wide = replay_wide(collected)
    if "mgwfbp" not in wide or reference not in wide:
        return pd.Series(dtype=float)
    gaps = 100.0 * (wide["mgwfbp"] / wide[reference] - 1.0)
    return gaps.dropna()


def speedups_over_wfbp(collected: pd.DataFrame) -> pd.DataFrame:
    """Per case and algorithm: T_wfbp / T_alg (``best`` and ``oasr`` excluded: see
    :data:`~gradsched.report.tables.NOT_CREDITED`)."""
    wide = replay_wide(collected)
    if "wfbp" not in wide:
        return pd.DataFrame(columns=["trace", "network", "world_size", "algorithm", "speedup"])
    algs = [c for c in wide.columns if c not in (*WIDE_COLUMNS, *NOT_CREDITED)]
    rows = []
    for _, row in wide.iterrows():
        for alg in algs:
            if not np.isnan(row[alg]) and row[alg] > 0:
                rows.append({"trace": row["trace"], "network": row["network"],
                             "world_size": int(row["world_size"]), "algorithm": alg,
                             "speedup": float(row["wfbp"] / row[alg])})
    return pd.DataFrame(rows, columns=["trace", "network", "world_size", "algorithm", "speedup"])


def headline_row(collected: pd.DataFrame, headline: Headline) -> pd.Series | None:
    wide = replay_wide(collected)
    if headline.trace is not None:
        wide = wide[wide["trace"] == headline.trace]
    if headline.network is not None:
        wide = wide[wide["network"] == headline.network]
    if wide.empty:
        return None
    if headline.world_size is not None:
        wide = wide[wide["world_size"] == headline.world_size]
        if wide.empty:
            return None
    else:
        wide = wide[wide["world_size"] == wide["world_size"].max()]
    return wide.iloc[0]


def tolerance_text(rtol: float) -> str:
    """``1e-9`` for 1e-9 (the relative tolerance under which times tie, ``TieRelTol``)."""
    exponent = math.floor(math.log10(rtol))
    mantissa = rtol / 10.0 ** exponent
    return (f"{mantissa:g}" if not math.isclose(mantissa, 1.0) else "1") + f"e{exponent}"


def top_speedup(speed: pd.DataFrame) -> tuple[pd.Series, list[str]]:
    """The row of the largest speed-up (of :func:`speedups_over_wfbp`) and every algorithm
    tied with it on that case (:func:`gradsched.ties.same_time`), in the usual order. Of
    cases tied for the largest, the first by trace, network and world size."""
    top_s = float(speed["speedup"].max())
    tied = speed[[same_time(float(v), top_s) for v in speed["speedup"]]]
    top = tied.sort_values(["trace", "network", "world_size"], kind="stable").iloc[0]
    case = tied[(tied["trace"] == top["trace"]) & (tied["network"] == top["network"])
                & (tied["world_size"] == top["world_size"])]
    return top, sorted(case["algorithm"], key=algorithm_sort_key)


def max_speedup_macros(collected: pd.DataFrame | None) -> dict[str, str]:
    """Where the largest speed-up over WFBP is: the case of the largest one at a world size
    a sweep measured (``MaxSpeedupOverWfbp{Trace,Network,WorldSize}``) and, separately, the
    largest one at the world sizes replayed on a cross-world-size model beyond the sweeps
    (``MaxSpeedupOverWfbpExtrap...``), so that the prose names the scope of each."""
    keys = [f"MaxSpeedupOverWfbp{scope}{what}" for scope in ("", "Extrap")
            for what in ("Trace", "Network", "WorldSize")]
    keys += ["MaxSpeedupOverWfbpExtrap", "MaxSpeedupOverWfbpExtrapAlgorithm"]
    out = dict.fromkeys(keys, NA)
    if collected is None or collected.empty:
        return out
    collected = collected[~outside_domain_mask(collected) & ~host_bound_mask(collected)]
    mask = extrapolated_mask(collected)
    for scope, part in (("", collected[~mask]), ("Extrap", collected[mask])):
        speed = speedups_over_wfbp(part) if not part.empty else pd.DataFrame()
        if speed.empty:
            continue
        top, algorithms = top_speedup(speed)
        key = "MaxSpeedupOverWfbp" + scope
        out[key + "Trace"] = latex_escape(str(top["trace"]))
        out[key + "Network"] = latex_escape(str(top["network"]))
        out[key + "WorldSize"] = str(int(top["world_size"]))
        if scope:
            out[key] = number(float(top["speedup"]), 2)
            out[key + "Algorithm"] = latex_escape(tie_text(algorithms))
    return out


def cpu_capture_macros(inventory: pd.DataFrame | None) -> dict[str, str]:
    """The CPU compute traces captured here (``results/traces/captured.csv``, Table
    captured-compute): how many, in how many the hook overhead (iteration with hooks over
    without, minus one) came out negative -- the run-to-run noise is larger than the hooks'
    cost -- and its range and median, in percent."""
    keys = ["CaptureCpuNumTraces", "CaptureCpuHookNegativeTraces", "CaptureCpuHookMinPct",
            "CaptureCpuHookMaxPct", "CaptureCpuHookMedianPct"]
    out = dict.fromkeys(keys, NA)
    if inventory is None or inventory.empty or "hook_overhead_pct" not in inventory:
        return out
    values = inventory.loc[inventory["kind"] == "compute", "hook_overhead_pct"].astype(
        float).dropna()
    if values.empty:
        return out
    out["CaptureCpuNumTraces"] = str(len(values))
    out["CaptureCpuHookNegativeTraces"] = str(int((values < 0).sum()))
    out["CaptureCpuHookMinPct"] = number(float(values.min()))
    out["CaptureCpuHookMaxPct"] = number(float(values.max()))
    out["CaptureCpuHookMedianPct"] = number(float(values.median()))
    return out


def replay_macros(collected: pd.DataFrame | None, headline: Headline) -> dict[str, str]:
    keys = ["NumReplayCases", "NumAlgorithms", "HeadlineTrace", "HeadlineNetwork",
            "HeadlineWorldSize", "HeadlineFastest", "HeadlineFastestSpeedupOverWfbp",
            "HeadlineMgwfbpSpeedupOverWfbp", "HeadlineGapToLbPct", "MgwfbpContigGapMedianPct",
            "MgwfbpContigGapMaxPct", "NumCasesMgwfbpContig", "MgwfbpSearchGapMedianPct",
            "MgwfbpSearchGapMaxPct", "MaxSpeedupOverWfbp",
            "MaxSpeedupOverWfbpAlgorithm", "NumCasesSearchFastest", "NumCasesOutsideDomain",
            "NumRowsOutsideDomain", "DomainMostlyOutsidePct", "NumRowsMostlyBelow",
            "NumRowsMostlyAbove", "NumCasesHostBound", "HeadlineMgwfbpAboveRangePct",
            "HeadlineMgwfbpBelowRangePct"]
    out = dict.fromkeys(keys, NA)
    out["TieRelTol"] = tolerance_text(RTOL)
    out.update(max_speedup_macros(collected))
    if collected is not None:
        # the prose's claims are about world sizes a sweep measured: the points replayed on
        # a cross-world-size model beyond the sweeps are shown, never counted
        collected = collected[~extrapolated_mask(collected)]
    if collected is None or collected.empty:
        return out
    wide = replay_wide(collected)
    out["NumReplayCases"] = str(len(wide))
    out["NumAlgorithms"] = str(collected["algorithm"].nunique())
    row = headline_row(collected, headline)
    if row is not None:
        out["HeadlineTrace"] = latex_escape(row["trace"])
        out["HeadlineNetwork"] = latex_escape(row["network"])
        out["HeadlineWorldSize"] = str(int(row["world_size"]))
        fastest = row["fastest"]
        out["HeadlineFastest"] = latex_escape(tie_text(row["fastest_tied"]))
        if "wfbp" in row.index and not np.isnan(row["wfbp"]):
            out["HeadlineFastestSpeedupOverWfbp"] = number(row["wfbp"] / row[fastest], 2)
            if "mgwfbp" in row.index and not np.isnan(row["mgwfbp"]):
                out["HeadlineMgwfbpSpeedupOverWfbp"] = number(row["wfbp"] / row["mgwfbp"], 2)
        out["HeadlineGapToLbPct"] = number(100.0 * (row[fastest] / row["lower_bound_s"] - 1.0))
    # maxima and medians count only rows whose communication was mostly priced inside the
    # measured sizes (the others stay in the tables, marked)
    out.update(domain_count_macros(collected))
    out.update(headline_domain_macros(collected, row))
    collected = collected[~outside_domain_mask(collected) & ~host_bound_mask(collected)]
    gaps = mgwfbp_gaps(collected)
    if len(gaps):
        out["MgwfbpContigGapMedianPct"] = number(float(gaps.median()))
        out["MgwfbpContigGapMaxPct"] = number(float(gaps.max()))
        out["NumCasesMgwfbpContig"] = str(len(gaps))
    search_gaps = mgwfbp_gaps(collected, "search")
    if len(search_gaps):
        out["MgwfbpSearchGapMedianPct"] = number(float(search_gaps.median()))
        out["MgwfbpSearchGapMaxPct"] = number(float(search_gaps.max()))
    speed = speedups_over_wfbp(collected)
    if not speed.empty:
        top, algorithms = top_speedup(speed)
        out["MaxSpeedupOverWfbp"] = number(float(top["speedup"]), 2)
        out["MaxSpeedupOverWfbpAlgorithm"] = latex_escape(tie_text(algorithms))
    if "search" in wide:
        others = [c for c in wide.columns if c not in (*WIDE_COLUMNS, "best", "search")]
        if others:
            best_other = wide[others].min(axis=1)
            fastest = [s <= o or same_time(s, o)
                       for s, o in zip(wide["search"], best_other, strict=True)]
            out["NumCasesSearchFastest"] = str(sum(fastest))
    return out


def headline_model_macros(long: pd.DataFrame | None, fits: pd.DataFrame | None = None,
                          comm_trace: str | None = None) -> dict[str, str]:
    """The headline case under each fitted comm model kind (:mod:`gradsched.report.
    headline`): per kind, the fastest schedule, its and MG-WFBP's speed-up over WFBP, MG-WFBP's
    gap to the contiguous optimum and to ``search``, and the kind's held-out error on the
    headline's comm trace (``HeadlineModel<Kind>...``); over the kinds, the range of each
    (``HeadlineModels...Min``/``Max``) and how many kinds agree on the fastest schedule."""
    fields = {"FastestSpeedupOverWfbp": ("fastest_speedup", 2),
              "MgwfbpSpeedupOverWfbp": ("mgwfbp_speedup", 2),
              "MgwfbpContigGapPct": ("mgwfbp_contig_gap_pct", 1),
              "MgwfbpSearchGapPct": ("mgwfbp_search_gap_pct", 1)}
    out = {f"HeadlineModel{camel(k)}{f}": NA for k in MODEL_KINDS
           for f in (*fields, "Fastest", "HeldoutMapePct")}
    out |= {f"HeadlineModels{f}{end}": NA for f in fields for end in ("Min", "Max")}
    out["HeadlineModelsNum"] = NA
    if fits is not None and not fits.empty and comm_trace:
        mine = fits[fits["trace"].astype(str) == comm_trace]
        for row in mine.itertuples(index=False):
            if row.model in MODEL_KINDS:
                out[f"HeadlineModel{camel(row.model)}HeldoutMapePct"] = number(
                    float(row.heldout_mape_pct))
    if long is None or long.empty:
        return out
    table = per_model(long)
    out["HeadlineModelsNum"] = str(len(table))
    for row in table.itertuples(index=False):
        key = "HeadlineModel" + camel(row.model)
        out[key + "Fastest"] = latex_escape(tie_text(row.fastest_tied))
        for name, (column, digits) in fields.items():
            out[key + name] = number(float(getattr(row, column)), digits)
    for name, (column, digits) in fields.items():
        out[f"HeadlineModels{name}Min"] = number(float(table[column].min()), digits)
        out[f"HeadlineModels{name}Max"] = number(float(table[column].max()), digits)
    return out


def calibrated_gap_macros(runs: pd.DataFrame | None) -> dict[str, str]:
    """MG-WFBP against ``search`` and the contiguous optimum when the replay charges the
    per-collective CPU cost the re-execution calibrated, with the executor's issue order
    (rule ``replay_calibrated``; ``runs``: long frame with ``case``, ``algorithm``,
    ``iteration_s``). Gaps are 100 (T_mgwfbp / T_ref - 1): negative where the reference
    replays slower than MG-WFBP."""
    keys = ["CalibratedNumCases", "CalibratedMgwfbpSearchGapMinPct",
            "CalibratedMgwfbpSearchGapMaxPct", "CalibratedSearchSlowerCases",
            "CalibratedMgwfbpContigGapMinPct", "CalibratedMgwfbpContigGapMaxPct",
            "CalibratedNumOutsideDomain"]
    out = dict.fromkeys(keys, NA)
    if runs is None or runs.empty:
        return out
    wide = runs.pivot_table(index="case", columns="algorithm", values="iteration_s",
                            aggfunc="first")
    if not {"mgwfbp", "search", "contiguous_optimum"} <= set(wide.columns):
        return out
    search = 100.0 * (wide["mgwfbp"] / wide["search"] - 1.0)
    contig = 100.0 * (wide["mgwfbp"] / wide["contiguous_optimum"] - 1.0)
    out["CalibratedNumCases"] = str(len(wide))
    out["CalibratedMgwfbpSearchGapMinPct"] = number(float(search.min()))
    out["CalibratedMgwfbpSearchGapMaxPct"] = number(float(search.max()))
    out["CalibratedSearchSlowerCases"] = str(int((search < 0).sum()))
    out["CalibratedMgwfbpContigGapMinPct"] = number(float(contig.min()))
    out["CalibratedMgwfbpContigGapMaxPct"] = number(float(contig.max()))
    compared = runs[runs["algorithm"].isin(["mgwfbp", "search", "contiguous_optimum"])]
    outside = compared.assign(out=outside_domain_mask(compared)).groupby("case")["out"].any()
    out["CalibratedNumOutsideDomain"] = str(int(outside.sum()))
    return out


OVERHEAD_THRESHOLD = 0.03
"""Hook overhead above which a GPU capture's rows are counted as distorted (the tolerance the
capture holds its backward rows to)."""


def gpu_capture_macros(sidecars: dict[str, dict | None]) -> dict[str, str]:
    """The GPU captures' own record of what the per-layer hooks cost (``capture_overhead``
    of each sidecar: the iteration with hooks over the same run's iteration without, minus
    one): the number of traces, the largest overhead and its trace, and the overhead of each
    (``CaptureHookOverhead<Stem>Pct``; stem = trace file name without ``.csv``)."""
    out = {"CaptureOverheadThresholdPct": number(100 * OVERHEAD_THRESHOLD, 0),
           "CaptureNumGpuTraces": NA,
           "CaptureHookOverheadMaxPct": NA,
           "CaptureHookOverheadMaxTrace": NA, "CaptureNumGpuTracesOverThreePct": NA}
    overheads = {stem: float(meta["capture_overhead"]) for stem, meta in sidecars.items()
                 if meta and meta.get("capture_overhead") is not None}
    if not overheads:
        return out
    top = max(sorted(overheads), key=lambda stem: overheads[stem])
    out["CaptureNumGpuTraces"] = str(len(overheads))
    out["CaptureHookOverheadMaxPct"] = number(100.0 * overheads[top])
    out["CaptureHookOverheadMaxTrace"] = latex_escape(top)
    out["CaptureNumGpuTracesOverThreePct"] = str(sum(v > OVERHEAD_THRESHOLD
                                                    for v in overheads.values()))
    for stem, value in overheads.items():
        out[f"CaptureHookOverhead{camel(stem)}Pct"] = number(100.0 * value)
    return out


def compare_macros(compare: pd.DataFrame | None) -> dict[str, str]:
    """Reproduced vs published (:mod:`gradsched.report.compare`): all checks, then the
    parser's self-checks (``CompareSelf...``) apart from the reproductions of published
    measurements (``CompareRepro...``: count, within tolerance, the tolerance, the range of
    published and reproduced values, and the largest relative difference)."""
    keys = ["CompareNumChecked", "CompareNumWithin", "CompareNumSkipped"]
    keys += [f"Compare{scope}{key}" for scope in ("Self", "Repro")
             for key in ("NumChecked", "NumWithin", "TolerancePct", "MaxAbsDiffPct")]
    keys += [f"CompareRepro{what}{end}" for what in ("Published", "Reproduced")
             for end in ("Min", "Max")]
    out = dict.fromkeys(keys, NA)
    if compare is None or compare.empty:
        return out
    checked = compare[compare["verdict"].isin(["within", "outside"])]
    out["CompareNumChecked"] = str(len(checked))
    out["CompareNumWithin"] = str(int((checked["verdict"] == "within").sum()))
    out["CompareNumSkipped"] = str(int((compare["verdict"] == "skipped").sum()))
    if "kind" not in checked:
        return out
    for scope, kind in (("Self", "self-check"), ("Repro", "reproduction")):
        rows = checked[checked["kind"] == kind]
        if rows.empty:
            continue
        out[f"Compare{scope}NumChecked"] = str(len(rows))
        out[f"Compare{scope}NumWithin"] = str(int((rows["verdict"] == "within").sum()))
        tolerance = rows["tolerance_pct"].astype(float).unique()
        out[f"Compare{scope}TolerancePct"] = (number(float(tolerance[0]), 1)
                                             if len(tolerance) == 1 else NA)
        diff = rows["rel_diff_pct"].astype(float).abs().max()
        out[f"Compare{scope}MaxAbsDiffPct"] = number(float(diff), 1 if scope == "Repro" else 3)
        if scope == "Repro":
            for what, column in (("Published", "published"), ("Reproduced", "reproduced")):
                out[f"CompareRepro{what}Min"] = number(float(rows[column].min()), 2)
                out[f"CompareRepro{what}Max"] = number(float(rows[column].max()), 2)
    return out


REEXEC_WORLD_SIZES = (2, 3)
_REEXEC_KEYS = {
    "MedianErr": ("median_abs_err_pct", 1), "MedianErrInt": ("median_abs_err_int_pct", 1),
    "MedianErrDyn": ("median_abs_err_dyn_pct", 1),
    "Tau": ("tau", 2), "TauInt": ("tau_int", 2), "OrderOk": ("order_ok_pct", 0),
    "OrderOkInt": ("order_ok_int_pct", 0), "Pairs": ("n_distinguishable", 0),
    "NumPlans": ("n_plans", 0), "Spread": ("median_spread_pct", 1),
}


def plain_replay_macros(measured: pd.DataFrame) -> dict[str, str]:
    """The plain replay's median |error| (``ReexecMedianErrRaw``: no interference
    calibration, the compute trace as committed rather than scaled to the same launch's
    compute-only control) and the range of that scale, so that the calibrated error is
    never quoted alone."""
    out: dict[str, str] = {}
    if "predicted_raw_s" not in measured:
        return out
    plain = measured.loc[measured["kind"] != "control"]
    raw = (100.0 * (plain["predicted_raw_s"] / plain["measured_s"] - 1.0)).abs().dropna()
    if len(raw):
        out["ReexecMedianErrRaw"] = number(float(raw.median()), 1)
    scale = plain["compute_scale"].astype(float).dropna()
    if len(scale):
        out["ReexecComputeScaleMin"] = number(float(scale.min()), 2)
        out["ReexecComputeScaleMax"] = number(float(scale.max()), 2)
    return out


def reexec_macros(measured: pd.DataFrame | None) -> dict[str, str]:
    """The re-execution experiment (``paper/data/reexec/measured.csv``): pooled errors,
    tau and pair order over all cases (``Reexec...``) and per network
    (``Reexec<Network>...``), the number of cases, in how many the best plan measured at
    least as fast as PyTorch DDP (25 MiB), the median executor-vs-DDP difference, and the
    calibrated per-collective compute cost per network and world size (ms)."""
    scopes = {"": "all", **{camel(n): f"all-{n}" for n in NETWORKS}}
    out = {f"Reexec{scope}{key}": NA for scope in scopes for key in _REEXEC_KEYS}
    out |= {"ReexecMedianErrIntPerLayer": NA, "ReexecMedianErrIntGlobal": NA}
    out |= {"ReexecMedianErrRaw": NA, "ReexecComputeScaleMin": NA,
            "ReexecComputeScaleMax": NA}
    out |= {"ReexecNumCases": NA, "ReexecBestAsFastCases": NA,
            "ReexecExecVsDdpMedian": NA, "ReexecExecVsDdpWorst": NA}
    out |= {f"Reexec{camel(n)}P{camel(str(w))}CollectiveCpuMs": NA
            for n in NETWORKS for w in REEXEC_WORLD_SIZES}
    if measured is None or measured.empty:
        return out
    stats = case_stats(measured).set_index("case")
    for scope, row in scopes.items():
        if row not in stats.index:
            continue
        for key, (col, digits) in _REEXEC_KEYS.items():
            if col in stats.columns:
                out[f"Reexec{scope}{key}"] = number(float(stats.loc[row, col]), digits)
    cases = stats.loc[~stats.index.str.startswith("all")]
    out["ReexecNumCases"] = str(len(cases))
    fast = cases["best_at_least_as_fast"].dropna()
    out["ReexecBestAsFastCases"] = str(int(fast.astype(bool).sum())) if len(fast) else NA
    gap = cases["ddp_executor_vs_native_pct"].dropna().astype(float)
    if len(gap):
        out["ReexecExecVsDdpMedian"] = number(float(gap.median()), 1)
        out["ReexecExecVsDdpWorst"] = number(float(gap.loc[gap.abs().idxmax()]), 1)
    out.update(plain_replay_macros(measured))
    if "update" in measured:
        plans = measured.loc[measured["kind"] != "control"]
        err = (100.0 * (plans["predicted_interference_s"] - plans["measured_s"])
               / plans["measured_s"])
        for mode, key in (("per_layer", "PerLayer"), ("global", "Global")):
            mine = err[plans["update"] == mode]
            if len(mine):
                out[f"ReexecMedianErrInt{key}"] = number(float(mine.median()), 1)
    if "collective_cpu_s" in measured:
        for net in NETWORKS:
            for world in REEXEC_WORLD_SIZES:
                values = measured.loc[(measured["bandwidth"] == net)
                                      & (measured["world_size"] == world), "collective_cpu_s"]
                if len(values):
                    out[f"Reexec{camel(net)}P{camel(str(world))}CollectiveCpuMs"] = number(
                        1e3 * float(values.iloc[0]), 2)
    return out


_BOOT_KEYS = ("ReexecSepPairs", "ReexecAllPairs", "ReexecTauSepMedian", "ReexecOrderOkSep",
              "ReexecTauIntLoMedian", "ReexecSpreadToNoiseMin", "ReexecSpreadToNoiseMax",
              "ReexecBestVsDefaultMin", "ReexecBestVsDefaultMax", "ReexecBestTenPctCases",
              "ReexecBestNotSlowerTunedCases", "ReexecBestVsTunedMin", "ReexecBestVsTunedMax",
              "ReexecFlaggedRuns", "ReexecForeignMax", "ReexecCommCases",
              "ReexecDefaultOverBoundMin", "ReexecDefaultOverBoundMax",
              "ReexecBestOverBoundMin", "ReexecBestOverBoundMax")


def reexec_boot_macros(stats: pd.DataFrame | None) -> dict[str, str]:
    """Bootstrap statistics of the re-execution (``reexec analyze --iterations`` stats
    CSV, :mod:`gradsched.reexec.uncertainty`): separated pairs and tau on them, the
    spread-to-noise range, ``best`` against PyTorch DDP's default and the tuned cap
    (speed-ups; a case counts as "not slower than tuned" when the interval's upper end
    reaches 1), flagged runs. Communication-bound cases: every network but loopback."""
    out = {key: NA for key in _BOOT_KEYS}
    out["ReexecCiLevel"] = number(LEVEL, 0)  # settings of the bootstrap, not results
    out["ReexecBootReplicates"] = str(N_BOOT)
    if stats is None or stats.empty or "n_separated_pairs" not in stats:
        return out
    cases = stats.loc[~stats["case"].astype(str).str.startswith("all")]
    sep = cases["n_separated_pairs"].astype(float)
    out["ReexecSepPairs"] = str(int(sep.sum()))
    out["ReexecAllPairs"] = str(int(cases["n_pairs"].astype(float).sum()))
    ok = cases["order_ok_separated_pct"].astype(float)
    if sep.sum() > 0:
        out["ReexecOrderOkSep"] = number(float((ok.fillna(0) * sep).sum() / sep.sum()), 0)
    out["ReexecTauSepMedian"] = number(float(cases["tau_separated"].astype(float).median()), 2)
    out["ReexecTauIntLoMedian"] = number(float(cases["tau_int_lo"].astype(float).median()), 2)
    ratio = cases["spread_to_noise"].astype(float)
    out["ReexecSpreadToNoiseMin"] = number(float(ratio.min()), 1)
    out["ReexecSpreadToNoiseMax"] = number(float(ratio.max()), 1)
    comm = cases.loc[cases["bandwidth"].astype(str) != "loopback"]
    out["ReexecCommCases"] = str(len(comm))
    default = cases["best_vs_ddp_default_speedup"].astype(float)
    tuned = comm["best_vs_ddp_tuned_speedup"].astype(float)
    out["ReexecBestVsDefaultMin"] = number(float(default.min()), 2)
    out["ReexecBestVsDefaultMax"] = number(float(default.max()), 2)
    out["ReexecBestTenPctCases"] = str(int((default >= 1.10).sum()))
    out["ReexecBestVsTunedMin"] = number(float(tuned.min()), 2)
    out["ReexecBestVsTunedMax"] = number(float(tuned.max()), 2)
    out["ReexecBestNotSlowerTunedCases"] = str(int(
        (comm["best_vs_ddp_tuned_speedup_hi"].astype(float) >= 1.0).sum()))
    for key, col in (("DefaultOverBound", "ddp_default_over_bound_pct"),
                     ("BestOverBound", "best_over_bound_pct")):
        if col in comm and comm[col].notna().any():
            out[f"Reexec{key}Min"] = number(float(comm[col].min()), 0)
            out[f"Reexec{key}Max"] = number(float(comm[col].max()), 0)
    if "n_flagged_runs" in cases:
        out["ReexecFlaggedRuns"] = str(int(cases["n_flagged_runs"].fillna(0).sum()))
        out["ReexecForeignMax"] = number(float(cases["foreign_cpu_cores_max"].max()), 2)
    return out


_VERSUS = {"Default": ("ddp-native-default", "ddp-native-25"), "ExecDdp": ("ddp",)}
"""What ``best`` is compared with: PyTorch DDP as users get it (no ``bucket_cap_mb``; 25 MB
in older data) and the executor running DDP's own bucket plan (algorithm ``ddp``)."""


def _item(case_rows: pd.DataFrame, algorithms: tuple[str, ...]) -> str | None:
    items = dict(zip(case_rows["algorithm"].astype(str), case_rows["item"].astype(str),
                     strict=False))
    return next((items[a] for a in algorithms if a in items), None)


def best_versus_table(measured: pd.DataFrame | None, iterations: pd.DataFrame | None
                      ) -> pd.DataFrame:
    """Per re-execution case and reference (``Default``, ``ExecDdp``; :data:`_VERSUS`;
    ``TunedCap``: PyTorch DDP at the fastest cap measured), and
    the executor's DDP plan against PyTorch DDP's default (``ExecDdpOverDefault``):
    ``ratio`` = T_reference / T_compared (above 1: the compared item measured faster) with
    its bootstrap interval (medians of the iterations resampled within rounds,
    :func:`gradsched.reexec.uncertainty.bootstrap_medians`, over the case's non-control
    items, as ``reexec analyze`` draws them)."""
    columns = ["case", "versus", "ratio", "ratio_lo", "ratio_hi"]
    if measured is None or measured.empty or iterations is None or iterations.empty:
        return pd.DataFrame(columns=columns)
    rows = []
    for case, group in measured.groupby("case", sort=True):
        plans = group.loc[group["kind"] != "control"]
        best = _item(plans, ("best",))
        if best is None:
            continue
        reps = bootstrap_medians(iterations, str(case), plans["item"].astype(str).unique())
        refs = {name: _item(plans, algs) for name, algs in _VERSUS.items()}
        native = plans.loc[plans["kind"] == "ddp-native", "item"].astype(str).unique()
        if len(native):  # the tuned baseline: the fastest cap measured
            refs["TunedCap"] = min(sorted(native), key=lambda item: reps.point[item])
        pairs = [(name, ref, best) for name, ref in refs.items()]
        pairs.append(("ExecDdpOverDefault", refs["Default"], refs["ExecDdp"]))
        for name, ref, mine in pairs:
            if ref is None or mine is None:
                continue
            lo, hi = percentile_interval(reps.medians[ref] / reps.medians[mine])
            rows.append({"case": str(case), "versus": name,
                         "ratio": reps.point[ref] / reps.point[mine],
                         "ratio_lo": lo, "ratio_hi": hi})
    return pd.DataFrame(rows, columns=columns)


def _case_label(case: str) -> str:
    """``resnet50-b2-p2-tbf1gbit`` -> ``resnet50 b2 P=2 1 Gbit/s`` (network label of
    :data:`gradsched.networks.NETWORKS`)."""
    *head, net = case.split("-")
    label = NETWORKS[net].long_label if net in NETWORKS else net
    parts = [p if not (p.startswith("p") and p[1:].isdigit()) else f"P={p[1:]}" for p in head]
    return latex_escape(" ".join([*parts, label]))


def reexec_versus_macros(measured: pd.DataFrame | None, iterations: pd.DataFrame | None
                         ) -> dict[str, str]:
    """``best`` against PyTorch DDP's default (``ReexecBestVsDefault...``) and against the
    executor running DDP's plan (``ReexecBestVsExecDdp...``) and DDP at its fastest measured
    cap (``ReexecBestVsTunedCap...``), and the executor's DDP plan
    against PyTorch DDP (``ReexecExecDdpOverDefault...``): the range of the ratios, the
    cases whose interval lies above 1 (``FasterCases``: faster beyond the noise) and below 1
    (``SlowerCases``), and each case as ``ratio [lo, hi]`` (``...List``)."""
    names = (*_VERSUS, "TunedCap", "ExecDdpOverDefault")
    prefix = {n: ("Reexec" if n == "ExecDdpOverDefault" else "ReexecBestVs") + n for n in names}
    out = {prefix[n] + key: NA for n in names
           for key in ("Min", "Max", "FasterCases", "SlowerCases", "List", "Cases")}
    table = best_versus_table(measured, iterations)
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
            f"{_case_label(r.case)}: {r.ratio:.2f} [{r.ratio_lo:.2f}, {r.ratio_hi:.2f}]"
            for r in rows.itertuples(index=False))
    return out


def architecture_macros(runs: list[dict] | None) -> dict[str, str]:
    """Hierarchical and PS runs on the emulated cluster (:mod:`gradsched.report.
    architectures`): measured and predicted ratios per link (``ArchHierFlat<Link>Meas``,
    ``...Pred``, ``ArchPsFlat<Link>...``), per ratio the rounds, those measured below 1 and
    those whose two p10-p90 ranges overlap (``...Rounds``, ``...RoundsBelowOne``,
    ``...RoundsOverlap``), and the range of the errors."""
    links = ("1gbit", "100mbit")
    out = {f"Arch{name}{camel(link)}{kind}": NA for name in ("HierFlat", "PsFlat")
           for link in links for kind in ("Meas", "Pred", "Rounds", "RoundsBelowOne",
                                          "RoundsOverlap")}
    out |= {"ArchErrMin": NA, "ArchErrMax": NA, "ArchNumRuns": NA}
    if not runs:
        return out
    for row in ratios(runs).itertuples(index=False):
        name = "HierFlat" if row.ratio.startswith("hierarchical") else "PsFlat"
        out[f"Arch{name}{camel(row.link)}Meas"] = number(float(row.measured), 2)
        out[f"Arch{name}{camel(row.link)}Pred"] = number(float(row.predicted), 2)
        out[f"Arch{name}{camel(row.link)}Rounds"] = str(int(row.rounds))
        out[f"Arch{name}{camel(row.link)}RoundsBelowOne"] = str(int(row.rounds_below_one))
        out[f"Arch{name}{camel(row.link)}RoundsOverlap"] = str(int(row.rounds_overlapping))
    errors = [100.0 * (float(r["predicted_iteration_s"]) - float(r["median_s"]))
              / float(r["median_s"]) for r in runs]
    out["ArchErrMin"] = number(min(errors), 0)
    out["ArchErrMax"] = number(max(errors), 0)
    out["ArchNumRuns"] = str(len(runs))
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


_GPU_KEYS = ("GpuImportTraces", "GpuImportFwdMinPct", "GpuImportBwdMinPct",
             "GpuImportFwdLinkedMinPct",
             "GpuKernelOverEventMinPct", "GpuKernelOverEventMaxPct", "GpuBusyMin", "GpuBusyMax",
             "GpuBwdSplitTvdMax", "GpuCorrected", "GpuCorrectedHostBound", "GpuRawErrMaxPct",
             "GpuCorrectedErrMaxPct", "GpuSpreadMax")


def gpu_validation_macros(kineto: pd.DataFrame | None, corrections: pd.DataFrame | None
                          ) -> dict[str, str]:
    """Our own H200 measurements: the Kineto import of the hook-free profiler traces
    (data/h200/kineto-import-report.csv, workflow/scripts/h200_kineto_report.py) and the
    corrected captures (data/h200/correction-report.csv, workflow/scripts/h200_correct.py)."""
    out = dict.fromkeys(_GPU_KEYS, NA)
    if kineto is not None and len(kineto):
        ratio = pd.concat([kineto["fwd_kernel_over_event"], kineto["bwd_kernel_over_event"]])
        steps = kineto[kineto["trace"].str.startswith("kineto-steps/")]
        out.update({
            "GpuImportTraces": str(len(kineto)),
            "GpuImportFwdMinPct": number(100 * kineto["fwd_attributed"].min(), 1),
            "GpuImportBwdMinPct": number(100 * kineto["bwd_attributed"].min(), 1),
            "GpuImportFwdLinkedMinPct": number(100 * kineto["fwd_linked"].min(), 0),
            "GpuKernelOverEventMinPct": number(100 * ratio.min(), 0),
            "GpuKernelOverEventMaxPct": number(100 * ratio.max(), 0),
            "GpuBusyMin": number(steps["busy_over_unprofiled"].min(), 2),
            "GpuBusyMax": number(steps["busy_over_unprofiled"].max(), 2),
            "GpuBwdSplitTvdMax": number(kineto["bwd_split_tvd_vs_hooks"].max(), 2),
        })
    if corrections is not None and len(corrections):
        raw = corrections[["raw_forward_rel_error", "raw_backward_rel_error"]].abs().to_numpy()
        fixed = corrections[["forward_rel_error", "backward_rel_error"]].abs().to_numpy()
        out.update({
            "GpuCorrected": str(len(corrections)),
            "GpuCorrectedHostBound": str(int(corrections["host_bound"].astype(bool).sum())),
            "GpuRawErrMaxPct": number(100 * raw.max(), 0),
            "GpuCorrectedErrMaxPct": number(100 * fixed.max(), 1),
            "GpuSpreadMax": number(corrections["spread_max_over_min"].max(), 2),
        })
    return out


def all_macros(fits: pd.DataFrame | None = None, cross: pd.DataFrame | None = None,
               collected: pd.DataFrame | None = None, compare: pd.DataFrame | None = None,
               headline: Headline | None = None,
               reexec: pd.DataFrame | None = None,
               executor_bench: dict | None = None,
               reexec_stats: pd.DataFrame | None = None,
               architectures: list[dict] | None = None,
               gpu_kineto: pd.DataFrame | None = None,
               gpu_corrections: pd.DataFrame | None = None,
               gpu_captures: dict[str, dict | None] | None = None,
               compute_traces: list[ComputeTrace] | None = None,
               sweeps: list[CommTrace] | None = None,
               burst_sweep: CommTrace | None = None,
               reexec_iterations: pd.DataFrame | None = None,
               headline_models: pd.DataFrame | None = None,
               headline_comm: str | None = None,
               calibrated: pd.DataFrame | None = None,
               captured: pd.DataFrame | None = None,
               sharded_measured: pd.DataFrame | None = None) -> dict[str, str]:
    """Every macro (name without prefix -> TeX text). ``compute_traces`` and ``sweeps``:
    the committed traces whose facts the prose quotes (:mod:`.trace_facts`);
    ``burst_sweep``: the shaped sweep whose token-bucket burst it quotes (:mod:`.burst`)."""
    out: dict[str, str] = {}
    out.update(fit_macros(fits))
    out.update(crossws_macros(cross))
    out.update(replay_macros(collected, headline or Headline()))
    out.update(headline_model_macros(headline_models, fits, headline_comm))
    out.update(calibrated_gap_macros(calibrated))
    out.update(cpu_capture_macros(captured))
    out.update(gpu_generation_macros(collected))
    out.update(compare_macros(compare))
    out.update(reexec_macros(reexec))
    out.update(reexec_boot_macros(reexec_stats))
    out.update(reexec_versus_macros(reexec, reexec_iterations))
    out.update(stock_ddp_macros(reexec, reexec_iterations))
    out.update(sharded_measured_macros(sharded_measured))
    out.update(architecture_macros(architectures))
    out.update(executor_bench_macros(executor_bench))
    out.update(gpu_validation_macros(gpu_kineto, gpu_corrections))
    out.update(gpu_capture_macros(gpu_captures or {}))
    # --- facts quoted in the prose (trace_facts.py, burst.py, tuned_caps.py) ---
    out.update(trace_fact_macros(compute_traces or [], sweeps or []))
    out.update(burst_macros(burst_sweep))
    out.update(tuned_cap_macros(reexec_stats))
    return out


def render(macros: dict[str, str]) -> str:
    lines = ["% generated by `gradsched report macros` from the pipeline's result CSVs.",
             "% Do not edit: rerun the pipeline (make reproduce).", ""]
    for name in sorted(macros):
        full = PREFIX + name
        if not _NAME_RE.match(full):
            raise ValueError(f"macro name {full!r} must be letters only")
        lines.append(rf"\newcommand{{\{full}}}{{{macros[name]}}}")
    return "\n".join(lines) + "\n"


def write_macros(path: str | Path, macros: dict[str, str]) -> None:
    write_text_atomic(path, render(macros))


def parse_macros(text: str) -> dict[str, str]:
    """``\\newcommand{\\gsX}{v}`` lines -> ``{"X": "v"}`` (prefix removed)."""
    out = {}
    for line in text.splitlines():
        match = _MACRO_RE.match(line.strip())
        if match:
            name = match.group("name")
            out[name[len(PREFIX):] if name.startswith(PREFIX) else name] = match.group("value")
    return out
