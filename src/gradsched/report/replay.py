r"""The replay study: every planner's plan of every case (compute trace x network x world
size) replayed. Its table (iteration time per algorithm, the fastest, the lower bound), the
iteration time against the world size (one world size: :mod:`.figure_relative`), the gaps
figure (MG-WFBP against the contiguous optimum, every algorithm against the lower bound) and
the prose macros: the headline case, the speed-ups over WFBP and MG-WFBP's gaps, counted on
the rows that pass the quoting rule (:mod:`.quote_rule`; the counts left out:
:mod:`.domain_macros`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from gradsched.intermediates import read_intermediate
from gradsched.report.algorithms import (
    NOT_CREDITED,
    algorithm_label,
    algorithm_sort_key,
    fastest_algorithms,
    tie_count_text,
    tie_text,
)
from gradsched.report.collect import extrapolated_mask, outside_domain_mask
from gradsched.report.domain_macros import domain_count_macros, headline_domain_macros
from gradsched.report.figure_relative import relative_to_ddp
from gradsched.report.figure_style import (
    FONT_PT,
    MARKER_CYCLE,
    algorithm_colors,
    pairing_of,
    panel_grid,
    placeholder,
    save,
    series_style,
    setup_style,
    width_in,
)
from gradsched.report.formatting import fmt
from gradsched.report.latex import NA, latex_escape, number
from gradsched.report.quote_rule import exclusion_reasons, quotable_rows
from gradsched.ties import RTOL, same_time


@dataclass(frozen=True)
class Headline:
    """The case the prose singles out (world size ``None`` = the largest one replayed)."""

    trace: str | None = None
    network: str | None = None
    world_size: int | None = None


WIDE_COLUMNS = ("trace", "network", "world_size", "nodes", "fastest", "fastest_tied",
                "lower_bound_s")
"""The columns of :func:`replay_wide` that are not an algorithm's iteration time."""


def replay_wide(collected: pd.DataFrame) -> pd.DataFrame:
    """One row per case: iteration time per algorithm (s), the fastest one (``fastest``) and
    every credited one tied with it (``fastest_tied``, a tuple in the usual order), the lower
    bound."""
    keys = ["trace", "network", "world_size", "nodes"]
    wide = collected.pivot_table(index=keys, columns="algorithm", values="iteration_s",
                                 aggfunc="first", sort=True)
    algorithms = sorted(wide.columns, key=algorithm_sort_key)
    wide = wide[algorithms]
    # ``best`` is the oracle over the others; ``oasr`` (a reconstruction from an abstract)
    # runs the same program as ``contiguous_optimum``, whose result it is.
    # Ties (:func:`gradsched.ties.same_time`) are all credited, in the usual order;
    # ``fastest`` is the first of them.
    tied = [tuple(fastest_algorithms(row.dropna().to_dict())) for _, row in wide.iterrows()]
    bound = collected.groupby(keys, sort=True)["lower_bound_s"].first()
    out = wide.reset_index()
    out["fastest"] = [t[0] if t else "" for t in tied]
    out["fastest_tied"] = pd.Series(tied, index=out.index, dtype=object)
    out["lower_bound_s"] = bound.to_numpy()
    return out


OUTSIDE_MARK = "*"
"""Marks a replayed time whose communication was mostly priced outside the measured sizes
(:func:`gradsched.report.collect.outside_domain_mask`); the claims leave such rows out."""


def outside_cells(collected: pd.DataFrame, wide: pd.DataFrame) -> pd.DataFrame:
    """Per case of ``wide`` (same order) and algorithm: True where the row is mostly priced
    outside its sweep's measured sizes."""
    keys = ["trace", "network", "world_size", "nodes"]
    flags = collected.assign(outside=outside_domain_mask(collected)).pivot_table(
        index=keys, columns="algorithm", values="outside", aggfunc="any", sort=True)
    return flags.reindex(pd.MultiIndex.from_frame(wide[keys])).fillna(False).astype(
        bool).reset_index(drop=True)


