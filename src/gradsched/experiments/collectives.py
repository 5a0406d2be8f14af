"""The frames of the collectives report (``gradsched bench collectives-report``): the
measured sweeps beside the alpha-beta-gamma formulas fitted to them, computed here so that
:mod:`gradsched.report.collectives` only draws and formats them.

* the all-reduce samples (:func:`gradsched.costmodel.tuned.load_samples`) with the
  per-algorithm fit's time (``fit_time_s``) and the joint fit's (``joint_time_s``), each
  evaluated by :func:`gradsched.costmodel.tuned.predict` with the LP chunks the sweep
  recorded, NaN on a network the fit JSON does not hold;
* at large messages (:func:`large_sizes`: the :data:`LARGE_SIZES` largest sizes measured
  at every world size of a network), the median time per (algorithm, world size)
  (:func:`at_large_frame`);
* the summary rows of the all-reduce (:func:`summary_rows`) and of the broadcast
  (:func:`broadcast_rows`): measured times and ratios there, and the joint fit's LP/RHD and
  LP/MST bandwidth ratios at the median large size (:func:`gradsched.costmodel.formulas.cost`;
  the broadcast's RHD is scatter + all-gather, van de Geijn; Thakur et al., IJHPCA 2005,
  Sec. 4.3), the setting of Wang et al.'s "up to 2x" claim (arXiv:1711.04883).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from gradsched.costmodel.formulas import algorithms_for, cost
from gradsched.costmodel.tuned import FormulaFit, fits_from_json, load_samples, predict
from gradsched.io import read_json

LARGE_SIZES = 3
"""How many of the largest common sizes the "large message" statistics take the median
over (tames the noise of single points)."""
SUMMARY_ALGORITHMS = ("lp", "ring", "mst", "rd", "rhd", "default")
"""The all-reduce algorithms of the summary rows (a ``<name>_ms`` column each)."""
BROADCAST_ALGORITHMS = ("lp", "mst", "default")
"""The broadcast algorithms of the broadcast rows."""


@dataclass(frozen=True)
class CollectivesFrames:
    """What the collectives report draws and formats (module docstring). ``networks``: the
    all-reduce sweeps' networks in the report's order (loopback first); ``fitted``: the
    networks the fit JSON holds."""

    networks: tuple[str, ...]
    fitted: tuple[str, ...]
    samples: pd.DataFrame
    at_large: pd.DataFrame
    summary: pd.DataFrame
    broadcast: pd.DataFrame


def collectives_frames(traces: Sequence[str | Path], fit_json: str | Path
                       ) -> CollectivesFrames:
    """Every frame of the report, from the committed sweeps and their fit JSON."""
    samples = load_samples(traces, "time_s")
    fits = fits_from_json(read_json(fit_json, missing="fit JSON not found"))
    all_reduce = samples[samples["collective"] == "all_reduce"]
    broadcast = samples[samples["collective"] == "broadcast"]
    return CollectivesFrames(
        networks=tuple(network_order(all_reduce)), fitted=tuple(fits),
        samples=with_predictions(all_reduce, fits), at_large=at_large_frame(all_reduce),
        summary=summary_rows(all_reduce, fits), broadcast=broadcast_rows(broadcast, fits))


def network_order(samples: pd.DataFrame) -> list[str]:
    """The networks of ``samples``, loopback first, then by name."""
    nets = sorted(samples["network"].unique())
    return sorted(nets, key=lambda n: (n != "loopback", n))


def with_predictions(samples: pd.DataFrame, fits: dict[str, FormulaFit]) -> pd.DataFrame:
    """``samples`` ordered by (network, world size, algorithm, bytes), with the formula
    times of the per-algorithm fit (``fit_time_s``) and of the joint fit (``joint_time_s``)
    of the row's network; NaN where the network or the algorithm has no fit (the joint
    fit: no formula for the library's own algorithm, ``default``)."""
    parts = []
    for (net, _p, coll, alg), g in samples.groupby(
            ["network", "world_size", "collective", "algorithm"], sort=True):
        g = g.sort_values("bytes")
        fit = fits.get(str(net))
        per_alg = fit.per_algorithm.get(str(alg)) if fit is not None else None
        formula = fit is not None and alg in algorithms_for(str(coll))  # not the library's
        g = g.assign(
            fit_time_s=(predict(g, str(alg), *per_alg) if per_alg is not None
                        else np.full(len(g), math.nan)),
            joint_time_s=(predict(g, str(alg), *fit.joint) if formula  # type: ignore[union-attr]
                          else np.full(len(g), math.nan)))
        parts.append(g)
    if not parts:
        return samples.assign(fit_time_s=pd.Series(dtype=float),
                              joint_time_s=pd.Series(dtype=float))
    return pd.concat(parts, ignore_index=True)


