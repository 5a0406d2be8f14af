"""Figures and table of the collective-algorithm sweeps (``gradsched bench collectives``).

* :func:`time_vs_size` -- measured time (points) and fitted alpha-beta-gamma formula
  (lines, per-algorithm fit) vs message size, one panel per (network, world size);
* :func:`lp_invariance` -- time at the largest common size vs world size, LP next to
  ring, MST, RD, RHD and the library's own all-reduce (Wang et al. 2017 claim LP's cost
  is nearly independent of P);
* :func:`lp_rhd_ratio` -- LP's bandwidth relative to recursive halving/doubling,
  ``t_rhd / t_lp``, vs message size per world size (Wang et al. claim up to 2x);
* :func:`summary_table` -- the numbers quoted from these figures;
* :func:`broadcast_table` -- LP vs binomial-tree broadcast (the setting of Wang et al.'s
  bandwidth claim), with the formulas' LP/MST and LP/RHD ratios;
* :func:`error_summary` -- where formula and measurement disagree, by size band.

The frames come computed from :mod:`gradsched.experiments.collectives` (the samples with
the fitted formulas' times, the medians at large messages, the summary rows with the
formulas' ratios); this module draws and formats them, and reads the per-size error CSV.
A figure with nothing to draw is a placeholder that says so.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import pandas as pd
from matplotlib.lines import Line2D

from gradsched.intermediates import read_csv_frame
from gradsched.report.figure_style import (
    legend_union,
    panel_grid,
    placeholder,
    plain_log_ticks,
    save,
    series_style,
    setup_style,
    width_in,
)
from gradsched.report.formatting import fmt
from gradsched.report.latex import write_table


class CollectivesFrames(Protocol):
    """What :func:`write_all` formats (the report computes none of it): the frames of
    :class:`gradsched.experiments.collectives.CollectivesFrames`."""

    networks: tuple[str, ...]
    fitted: tuple[str, ...]
    samples: pd.DataFrame
    at_large: pd.DataFrame
    summary: pd.DataFrame
    broadcast: pd.DataFrame

ALG_ORDER = ("lp", "ring", "mst", "rd", "rhd", "default")
ALG_LABELS = {"lp": "LP", "ring": "ring", "mst": "MST", "rd": "RD", "rhd": "RHD",
              "default": "gloo default"}


def _colors() -> dict[str, str]:
    """One distinct colour per algorithm (:func:`gradsched.report.figure_style.series_style`)."""
    return {a: str(series_style(i)["color"]) for i, a in enumerate(ALG_ORDER)}


def time_vs_size(samples: pd.DataFrame, networks: Sequence[str], out_pdf: str | Path,
                 out_png: str | Path) -> None:
    """Measured (points) and per-algorithm fitted formula (lines, ``fit_time_s``) vs
    message size, one panel per (network, world size)."""
    panels = [(n, int(p)) for n in networks
              for p in sorted(samples.loc[samples["network"] == n, "world_size"].unique())]
    if not panels:
        placeholder(out_pdf, out_png, "collective algorithms", "no all_reduce sweeps")
        return
    setup_style()
    colors = _colors()
    fig, axes = panel_grid(len(panels), 3, width_in(1.0), 2.0)
    for ax, (net, p) in zip(axes, panels, strict=True):
        sel = samples[(samples["network"] == net) & (samples["world_size"] == p)]
        for alg in ALG_ORDER:
            g = sel[sel["algorithm"] == alg].sort_values("bytes")
            if g.empty:
                continue
            ax.plot(g["bytes"], g["time"] * 1e3, "o", ms=2.5, color=colors[alg],
                    label=ALG_LABELS[alg], alpha=0.8)
            if not g["fit_time_s"].isna().all():
                ax.plot(g["bytes"], g["fit_time_s"].to_numpy() * 1e3, "-", lw=1.0,
                        color=colors[alg])
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        plain_log_ticks(ax)
        ax.set_title(f"{net}, P={p}")
        ax.set_xlabel("message size (bytes)")
        ax.set_ylabel("time (ms)")
    fig.legend(*legend_union(axes), loc="outside lower center", ncol=len(ALG_ORDER),
               frameon=False)
    fig.suptitle("all-reduce: measured (points) and fitted alpha-beta-gamma formula (lines)")
    save(fig, out_pdf, out_png)


def lp_invariance(at_large: pd.DataFrame, networks: Sequence[str], out_pdf: str | Path,
                  out_png: str | Path) -> None:
    """Time at large sizes vs world size per algorithm (one panel per network)."""
    if not networks:
        placeholder(out_pdf, out_png, "LP vs P", "no all_reduce sweeps")
        return
    setup_style()
    colors = _colors()
    fig, axes = panel_grid(len(networks), 3, width_in(0.8), 2.1)
    for ax, net in zip(axes, networks, strict=True):
        sub = at_large[at_large["network"] == net]
        if sub.empty:
            ax.set_title(f"{net}: no common sizes")
            continue
        table = sub.pivot(index="algorithm", columns="world_size", values="time_s")
        for alg in ALG_ORDER:
            if alg in table.index:
                row = table.loc[alg].dropna()
                ax.plot(row.index, row.to_numpy() * 1e3, "o-", color=colors[alg],
                        label=ALG_LABELS[alg], lw=1.2 if alg != "lp" else 2.2, ms=3)
        ax.set_xticks(sorted(table.columns))
        ax.set_xlabel("world size P")
        ax.set_ylabel("time (ms)")
        ax.set_title(f"{net}:\nmedian over {_sizes_mib(sub.iloc[0])} MiB")
    fig.legend(*legend_union(axes), loc="outside lower center", ncol=len(ALG_ORDER),
               frameon=False)
    fig.suptitle("all-reduce time at large messages vs P\n(Wang et al.: LP nearly P-invariant)")
    save(fig, out_pdf, out_png)


def _mib(nbytes: float) -> str:
    return f"{nbytes / 2**20:g}"


def _sizes_mib(row: pd.Series) -> str:
    """``first-last`` MiB of a row's ``first_bytes`` and ``last_bytes``."""
    return f"{_mib(row['first_bytes'])}-{_mib(row['last_bytes'])}"


