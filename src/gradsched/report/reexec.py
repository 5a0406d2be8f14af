"""Re-execution figure and table: the replay's predictions vs the plans run for real.

* :func:`figure_reexec` -- the order within each case: one panel per case, predicted (with
  the calibrated interference) against measured iteration time, both relative to the case's
  PyTorch DDP default, the y = x line, the measured median's interval as error bars;
  colour = algorithm, marker = kind of run.
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
from gradsched.reexec.analysis import analyze, ddp_default_label, plan_errors
from gradsched.report.figure_style import (
    FONT_PT,
    algorithm_colors,
    placeholder,
    save,
    setup_style,
    width_in,
)
from gradsched.report.formatting import MISSING, fmt
from gradsched.report.tables import algorithm_label, algorithm_sort_key, to_latex, to_markdown


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
    # PyTorch DDP's caps get colours far from every planner's here (figures.other_colors)
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
    title = f"{_case_label(case)}, P = {world}, {_network_label(network)}"
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
        figure_reexec(result.frame, pdf_out, png_out, result.intervals, result.summary)
    return result.summary