def large_sizes(net: pd.DataFrame, count: int = LARGE_SIZES,
                algs: Sequence[str] = ("lp", "rhd")) -> list[int]:
    """The ``count`` largest sizes measured for ``algs`` at every world size."""
    common = None
    for _, g in net[net["algorithm"].isin(list(algs))].groupby(["world_size", "algorithm"]):
        sizes = set(g["bytes"].astype(int))
        common = sizes if common is None else common & sizes
    return sorted(common or [])[-count:]


def _at_large(net: pd.DataFrame, sizes: list[int]) -> pd.DataFrame:
    """Median time over ``sizes`` per algorithm (rows) and world size (columns)."""
    sel = net[net["bytes"].isin(sizes)]
    return sel.groupby(["algorithm", "world_size"])["time"].median().unstack("world_size")


def _large_tables(samples: pd.DataFrame) -> Iterator[tuple[str, list, pd.DataFrame]]:
    """Per network (in report order) with large sizes common to LP and RHD: the network,
    those sizes and :func:`_at_large`'s table of median times over them."""
    for net in network_order(samples):
        sub = samples[samples["network"] == net]
        sizes = large_sizes(sub)
        if sizes:
            yield net, sizes, _at_large(sub, sizes)


def at_large_frame(samples: pd.DataFrame) -> pd.DataFrame:
    """Per network with large sizes common to LP and RHD: the median time (``time_s``)
    over them per (algorithm, world size), with the smallest and largest of those sizes
    (``first_bytes``, ``last_bytes``); a network without common sizes has no row."""
    rows = []
    for net, sizes, table in _large_tables(samples):
        for alg in table.index:
            for p in table.columns:
                rows.append({"network": net, "algorithm": alg, "world_size": p,
                             "time_s": table.loc[alg, p], "first_bytes": sizes[0],
                             "last_bytes": sizes[-1]})
    return pd.DataFrame(rows, columns=["network", "algorithm", "world_size", "time_s",
                                       "first_bytes", "last_bytes"])


def summary_rows(samples: pd.DataFrame, fits: dict[str, FormulaFit]) -> pd.DataFrame:
    """The all-reduce per (network, P) at large sizes: median times (``<alg>_ms``), the
    measured LP/RHD bandwidth ratio, LP's time relative to the smallest P, and the joint
    fit's LP/RHD ratio at the median large size (NaN without a fit)."""
    rows = []
    for net, sizes, table in _large_tables(samples):
        ps = sorted(table.columns)
        fit = fits.get(net)
        size = float(np.median(sizes))
        for p in ps:
            row: dict[str, object] = {"network": net, "world_size": int(p),
                                      "first_bytes": sizes[0], "last_bytes": sizes[-1]}
            for alg in SUMMARY_ALGORITHMS:
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


def broadcast_rows(samples: pd.DataFrame, fits: dict[str, FormulaFit]) -> pd.DataFrame:
    """The broadcast at large sizes per (network, P): LP vs the binomial tree (MST) and
    the library, LP's growth with P, and the joint fit's LP/MST and LP/RHD (scatter +
    all-gather, van de Geijn; Thakur et al. Sec. 4.3) bandwidth ratios -- the setting of
    Wang et al.'s "up to 2x" claim."""
    rows = []
    for net in network_order(samples):
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
                                      "first_bytes": sizes[0], "last_bytes": sizes[-1]}
            for alg in BROADCAST_ALGORITHMS:
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


__all__ = ["CollectivesFrames", "at_large_frame", "broadcast_rows", "collectives_frames",
           "large_sizes", "network_order", "summary_rows", "with_predictions"]
