"""The fit figures: measured against fitted collective time per comm trace (a), and the
held-out MAPE per trace and model (b). Apart from :mod:`gradsched.report.fits` (the fit
tables and macros), so that writing a table loads no plotting stack."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from gradsched.costmodel.base import load_comm_spec
from gradsched.intermediates import read_csv_frame, read_intermediate
from gradsched.report.figure_style import (
    FONT_PT,
    panel_grid,
    placeholder,
    plain_log_ticks,
    save,
    series_style,
    setup_style,
    width_in,
)

MODEL_ORDER = ("alpha-beta", "piecewise", "interp", "analytic")


def _measured(comm_csv: Path) -> tuple[pd.DataFrame, str, int]:
    frame = read_csv_frame(comm_csv, comment="#")
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
