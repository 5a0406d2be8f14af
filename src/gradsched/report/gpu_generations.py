"""GPU generations: PyTorch DDP's default plan against the best plan found, per measured case
of the GPU families (K80, V100, A100/GH200, H200), and the family medians the paper quotes,
on the cases that pass the quoting rule (:mod:`gradsched.report.quote_rule`: DDP's and the
best plan's rows both in-domain and not host-bound), the others counted; the figure of both
per generation (:func:`gpu_generations`), the cases left out drawn hollow and grey."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from gradsched.intermediates import read_intermediate
from gradsched.report.collect import extrapolated_mask, outside_domain_mask
from gradsched.report.figure_style import placeholder, save, setup_style, width_in
from gradsched.report.latex import NA, camel, number
from gradsched.report.quote_rule import exclusion_reasons

GPU_FAMILIES = ("k80", "v100", "a100-gh200", "h200")
"""The GPU case families (config ``cases: family``), oldest GPU first: the paper compares how
exposed communication and the gain of the best plan change from one generation to the next."""


def gpu_case_table(collected: pd.DataFrame | None,
                   families: tuple[str, ...] = GPU_FAMILIES,
                   calibrated: frozenset[str] = frozenset()) -> pd.DataFrame:
    """One row per measured (not extrapolated) case of the GPU families: PyTorch DDP's
    default plan (``ddp``) against the best plan found (``best``, the oracle over every
    planner). ``ddp_exposed_pct`` = 100 exposed communication / iteration time of DDP's
    plan; ``best_gain_pct`` = 100 (T_ddp / T_best - 1); ``compute_ms`` = the trace's compute
    per iteration; ``excluded``: why the quoting rule leaves the case out (the first reason
    of DDP's or the best plan's row, :func:`gradsched.report.quote_rule.exclusion_reasons`),
    ``""`` where its numbers may be quoted; ``calibrated``: the links a calibrated replay
    exists for."""
    columns = ["family", "trace", "network", "world_size", "compute_ms", "ddp_ms", "best_ms",
               "ddp_exposed_pct", "best_gain_pct", "host_bound", "outside_domain", "excluded"]
    if collected is None or collected.empty or "family" not in collected:
        return pd.DataFrame(columns=columns)
    part = collected[~extrapolated_mask(collected) & collected["family"].isin(families)]
    part = part.assign(outside=outside_domain_mask(part),
                       excluded=exclusion_reasons(part, calibrated).to_numpy())
    rows = []
    for (family, trace, network, ws), case in part.groupby(
            ["family", "trace", "network", "world_size"], sort=True):
        by_alg = case.set_index("algorithm")
        if "ddp" not in by_alg.index or "best" not in by_alg.index:
            continue
        ddp, best = by_alg.loc["ddp"], by_alg.loc["best"]
        rows.append({
            "family": family, "trace": trace, "network": network, "world_size": int(ws),
            "compute_ms": 1e3 * float(ddp["compute_s"]),
            "ddp_ms": 1e3 * float(ddp["iteration_s"]),
            "best_ms": 1e3 * float(best["iteration_s"]),
            "ddp_exposed_pct": 100.0 * float(ddp["exposed_comm_s"]) / float(ddp["iteration_s"]),
            "best_gain_pct": 100.0 * (float(ddp["iteration_s"]) / float(best["iteration_s"])
                                      - 1.0),
            "host_bound": str(ddp.get("compute_bound_by", "")) == "host",
            "outside_domain": bool(ddp["outside"] or best["outside"]),
            "excluded": str(ddp["excluded"] or best["excluded"]),
        })
    return pd.DataFrame(rows, columns=columns)


def gpu_generation_macros(collected: pd.DataFrame | None,
                          families: tuple[str, ...] = GPU_FAMILIES,
                          calibrated: frozenset[str] = frozenset()) -> dict[str, str]:
    """Per GPU family: the number of measured cases, how many the quoting rule leaves out
    (host-bound; mostly priced outside the measured sizes) and how many it keeps
    (``Gen<Family>NumQuoted``), and over the kept ones only the median, smallest and largest
    DDP exposed share and gain of the best plan over DDP's default (``n/a`` where none is
    kept); per case of the newest family (the H200 traces captured here): its compute,
    exposed share and gain (``Gen<Trace><Network>...``) and why the rule leaves it out
    (``...Excluded``: ``none`` where it passes)."""
    table = gpu_case_table(collected, families, calibrated)
    out: dict[str, str] = {}
    for family in families:
        key = "Gen" + camel(family)
        rows = table[table["family"] == family]
        # a host-bound trace's compute does not reproduce across machines (the GPU waits on
        # kernel launches): shown per case, left out of the family's medians and maxima
        out[key + "NumHostBound"] = str(int(rows["host_bound"].sum()))
        rows = rows[~rows["host_bound"].astype(bool)]
        # stated next to the family's numbers: cases whose DDP or best plan is mostly priced
        # outside the sweep's measured sizes
        out[key + "NumOutsideDomain"] = str(int(rows["outside_domain"].sum()))
        out[key + "NumCases"] = str(len(rows)) if len(rows) else NA
        rows = rows[rows["excluded"] == ""]
        out[key + "NumQuoted"] = str(len(rows))
        for column, name in (("ddp_exposed_pct", "DdpExposed"), ("best_gain_pct", "BestGain")):
            values = rows[column]
            out[f"{key}{name}MedianPct"] = number(float(values.median())) if len(rows) else NA
            out[f"{key}{name}MinPct"] = number(float(values.min())) if len(rows) else NA
            out[f"{key}{name}MaxPct"] = number(float(values.max())) if len(rows) else NA
    newest = table[table["family"] == families[-1]]
    for _, row in newest.iterrows():
        key = "Gen" + camel(row["trace"]) + camel(row["network"])
        out[key + "ComputeMs"] = number(float(row["compute_ms"]))
        out[key + "DdpExposedPct"] = number(float(row["ddp_exposed_pct"]))
        out[key + "BestGainPct"] = number(float(row["best_gain_pct"]))
        out[key + "Excluded"] = row["excluded"] or "none"
    return out


GENERATION_LABELS = {"k80": "K80\n(real)", "v100": "V100", "a100-gh200": "A100,\nGH200",
                     "h200": "H200\n(Hopper nets)"}
"""x-axis labels of :func:`gpu_generations` per GPU family (config ``cases: family``)."""


NETWORK_COLORS = ("#000000", "#E69F00", "#009E73", "#D55E00", "#0072B2", "#CC79A7",
                  "#56B4E9", "#F0E442")
"""Network colours of :func:`gpu_generations`, in the order the networks first appear (oldest
generation first): Okabe-Ito's, black first, so that the two networks that share a
generation (A100 and GH200; A3-Mega and Alps) never get neighbouring hues."""

DODGE = 0.32
"""Half the width (x units) over which a generation's networks are spread side by side."""


