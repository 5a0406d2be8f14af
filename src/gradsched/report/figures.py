"""Figures: one function per figure, each saved as vector PDF and PNG (seaborn style).

Every function takes data already on disk (result CSVs, comm traces, fitted model JSONs)
and writes ``out_pdf`` and ``out_png`` atomically. When the data a figure needs is not
there, the figure says so in its own canvas (:func:`placeholder`) instead of drawing
anything made up. Outputs are deterministic (no timestamps in the PDF).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from gradsched.costmodel.base import load_comm_spec
from gradsched.intermediates import read_intermediate
from gradsched.report.collect import extrapolated_mask
from gradsched.report.figure_relative import relative_to_ddp
from gradsched.report.figure_style import (
    FONT_PT,
    algorithm_colors,
    legend_union,
    pairing_of,
    panel_grid,
    placeholder,
    plain_log_ticks,
    save,
    series_style,
    setup_style,
    width_in,
)
from gradsched.report.gpu_generations import GPU_FAMILIES, gpu_case_table
from gradsched.report.macros import mgwfbp_gaps
from gradsched.report.tables import (
    algorithm_label,
    algorithm_sort_key,
    replay_wide,
)

MODEL_ORDER = ("alpha-beta", "piecewise", "interp", "analytic")
KIND_COLORS = {"forward": "#4c72b0", "backward": "#55a868", "update": "#8172b2"}


# --------------------------------------------------------------------- (a) fit curves


def _measured(comm_csv: Path) -> tuple[pd.DataFrame, str, int]:
    frame = pd.read_csv(comm_csv, comment="#")
    if "in_place" in frame and (frame["in_place"] == 0).any():
        frame = frame[frame["in_place"] == 0]
    collective = str(frame["collective"].mode().iloc[0])
    frame = frame[frame["collective"] == collective]
    world = int(frame["world_size"].mode().iloc[0])
    frame = frame[frame["world_size"] == world]
    return frame.sort_values("bytes"), collective, world


def fit_curves(comm_csvs: Sequence[str | Path], model_jsons: Sequence[str | Path],
               fits_csv: str | Path | None, out_pdf: str | Path, out_png: str | Path,
               ncols: int = 3) -> None:
    """(a) Measured vs fitted time against message size, one log-log panel per comm trace.

    Model files are named ``<trace stem>.<model kind>.json``; the legend gives each model's
    held-out MAPE from ``fits_csv`` (the k-fold error by message size).
    """
    comm_csvs = [Path(p) for p in comm_csvs]
    if not comm_csvs:
        placeholder(out_pdf, out_png, "Measured vs fitted collective time",
                    "no comm trace selected (config: figures.fit_curves)")
        return
    fits = read_intermediate(fits_csv) if fits_csv else pd.DataFrame()
    models: dict[str, dict[str, Path]] = {}
    for path in map(Path, model_jsons):
        stem, _, kind = path.name[: -len(".json")].rpartition(".")
        models.setdefault(stem, {})[kind] = path
    setup_style()
    fig, axes = panel_grid(len(comm_csvs), ncols, height=2.1)
    styles = {kind: series_style(i + 1) for i, kind in enumerate(MODEL_ORDER)}
    for ax, comm in zip(axes, comm_csvs, strict=True):
        data, collective, world = _measured(comm)
        x = data["bytes"].to_numpy(float)
        ax.scatter(x, data["time_s"] * 1e6, s=8, color="black", zorder=3, label="measured")
        grid = np.geomspace(x.min(), x.max(), 200)
        kinds = sorted(models.get(comm.stem, {}),
                       key=lambda k: MODEL_ORDER.index(k) if k in MODEL_ORDER else 99)
        mapes = []
        for kind in kinds:
            model = load_comm_spec(str(models[comm.stem][kind]))
            y = model.times(collective, grid, world) * 1e6
            style = styles.get(kind, series_style(len(styles) + 1))
            ax.plot(grid, y, lw=1.2, color=style["color"], ls=style["ls"], label=kind)
            mapes.append(f"{kind} {_heldout(fits, comm.stem, kind)}")
        ax.set_xscale("log")
        ax.set_yscale("log")
        plain_log_ticks(ax)
        # the held-out errors in the title, not in a legend over the curves
        ax.set_title(f"{comm.stem}\n{collective}, P={world}\n" + ", ".join(mapes),
                     fontsize=FONT_PT - 1)
        ax.set_xlabel("message size [bytes]")
        ax.set_ylabel("time [us]")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=len(labels), frameon=False,
               title="measured and fitted models (title: held-out MAPE, 5-fold by size)")
    save(fig, out_pdf, out_png)


def _heldout(fits: pd.DataFrame, trace: str, kind: str) -> str:
    """The held-out MAPE of ``kind`` on ``trace`` from the fit table, or n/a."""
    if fits.empty:
        return "n/a"
    row = fits[(fits["trace"] == trace) & (fits["model"] == kind)]
    if not len(row) or math.isnan(float(row["heldout_mape_pct"].iloc[0])):
        return "n/a"
    return f"{float(row['heldout_mape_pct'].iloc[0]):.1f}%"


# -------------------------------------------------------------------- (b) held-out MAPE


def fit_mape(fits_csv: str | Path, out_pdf: str | Path, out_png: str | Path) -> None:
    """(b) Held-out MAPE per comm trace (rows) and model (colour), log scale."""
    fits = read_intermediate(fits_csv)
    fits = fits.dropna(subset=["heldout_mape_pct"])
    if fits.empty:
        placeholder(out_pdf, out_png, "Held-out MAPE per comm trace",
                    "the fit table has no held-out errors")
        return
    setup_style()
    fits = fits.assign(trace=fits["trace"].map(lambda t: Path(str(t)).stem))
    order = sorted(fits["trace"].unique())
    kinds = sorted(fits["model"].unique(),
                   key=lambda k: MODEL_ORDER.index(k) if k in MODEL_ORDER else 99)
    fig, ax = plt.subplots(figsize=(width_in(0.85), 0.9 + 0.04 * len(order) * max(3, len(kinds))),
                           layout="constrained")
    palette = [series_style(MODEL_ORDER.index(k) + 1 if k in MODEL_ORDER else 9)["color"]
               for k in kinds]
    sns.barplot(data=fits, y="trace", x="heldout_mape_pct", hue="model", order=order,
                hue_order=kinds, orient="h", palette=palette, ax=ax, errorbar=None)
    ax.set_xscale("log")
    plain_log_ticks(ax)
    ax.set_xlabel("held-out MAPE [%] (5-fold by message size, log scale)")
    ax.set_ylabel("comm trace")
    # the legend below the axes: inside, it hid the bars of the last traces
    handles, labels = ax.get_legend_handles_labels()
    ax.get_legend().remove()
    fig.legend(handles, labels, title="model", loc="outside lower center", ncol=len(labels),
               frameon=False)
    save(fig, out_pdf, out_png)


# ---------------------------------------------------------- (c) replay vs world size


def _cases(collected: pd.DataFrame) -> list[tuple[str, str]]:
    return sorted({(t, n) for t, n in zip(collected["trace"], collected["network"],
                                          strict=True)})


def _shade_extrapolated(ax: plt.Axes, part: pd.DataFrame) -> None:
    """Grey out the world sizes no sweep measured (replayed on a cross-world-size model)."""
    mask = extrapolated_mask(part)
    if not mask.any():
        return
    flags = part.assign(extrapolated=mask).groupby("world_size")["extrapolated"].any()
    flags = flags.sort_index()
    measured = flags.index[~flags.to_numpy()]
    first = min(flags.index[flags.to_numpy()])
    start = math.sqrt(max(measured) * first) if len(measured) else first / 1.2
    ax.axvspan(start, max(flags.index) * 1.25, color="0.85", zorder=0, lw=0)
    ax.text(start, 1.0, " extrapolated", transform=ax.get_xaxis_transform(),
            fontsize=FONT_PT - 1, va="top", ha="left", color="0.3")


def replay_vs_world_size(collected_csv: str | Path, out_pdf: str | Path, out_png: str | Path,
                         ncols: int = 3, family: str | None = None) -> None:
    """(c) Iteration time per algorithm vs world size, one panel per compute x network.

    ``family`` keeps the cases of one compute family (the ``family`` column written by
    ``report collect --label``), so that each family is a figure that fits its page; every
    panel title names the case's pairing (real, matched GPU type, what-if).
    """
    collected = read_intermediate(collected_csv)
    title = "Iteration time vs world size" + (f" ({family})" if family else "")
    if family is not None and not collected.empty:
        if "family" not in collected:
            placeholder(out_pdf, out_png, title, "the replay table has no family column")
            return
        collected = collected[collected["family"] == family]
    if collected.empty:
        placeholder(out_pdf, out_png, title, "no replay results")
        return
    setup_style()
    if collected.groupby(["trace", "network"])["world_size"].nunique().max() == 1:
        relative_to_ddp(collected, out_pdf, out_png)
        return
    cases = _cases(collected)
    colors = algorithm_colors(sorted(collected["algorithm"].unique()))
    # a third of the text width per panel (one panel: 0.6, with the legend beside it)
    width = width_in(0.6) if len(cases) == 1 else width_in(min(ncols, len(cases)) / ncols)
    fig, axes = panel_grid(len(cases), ncols, width=width, height=2.2)
    for ax, (trace, network) in zip(axes, cases, strict=True):
        part = collected[(collected["trace"] == trace) & (collected["network"] == network)]
        for alg in sorted(part["algorithm"].unique(), key=algorithm_sort_key):
            rows = part[part["algorithm"] == alg].sort_values("world_size")
            style = {"ls": ":", "lw": 2.2} if alg == "best" else {"ls": "-", "lw": 1.2}
            ax.plot(rows["world_size"], rows["iteration_s"] * 1e3, marker="o", ms=3,
                    color=colors[alg], label=algorithm_label(alg), **style)
        bound = part.groupby("world_size")["lower_bound_s"].first().sort_index()
        ax.plot(bound.index, bound.to_numpy() * 1e3, color="black", ls="--", lw=1,
                label="lower bound")
        if len(bound) == 1:  # one world size (one sweep): the bound as a visible level
            ax.axhline(float(bound.iloc[0]) * 1e3, color="black", ls="--", lw=1)
        _shade_extrapolated(ax, part)
        ax.set_xscale("log", base=2)
        ax.set_xticks(sorted(part["world_size"].unique()))
        ax.get_xaxis().set_major_formatter(matplotlib.ticker.ScalarFormatter())
        ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
        pairing = pairing_of(part)
        ax.set_title(f"{trace}\nx {network}" + (f"\n[{pairing}]" if pairing else ""),
                     fontsize=FONT_PT - 1)
        ax.set_xlabel("world size P [ranks]")
        ax.set_ylabel("iteration time [ms]")
    handles, labels = legend_union(axes)
    if len(cases) == 1:  # one panel: the legend beside it, not wider than it on top
        fig.legend(handles, labels, loc="outside right center", ncol=1, frameon=False)
    else:
        fig.legend(handles, labels, loc="outside upper center", ncol=min(6, len(labels)),
                   frameon=False)
    save(fig, out_pdf, out_png)


# ---------------------------------------------------------------------- (d) timeline


def timeline(timeline_csvs: Mapping[str, str | Path] | Sequence[str | Path], out_pdf: str | Path,
             out_png: str | Path, title: str = "") -> None:
    """(d) Two steady-state iterations per algorithm: compute and comm lanes as bars.

    ``timeline_csvs``: ``<algorithm>.timeline.csv`` files from ``gradsched replay
    --timeline``. The window is iterations k and k+1 with k the middle iteration, so the
    warm-up of the first iteration is not shown.
    """
    paths = (dict(timeline_csvs) if isinstance(timeline_csvs, Mapping) else
             {Path(p).name.split(".")[0]: Path(p) for p in timeline_csvs})
    frames = {alg: pd.read_csv(p) for alg, p in paths.items()}
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


# --------------------------------------------------------------------------- (e) gaps


GENERATION_LABELS = {"k80": "K80\n(real)", "v100": "V100", "a100-gh200": "A100,\nGH200",
                     "h200": "H200\n(Hopper nets)"}
"""x-axis labels of :func:`gpu_generations` per GPU family (config ``cases: family``)."""


def gpu_generations(collected_csv: str | Path, out_pdf: str | Path, out_png: str | Path,
                    families: Sequence[str] = GPU_FAMILIES) -> None:
    """Per GPU generation (oldest left), one point per measured case and world size: the
    share of PyTorch DDP's default iteration that is exposed communication (left) and the
    gain of the best plan found over it (right), on a symmetric-log axis; colour and marker
    = network, open = bf16 compute. Extrapolated points are left out, as in the prose's macros."""
    collected = read_intermediate(collected_csv)
    title = "Exposed communication and best plan vs DDP, per GPU generation"
    table = gpu_case_table(collected, tuple(families))
    if table.empty:
        placeholder(out_pdf, out_png, title, "no GPU replay results (families "
                    + ", ".join(families) + ")")
        return
    setup_style()
    present = [f for f in families if (table["family"] == f).any()]
    networks = list(dict.fromkeys(table.sort_values("family", key=lambda s: s.map(
        present.index))["network"]))
    colors = sns.color_palette("colorblind", 10)
    # colour AND marker per network (vermillion and orange, say, stay apart in grey print)
    styles = {network: (colors[(0, 1, 2, 3, 4, 7, 9, 5)[i % 8]], "osD^vPXh"[i % 8])
              for i, network in enumerate(networks)}
    fig, axes = plt.subplots(1, 2, figsize=(width_in(1.0), 3.0), layout="constrained")
    rng = np.random.default_rng(0)  # jitter within a generation: deterministic
    for ax, column, label in ((axes[0], "ddp_exposed_pct",
                               "DDP default: exposed comm. [% of iteration]"),
                              (axes[1], "best_gain_pct", "best plan over DDP default [%]")):
        for network in networks:
            color, marker = styles[network]
            part = table[table["network"] == network]
            x = part["family"].map(present.index).to_numpy(float)
            x = x + rng.uniform(-0.2, 0.2, len(x))
            bf16 = part["trace"].str.contains("bf16").to_numpy()
            y = part[column].to_numpy()
            ax.scatter(x[~bf16], y[~bf16], s=18, marker=marker, color=color,
                       edgecolor="none", label=network)
            if bf16.any():
                ax.scatter(x[bf16], y[bf16], s=20, marker=marker, facecolor="none",
                           edgecolor=color, linewidth=1.0)
        ax.set_xticks(range(len(present)), [GENERATION_LABELS.get(f, f) for f in present])
        ax.set_xlim(-0.5, len(present) - 0.5)
        # symmetric log: the few-percent Hopper and V100 values stay apart, 0 stays drawable
        ax.set_yscale("symlog", linthresh=1.0, linscale=0.6)
        ax.set_ylim(0, max(100.0, float(table[column].max()) * 1.3))
        ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
        ax.set_ylabel(label)
        ax.grid(axis="y", lw=0.4, alpha=0.5)
    handles, labels = axes[0].get_legend_handles_labels()
    handles.append(matplotlib.lines.Line2D([], [], ls="", marker="o", mfc="none", mec="0.3",
                                           label="open: bf16 compute (filled: fp32)"))
    labels.append("open: bf16 compute (filled: fp32)")
    fig.legend(handles, labels, loc="outside lower center", ncol=3, frameon=False)
    save(fig, out_pdf, out_png)


