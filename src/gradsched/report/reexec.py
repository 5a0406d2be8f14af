r"""Re-execution figure and table: the replay's predictions vs the plans run for real.

* :func:`figure_reexec` -- the order within each case: one panel per case, predicted (with
  the calibrated interference) against measured iteration time, both relative to the case's
  PyTorch DDP default, the y = x line, the measured median's interval as error bars;
  colour = algorithm, marker = kind of run.
* :func:`reexec_table` / :func:`write_reexec_table` -- per-plan errors (%) per case, without
  / with interference, then median |error|, worst error and Kendall's tau per case, and
  the best plan vs PyTorch DDP (25 MiB).

* :func:`reexec_macros`, :func:`reexec_boot_macros` -- the prose macros: errors, tau and
  pair order pooled and per network, the bootstrap's separated pairs and ``best`` against
  PyTorch DDP's default and tuned cap.

Input: the committed ``paper/data/reexec/measured.csv`` and the statistics that
:mod:`gradsched.reexec.analysis` computes of it; :func:`write_analysis` (``gradsched reexec
analyze``) writes every output of an analysis it is given (the stock-DDP table:
:mod:`.stock_ddp`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import pandas as pd

from gradsched.errors import InputError
from gradsched.io import write_csv_atomic, write_text_atomic
from gradsched.networks import NETWORKS
from gradsched.reexec.items import ddp_default_label
from gradsched.report.algorithms import algorithm_label, algorithm_sort_key
from gradsched.report.figure_style import (
    FONT_PT,
    algorithm_colors,
    placeholder,
    save,
    setup_style,
    width_in,
)
from gradsched.report.formatting import MISSING, fmt
from gradsched.report.latex import NA, camel, number, to_latex, to_markdown
from gradsched.report.reexec_cases import case_label, network_label, with_interval
from gradsched.report.stock_ddp import write_stock_ddp_table


def _cap_mb(name: str) -> float:
    """``ddp-native-10`` -> 10; ``ddp-native-default`` -> 25 (DDP's default cap)."""
    cap = name.removeprefix("ddp-native-")
    return 25.0 if cap == "default" else float(cap)


def _label(name: str) -> str:
    if name == "ddp-native-default":
        return "PyTorch DDP default"
    if name.startswith("ddp-list-"):
        return f"PyTorch DDP, {algorithm_label(name.removeprefix('ddp-list-'))} buckets"
    if name.startswith("ddp-native-"):
        return f"PyTorch DDP {name.removeprefix('ddp-native-')} MB"
    return algorithm_label(name)


def _order(names: list[str]) -> list[str]:
    plans = sorted((n for n in names if not n.startswith(("ddp-native", "ddp-list-"))),
                   key=algorithm_sort_key)
    native = sorted((n for n in names if n.startswith("ddp-native")),
                    key=lambda n: (n != "ddp-native-default", -_cap_mb(n)))
    listed = sorted(n for n in names if n.startswith("ddp-list-"))
    return plans + listed + native


KIND_MARKERS = {"plan": "o", "ddp-list": "D", "ddp-native": "s"}
"""Marker per kind of run: a plan through gradsched's executor, stock DDP with a planner's
per-bucket caps, stock DDP with one cap."""


def figure_reexec(frame: pd.DataFrame, out_pdf: str | Path, out_png: str | Path,
                  intervals: pd.DataFrame | None = None,
                  stats: pd.DataFrame | None = None) -> None:
    """The order within each case (claim 5): one panel per case, each plan's predicted
    iteration time (the replay with the calibrated interference, the prediction ``best``
    scores with) against its measured median, both relative to the same case's PyTorch DDP
    default, with the y = x line. Error bars: the 95 % bootstrap interval of the measured
    median where ``intervals`` gives it (:func:`gradsched.reexec.analysis.case_intervals`),
    else the p10-p90 range. ``stats`` (:func:`gradsched.reexec.analysis.case_stats`) puts
    each case's separated pairs and Kendall's tau on them in its panel title."""
    import matplotlib
    import matplotlib.pyplot as plt

    rows = within_case_rows(frame, intervals)
    if rows.empty:
        placeholder(out_pdf, out_png, "Re-execution", "no measured plans in the input")
        return
    setup_style()
    names = _order(sorted(rows["algorithm"].unique()))
    # PyTorch DDP's caps get colours far from every planner's here (figure_style.other_colors)
    colors = algorithm_colors(names)
    cases = list(dict.fromkeys(rows["case"]))
    ncols = min(3, len(cases))
    nrows = -(-len(cases) // ncols)
    fig, grid = plt.subplots(nrows, ncols, figsize=(width_in(1.0), 2.3 * nrows + 0.9),
                             squeeze=False, layout="constrained")
    axes = list(grid.ravel())
    for ax in axes[len(cases):]:
        ax.set_visible(False)
    axes = axes[:len(cases)]
    for ax, case in zip(axes, cases, strict=True):
        _case_panel(ax, rows.loc[rows["case"] == case], colors)
        ax.set_title(_panel_title(case, rows.loc[rows["case"] == case], stats),
                     fontsize=FONT_PT - 1)
    for ax in axes[-ncols:]:
        ax.set_xlabel("predicted / DDP default's")
    for ax in axes[::ncols]:
        ax.set_ylabel("measured / DDP default's")
    handles = [plt.Line2D([], [], ls="", marker=KIND_MARKERS.get(_kind(rows, n), "o"),
                          color=colors[n], mec="black", mew=0.4, label=_label(n))
               for n in names]
    handles.append(plt.Line2D([], [], color="0.3", lw=0.9, ls="--", label="y = x"))
    fig.legend(handles=handles, loc="outside lower center", frameon=False, ncol=4)
    for ax in axes:  # few ticks: the square panels are narrow
        ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(4, steps=[1, 2, 5, 10]))
        ax.yaxis.set_major_locator(matplotlib.ticker.MaxNLocator(5, steps=[1, 2, 5, 10]))
    fig.canvas.draw()  # lay out once before the PDF, as the PNG gets it
    save(fig, out_pdf, out_png)


def within_case_rows(frame: pd.DataFrame, intervals: pd.DataFrame | None) -> pd.DataFrame:
    """The measured plans (no controls) with the bar ends in ``bar_lo_s`` / ``bar_hi_s``
    and every time relative to the case's PyTorch DDP default (columns ``*_rel``); a case
    without that default keeps no rows."""
    rows = frame.loc[frame["kind"] != "control"] if "kind" in frame else frame
    rows = rows.assign(bar_lo_s=rows["measured_p10_s"], bar_hi_s=rows["measured_p90_s"])
    if intervals is not None and not intervals.empty:
        rows = rows.merge(intervals[["case", "algorithm", "measured_lo_s", "measured_hi_s"]],
                          on=["case", "algorithm"], how="left")
        rows = rows.assign(bar_lo_s=rows["measured_lo_s"], bar_hi_s=rows["measured_hi_s"])
    parts = []
    for _, part in rows.groupby("case", sort=False):
        ref = part.loc[part["algorithm"] == ddp_default_label(part["algorithm"])]
        if ref.empty:
            continue
        pred, meas = float(ref["predicted_interference_s"].iloc[0]), float(
            ref["measured_s"].iloc[0])
        parts.append(part.assign(
            predicted_rel=part["predicted_interference_s"] / pred,
            measured_rel=part["measured_s"] / meas, lo_rel=part["bar_lo_s"] / meas,
            hi_rel=part["bar_hi_s"] / meas))
    return pd.concat(parts, ignore_index=True) if parts else rows.iloc[0:0]


def _kind(rows: pd.DataFrame, name: str) -> str:
    kinds = rows.loc[rows["algorithm"] == name, "kind"] if "kind" in rows else pd.Series()
    return str(kinds.iloc[0]) if len(kinds) else "plan"


def _case_panel(ax, part: pd.DataFrame, colors: dict) -> None:
    """One case: every plan's relative predicted vs measured time, bars, y = x."""
    lo = min(part["predicted_rel"].min(), part["lo_rel"].min())
    hi = max(part["predicted_rel"].max(), part["hi_rel"].max())
    pad = 0.06 * (hi - lo if hi > lo else 1.0)
    span = (lo - pad, hi + pad)
    ax.plot(span, span, color="0.3", lw=0.9, ls="--", zorder=1)
    for _, r in part.iterrows():
        ax.errorbar(r["predicted_rel"], r["measured_rel"],
                    yerr=[[r["measured_rel"] - r["lo_rel"]], [r["hi_rel"] - r["measured_rel"]]],
                    fmt=KIND_MARKERS.get(str(r.get("kind", "plan")), "o"), ms=4,
                    color=colors[r["algorithm"]], mec="black", mew=0.4, elinewidth=0.7,
                    capsize=1.5, zorder=3)
    ax.set_xlim(span)
    ax.set_ylim(span)
    ax.set_box_aspect(1)  # square, and x and y share the span: y = x at 45 degrees


def _panel_title(case: str, part: pd.DataFrame, stats: pd.DataFrame | None) -> str:
    """``ResNet-18 b4, P = 2, 1 Gbit/s`` and, with ``stats``, the separated pairs and
    Kendall's tau on them."""
    network = ",".join(sorted(part["bandwidth"].astype(str).unique()))
    world = ",".join(str(w) for w in sorted(part["world_size"].unique()))
    title = f"{case_label(case)}, P = {world}, {network_label(network)}"
    if stats is None or "n_separated_pairs" not in stats:
        return title
    row = stats.loc[stats["case"] == case]
    if row.empty or pd.isna(row["n_separated_pairs"].iloc[0]):
        return title
    r = row.iloc[0]
    return (f"{title}\n{int(r['n_separated_pairs'])}/{int(r['n_pairs'])} pairs separated, "
            f"$\\tau$ on them = {fmt(r['tau_separated'], 2)}")


_SHORT_MODELS = {"resnet18": "RN18", "resnet50": "RN50", "mobilenet_v2": "MNv2",
                 "bert-base": "BERT", "densenet121": "DN121"}


def _short(case: str) -> str:
    """``mobilenet_v2-b8-p3-tbf100mbit`` -> ``MNv2 b8 P3 100M`` (a column header)."""
    match = re.match(r"^(?P<model>.+?)(?:-s\d+)?-b(?P<batch>\d+)-p(?P<p>\d+)-(?P<net>.+)$",
                     case)
    if match is None:
        return case
    model = _SHORT_MODELS.get(match["model"], match["model"])
    net = NETWORKS[match["net"]].short_label if match["net"] in NETWORKS else match["net"]
    return f"{model} b{match['batch']} P{match['p']} {net}"


def reexec_table(errors: pd.DataFrame, stats: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """Rows: plans (error %, without / with interference; ``errors``: one row per case and
    plan, :func:`gradsched.reexec.analysis.plan_errors`), then the per-case summary."""
    cases = list(dict.fromkeys(errors["case"]))
    names = _order(sorted(errors["algorithm"].unique()))
    cols = ["plan"]
    for case in cases:
        cols += [f"{_short(case)} err %", f"{_short(case)} err % (int.)"]
    out = []
    for name in names:
        row = [_label(name)]
        for case in cases:
            hit = errors.loc[(errors["case"] == case) & (errors["algorithm"] == name)]
            if hit.empty:
                row += [MISSING, MISSING]
            else:
                row += [fmt(hit.iloc[0]["error_pct"], 1), fmt(hit.iloc[0]["error_int_pct"], 1)]
        out.append(row)
    by_case = {r["case"]: r for _, r in stats.iterrows()}
    for label, a, b, digits in (("median |err| %", "median_abs_err_pct",
                                 "median_abs_err_int_pct", 1),
                                ("worst err %", "worst_err_pct", "worst_err_int_pct", 1),
                                ("Kendall tau", "tau", "tau_int", 2),
                                ("ordered right, distinguishable pairs %", "order_ok_pct",
                                 "order_ok_int_pct", 0)):
        row = [label]
        for case in cases:
            s = by_case.get(case)
            row += [fmt(s[a], digits), fmt(s[b], digits)] if s is not None else [MISSING] * 2
        out.append(row)
    for label, key in (("distinguishable pairs", "n_distinguishable"),
                       ("best vs DDP default (meas.) %", "best_vs_ddp25_pct"),
                       ("noise: median half p10-p90 %", "median_spread_pct"),
                       ("executor DDP vs PyTorch DDP default %",
                        "ddp_executor_vs_native_pct")):
        row = [label]
        for case in cases:
            s = by_case.get(case)
            digits = 0 if key == "n_distinguishable" else 1
            row += [fmt(s[key], digits) if s is not None else MISSING, ""]
        out.append(row)
    return pd.DataFrame(out, columns=cols), "l" + "r" * (len(cols) - 1)


def split_latex(table: pd.DataFrame, title: str) -> str:
    """The LaTeX form as two stacked tabulars, the replay without and with interference
    (each case has one column of each), so that neither is set below 7 pt (``paper/main.tex``
    refuses a table wider than the line at 7 pt)."""
    cols = list(table.columns)
    parts = []
    for label, picked in (("without interference", cols[1::2]),
                          ("with interference", cols[2::2])):
        part = table[[cols[0], *picked]].rename(columns={cols[0]: f"{cols[0]} ({label})"})
        part = part[(part[picked] != "").any(axis=1)]  # rows with one value per case
        part.columns = [str(c).replace(" (int.)", "") for c in part.columns]
        parts.append(to_latex(part, "l" + "r" * len(picked), f"{title}, {label}"))
    # an outer one-column tabular stacks them, its natural width the wider of the two
    return ("\\begin{tabular}{@{}c@{}}\n" + parts[0] + "\\\\[6pt]\n" + parts[1]
            + "\\end{tabular}\n")


def write_reexec_table(errors: pd.DataFrame, stats: pd.DataFrame, *,
                       tex: str | Path | None, md: str | Path | None) -> None:
    """Write :func:`reexec_table` as LaTeX and/or Markdown (atomically)."""
    table, _ = reexec_table(errors, stats)
    title = "re-execution: replay error per plan (negative = predicted faster than measured)"
    if tex is not None:
        write_text_atomic(tex, split_latex(table, title))
    if md is not None:
        write_text_atomic(md, to_markdown(table, title))


def reexec_summary_table(stats: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """One row per case: the power of the experiment (spread / noise), the order (tau
    with its 95 % interval, on all pairs and on the separated ones), the error, and
    ``best`` against PyTorch DDP at its default and at the best cap measured (speed-up =
    DDP time / best time, 95 % interval). Needs the bootstrap columns of
    :func:`gradsched.reexec.analysis.case_stats` with iterations."""
    cases = stats.loc[~stats["case"].astype(str).str.startswith("all")]
    rows = []
    for _, s in cases.iterrows():
        tuned = str(s.get("tuned_ddp", "")).removeprefix("ddp-native-")
        rows.append([
            f"{case_label(str(s['case']))}, P={s['world_size']}, "
            f"{network_label(str(s['bandwidth']))}", fmt(s.get("spread_to_noise"), 1),
            with_interval(s.get("tau_int"), s.get("tau_int_lo"), s.get("tau_int_hi"), 2),
            f"{int(s['n_separated_pairs'])}/{int(s['n_pairs'])}"
            if pd.notna(s.get("n_separated_pairs")) else MISSING,
            fmt(s.get("tau_separated"), 2), fmt(s.get("median_abs_err_int_pct"), 1),
            fmt(s.get("median_abs_err_raw_pct"), 1),
            with_interval(s.get("best_vs_ddp_default_speedup"),
                           s.get("best_vs_ddp_default_speedup_lo"),
                           s.get("best_vs_ddp_default_speedup_hi"), 2),
            with_interval(s.get("best_vs_ddp_tuned_speedup"),
                           s.get("best_vs_ddp_tuned_speedup_lo"),
                           s.get("best_vs_ddp_tuned_speedup_hi"), 2)
            + (f" ({tuned} MB)" if tuned and tuned != "default" else ""),
            fmt(s.get("ddp_default_over_bound_pct"), 1),
            str(int(s["n_flagged_runs"])) if pd.notna(s.get("n_flagged_runs")) else MISSING])
    cols = ["case", "spread / noise", "tau [95% CI]", "separated pairs",
            "tau, separated", "median |err| %", "median |err| % uncalibrated",
            "DDP default / best [95% CI]",
            "tuned DDP / best [95% CI] (cap)", "DDP default above bound %", "flagged runs"]
    return pd.DataFrame(rows, columns=cols), "l" + "r" * (len(cols) - 1)


def write_reexec_summary(stats: pd.DataFrame, *, tex: str | Path | None,
                         md: str | Path | None) -> None:
    """Write :func:`reexec_summary_table` as LaTeX and/or Markdown (atomically)."""
    table, align = reexec_summary_table(stats)
    title = "re-execution: order, error and best vs PyTorch DDP per case (bootstrap 95% CI)"
    if tex is not None:
        write_text_atomic(tex, to_latex(table, align, title))
    if md is not None:
        write_text_atomic(md, to_markdown(table, title))


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
    ctrl = measured.loc[measured["kind"] == "control"].set_index("case")
    if len(ctrl) and "predicted_interference_s" in measured:
        # the error on the part of the step above the compute-only control (as
        # gradsched.reexec.accum.excess_error_pct): what the calibrated replay says
        # communication adds, which the compute scale does not calibrate
        above = plain["measured_s"] - plain["case"].map(ctrl["measured_s"])
        added = (plain["predicted_interference_s"]
                 - plain["case"].map(ctrl["predicted_interference_s"]))
        excess = (100.0 * (added - above) / above).where(above > 0)
        out["ReexecExcessUndefined"] = str(int(excess.isna().sum()))
        if excess.notna().any():
            out["ReexecMedianExcessErr"] = number(float(excess.abs().median()), 0)
    scale = plain["compute_scale"].astype(float).dropna()
    if len(scale):
        out["ReexecComputeScaleMin"] = number(float(scale.min()), 2)
        out["ReexecComputeScaleMax"] = number(float(scale.max()), 2)
    return out


def reexec_macros(cases: pd.DataFrame | None, measured: pd.DataFrame | None
                  ) -> dict[str, str]:
    """The re-execution experiment (``paper/data/reexec/measured.csv``): pooled errors,
    tau and pair order over all cases (``Reexec...``) and per network
    (``Reexec<Network>...``), the number of cases, in how many the best plan measured at
    least as fast as PyTorch DDP (25 MiB), the median executor-vs-DDP difference, and the
    calibrated per-collective compute cost per network and world size (ms)."""
    scopes = {"": "all", **{camel(n): f"all-{n}" for n in NETWORKS}}
    out = {f"Reexec{scope}{key}": NA for scope in scopes for key in _REEXEC_KEYS}
    out |= {"ReexecMedianErrIntPerLayer": NA, "ReexecMedianErrIntGlobal": NA}
    out |= {"ReexecMedianErrRaw": NA, "ReexecComputeScaleMin": NA,
            "ReexecComputeScaleMax": NA, "ReexecMedianExcessErr": NA,
            "ReexecExcessUndefined": NA}
    out |= {"ReexecNumCases": NA, "ReexecBestAsFastCases": NA,
            "ReexecExecVsDdpMedian": NA, "ReexecExecVsDdpWorst": NA}
    out |= {f"Reexec{camel(n)}P{camel(str(w))}CollectiveCpuMs": NA
            for n in NETWORKS for w in REEXEC_WORLD_SIZES}
    if cases is None or measured is None or measured.empty:
        return out
    stats = cases.set_index("case")
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


def reexec_boot_macros(stats: pd.DataFrame | None, level_pct: float | None = None,
                       replicates: int | None = None) -> dict[str, str]:
    """Bootstrap statistics of the re-execution (``reexec analyze --iterations-csv`` stats
    CSV, :mod:`gradsched.reexec.uncertainty`): separated pairs and tau on them, the
    spread-to-noise range, ``best`` against PyTorch DDP's default and the tuned cap
    (speed-ups; a case counts as "not slower than tuned" when the interval's upper end
    reaches 1), flagged runs. Communication-bound cases: every network but loopback.
    ``level_pct`` and ``replicates``: the bootstrap's settings, quoted as they are."""
    out = {key: NA for key in _BOOT_KEYS}
    out["ReexecCiLevel"] = NA if level_pct is None else number(level_pct, 0)
    out["ReexecBootReplicates"] = NA if replicates is None else str(replicates)
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


class AnalysisFrames(Protocol):
    """What :func:`write_analysis` formats: the frames of
    :class:`gradsched.reexec.analysis.Analysis`."""

    frame: pd.DataFrame
    summary: pd.DataFrame
    intervals: pd.DataFrame | None
    stock_ddp: pd.DataFrame

    def errors(self, intervals: bool = True) -> pd.DataFrame: ...


Out = str | Path | None
"""Where one output goes; None: not written."""


@dataclass(frozen=True)
class AnalysisOutputs:
    """Where ``gradsched reexec analyze`` writes each output (None: not asked for):
    ``stats`` (per-case statistics CSV), ``summary_table``/``summary_md`` (the per-case
    summary, LaTeX/Markdown), ``errors`` (per-plan errors CSV), ``table``/``md`` (the
    error table), ``figure``/``png`` (measured against predicted), ``stock_ddp_tex``/
    ``stock_ddp_md`` (stock DDP's gap split into implementation and schedule)."""

    stats: Out = None
    summary_table: Out = None
    summary_md: Out = None
    errors: Out = None
    table: Out = None
    md: Out = None
    figure: Out = None
    png: Out = None
    stock_ddp_tex: Out = None
    stock_ddp_md: Out = None


def write_analysis(result: AnalysisFrames, outputs: AnalysisOutputs) -> pd.DataFrame:
    """``gradsched reexec analyze``: write the ``outputs`` asked for of an analysis
    (:func:`gradsched.reexec.analysis.analyze`) and return its per-case statistics."""
    stats, summary_table, summary_md = outputs.stats, outputs.summary_table, outputs.summary_md
    errors, table, md, figure, png = (outputs.errors, outputs.table, outputs.md,
                                      outputs.figure, outputs.png)
    stock_ddp_tex, stock_ddp_md = outputs.stock_ddp_tex, outputs.stock_ddp_md
    if stats is not None:
        write_csv_atomic(stats, result.summary)
    if errors is not None:
        write_csv_atomic(errors, result.errors())
    if summary_table is not None or summary_md is not None:
        if result.intervals is None:
            raise InputError("the summary table needs the per-iteration data (--iterations-csv)")
        write_reexec_summary(result.summary, tex=summary_table, md=summary_md)
    if stock_ddp_tex is not None or stock_ddp_md is not None:
        if result.intervals is None:
            raise InputError("the stock-DDP table needs the per-iteration data (--iterations-csv)")
        write_stock_ddp_table(result.stock_ddp, tex=stock_ddp_tex, md=stock_ddp_md)
    if table is not None or md is not None:
        write_reexec_table(result.errors(intervals=False), result.summary, tex=table, md=md)
    if figure is not None or png is not None:
        pdf_out = figure if figure is not None else Path(str(png)).with_suffix(".pdf")
        png_out = png if png is not None else Path(str(figure)).with_suffix(".png")
        figure_reexec(result.frame, pdf_out, png_out, result.intervals, result.summary)
    return result.summary