def lp_rhd_ratio(samples: pd.DataFrame, networks: Sequence[str], fitted: Sequence[str],
                 out_pdf: str | Path, out_png: str | Path, min_bytes: int = 1 << 16) -> None:
    """LP's bandwidth relative to RHD (t_rhd / t_lp) vs size, per world size and network;
    on a network in ``fitted`` also the joint formula fit's ratio (dotted, ``joint_time_s``:
    LP with the chunks the measurements used)."""
    if not networks:
        placeholder(out_pdf, out_png, "LP / RHD bandwidth", "no all_reduce sweeps")
        return
    setup_style()
    fig, axes = panel_grid(len(networks), 3, width_in(0.8), 2.0)
    worlds = sorted(samples["world_size"].unique())
    palette = {p: series_style(i)["color"] for i, p in enumerate(worlds)}
    for ax, net in zip(axes, networks, strict=True):
        sub = samples[(samples["network"] == net) & (samples["bytes"] >= min_bytes)]
        for p, g in sub.groupby("world_size"):
            wide = g.pivot_table(index="bytes", columns="algorithm", values="time")
            if {"lp", "rhd"} <= set(wide.columns):
                ratio = (wide["rhd"] / wide["lp"]).dropna()
                ax.plot(ratio.index, ratio.to_numpy(), "o-", ms=3, color=palette[p],
                        label=f"P={p}")
                if net in fitted:
                    lp_rows = g[g["algorithm"] == "lp"].sort_values("bytes")
                    rhd_rows = g[g["algorithm"] == "rhd"].sort_values("bytes")
                    if lp_rows["bytes"].tolist() == rhd_rows["bytes"].tolist():
                        model = (rhd_rows["joint_time_s"].to_numpy()
                                 / lp_rows["joint_time_s"].to_numpy())
                        ax.plot(lp_rows["bytes"], model, ":", color=palette[p], lw=1.2)
        ax.axhline(1.0, color="0.4", lw=0.8)
        ax.axhline(2.0, color="0.6", lw=0.8, ls="--", label="Wang et al.: up to 2x")
        ax.set_xscale("log", base=2)
        plain_log_ticks(ax)
        ax.set_xlabel("message size (bytes)")
        ax.set_ylabel("bandwidth LP / RHD")
        ax.set_title(net)
    handles, labels = legend_union(axes)
    if fitted:  # one entry for every dotted line: its colour is its P's
        handles.append(Line2D([], [], ls=":", color="0.3", lw=1.2))
        labels.append("joint formula fit (dotted, colour = P)")
    fig.legend(handles, labels, loc="outside lower center", ncol=min(5, len(labels)),
               frameon=False)
    fig.suptitle("all-reduce: LP bandwidth relative to recursive halving/doubling\n"
                 "(points: measured; dotted: joint formula fit)")
    save(fig, out_pdf, out_png)


def summary_table(rows: pd.DataFrame) -> pd.DataFrame:
    """The all-reduce's summary rows (:func:`gradsched.experiments.collectives.summary_rows`)
    as formatted strings (units in the headers)."""
    if rows.empty:
        return pd.DataFrame(columns=["network"])
    return pd.DataFrame({
        "network": rows["network"], "P": rows["world_size"].astype(str),
        "sizes (MiB)": rows.apply(_sizes_mib, axis=1),
        **{f"{ALG_LABELS[a]} (ms)": rows[f"{a}_ms"].map(lambda v: fmt(v, 1))
           for a in ALG_ORDER},
        "LP/RHD bw measured": rows["lp_rhd_bw_measured"].map(lambda v: fmt(v, 2)),
        "LP/RHD bw formula": rows["lp_rhd_bw_model"].map(lambda v: fmt(v, 2)),
        "LP time / LP at smallest P": rows["lp_vs_smallest_p"].map(lambda v: fmt(v, 2)),
    })