GAP_FLAT_PCT = 0.1
"""A case whose MG-WFBP gap stays within this many percent of 0 at every world size is drawn
in the one grey "every other case" line of :func:`gaps` instead of a legend entry of its own
(their lines coincide at 0)."""


def gaps(collected_csv: str | Path, out_pdf: str | Path, out_png: str | Path) -> None:
    """(e) Left: MG-WFBP's gap to ``contiguous_optimum`` (its family's exact optimum) per
    case, the cases that stay within :data:`GAP_FLAT_PCT` of 0 drawn as one grey group;
    right: every algorithm's gap to the lower bound (one point per case). Points replayed
    beyond the sweeps (extrapolated) are left out, as in the prose's macros."""
    collected = read_intermediate(collected_csv)
    collected = collected[~extrapolated_mask(collected)]
    if collected.empty:
        placeholder(out_pdf, out_png, "Gaps", "no replay results")
        return
    setup_style()
    fig, (left, right) = plt.subplots(1, 2, figsize=(width_in(1.0), 3.3), layout="constrained",
                                      gridspec_kw={"width_ratios": [1, 1.2]})
    gap = mgwfbp_gaps(collected)
    if len(gap):
        _mgwfbp_panel(left, replay_wide(collected).loc[gap.index].assign(gap_pct=gap))
    else:
        left.axis("off")
        left.text(0.5, 0.5, "NO DATA: MG-WFBP and contiguous_optimum\nwere not both replayed",
                  ha="center", va="center")
    left.set_title("MG-WFBP over the contiguous optimum")
    _lower_bound_panel(right, collected)
    if len(gap):
        fig.legend(*left.get_legend_handles_labels(), loc="outside lower center", ncol=2,
                   frameon=False, title="left panel: compute x network")
    save(fig, out_pdf, out_png)


