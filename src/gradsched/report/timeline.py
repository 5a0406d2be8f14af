"""Replay timelines: two steady-state iterations of a few algorithms on one case, compute
and communication lanes as bars (the events of ``gradsched replay --timeline``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from gradsched.intermediates import read_csv_frame
from gradsched.report.algorithms import algorithm_label, algorithm_sort_key
from gradsched.report.figure_style import placeholder, save, setup_style, width_in

KIND_COLORS = {"forward": "#4c72b0", "backward": "#55a868", "update": "#8172b2"}


def timeline(timeline_csvs: Mapping[str, str | Path] | Sequence[str | Path], out_pdf: str | Path,
             out_png: str | Path, title: str = "") -> None:
    """(d) Two steady-state iterations per algorithm: compute and comm lanes as bars.

    ``timeline_csvs``: ``<algorithm>.timeline.csv`` files from ``gradsched replay
    --timeline``. The window is iterations k and k+1 with k the middle iteration, so the
    warm-up of the first iteration is not shown.
    """
    paths = (dict(timeline_csvs) if isinstance(timeline_csvs, Mapping) else
             {Path(p).name.split(".")[0]: Path(p) for p in timeline_csvs})
    frames = {alg: read_csv_frame(p) for alg, p in paths.items()}
    frames = {alg: f for alg, f in frames.items() if not f.empty}
    if not frames:
        placeholder(out_pdf, out_png, "Replay timelines", "no timeline CSV with events")
        return
    setup_style()
    algs = sorted(frames, key=algorithm_sort_key)
    windows = {}
    for alg in algs:
        f = frames[alg]
        iters = sorted(f["iteration"].unique())
        k = iters[len(iters) // 2 - 1] if len(iters) >= 3 else iters[0]
        start = f.loc[f["iteration"] == k, "start_s"].min()
        end = f.loc[f["iteration"] <= k + 1, "end_s"].max()
        windows[alg] = (start, end)
    span = max(e - s for s, e in windows.values())
    lanes_per = {alg: sorted(frames[alg]["lane"].unique(),
                             key=lambda lane: (lane != "compute", lane)) for alg in algs}
    heights = [max(1, len(lanes_per[a])) for a in algs]
    fig, axes = plt.subplots(len(algs), 1, figsize=(width_in(1.0),
                                                    0.3 * sum(heights) + 0.45 * len(algs) + 0.5),
                             sharex=True, squeeze=False, layout="constrained",
                             gridspec_kw={"height_ratios": heights})
    kinds = sorted({k for f in frames.values() for k in f["kind"].unique()})
    comm_palette = sns.color_palette("Oranges_r", max(3, len(kinds)))
    colors = {k: KIND_COLORS.get(k, comm_palette[i % len(comm_palette)])
              for i, k in enumerate(kinds)}
    for ax, alg in zip(axes[:, 0], algs, strict=True):
        f = frames[alg]
        start, end = windows[alg]
        part = f[(f["end_s"] > start) & (f["start_s"] < start + span)]
        lanes = lanes_per[alg]
        for y, lane in enumerate(lanes):
            rows = part[part["lane"] == lane]
            for kind, group in rows.groupby("kind"):
                bars = [((s - start) * 1e3, (e - s) * 1e3) for s, e in
                        zip(group["start_s"], group["end_s"], strict=True)]
                ax.broken_barh(bars, (y - 0.38, 0.76), facecolors=colors[kind],
                               edgecolors="white", linewidth=0.2)
        ax.set_yticks(range(len(lanes)))
        ax.set_yticklabels(lanes)
        ax.set_ylim(len(lanes) - 0.5, -0.5)
        iteration_ms = _period_ms(f)
        ax.set_title(f"{algorithm_label(alg)}  (iteration {iteration_ms:.1f} ms)", loc="left")
        ax.grid(axis="y", visible=False)
    axes[-1, 0].set_xlim(0, span * 1e3)
    axes[-1, 0].set_xlabel("time from the start of a steady-state iteration [ms]")
    handles = [matplotlib.patches.Patch(color=colors[k], label=k) for k in kinds]
    if title:
        fig.suptitle(title)
    fig.legend(handles=handles, loc="outside lower center", ncol=min(6, len(kinds)),
               frameon=False)
    save(fig, out_pdf, out_png)


def _period_ms(frame: pd.DataFrame) -> float:
    """Steady-state period: difference of consecutive iteration starts (middle ones)."""
    starts = frame.groupby("iteration")["start_s"].min().sort_index().to_numpy()
    if len(starts) < 2:
        return float("nan")
    return float(np.median(np.diff(starts[1:] if len(starts) > 2 else starts)) * 1e3)