def gpu_generations(collected_csv: str | Path, out_pdf: str | Path, out_png: str | Path,
                    families: Sequence[str] = GPU_FAMILIES,
                    calibrated: frozenset[str] = frozenset()) -> None:
    """Per GPU generation (oldest left), one point per measured case and world size: the
    share of PyTorch DDP's default iteration that is exposed communication (left) and the
    gain of the best plan found over it (right), on a symmetric-log axis. Within a
    generation each network has its own column (colour and marker = network); half-filled
    = bf16 compute; hollow grey = a case the quoting rule leaves out (:mod:`.quote_rule`:
    DDP's or the best plan's row host-bound or mostly priced outside the measured sizes;
    ``calibrated``: the links a calibrated replay exists for), drawn but in no median.
    Extrapolated points are left out, as in the prose's macros."""
    collected = read_intermediate(collected_csv)
    title = "Exposed communication and best plan vs DDP, per GPU generation"
    table = gpu_case_table(collected, tuple(families), calibrated)
    if table.empty:
        placeholder(out_pdf, out_png, title, "no GPU replay results (families "
                    + ", ".join(families) + ")")
        return
    setup_style()
    present = [f for f in families if (table["family"] == f).any()]
    table = table.sort_values(["family", "network", "trace", "world_size"],
                              key=lambda s: s.map(present.index) if s.name == "family" else s)
    networks = list(dict.fromkeys(table["network"]))
    styles = {network: (NETWORK_COLORS[i % len(NETWORK_COLORS)], "osD^vPXh"[i % 8])
              for i, network in enumerate(networks)}
    # each network its own column within its generation (no two networks' points overlap)
    offset: dict[tuple[str, str], float] = {}
    for family in present:
        mine = list(dict.fromkeys(table.loc[table["family"] == family, "network"]))
        for j, network in enumerate(mine):
            offset[(family, network)] = (0.0 if len(mine) == 1
                                         else -DODGE + 2 * DODGE * j / (len(mine) - 1))
    rng = np.random.default_rng(0)  # jitter within a column: deterministic
    x = np.array([present.index(f) + offset[(f, n)]
                  for f, n in zip(table["family"], table["network"], strict=True)])
    x = x + rng.uniform(-0.07, 0.07, len(x))
    table = table.assign(x=x)
    fig, axes = plt.subplots(1, 2, figsize=(width_in(1.0), 3.2), layout="constrained")
    for ax, column, label in ((axes[0], "ddp_exposed_pct",
                               "DDP default: exposed comm. [% of step]"),
                              (axes[1], "best_gain_pct", "best plan over DDP default [%]")):
        for network in networks:
            color, marker = styles[network]
            part = table[table["network"] == network]
            bf16 = part["trace"].str.contains("bf16").to_numpy()
            out = (part["excluded"] != "").to_numpy()
            for mask, kw in ((~bf16 & ~out, {"color": color}),
                             (bf16 & ~out, {"color": color, "fillstyle": "left",
                                            "mfc": color, "mfcalt": "white"}),
                             (out, {"mfc": "none", "mec": "0.5", "mew": 0.8})):
                if mask.any():
                    ax.plot(part["x"][mask], part[column][mask], ls="", marker=marker,
                            ms=4.2, **kw)
        ax.set_xticks(range(len(present)), [GENERATION_LABELS.get(f, f) for f in present])
        ax.set_xlim(-0.5, len(present) - 0.5)
        for edge in range(1, len(present)):
            ax.axvline(edge - 0.5, color="0.85", lw=0.6)
        # symmetric log: the few-percent Hopper and V100 values stay apart, 0 stays drawable
        ax.set_yscale("symlog", linthresh=1.0, linscale=0.6)
        ax.set_ylim(0, max(100.0, float(table[column].max()) * 1.3))
        ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
        ax.set_ylabel(label)
        ax.grid(axis="y", lw=0.4, alpha=0.5)
        ax.grid(axis="x", visible=False)
    handles = [matplotlib.lines.Line2D([], [], ls="", marker=styles[n][1], color=styles[n][0],
                                       ms=4.2) for n in networks]
    labels = list(networks)
    handles += [matplotlib.lines.Line2D([], [], ls="", marker="o", ms=4.2, color="0.3",
                                        fillstyle="left", mfcalt="white"),
                matplotlib.lines.Line2D([], [], ls="", marker="o", ms=4.2, mfc="none",
                                        mec="0.5", mew=0.8)]
    labels += ["half-filled: bf16 compute (filled: fp32)",
               "hollow grey: left out of the medians (host-bound or mostly outside the "
               "measured sizes)"]
    fig.legend(handles, labels, loc="outside lower center", ncol=3, frameon=False)
    save(fig, out_pdf, out_png)