def _mgwfbp_panel(ax: plt.Axes, wide: pd.DataFrame) -> None:
    """One line per case with a gap; the cases flat at 0 as one grey group."""
    groups = list(wide.groupby(["trace", "network"]))
    flat = [part for _, part in groups if part["gap_pct"].abs().max() <= GAP_FLAT_PCT]
    for i, ((trace, network), part) in enumerate(
            (key, part) for key, part in groups if part["gap_pct"].abs().max() > GAP_FLAT_PCT):
        style = series_style(i)
        part = part.sort_values("world_size")
        ax.plot(part["world_size"], part["gap_pct"], ms=3.5, lw=1.1, color=style["color"],
                ls=style["ls"], marker=style["marker"], label=f"{trace} x {network}")
    for j, part in enumerate(flat):
        part = part.sort_values("world_size")
        ax.plot(part["world_size"], part["gap_pct"], color="0.6", lw=0.8, marker=".", ms=3,
                zorder=1, label=(f"{len(flat)} other cases (within {GAP_FLAT_PCT:g}% of 0 "
                                 "at every P)") if j == 0 else None)
    ax.set_xscale("log", base=2)
    ax.set_xticks(sorted(wide["world_size"].unique()))
    ax.get_xaxis().set_major_formatter(matplotlib.ticker.ScalarFormatter())
    ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
    ax.set_xlabel("world size P [ranks]")
    ax.set_ylabel("MG-WFBP vs contiguous optimum [%]")