def host_bound_cases(collected: pd.DataFrame, wide: pd.DataFrame) -> pd.Series:
    """Per case of ``wide``: True where the compute trace is host-bound
    (``compute_bound_by == "host"``)."""
    if "compute_bound_by" not in collected:
        return pd.Series(False, index=wide.index)
    keys = ["trace", "network", "world_size", "nodes"]
    host = collected.assign(host=collected["compute_bound_by"].astype(str) == "host")
    flags = host.groupby(keys, sort=True)["host"].any()
    return pd.Series(flags.reindex(pd.MultiIndex.from_frame(wide[keys])).fillna(
        False).to_numpy(dtype=bool), index=wide.index)


UNCALIBRATED_MARK = " (uncal.)"
"""Appended to the network of a case replayed without the per-collective cost calibrated for
its link (:mod:`.quote_rule`, ``uncalibrated``): it counts in no claim."""


def replay_table(collected: pd.DataFrame, ties: str = "names",
                 calibrated: frozenset[str] = frozenset()) -> tuple[pd.DataFrame, str]:
    """Iteration time per algorithm [ms] per case, the fastest algorithm (``ties="names"``:
    every tied one, joined by :data:`TIE_SEP`; ``"count"``: :func:`tie_count_text`) and the
    lower bound. Every mark says why the quoting rule leaves a cell out: ``*`` (mostly
    priced outside the measured sizes), ``(extrap.)``, ``(host)`` (host-bound) and, for the links in
    ``calibrated``, :data:`UNCALIBRATED_MARK`."""
    if collected.empty:
        return pd.DataFrame(columns=["trace", "network", "P [ranks]"]), "lll"
    wide = replay_wide(collected)
    algorithms = [c for c in wide.columns if c not in WIDE_COLUMNS]
    ranks = wide["world_size"].astype(int).astype(str)
    if "extrapolated" in collected:  # replayed on a cross-world-size model, no sweep
        keys = ["trace", "network", "world_size", "nodes"]
        flags = collected.assign(extrapolated=extrapolated_mask(collected)).groupby(
            keys, sort=True)["extrapolated"].any()
        ranks = ranks.where(~flags.to_numpy(), ranks + " (extrap.)")
    out = pd.DataFrame({
        "compute": wide["trace"].where(~host_bound_cases(collected, wide),
                                       wide["trace"] + " (host)"),
        "network": wide["network"], "P [ranks]": ranks,
    })
    if calibrated:
        keys = ["trace", "network", "world_size", "nodes"]
        flags = collected.assign(uncal=(exclusion_reasons(collected, calibrated)
                                        == "uncalibrated").to_numpy()).groupby(
            keys, sort=True)["uncal"].any()
        uncal = flags.reindex(pd.MultiIndex.from_frame(wide[keys])).fillna(False).to_numpy(
            dtype=bool)
        out["network"] = out["network"].where(~uncal, out["network"] + UNCALIBRATED_MARK)
    outside = outside_cells(collected, wide)
    for alg in algorithms:
        cells = (wide[alg] * 1e3).map(lambda v: fmt(v, 1))
        if alg in outside:
            cells = cells.where(~outside[alg], cells + OUTSIDE_MARK)
        out[f"{algorithm_label(alg)} [ms]"] = cells
    out["fastest"] = wide["fastest_tied"].map(tie_text if ties == "names" else tie_count_text)
    out["bound [ms]"] = (wide["lower_bound_s"] * 1e3).map(lambda v: fmt(v, 1))
    return out, "llr" + "r" * len(algorithms) + "lr"


