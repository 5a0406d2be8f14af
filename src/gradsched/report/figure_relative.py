"""Cases replayed at one world size each (the H200 family: each Hopper sweep measured one):
every algorithm's iteration time relative to the case's own PyTorch DDP default, one panel
per network, instead of a line per case that would be a column of markers."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pandas as pd

from gradsched.report.algorithms import algorithm_label, algorithm_sort_key
from gradsched.report.figure_style import (
    FONT_PT,
    legend_union,
    pairing_of,
    placeholder,
    save,
    series_style,
    width_in,
)

RATIO_TICKS = (0.25, 0.5, 0.75, 0.9, 1.0, 1.1, 1.25, 1.5, 2.0, 2.5, 3.0, 4.0, 6.0, 8.0)
"""Where a ratio axis (log scale) gets a labelled tick: dense near 1, where most plans are."""
BOUND_ROW = "lower bound"
"""The row of :func:`relative_to_ddp` that holds each case's lower bound."""


def relative_to_ddp(collected: pd.DataFrame, out_pdf: str | Path, out_png: str | Path
                    ) -> None:
    """(c) for cases replayed at one world size each (the H200 family: each sweep measured
    one): a line per world size would be a column of markers. Instead one panel per
    network, the algorithms on a categorical axis and each case's iteration time relative
    to its own PyTorch DDP default (``ddp``; 1 = DDP's default), the lower bound as the last
    row; one marker per compute trace, dodged so that the cases of one algorithm sit side
    by side."""
    rel = relative_rows(collected)
    if rel.empty:
        placeholder(out_pdf, out_png, "Iteration time relative to PyTorch DDP",
                    "no case has a PyTorch DDP (ddp) row to compare with")
        return
    networks = sorted(rel["network"].unique())
    traces = sorted(rel["trace"].unique())
    algorithms = set(rel["algorithm"]) - {BOUND_ROW}
    rows = [*sorted(algorithms, key=algorithm_sort_key), BOUND_ROW]
    fig, axes = plt.subplots(1, len(networks), figsize=(width_in(1.0), 0.24 * len(rows) + 1.6),
                             sharey=True, squeeze=False, layout="constrained")
    for ax, network in zip(axes[0], networks, strict=True):
        part = rel[rel["network"] == network]
        _dodged_dots(ax, part, traces, rows)
        world = ", ".join(str(w) for w in sorted(part["world_size"].unique()))
        pairing = pairing_of(part)
        ax.set_title(f"{network}, P = {world}" + (f"\n[{pairing}]" if pairing else ""),
                     fontsize=FONT_PT - 1)
        ax.set_xlabel("iteration time / PyTorch DDP default's")
    labels = [algorithm_label(a) for a in rows[:-1]] + [rows[-1]]
    axes[0][0].set_yticks(range(len(rows)), labels)
    handles, names = legend_union(axes[0])
    fig.legend(handles, names, loc="outside lower center", ncol=min(3, len(names)),
               frameon=False)
    save(fig, out_pdf, out_png)


def relative_rows(collected: pd.DataFrame) -> pd.DataFrame:
    """Per algorithm and case: ``ratio`` = iteration time / the case's ``ddp`` time, plus a
    ``lower bound`` row (the case's bound over the same); cases without ``ddp`` are left
    out."""
    out = []
    for (trace, network, world), part in collected.groupby(["trace", "network",
                                                              "world_size"]):
        ddp = part.loc[part["algorithm"] == "ddp", "iteration_s"]
        if ddp.empty:
            continue
        base = float(ddp.iloc[0])
        rows = part[["trace", "network", "world_size", "algorithm"]].assign(
            ratio=part["iteration_s"].to_numpy() / base)
        bound = {"trace": trace, "network": network, "world_size": world,
                 "algorithm": BOUND_ROW,
                 "ratio": float(part["lower_bound_s"].iloc[0]) / base}
        out.append(pd.concat([rows, pd.DataFrame([bound])], ignore_index=True).assign(
            pairing=part["pairing"].iloc[0] if "pairing" in part else None))
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame()


def _dodged_dots(ax: plt.Axes, part: pd.DataFrame, traces: Sequence[str],
                 rows: Sequence[str]) -> None:
    """One marker per compute trace in each algorithm's row, offset within the row."""
    step = 0.7 / max(1, len(traces))
    for i, trace in enumerate(traces):
        mine = part[part["trace"] == trace]
        if mine.empty:
            continue
        y = [rows.index(a) + (i - (len(traces) - 1) / 2) * step for a in mine["algorithm"]]
        style = series_style(i)
        ax.plot(mine["ratio"], y, ls="", marker=style["marker"], ms=3.5,
                color=style["color"], mec="black", mew=0.3, label=trace)
    ax.axvline(1.0, color="0.3", lw=0.8, ls="--", zorder=0)
    for k in range(1, len(rows)):
        ax.axhline(k - 0.5, color="0.9", lw=0.5, zorder=0)
    ax.set_xscale("log")
    low, high = float(part["ratio"].min()), float(part["ratio"].max())
    ticks = [t for t in RATIO_TICKS if low / 1.1 <= t <= high * 1.1]
    ax.xaxis.set_major_locator(matplotlib.ticker.FixedLocator(ticks))
    ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda x, _: f"{x:g}"))
    ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.grid(axis="y", visible=False)