def _lower_bound_panel(ax: plt.Axes, collected: pd.DataFrame) -> None:
    """Each algorithm's gap to the lower bound: a box and one point per case, one row per
    algorithm (horizontal labels: no rotated text)."""
    data = collected.assign(label=collected["algorithm"].map(algorithm_label))
    order = [algorithm_label(a) for a in sorted(collected["algorithm"].unique(),
                                                key=algorithm_sort_key)]
    boxes = [data.loc[data["label"] == label, "gap_to_lb_pct"].to_numpy() for label in order]
    ax.boxplot(boxes, positions=range(len(order)), widths=0.6, showfliers=False,
               orientation="horizontal", patch_artist=True,
               boxprops={"facecolor": "0.9", "linewidth": 0.8},
               medianprops={"color": "0.3"}, zorder=1)
    np.random.seed(0)  # seaborn's jitter draws from numpy's global generator: deterministic
    sns.stripplot(data=data, y="label", x="gap_to_lb_pct", order=order, ax=ax, size=2.5,
                  color="0.2", jitter=0.2, orient="h")
    ax.set_yticks(range(len(order)), order)
    ax.set_ylim(len(order) - 0.5, -0.5)
    ax.set_ylabel("")
    ax.set_xlabel("gap to lower bound [%]")
    ax.set_title("every algorithm's gap to the lower bound\n(one point per case)")