def mgwfbp_gaps(collected: pd.DataFrame, reference: str = "contiguous_optimum") -> pd.Series:
    """Per case: 100 (T_mgwfbp / T_reference - 1), for cases where both were replayed.
    ``contiguous_optimum`` is the exact optimum of MG-WFBP's own family; ``search`` the
    best plan found over every family."""
    wide = replay_wide(collected)
    if "mgwfbp" not in wide or reference not in wide:
        return pd.Series(dtype=float)
    gaps = 100.0 * (wide["mgwfbp"] / wide[reference] - 1.0)
    return gaps.dropna()


def speedups_over_wfbp(collected: pd.DataFrame) -> pd.DataFrame:
    """Per case and algorithm: T_wfbp / T_alg (``best`` and ``oasr`` excluded: see
    :data:`~gradsched.report.algorithms.NOT_CREDITED`)."""
    wide = replay_wide(collected)
    if "wfbp" not in wide:
        return pd.DataFrame(columns=["trace", "network", "world_size", "algorithm", "speedup"])
    algs = [c for c in wide.columns if c not in (*WIDE_COLUMNS, *NOT_CREDITED)]
    rows = []
    for _, row in wide.iterrows():
        for alg in algs:
            if not np.isnan(row[alg]) and row[alg] > 0:
                rows.append({"trace": row["trace"], "network": row["network"],
                             "world_size": int(row["world_size"]), "algorithm": alg,
                             "speedup": float(row["wfbp"] / row[alg])})
    return pd.DataFrame(rows, columns=["trace", "network", "world_size", "algorithm", "speedup"])


def headline_row(collected: pd.DataFrame, headline: Headline) -> pd.Series | None:
    wide = replay_wide(collected)
    if headline.trace is not None:
        wide = wide[wide["trace"] == headline.trace]
    if headline.network is not None:
        wide = wide[wide["network"] == headline.network]
    if wide.empty:
        return None
    if headline.world_size is not None:
        wide = wide[wide["world_size"] == headline.world_size]
        if wide.empty:
            return None
    else:
        wide = wide[wide["world_size"] == wide["world_size"].max()]
    return wide.iloc[0]


def tolerance_text(rtol: float) -> str:
    """``1e-9`` for 1e-9 (the relative tolerance under which times tie, ``TieRelTol``)."""
    exponent = math.floor(math.log10(rtol))
    mantissa = rtol / 10.0 ** exponent
    return (f"{mantissa:g}" if not math.isclose(mantissa, 1.0) else "1") + f"e{exponent}"


def top_speedup(speed: pd.DataFrame) -> tuple[pd.Series, list[str]]:
    """The row of the largest speed-up (of :func:`speedups_over_wfbp`) and every algorithm
    tied with it on that case (:func:`gradsched.ties.same_time`), in the usual order. Of
    cases tied for the largest, the first by trace, network and world size."""
    top_s = float(speed["speedup"].max())
    tied = speed[[same_time(float(v), top_s) for v in speed["speedup"]]]
    top = tied.sort_values(["trace", "network", "world_size"], kind="stable").iloc[0]
    case = tied[(tied["trace"] == top["trace"]) & (tied["network"] == top["network"])
                & (tied["world_size"] == top["world_size"])]
    return top, sorted(case["algorithm"], key=algorithm_sort_key)


