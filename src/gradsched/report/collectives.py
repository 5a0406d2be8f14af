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

"Large size" statistics use the :data:`LARGE_SIZES` largest sizes measured at every world
size of a network (the median over them), which tames the noise of single points.
All inputs are on disk (comm traces, the fit JSON, the per-size error CSV); a missing
input gives a placeholder figure that says so.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.lines import Line2D

from gradsched.costmodel.formulas import cost
from gradsched.costmodel.tuned import FormulaFit, fits_from_json, load_samples, predict
from gradsched.intermediates import read_csv_frame
from gradsched.io import read_json
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

ALG_ORDER = ("lp", "ring", "mst", "rd", "rhd", "default")
ALG_LABELS = {"lp": "LP", "ring": "ring", "mst": "MST", "rd": "RD", "rhd": "RHD",
              "default": "gloo default"}
LARGE_SIZES = 3


def _colors() -> dict[str, str]:
    """One distinct colour per algorithm (:func:`gradsched.report.figure_style.series_style`)."""
    return {a: str(series_style(i)["color"]) for i, a in enumerate(ALG_ORDER)}


def _load(traces: Sequence[str | Path], collective: str = "all_reduce") -> pd.DataFrame:
    samples = load_samples(traces, "time_s")
    return samples[samples["collective"] == collective]


def _fits(fit_json: str | Path) -> dict[str, FormulaFit]:
    return fits_from_json(read_json(fit_json, missing="fit JSON not found"))


def _networks(samples: pd.DataFrame) -> list[str]:
    nets = sorted(samples["network"].unique())
    return sorted(nets, key=lambda n: (n != "loopback", n))


def large_sizes(net: pd.DataFrame, count: int = LARGE_SIZES,
                algs: Sequence[str] = ("lp", "rhd")) -> list[int]:
    """The ``count`` largest sizes measured for ``algs`` at every world size."""
    common = None
    for _, g in net[net["algorithm"].isin(list(algs))].groupby(["world_size", "algorithm"]):
        sizes = set(g["bytes"].astype(int))
        common = sizes if common is None else common & sizes
    return sorted(common or [])[-count:]


