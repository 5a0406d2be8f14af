"""Figures and table of the gradient-compression training experiment.

Inputs are the committed results of ``gradsched compress train``
(``paper/data/compression/curves.csv`` and ``summary.csv``, see
:mod:`gradsched.compression.train`): measured on real gloo ranks, never simulated.

* :func:`accuracy_vs_step` -- test accuracy against training step, one panel per
  compression method (the dense baseline drawn in every panel), one line per density, mean
  over seeds with a +-1 std band;
* :func:`accuracy_vs_time` -- the same against the measured training wall-clock;
* :func:`bytes_per_step` -- bytes each rank passes to collectives per step and bytes it
  receives back (log scale), with the compression ratio vs dense on each bar;
* :func:`summary_table` -- final accuracy (mean +- std over seeds), bytes sent and
  received per step, compression ratio and time per step, per method and density.

Methods: dense all-reduce; top-k with residuals and momentum correction by all-gather (Lin
et al., ICLR 2018); importance-weighted pruning with a shared index set on ring all-reduce
(Cheng & Xu, 2019); gTop-k (Shi et al., ICDCS 2019) when present.
"""

from __future__ import annotations

import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd

from gradsched.intermediates import read_csv_frame
from gradsched.report.figure_style import (
    legend_union,
    placeholder,
    plain_log_ticks,
    save,
    series_style,
    setup_style,
    width_in,
)
from gradsched.report.formatting import fmt
from gradsched.report.latex import write_table

METHOD_ORDER = ("dense", "topk", "importance", "gtopk")
METHOD_LABELS = {"dense": "dense all-reduce", "topk": "top-k (DGC, all-gather)",
                 "importance": "importance-weighted (Cheng & Xu)", "gtopk": "gTop-k"}


def density_label(density: float) -> str:
    """``1/64`` for 0.015625, ``1`` for 1."""
    if density >= 1:
        return "1"
    frac = Fraction(density).limit_denominator(100_000)
    return f"{frac.numerator}/{frac.denominator}"


def _methods(frame: pd.DataFrame) -> list[str]:
    present = list(dict.fromkeys(frame["method"]))
    return sorted(present, key=lambda m: (METHOD_ORDER.index(m) if m in METHOD_ORDER else 99, m))


def _load(path: str | Path) -> pd.DataFrame | None:
    p = Path(path)
    if not p.is_file():
        return None
    frame = read_csv_frame(p)
    return frame if not frame.empty else None


def _bands(curves: pd.DataFrame, x: str) -> pd.DataFrame:
    """Mean and std over seeds of accuracy (and mean of ``x``) per method, density, step."""
    g = curves.groupby(["method", "density", "step"])
    out = g.agg(acc_mean=("test_accuracy", "mean"), acc_std=("test_accuracy", "std"),
                x=(x, "mean"), n=("seed", "nunique")).reset_index()
    out["acc_std"] = out["acc_std"].fillna(0.0)
    return out


def _accuracy(curves_csv: str | Path, out_pdf: str | Path, out_png: str | Path, x: str,
              xlabel: str, title: str) -> None:
    curves = _load(curves_csv)
    if curves is None:
        placeholder(out_pdf, out_png, title, f"{curves_csv} is missing or empty "
                    "(run: gradsched compress train)")
        return
    setup_style()
    import matplotlib.pyplot as plt

    data = _bands(curves, x)
    methods = [m for m in _methods(data) if m != "dense"] or ["dense"]
    densities = sorted({d for d in data["density"] if d < 1}, reverse=True)
    # series 0 is black-ish blue; dense is black: the densities take the next colours
    palette = {d: series_style(i)["color"] for i, d in enumerate(densities)}
    fig, axes = plt.subplots(1, len(methods), figsize=(width_in(1.0), 2.5), sharey=True,
                             squeeze=False, layout="constrained")
    dense = data[data["method"] == "dense"].sort_values("step")
    lo = max(0.0, float((data["acc_mean"] - data["acc_std"]).quantile(0.02)) - 0.02)
    for ax, method in zip(axes[0], methods, strict=True):
        if len(dense):
            ax.plot(dense["x"], dense["acc_mean"], color="black", lw=1.4, label="dense")
            ax.fill_between(dense["x"], dense["acc_mean"] - dense["acc_std"],
                            dense["acc_mean"] + dense["acc_std"], color="black", alpha=0.15,
                            lw=0)
        for d in densities:
            sub = data[(data["method"] == method) & (data["density"] == d)].sort_values("step")
            if sub.empty:
                continue
            ax.plot(sub["x"], sub["acc_mean"], color=palette[d], lw=1.2,
                    label=f"density {density_label(d)}")
            ax.fill_between(sub["x"], sub["acc_mean"] - sub["acc_std"],
                            sub["acc_mean"] + sub["acc_std"], color=palette[d], alpha=0.2,
                            lw=0)
        n_seeds = int(data.loc[data["method"] == method, "n"].max())
        ax.set_title(f"{METHOD_LABELS.get(method, method)}\n(mean ± std, {n_seeds} seeds)")
        ax.set_xlabel(xlabel)
        ax.set_ylim(lo, 1.0)
    axes[0][0].set_ylabel("test accuracy")
    fig.legend(*legend_union(list(axes[0])), loc="outside lower center",
               ncol=len(densities) + 1, frameon=False)
    fig.suptitle(title)
    save(fig, out_pdf, out_png)


def accuracy_vs_step(curves_csv: str | Path, out_pdf: str | Path, out_png: str | Path) -> None:
    """Test accuracy vs training step per method and density (mean ± std over seeds)."""
    _accuracy(curves_csv, out_pdf, out_png, "step", "training step",
              "Digits MLP, 4 gloo ranks: test accuracy vs step")