def max_speedup_macros(collected: pd.DataFrame | None,
                       calibrated: frozenset[str] = frozenset()) -> dict[str, str]:
    """Where the largest speed-up over WFBP is: the case of the largest one on the rows that
    pass the quoting rule (:func:`gradsched.report.quote_rule.exclusion_reasons`;
    ``MaxSpeedupOverWfbp{Trace,Network,WorldSize}``) and, separately, the largest one on the
    rows that fail it only for being extrapolated (``MaxSpeedupOverWfbpExtrap...``: a number
    only to be quoted labelled as an extrapolation), so that the prose names the scope of
    each. ``calibrated``: the links a calibrated replay exists for."""
    keys = [f"MaxSpeedupOverWfbp{scope}{what}" for scope in ("", "Extrap")
            for what in ("Trace", "Network", "WorldSize")]
    keys += ["MaxSpeedupOverWfbpExtrap", "MaxSpeedupOverWfbpExtrapAlgorithm"]
    out = dict.fromkeys(keys, NA)
    if collected is None or collected.empty:
        return out
    reasons = exclusion_reasons(collected, calibrated).to_numpy()
    for scope, part in (("", collected[reasons == ""]),
                        ("Extrap", collected[reasons == "extrapolated"])):
        speed = speedups_over_wfbp(part) if not part.empty else pd.DataFrame()
        speed = speed.dropna(subset=["speedup"]) if not speed.empty else speed
        if speed.empty:
            continue
        top, algorithms = top_speedup(speed)
        key = "MaxSpeedupOverWfbp" + scope
        out[key + "Trace"] = latex_escape(str(top["trace"]))
        out[key + "Network"] = latex_escape(str(top["network"]))
        out[key + "WorldSize"] = str(int(top["world_size"]))
        if scope:
            out[key] = number(float(top["speedup"]), 2)
            out[key + "Algorithm"] = latex_escape(tie_text(algorithms))
    return out


def replay_macros(collected: pd.DataFrame | None, headline: Headline,
                  calibrated: frozenset[str] = frozenset()) -> dict[str, str]:
    """The replay's prose macros. Every maximum, median and count of cases rests only on
    the rows that pass the quoting rule (:mod:`.quote_rule`; ``calibrated``: the links a
    calibrated replay exists for, whose plain rows are quoted from that replay instead);
    the headline case is quoted whatever its domain, with its out-of-range shares beside
    it (``HeadlineMgwfbp{Above,Below}RangePct``)."""
    keys = ["NumReplayCases", "NumAlgorithms", "HeadlineTrace", "HeadlineNetwork",
            "HeadlineWorldSize", "HeadlineFastest", "HeadlineFastestSpeedupOverWfbp",
            "HeadlineMgwfbpSpeedupOverWfbp", "HeadlineGapToLbPct", "MgwfbpContigGapMedianPct",
            "MgwfbpContigGapMaxPct", "NumCasesMgwfbpContig", "MgwfbpSearchGapMedianPct",
            "MgwfbpSearchGapMaxPct", "MaxSpeedupOverWfbp",
            "MaxSpeedupOverWfbpAlgorithm", "NumCasesSearchFastest", "NumCasesOutsideDomain",
            "NumRowsOutsideDomain", "DomainMostlyOutsidePct", "NumRowsMostlyBelow",
            "NumRowsMostlyAbove", "NumCasesHostBound", "HeadlineMgwfbpAboveRangePct",
            "HeadlineMgwfbpBelowRangePct", "NumRowsUncalibrated", "NumCasesUncalibrated"]
    out = dict.fromkeys(keys, NA)
    out["TieRelTol"] = tolerance_text(RTOL)
    out.update(max_speedup_macros(collected, calibrated))
    if collected is not None:
        # the prose's claims are about world sizes a sweep measured: the points replayed on
        # a cross-world-size model beyond the sweeps are shown, never counted
        collected = collected[~extrapolated_mask(collected)]
    if collected is None or collected.empty:
        return out
    wide = replay_wide(collected)
    out["NumReplayCases"] = str(len(wide))
    out["NumAlgorithms"] = str(collected["algorithm"].nunique())
    row = headline_row(collected, headline)
    if row is not None:
        out["HeadlineTrace"] = latex_escape(row["trace"])
        out["HeadlineNetwork"] = latex_escape(row["network"])
        out["HeadlineWorldSize"] = str(int(row["world_size"]))
        fastest = row["fastest"]
        out["HeadlineFastest"] = latex_escape(tie_text(row["fastest_tied"]))
        if "wfbp" in row.index and not np.isnan(row["wfbp"]):
            out["HeadlineFastestSpeedupOverWfbp"] = number(row["wfbp"] / row[fastest], 2)
            if "mgwfbp" in row.index and not np.isnan(row["mgwfbp"]):
                out["HeadlineMgwfbpSpeedupOverWfbp"] = number(row["wfbp"] / row["mgwfbp"], 2)
        out["HeadlineGapToLbPct"] = number(100.0 * (row[fastest] / row["lower_bound_s"] - 1.0))
    # maxima and medians count only the rows that pass the quoting rule (the others stay in
    # the tables, marked)
    out.update(domain_count_macros(collected, calibrated))
    out.update(headline_domain_macros(collected, row))
    collected = quotable_rows(collected, calibrated)
    gaps = mgwfbp_gaps(collected)
    if len(gaps):
        out["MgwfbpContigGapMedianPct"] = number(float(gaps.median()))
        out["MgwfbpContigGapMaxPct"] = number(float(gaps.max()))
        out["NumCasesMgwfbpContig"] = str(len(gaps))
    search_gaps = mgwfbp_gaps(collected, "search")
    if len(search_gaps):
        out["MgwfbpSearchGapMedianPct"] = number(float(search_gaps.median()))
        out["MgwfbpSearchGapMaxPct"] = number(float(search_gaps.max()))
    speed = speedups_over_wfbp(collected)
    speed = speed.dropna(subset=["speedup"])
    if not speed.empty:
        top, algorithms = top_speedup(speed)
        out["MaxSpeedupOverWfbp"] = number(float(top["speedup"]), 2)
        out["MaxSpeedupOverWfbpAlgorithm"] = latex_escape(tie_text(algorithms))
    if "search" in wide:
        others = [c for c in wide.columns if c not in (*WIDE_COLUMNS, "best", "search")]
        if others:
            best_other = wide[others].min(axis=1)
            fastest = [s <= o or same_time(s, o)
                       for s, o in zip(wide["search"], best_other, strict=True)]
            out["NumCasesSearchFastest"] = str(sum(fastest))
    return out


