"""Re-execution figure and table: the replay's predictions vs the plans run for real.

* :func:`figure_reexec` -- predicted vs measured iteration time, one panel without and one
  with the calibrated interference, the y = x line, the measured p10-p90 as error bars;
  colour = algorithm, marker = case.
* :func:`stock_ddp_table` / :func:`write_stock_ddp_table` -- stock PyTorch DDP running a
  planner's buckets (``bucket_cap_mb_list``) against DDP's default, the tuned uniform cap
  and ``best``; ``best``'s gain split into implementation and schedule.
* :func:`reexec_table` / :func:`write_reexec_table` -- per-plan errors (%) per case, without
  / with interference, then median |error|, worst error and Kendall's tau per case, and
  the best plan vs PyTorch DDP (25 MiB).

Input: the committed ``paper/data/reexec/measured.csv`` (see
:mod:`gradsched.reexec.experiment`); statistics from :mod:`gradsched.reexec.analysis`.
:func:`analyze_file` (``gradsched reexec analyze``) computes them and writes every output.
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from gradsched.errors import InputError
from gradsched.io import write_csv_atomic, write_text_atomic
from gradsched.networks import NETWORKS
from gradsched.reexec.analysis import analyze, plan_errors
from gradsched.report.figures import (
    algorithm_colors,
    placeholder,
    save,
    setup_style,
    width_in,
)
from gradsched.report.formatting import MISSING, fmt
from gradsched.report.tables import algorithm_label, algorithm_sort_key, to_latex, to_markdown

MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">")


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


def figure_reexec(frame: pd.DataFrame, out_pdf: str | Path, out_png: str | Path,
                  intervals: pd.DataFrame | None = None) -> None:
    """Predicted vs measured, without / with interference (see the module docstring).
    Error bars: the 95 % bootstrap interval of the median where ``intervals`` gives it
    (:func:`gradsched.reexec.analysis.case_intervals`), else the p10-p90 range."""
    import matplotlib.pyplot as plt

    rows = frame.loc[frame["kind"] != "control"] if "kind" in frame else frame
    bar = "p10-p90"
    if intervals is not None and not intervals.empty:
        rows = rows.merge(intervals[["case", "algorithm", "measured_lo_s", "measured_hi_s"]],
                          on=["case", "algorithm"], how="left")
        rows["measured_p10_s"] = rows["measured_lo_s"]
        rows["measured_p90_s"] = rows["measured_hi_s"]
        bar = "95% interval"
    if rows.empty:
        placeholder(out_pdf, out_png, "Re-execution", "no measured plans in the input")
        return
    setup_style()
    names = _order(sorted(rows["algorithm"].unique()))
    # PyTorch DDP's caps get colours far from every planner's here (figures.other_colors)
    colors = algorithm_colors(names)
    cases = list(dict.fromkeys(rows["case"]))
    fig, axes = plt.subplots(1, 2, figsize=(width_in(1.0), 4.4), sharex=True, sharey=True,
                             layout="constrained")
    lo = min(rows["measured_p10_s"].min(), rows["predicted_s"].min(),
             rows["predicted_interference_s"].min())
    hi = max(rows["measured_p90_s"].max(), rows["predicted_s"].max(),
             rows["predicted_interference_s"].max())
    pad = 0.05 * (hi - lo if hi > lo else hi)
    span = (lo - pad, hi + pad)
    for ax, col, title in zip(axes, ("predicted_s", "predicted_interference_s"),
                              ("without interference", "with calibrated interference"),
                              strict=True):
        ax.plot(span, span, color="0.3", lw=0.9, ls="--", zorder=1, label="y = x")
        for ci, case in enumerate(cases):
            sub = rows.loc[rows["case"] == case]
            for _, r in sub.iterrows():
                ax.errorbar(r[col], r["measured_s"],
                            yerr=[[r["measured_s"] - r["measured_p10_s"]],
                                  [r["measured_p90_s"] - r["measured_s"]]],
                            fmt=MARKERS[ci % len(MARKERS)], ms=4, color=colors[r["algorithm"]],
                            mec="black", mew=0.4, elinewidth=0.7, capsize=1.5, zorder=3)
        ax.set_xlim(span)
        ax.set_ylim(span)
        ax.set_aspect("equal")
        ax.set_xlabel("predicted iteration time [s] (replay)")
        ax.set_title(title)
    axes[0].set_ylabel(f"measured iteration time [s]\n(median, {bar})")
    handles = [plt.Line2D([], [], ls="", marker="o", color=colors[n], mec="black", mew=0.4,
                          label=_label(n)) for n in names]
    # a case is a marker shape: drawn hollow in the legend, so no case looks like a plan
    handles += [plt.Line2D([], [], ls="", marker=MARKERS[i % len(MARKERS)], mfc="white",
                           mec="black", mew=0.8, label=c) for i, c in enumerate(cases)]
    fig.legend(handles=handles, loc="outside lower center", frameon=False, ncol=3)
    save(fig, out_pdf, out_png)


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


def reexec_table(frame: pd.DataFrame, stats: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """Rows: plans (error %, without / with interference), then the per-case summary."""
    errors = plan_errors(frame)
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


def write_reexec_table(frame: pd.DataFrame, stats: pd.DataFrame, *, tex: str | Path | None,
                       md: str | Path | None) -> None:
    """Write :func:`reexec_table` as LaTeX and/or Markdown (atomically)."""
    table, _ = reexec_table(frame, stats)
    title = "re-execution: replay error per plan (negative = predicted faster than measured)"
    if tex is not None:
        write_text_atomic(tex, split_latex(table, title))
    if md is not None:
        write_text_atomic(md, to_markdown(table, title))


def _case_label(case: str) -> str:
    """``resnet50-b2-p2-tbf1gbit`` -> ``ResNet-50 b2``."""
    names = {"resnet18": "ResNet-18", "resnet50": "ResNet-50", "mobilenet_v2": "MobileNetV2",
             "bert-base": "BERT-base"}
    match = re.match(r"^(?P<model>.+?)(?:-s\d+)?-b(?P<batch>\d+)-p\d+-", case)
    if match is None:
        return case
    return f"{names.get(match['model'], match['model'])} b{match['batch']}"


def _network_label(network: str) -> str:
    """``tbf1gbit`` -> ``1 Gbit/s`` (:data:`gradsched.networks.NETWORKS`); unknown keys as
    they are."""
    return NETWORKS[network].long_label if network in NETWORKS else network


def _with_interval(value: object, lo: object, hi: object, digits: int) -> str:
    point = fmt(value, digits)
    if point == MISSING:
        return point
    return f"{point} [{fmt(lo, digits)}, {fmt(hi, digits)}]"


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
            f"{_case_label(str(s['case']))}, P={s['world_size']}, "
            f"{_network_label(str(s['bandwidth']))}", fmt(s.get("spread_to_noise"), 1),
            _with_interval(s.get("tau_int"), s.get("tau_int_lo"), s.get("tau_int_hi"), 2),
            f"{int(s['n_separated_pairs'])}/{int(s['n_pairs'])}"
            if pd.notna(s.get("n_separated_pairs")) else MISSING,
            fmt(s.get("tau_separated"), 2), fmt(s.get("median_abs_err_int_pct"), 1),
            _with_interval(s.get("best_vs_ddp_default_speedup"),
                           s.get("best_vs_ddp_default_speedup_lo"),
                           s.get("best_vs_ddp_default_speedup_hi"), 2),
            _with_interval(s.get("best_vs_ddp_tuned_speedup"),
                           s.get("best_vs_ddp_tuned_speedup_lo"),
                           s.get("best_vs_ddp_tuned_speedup_hi"), 2)
            + (f" ({tuned} MB)" if tuned and tuned != "default" else ""),
            fmt(s.get("ddp_default_over_bound_pct"), 1),
            str(int(s["n_flagged_runs"])) if pd.notna(s.get("n_flagged_runs")) else MISSING])
    cols = ["case", "spread / noise", "tau [95% CI]", "separated pairs",
            "tau, separated", "median |err| %", "DDP default / best [95% CI]",
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


NOT_MEASURED = "not measured"


def _ratio_cell(row: pd.Series, name: str) -> str:
    return _with_interval(row.get(name), row.get(f"{name}_lo"), row.get(f"{name}_hi"), 2)


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
        cells = [f"{_case_label(str(r['case']))}, P={r['world_size']}, "
                 f"{_network_label(str(r['bandwidth']))}"]
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


def analyze_file(path: str | Path, *, iterations: str | Path | None = None,
                 stats: str | Path | None = None, summary_table: str | Path | None = None,
                 summary_md: str | Path | None = None,
                 errors: str | Path | None = None, table: str | Path | None = None,
                 md: str | Path | None = None, figure: str | Path | None = None,
                 png: str | Path | None = None, stock_ddp_tex: str | Path | None = None,
                 stock_ddp_md: str | Path | None = None) -> pd.DataFrame:
    """``gradsched reexec analyze``: the statistics of ``path`` (measured.csv; with
    ``iterations``, bootstrap intervals too, :func:`gradsched.reexec.analysis.analyze`);
    write the outputs asked for and return the per-case statistics."""
    result = analyze(path, iterations)
    if stats is not None:
        write_csv_atomic(stats, result.summary)
    if errors is not None:
        write_csv_atomic(errors, result.errors())
    if summary_table is not None or summary_md is not None:
        if result.intervals is None:
            raise InputError("the summary table needs the per-iteration data (--iterations)")
        write_reexec_summary(result.summary, tex=summary_table, md=summary_md)
    if stock_ddp_tex is not None or stock_ddp_md is not None:
        if result.intervals is None:
            raise InputError("the stock-DDP table needs the per-iteration data (--iterations)")
        write_stock_ddp_table(result.stock_ddp, tex=stock_ddp_tex, md=stock_ddp_md)
    if table is not None or md is not None:
        write_reexec_table(result.frame, result.summary, tex=table, md=md)
    if figure is not None or png is not None:
        pdf_out = figure if figure is not None else Path(str(png)).with_suffix(".pdf")
        png_out = png if png is not None else Path(str(figure)).with_suffix(".png")
        figure_reexec(result.frame, pdf_out, png_out, result.intervals)
    return result.summary