def accuracy_vs_time(curves_csv: str | Path, out_pdf: str | Path, out_png: str | Path) -> None:
    """Test accuracy vs measured training wall-clock (mean over seeds on the x axis)."""
    _accuracy(curves_csv, out_pdf, out_png, "wallclock_s", "measured training time [s]",
              "Digits MLP, 4 gloo ranks: test accuracy vs wall-clock")


def bytes_per_step(summary_csv: str | Path, out_pdf: str | Path, out_png: str | Path) -> None:
    """Measured bytes per rank and step: passed to collectives (solid, ratio vs dense on
    top) and received back (hatched), log scale."""
    summary = _load(summary_csv)
    title = "Bytes per rank and step (counted)"
    if summary is None:
        placeholder(out_pdf, out_png, title, f"{summary_csv} is missing or empty")
        return
    import matplotlib.pyplot as plt

    setup_style()
    rows = summary.reset_index(drop=True)
    short = {"dense": "dense", "topk": "top-k", "importance": "imp.", "gtopk": "gTop-k"}
    labels = [short.get(m, m) if m == "dense" else f"{short.get(m, m)}\n{density_label(d)}"
              for m, d in zip(rows["method"], rows["density"], strict=True)]
    methods = _methods(rows)
    colors = {m: series_style(i)["color"] for i, m in enumerate(methods)}
    fig, ax = plt.subplots(figsize=(width_in(0.8), 2.6), layout="constrained")
    xs = np.arange(len(rows))
    width = 0.4
    color = [colors[m] for m in rows["method"]]
    ax.bar(xs - width / 2, rows["bytes_per_step"], width, color=color, label="sent")
    has_recv = "bytes_received_per_step" in rows
    if has_recv:
        ax.bar(xs + width / 2, rows["bytes_received_per_step"], width, color=color, alpha=0.45,
               hatch="//", edgecolor="white", label="received")
    for x, (b, r) in enumerate(zip(rows["bytes_per_step"], rows["compression_ratio"],
                                   strict=True)):
        text = f"{r:.0f}x" if math.isfinite(r) and r >= 10 else f"{r:.1f}x"
        ax.text(x - width / 2, b * 1.15, text, ha="center", va="bottom", fontsize=7)
    ax.set_yscale("log")
    plain_log_ticks(ax)
    ax.set_xticks(xs, labels)
    ax.set_ylabel("bytes per rank and step")
    top = float(rows["bytes_per_step"].max())
    if has_recv:
        top = max(top, float(rows["bytes_received_per_step"].max()))
    ax.set_ylim(top=top * 4)
    from matplotlib.patches import Patch

    # grey keys: the bar colours are the methods', the fill says sent or received
    keys = [Patch(facecolor="0.35", label="sent")]
    if has_recv:
        keys.append(Patch(facecolor="0.35", alpha=0.45, hatch="//", edgecolor="white",
                          label="received"))
    fig.legend(handles=keys, loc="outside right center", frameon=False)
    ax.set_title(title + ";\nratio = dense bytes sent / bytes sent")
    save(fig, out_pdf, out_png)


def summary_table(summary: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """Formatted table (strings, units in the headers) and its title."""
    out = []
    for row in summary.itertuples(index=False):
        acc = (f"{100 * row.final_accuracy_mean:.2f} ± {100 * row.final_accuracy_std:.2f}"
               if math.isfinite(row.final_accuracy_std) else fmt(100 * row.final_accuracy_mean))
        out.append({"method": METHOD_LABELS.get(row.method, row.method),
                    "density": density_label(row.density),
                    "final test accuracy [%]": acc,
                    "seeds": str(row.n_seeds),
                    "bytes sent per step [B]": f"{row.bytes_per_step:,.0f}",
                    "compression ratio [x]": fmt(row.compression_ratio, 1),
                    "bytes received per step [B]": (
                        f"{row.bytes_received_per_step:,.0f}"
                        if math.isfinite(getattr(row, "bytes_received_per_step", math.nan))
                        else fmt(None)),
                    "time per step [ms]": fmt(1e3 * row.time_per_step_s_mean, 1)})
    cols = ["method", "density", "final test accuracy [%]", "seeds", "bytes sent per step [B]",
            "compression ratio [x]", "bytes received per step [B]", "time per step [ms]"]
    return pd.DataFrame(out, columns=cols), "Gradient compression on digits (measured)"


def write_all(input_dir: str | Path, figdir: str | Path, tabdir: str | Path) -> list[Path]:
    """Every figure (PDF + PNG) and the table (LaTeX + Markdown); returns the paths."""
    src, fig, tab = Path(input_dir), Path(figdir), Path(tabdir)
    paths: list[Path] = []

    def pair(name: str) -> tuple[Path, Path]:
        p = (fig / f"compression-{name}.pdf", fig / f"compression-{name}.png")
        paths.extend(p)
        return p

    accuracy_vs_step(src / "curves.csv", *pair("accuracy-vs-step"))
    accuracy_vs_time(src / "curves.csv", *pair("accuracy-vs-time"))
    bytes_per_step(src / "summary.csv", *pair("bytes"))
    summary = _load(src / "summary.csv")
    frame, title = summary_table(summary if summary is not None else pd.DataFrame(
        columns=["method", "density", "final_accuracy_mean", "final_accuracy_std", "n_seeds",
                 "bytes_per_step", "compression_ratio", "time_per_step_s_mean"]))
    tex, md = tab / "compression-summary.tex", tab / "compression-summary.md"
    write_table(frame, tex, md, align="llrrrrrr", title=title)
    paths += [tex, md]
    return paths