def _cases(collected: pd.DataFrame) -> list[tuple[str, str]]:
    return sorted({(t, n) for t, n in zip(collected["trace"], collected["network"],
                                          strict=True)})


EXTRAPOLATED_SHADE = "0.88"
"""Fill of the world sizes no sweep measured (replayed on a cross-world-size model)."""

LEFT_OUT_LABEL = "hollow: left out (quoting rule)"
EXTRAPOLATED_LABEL = "grey band: extrapolated"


def _shade_extrapolated(ax: plt.Axes, part: pd.DataFrame) -> bool:
    """Grey out the world sizes no sweep measured (replayed on a cross-world-size model);
    no text on the axes (the legend names the band). True where a band was drawn."""
    mask = extrapolated_mask(part)
    if not mask.any():
        return False
    flags = part.assign(extrapolated=mask).groupby("world_size")["extrapolated"].any()
    flags = flags.sort_index()
    measured = flags.index[~flags.to_numpy()]
    first = min(flags.index[flags.to_numpy()])
    start = math.sqrt(max(measured) * first) if len(measured) else first / 1.2
    ax.axvspan(start, max(flags.index) * 1.25, color=EXTRAPOLATED_SHADE, zorder=0, lw=0)
    return True


def _world_size_axis(ax: plt.Axes, worlds: list[int], max_labels: int = 5) -> None:
    """A log2 world-size axis with a tick at every world size drawn and a label on at most
    ``max_labels`` of them (else every other one from the largest down), so that 128, 256
    and 512 never collide in a third of the text width."""
    ax.set_xscale("log", base=2)
    ticks = sorted(worlds)
    ax.set_xticks(ticks)
    step = 1 if len(ticks) <= max_labels else 2
    shown = set(ticks[::-1][::step])
    ax.set_xticklabels([str(int(t)) if t in shown else "" for t in ticks])
    ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
    ax.set_xlim(min(ticks) / 1.25, max(ticks) * 1.25)