def broadcast_table(rows: pd.DataFrame) -> pd.DataFrame:
    """The broadcast rows (:func:`gradsched.experiments.collectives.broadcast_rows`) as
    formatted strings."""
    if rows.empty:
        return pd.DataFrame(columns=["network"])
    return pd.DataFrame({
        "network": rows["network"], "P": rows["world_size"].astype(str),
        "sizes (MiB)": rows.apply(_sizes_mib, axis=1),
        "LP (ms)": rows["lp_ms"].map(lambda v: fmt(v, 1)),
        "MST (ms)": rows["mst_ms"].map(lambda v: fmt(v, 1)),
        "gloo default (ms)": rows["default_ms"].map(lambda v: fmt(v, 1)),
        "LP/MST bw measured": rows["lp_mst_bw_measured"].map(lambda v: fmt(v, 2)),
        "LP/MST bw formula": rows["lp_mst_bw_model"].map(lambda v: fmt(v, 2)),
        "LP/RHD bw formula": rows["lp_rhd_bw_model"].map(lambda v: fmt(v, 2)),
        "LP time / LP at smallest P": rows["lp_vs_smallest_p"].map(lambda v: fmt(v, 2)),
    })


SIZE_BANDS = ((0, 4096, "<=4 KiB"), (4096, 1 << 18, "4-256 KiB"), (1 << 18, math.inf,
                                                                   ">256 KiB"))


def error_summary(errors_csv: str | Path) -> pd.DataFrame:
    """Formula vs measurement per (network, collective, algorithm, fit): MAPE, the median
    absolute and signed percentage error per size band, and the worst error."""
    err = read_csv_frame(errors_csv)
    err["abs"] = err["rel_err_pct"].abs()
    keys = ["network", "collective", "algorithm", "fit"]
    out = (err.groupby(keys).agg(mape_pct=("abs", "mean"), max_ape_pct=("abs", "max"),
                                 n=("abs", "size")).reset_index())
    for lo, hi, label in SIZE_BANDS:
        band = err[(err["bytes"] > lo) & (err["bytes"] <= hi)]
        med = band.groupby(keys).agg(a=("abs", "median"), s=("rel_err_pct", "median"))
        med = med.rename(columns={"a": f"median_ape {label}", "s": f"median_err {label}"})
        out = out.merge(med.reset_index(), on=keys, how="left")
    return out


def write_all(frames: CollectivesFrames, errors_csv: str | Path, figdir: str | Path,
              tabdir: str | Path, prefix: str = "collectives") -> list[Path]:
    """Every figure (PDF + PNG) and the three tables (LaTeX + Markdown) of the computed
    ``frames`` and the per-size error CSV; the paths written."""
    figdir, tabdir = Path(figdir), Path(tabdir)
    nets = frames.networks
    out: list[Path] = []
    for name, fn in (("time-vs-size", lambda a, b: time_vs_size(frames.samples, nets, a, b)),
                     ("lp-invariance", lambda a, b: lp_invariance(frames.at_large, nets, a, b)),
                     ("lp-rhd-ratio", lambda a, b: lp_rhd_ratio(frames.samples, nets,
                                                                frames.fitted, a, b))):
        pdf, png = figdir / f"{prefix}-{name}.pdf", figdir / f"{prefix}-{name}.png"
        fn(pdf, png)
        out += [pdf, png]
    table = summary_table(frames.summary)
    tex, md = tabdir / f"{prefix}-summary.tex", tabdir / f"{prefix}-summary.md"
    write_table(table, tex, md, title="all-reduce algorithms at large messages")
    out += [tex, md]
    btable = broadcast_table(frames.broadcast)
    tex, md = tabdir / f"{prefix}-broadcast.tex", tabdir / f"{prefix}-broadcast.md"
    write_table(btable, tex, md, title="broadcast algorithms at large messages")
    out += [tex, md]
    errs = error_summary(errors_csv)
    errs_fmt = pd.DataFrame({
        "network": errs["network"], "collective": errs["collective"],
        "algorithm": errs["algorithm"].map(ALG_LABELS), "fit": errs["fit"],
        "MAPE (%)": errs["mape_pct"].map(lambda v: fmt(v, 1)),
        **{f"median err {label} (%)": errs[f"median_err {label}"].map(lambda v: fmt(v, 1))
           for _, _, label in SIZE_BANDS},
        "max APE (%)": errs["max_ape_pct"].map(lambda v: fmt(v, 1)),
        "points": errs["n"].astype(str)})
    tex, md = tabdir / f"{prefix}-formula-errors.tex", tabdir / f"{prefix}-formula-errors.md"
    write_table(errs_fmt, tex, md, title="alpha-beta-gamma formulas vs measurement")
    out += [tex, md]
    return out