def time_vs_size(traces: Sequence[str | Path], fit_json: str | Path, out_pdf: str | Path,
                 out_png: str | Path) -> None:
    """Measured (points) and per-algorithm fitted formula (lines) vs message size."""
    samples = _load(traces)
    fits = _fits(fit_json)
    panels = [(n, int(p)) for n in _networks(samples)
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
            fit = fits.get(net)
            if fit is not None and alg in fit.per_algorithm:
                ax.plot(g["bytes"], predict(g, alg, *fit.per_algorithm[alg]) * 1e3, "-",
                        lw=1.0, color=colors[alg])
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


def _at_large(net: pd.DataFrame, sizes: list[int]) -> pd.DataFrame:
    """Median time over ``sizes`` per (algorithm, world size), and the median size."""
    sel = net[net["bytes"].isin(sizes)]
    return sel.groupby(["algorithm", "world_size"])["time"].median().unstack("world_size")


def lp_invariance(traces: Sequence[str | Path], out_pdf: str | Path, out_png: str | Path
                  ) -> None:
    """Time at large sizes vs world size per algorithm (one panel per network)."""
    samples = _load(traces)
    nets = _networks(samples)
    if not nets:
        placeholder(out_pdf, out_png, "LP vs P", "no all_reduce sweeps")
        return
    setup_style()
    colors = _colors()
    fig, axes = panel_grid(len(nets), 3, width_in(0.8), 2.1)
    for ax, net in zip(axes, nets, strict=True):
        sub = samples[samples["network"] == net]
        sizes = large_sizes(sub)
        if not sizes:
            ax.set_title(f"{net}: no common sizes")
            continue
        table = _at_large(sub, sizes)
        for alg in ALG_ORDER:
            if alg in table.index:
                row = table.loc[alg].dropna()
                ax.plot(row.index, row.to_numpy() * 1e3, "o-", color=colors[alg],
                        label=ALG_LABELS[alg], lw=1.2 if alg != "lp" else 2.2, ms=3)
        ax.set_xticks(sorted(table.columns))
        ax.set_xlabel("world size P")
        ax.set_ylabel("time (ms)")
        ax.set_title(f"{net}:\nmedian over {_mib(sizes[0])}-{_mib(sizes[-1])} MiB")
    fig.legend(*legend_union(axes), loc="outside lower center", ncol=len(ALG_ORDER),
               frameon=False)
    fig.suptitle("all-reduce time at large messages vs P\n(Wang et al.: LP nearly P-invariant)")
    save(fig, out_pdf, out_png)


def _mib(nbytes: float) -> str:
    return f"{nbytes / 2**20:g}"


def lp_rhd_ratio(traces: Sequence[str | Path], out_pdf: str | Path, out_png: str | Path,
                 min_bytes: int = 1 << 16, fit_json: str | Path | None = None) -> None:
    """LP's bandwidth relative to RHD (t_rhd / t_lp) vs size, per world size and network;
    with ``fit_json`` also the joint formula fit's ratio (dotted, LP with the chunks the
    measurements used)."""
    samples = _load(traces)
    fits = _fits(fit_json) if fit_json is not None else {}
    nets = _networks(samples)
    if not nets:
        placeholder(out_pdf, out_png, "LP / RHD bandwidth", "no all_reduce sweeps")
        return
    setup_style()
    fig, axes = panel_grid(len(nets), 3, width_in(0.8), 2.0)
    worlds = sorted(samples["world_size"].unique())
    palette = {p: series_style(i)["color"] for i, p in enumerate(worlds)}
    for ax, net in zip(axes, nets, strict=True):
        sub = samples[(samples["network"] == net) & (samples["bytes"] >= min_bytes)]
        for p, g in sub.groupby("world_size"):
            wide = g.pivot_table(index="bytes", columns="algorithm", values="time")
            if {"lp", "rhd"} <= set(wide.columns):
                ratio = (wide["rhd"] / wide["lp"]).dropna()
                ax.plot(ratio.index, ratio.to_numpy(), "o-", ms=3, color=palette[p],
                        label=f"P={p}")
                fit = fits.get(net)
                if fit is not None:
                    lp_rows = g[g["algorithm"] == "lp"].sort_values("bytes")
                    rhd_rows = g[g["algorithm"] == "rhd"].sort_values("bytes")
                    if lp_rows["bytes"].tolist() == rhd_rows["bytes"].tolist():
                        model = (predict(rhd_rows, "rhd", *fit.joint)
                                 / predict(lp_rows, "lp", *fit.joint))
                        ax.plot(lp_rows["bytes"], model, ":", color=palette[p], lw=1.2)
        ax.axhline(1.0, color="0.4", lw=0.8)
        ax.axhline(2.0, color="0.6", lw=0.8, ls="--", label="Wang et al.: up to 2x")
        ax.set_xscale("log", base=2)
        plain_log_ticks(ax)
        ax.set_xlabel("message size (bytes)")
        ax.set_ylabel("bandwidth LP / RHD")
        ax.set_title(net)
    handles, labels = legend_union(axes)
    if fits:  # one entry for every dotted line: its colour is its P's
        handles.append(Line2D([], [], ls=":", color="0.3", lw=1.2))
        labels.append("joint formula fit (dotted, colour = P)")
    fig.legend(handles, labels, loc="outside lower center", ncol=min(5, len(labels)),
               frameon=False)
    fig.suptitle("all-reduce: LP bandwidth relative to recursive halving/doubling\n"
                 "(points: measured; dotted: joint formula fit)")
    save(fig, out_pdf, out_png)


def summary_rows(samples: pd.DataFrame, fits: dict[str, FormulaFit]) -> pd.DataFrame:
    """Numbers per (network, P) at large sizes (raw floats; see :func:`summary_table`)."""
    rows = []
    for net in _networks(samples):
        sub = samples[samples["network"] == net]
        sizes = large_sizes(sub)
        if not sizes:
            continue
        table = _at_large(sub, sizes)
        ps = sorted(table.columns)
        fit = fits.get(net)
        size = float(np.median(sizes))
        for p in ps:
            row: dict[str, object] = {"network": net, "world_size": int(p),
                                      "sizes_mib": f"{_mib(sizes[0])}-{_mib(sizes[-1])}"}
            for alg in ALG_ORDER:
                row[f"{alg}_ms"] = (float(table.loc[alg, p]) * 1e3
                                    if alg in table.index and not math.isnan(table.loc[alg, p])
                                    else math.nan)
            row["lp_rhd_bw_measured"] = row["rhd_ms"] / row["lp_ms"]  # type: ignore[operator]
            lp2 = table.loc["lp", ps[0]] if "lp" in table.index else math.nan
            row["lp_vs_smallest_p"] = row["lp_ms"] / (lp2 * 1e3)  # type: ignore[operator]
            if fit is not None:
                a, b, g = fit.joint
                t_lp = float(cost("all_reduce", "lp", size, int(p), a, b, g)[()])
                t_rhd = float(cost("all_reduce", "rhd", size, int(p), a, b, g)[()])
                row["lp_rhd_bw_model"] = t_rhd / t_lp
            else:
                row["lp_rhd_bw_model"] = math.nan
            rows.append(row)
    return pd.DataFrame(rows)


def summary_table(traces: Sequence[str | Path], fit_json: str | Path) -> pd.DataFrame:
    """The table as formatted strings (units in the headers)."""
    raw = summary_rows(_load(traces), _fits(fit_json))
    if raw.empty:
        return pd.DataFrame(columns=["network"])
    out = pd.DataFrame({
        "network": raw["network"], "P": raw["world_size"].astype(str),
        "sizes (MiB)": raw["sizes_mib"],
        **{f"{ALG_LABELS[a]} (ms)": raw[f"{a}_ms"].map(lambda v: fmt(v, 1)) for a in ALG_ORDER},
        "LP/RHD bw measured": raw["lp_rhd_bw_measured"].map(lambda v: fmt(v, 2)),
        "LP/RHD bw formula": raw["lp_rhd_bw_model"].map(lambda v: fmt(v, 2)),
        "LP time / LP at smallest P": raw["lp_vs_smallest_p"].map(lambda v: fmt(v, 2)),
    })
    return out


def broadcast_rows(samples: pd.DataFrame, fits: dict[str, FormulaFit]) -> pd.DataFrame:
    """Broadcast at large sizes per (network, P): LP vs the binomial tree (MST) and the
    library, LP's growth with P, and the formulas' LP/MST and LP/RHD (scatter +
    all-gather, van de Geijn; Thakur et al. Sec. 4.3) bandwidth ratios -- the setting of
    Wang et al.'s "up to 2x" claim."""
    rows = []
    for net in _networks(samples):
        sub = samples[samples["network"] == net]
        sizes = large_sizes(sub, algs=("lp", "mst"))
        if not sizes:
            continue
        table = _at_large(sub, sizes)
        ps = sorted(table.columns)
        size = float(np.median(sizes))
        fit = fits.get(net)
        for p in ps:
            row: dict[str, object] = {"network": net, "world_size": int(p),
                                      "sizes_mib": f"{_mib(sizes[0])}-{_mib(sizes[-1])}"}
            for alg in ("lp", "mst", "default"):
                row[f"{alg}_ms"] = (float(table.loc[alg, p]) * 1e3 if alg in table.index
                                    else math.nan)
            row["lp_mst_bw_measured"] = row["mst_ms"] / row["lp_ms"]  # type: ignore[operator]
            row["lp_vs_smallest_p"] = float(table.loc["lp", p] / table.loc["lp", ps[0]])
            if fit is not None:
                a, b, g = fit.joint
                t = {alg: float(cost("broadcast", alg, size, int(p), a, b, g)[()])
                     for alg in ("lp", "mst", "rhd")}
                row["lp_mst_bw_model"] = t["mst"] / t["lp"]
                row["lp_rhd_bw_model"] = t["rhd"] / t["lp"]
            else:
                row["lp_mst_bw_model"] = row["lp_rhd_bw_model"] = math.nan
            rows.append(row)
    return pd.DataFrame(rows)


def broadcast_table(traces: Sequence[str | Path], fit_json: str | Path) -> pd.DataFrame:
    """:func:`broadcast_rows` as formatted strings."""
    raw = broadcast_rows(_load(traces, "broadcast"), _fits(fit_json))
    if raw.empty:
        return pd.DataFrame(columns=["network"])
    return pd.DataFrame({
        "network": raw["network"], "P": raw["world_size"].astype(str),
        "sizes (MiB)": raw["sizes_mib"],
        "LP (ms)": raw["lp_ms"].map(lambda v: fmt(v, 1)),
        "MST (ms)": raw["mst_ms"].map(lambda v: fmt(v, 1)),
        "gloo default (ms)": raw["default_ms"].map(lambda v: fmt(v, 1)),
        "LP/MST bw measured": raw["lp_mst_bw_measured"].map(lambda v: fmt(v, 2)),
        "LP/MST bw formula": raw["lp_mst_bw_model"].map(lambda v: fmt(v, 2)),
        "LP/RHD bw formula": raw["lp_rhd_bw_model"].map(lambda v: fmt(v, 2)),
        "LP time / LP at smallest P": raw["lp_vs_smallest_p"].map(lambda v: fmt(v, 2)),
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


def write_all(traces: Sequence[str | Path], fit_json: str | Path, errors_csv: str | Path,
              figdir: str | Path, tabdir: str | Path, prefix: str = "collectives"
              ) -> list[Path]:
    """Every figure (PDF + PNG) and both tables (LaTeX + Markdown); the paths written."""
    figdir, tabdir = Path(figdir), Path(tabdir)
    out: list[Path] = []
    for name, fn in (("time-vs-size", lambda a, b: time_vs_size(traces, fit_json, a, b)),
                     ("lp-invariance", lambda a, b: lp_invariance(traces, a, b)),
                     ("lp-rhd-ratio", lambda a, b: lp_rhd_ratio(traces, a, b,
                                                                fit_json=fit_json))):
        pdf, png = figdir / f"{prefix}-{name}.pdf", figdir / f"{prefix}-{name}.png"
        fn(pdf, png)
        out += [pdf, png]
    table = summary_table(traces, fit_json)
    tex, md = tabdir / f"{prefix}-summary.tex", tabdir / f"{prefix}-summary.md"
    write_table(table, tex, md, title="all-reduce algorithms at large messages")
    out += [tex, md]
    btable = broadcast_table(traces, fit_json)
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