DODGE_LOG2 = 0.035
"""Horizontal spread (log2 units per algorithm) of :func:`replay_vs_world_size`'s markers, so
that schedules tied at one world size stay visible side by side."""

RELATIVE_LINTHRESH_PCT = 0.1
"""Linear range (percent) of the symmetric-log axis of :func:`replay_vs_world_size`: the
schedules within a few tenths of a percent of the fastest stay apart from those at 0."""


def relative_to_fastest(part: pd.DataFrame) -> pd.Series:
    """Per row of one case series: 100 (T / T_fastest - 1), T_fastest the smallest
    iteration time at the row's world size (the oracle ``best`` included: it is the
    fastest plan found)."""
    fastest = part.groupby("world_size")["iteration_s"].transform("min")
    return 100.0 * (part["iteration_s"] / fastest - 1.0)


def replay_vs_world_size(collected_csv: str | Path, out_pdf: str | Path, out_png: str | Path,
                         ncols: int = 3, family: str | None = None,
                         calibrated: frozenset[str] = frozenset()) -> None:
    """(c) Per compute x network, each algorithm's iteration time above the fastest
    schedule at that world size (percent, symmetric-log axis: schedules that collapse onto
    one line on a time axis stay apart, the fastest at 0), one marker per algorithm; a
    point the quoting rule leaves out (:mod:`.quote_rule`; ``calibrated``: the links a
    calibrated replay exists for) is drawn hollow. The absolute times are the replay
    tables'.

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
    collected = collected.assign(
        left_out=(exclusion_reasons(collected, calibrated) != "").to_numpy())
    cases = _cases(collected)
    algorithms = sorted(collected["algorithm"].unique(), key=algorithm_sort_key)
    colors = algorithm_colors(algorithms)
    markers = {alg: MARKER_CYCLE[i % len(MARKER_CYCLE)] for i, alg in enumerate(algorithms)}
    # a third of the text width per panel (one panel: 0.8, with the legend beside it)
    width = width_in(0.8) if len(cases) == 1 else width_in(min(ncols, len(cases)) / ncols)
    fig, axes = panel_grid(len(cases), ncols, width=width,
                           height=2.8 if len(cases) == 1 else 2.2)
    shaded = hollow = False
    for ax, (trace, network) in zip(axes, cases, strict=True):
        part = collected[(collected["trace"] == trace) & (collected["network"] == network)]
        part = part.assign(rel_pct=relative_to_fastest(part))
        for i, alg in enumerate(algorithms):
            rows = part[part["algorithm"] == alg].sort_values("world_size")
            if rows.empty:
                continue
            # schedules tied at one world size sit side by side, not on top of each other
            x = rows["world_size"].to_numpy(float) * 2.0 ** (
                DODGE_LOG2 * (i - (len(algorithms) - 1) / 2))
            y = rows["rel_pct"].to_numpy()
            style = {"ls": ":", "lw": 1.6} if alg == "best" else {"ls": "-", "lw": 0.9}
            ax.plot(x, y, color=colors[alg], **style)
            kept = ~rows["left_out"].to_numpy(dtype=bool)
            ax.plot(x[kept], y[kept], ls="", ms=3.2, marker=markers[alg], color=colors[alg])
            ax.plot(x[~kept], y[~kept], ls="", ms=3.2, marker=markers[alg], mfc="white",
                    mec=colors[alg], mew=0.8)
            hollow = hollow or bool((~kept).any())
        shaded = _shade_extrapolated(ax, part) or shaded
        _world_size_axis(ax, sorted(part["world_size"].unique()))
        ax.set_yscale("symlog", linthresh=RELATIVE_LINTHRESH_PCT, linscale=0.5)
        ax.set_ylim(-RELATIVE_LINTHRESH_PCT / 2, max(1.0, float(part["rel_pct"].max())) * 1.6)
        ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
        pairing = pairing_of(part)
        ax.set_title(f"{trace}\nx {network}" + (f"\n[{pairing}]" if pairing else ""),
                     fontsize=FONT_PT - 1)
        ax.set_xlabel("world size P [ranks]")
        ax.set_ylabel("above the fastest [%]")
    present = set(collected["algorithm"])
    handles = [matplotlib.lines.Line2D([], [], color=colors[a], marker=markers[a], ms=3.2,
                                       ls=":" if a == "best" else "-", lw=0.9)
               for a in algorithms if a in present]
    labels = [algorithm_label(a) for a in algorithms if a in present]
    if hollow:
        handles.append(matplotlib.lines.Line2D([], [], ls="", marker="o", ms=3.2,
                                               mfc="white", mec="0.3"))
        labels.append(LEFT_OUT_LABEL)
    if shaded:
        handles.append(matplotlib.patches.Patch(color=EXTRAPOLATED_SHADE))
        labels.append(EXTRAPOLATED_LABEL)
    if len(cases) == 1:  # one panel: the legend beside it, not wider than it on top
        fig.legend(handles, labels, loc="outside right center", ncol=1, frameon=False)
    else:
        fig.legend(handles, labels, loc="outside upper center", ncol=min(6, len(labels)),
                   frameon=False)
    save(fig, out_pdf, out_png)


GAP_FLAT_PCT = 0.1
"""A case whose MG-WFBP gap stays within this many percent of 0 at every world size is drawn
in the one grey "every other case" line of :func:`gaps` instead of a legend entry of its own
(their lines coincide at 0)."""


def gaps(collected_csv: str | Path, out_pdf: str | Path, out_png: str | Path,
         calibrated: frozenset[str] = frozenset()) -> None:
    """(e) Left: MG-WFBP's gap to ``contiguous_optimum`` (its family's exact optimum) per
    case, the cases that stay within :data:`GAP_FLAT_PCT` of 0 drawn as one grey group;
    right: every algorithm's gap to the lower bound (one point per case). A point the
    quoting rule leaves out (:mod:`.quote_rule`: either row of the gap, ``calibrated``: the
    links a calibrated replay exists for) is drawn hollow and grey and counts in no box;
    a case whose every point is left out says why in its legend entry. Points replayed
    beyond the sweeps (extrapolated) are not drawn."""
    collected = read_intermediate(collected_csv)
    collected = collected[~extrapolated_mask(collected)]
    if collected.empty:
        placeholder(out_pdf, out_png, "Gaps", "no replay results")
        return
    setup_style()
    collected = collected.assign(reason=exclusion_reasons(collected, calibrated).to_numpy())
    fig, (left, right) = plt.subplots(1, 2, figsize=(width_in(1.0), 3.6), layout="constrained",
                                      gridspec_kw={"width_ratios": [1, 1.2]})
    gap = mgwfbp_gaps(collected)
    if len(gap):
        wide = replay_wide(collected).loc[gap.index].assign(gap_pct=gap)
        _mgwfbp_panel(left, wide.assign(reason=_case_reasons(collected, wide)))
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


def _case_reasons(collected: pd.DataFrame, wide: pd.DataFrame,
                  algorithms: tuple[str, ...] = ("mgwfbp", "contiguous_optimum")) -> list[str]:
    """Per case of ``wide``: why the quoting rule leaves out a number comparing
    ``algorithms`` there (their rows' reasons, joined), ``""`` where it may be quoted."""
    keys = ["trace", "network", "world_size"]
    part = collected[collected["algorithm"].isin(algorithms)]
    reasons = part.groupby(keys, sort=True)["reason"].agg(
        lambda r: ", ".join(sorted({x for x in r if x})))
    return [reasons.get(tuple(row), "") for row in wide[keys].itertuples(index=False)]


def _mgwfbp_panel(ax: plt.Axes, wide: pd.DataFrame) -> None:
    """One line per case with a gap; the cases flat at 0 as one grey group; points left out
    by the quoting rule hollow and grey."""
    groups = list(wide.groupby(["trace", "network"]))
    flat = [part for _, part in groups if part["gap_pct"].abs().max() <= GAP_FLAT_PCT]
    hollow = False
    for i, ((trace, network), part) in enumerate(
            (key, part) for key, part in groups if part["gap_pct"].abs().max() > GAP_FLAT_PCT):
        style = series_style(i)
        part = part.sort_values("world_size")
        out = (part["reason"] != "").to_numpy()
        why = sorted({r for r in part["reason"] if r})
        label = f"{trace} x {network}" + (f" [left out: {'; '.join(why)}]" if out.all() else "")
        color = "0.6" if out.all() else style["color"]
        ax.plot(part["world_size"], part["gap_pct"], lw=1.0, color=color, ls=style["ls"])
        ax.plot([], [], lw=1.0, color=color, ls=style["ls"], marker=style["marker"], ms=4,
                label=label, **({"mfc": "white", "mec": "0.45"} if out.all() else {}))
        ax.plot(part["world_size"][~out], part["gap_pct"][~out], ls="", ms=3.5,
                marker=style["marker"], color=style["color"])
        ax.plot(part["world_size"][out], part["gap_pct"][out], ls="", ms=4, mfc="white",
                mec="0.45", mew=0.9, marker=style["marker"])
        hollow = hollow or bool(out.any())
    for j, part in enumerate(flat):
        part = part.sort_values("world_size")
        ax.plot(part["world_size"], part["gap_pct"], color="0.6", lw=0.8, marker=".", ms=3,
                zorder=1, label=(f"{len(flat)} other cases (within {GAP_FLAT_PCT:g}% of 0 "
                                 "at every P)") if j == 0 else None)
    if hollow:
        ax.plot([], [], ls="", marker="o", ms=4, mfc="white", mec="0.45",
                label="hollow grey: left out by the quoting rule")
    _world_size_axis(ax, sorted(wide["world_size"].unique()), max_labels=8)
    ax.set_xlabel("world size P [ranks]")
    ax.set_ylabel("MG-WFBP vs contiguous optimum [%]")


def _lower_bound_panel(ax: plt.Axes, collected: pd.DataFrame) -> None:
    """Each algorithm's gap to the lower bound: a box over the rows the quoting rule keeps
    and one point per case (hollow grey where the rule leaves the row out), one row per
    algorithm (horizontal labels: no rotated text)."""
    data = collected.assign(label=collected["algorithm"].map(algorithm_label))
    order = [algorithm_label(a) for a in sorted(collected["algorithm"].unique(),
                                                key=algorithm_sort_key)]
    kept = data[data["reason"] == ""]
    boxes = [kept.loc[kept["label"] == label, "gap_to_lb_pct"].to_numpy() for label in order]
    ax.boxplot(boxes, positions=range(len(order)), widths=0.6, showfliers=False,
               orientation="horizontal", patch_artist=True,
               boxprops={"facecolor": "0.9", "linewidth": 0.8},
               medianprops={"color": "0.3"}, zorder=1)
    rng = np.random.default_rng(0)  # jitter within a row: deterministic
    y = data["label"].map({label: i for i, label in enumerate(order)}).to_numpy(float)
    y = y + rng.uniform(-0.2, 0.2, len(y))
    out = (data["reason"] != "").to_numpy()
    ax.scatter(data["gap_to_lb_pct"][~out], y[~out], s=5, color="0.2", lw=0, zorder=2)
    ax.scatter(data["gap_to_lb_pct"][out], y[out], s=7, facecolor="none", edgecolor="0.55",
               lw=0.5, zorder=2)
    ax.set_yticks(range(len(order)), order)
    ax.set_ylim(len(order) - 0.5, -0.5)
    ax.set_ylabel("")
    ax.set_xlabel("gap to lower bound [%] (hollow grey: left out)")
    ax.set_title("every algorithm's gap to the lower bound\n(one point per case)")
