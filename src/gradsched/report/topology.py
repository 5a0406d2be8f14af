"""Two-level topologies: the table of the check against measured multi-node sweeps
(:func:`gradsched.experiments.topology_check.topology_check`: one row per collective model,
inter-node algorithm and sweep) and the table of the compute traces replayed flat and
hierarchically (:func:`gradsched.experiments.topology.topology_replay`).

:func:`topology_replay_table` pairs the flat and the hierarchical case of the same cluster
shape into one row: both iteration times, their ratio, and the replay on the measured sweep.
"""

from __future__ import annotations

import pandas as pd

from gradsched.costmodel.topology import TOPOLOGY_COLLECTIVES
from gradsched.errors import InputError
from gradsched.report.algorithms import algorithm_label
from gradsched.report.formatting import fmt


def topology_table(frame: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """Rows of the check, for the paper."""
    if frame.empty:
        return pd.DataFrame(columns=["model", "nodes x ranks", "MAPE [%]"]), "lll"
    out = pd.DataFrame({
        "model": frame["collective_model"] + " (" + frame["inter_algorithm"] + ")",
        "nodes x ranks": [f"{n} x {w // n}" + (" (fit)" if s else "")
                          for n, w, s in zip(frame["nodes"], frame["world_size"],
                                             frame["in_sample"].astype(bool), strict=True)],
        "MAPE all sizes [%]": frame["mape_pct"].map(lambda v: fmt(v, 1)),
        "MAPE >= 1 MiB [%]": frame["mape_large_pct"].map(lambda v: fmt(v, 1)),
        "inter alpha [us]": (frame["inter_alpha_s"] * 1e6).map(lambda v: fmt(v, 2)),
        "inter beta [ps/B]": (frame["inter_beta_s_per_byte"] * 1e12).map(lambda v: fmt(v, 1)),
    })
    return out, "llrrrr"


def paired(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per (compute, nodes, ranks per node, algorithm) with ``flat_s``,
    ``hierarchical_s``, ``flat_over_hierarchical`` and the sweep replay ``sweep_s`` (the
    first non-empty one of the pair's cases)."""
    keys = ["compute", "nodes", "ranks_per_node", "algorithm"]
    seen = frame.groupby([*keys, "collective"]).size()
    if (seen > 1).any():
        dup = seen[seen > 1].index[0]
        raise InputError(f"two rows for {dict(zip([*keys, 'collective'], dup, strict=True))}: "
                         "one topology case per cluster shape and collective model",
                         field="topology")
    wide = frame.pivot_table(index=keys, columns="collective", values="iteration_s",
                             aggfunc="first", sort=False)
    for name in TOPOLOGY_COLLECTIVES:
        if name not in wide.columns:
            wide[name] = float("nan")
    sweep = frame.groupby(keys, sort=False)["sweep_iteration_s"].max()
    out = pd.DataFrame({"flat_s": wide["flat"], "hierarchical_s": wide["hierarchical"]})
    out["flat_over_hierarchical"] = out["flat_s"] / out["hierarchical_s"]
    out["sweep_s"] = sweep.reindex(out.index)
    return out.reset_index()


def topology_replay_table(frame: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """The paper's table: per model, cluster shape and algorithm, flat and hierarchical
    iteration times (ms), their ratio and the replay on the measured sweep (ms)."""
    header = ["model", "nodes x GPUs", "algorithm", "flat [ms]", "hierarchical [ms]",
              "flat / hier.", "measured sweep [ms]"]
    if frame.empty:
        return pd.DataFrame(columns=header), "lllrrrr"
    wide = paired(frame)
    out = pd.DataFrame({
        header[0]: wide["compute"].astype(str),
        header[1]: [f"{n} x {r}" for n, r in zip(wide["nodes"], wide["ranks_per_node"],
                                                  strict=True)],
        header[2]: wide["algorithm"].map(algorithm_label),
        header[3]: (wide["flat_s"] * 1e3).map(lambda v: fmt(v, 1)),
        header[4]: (wide["hierarchical_s"] * 1e3).map(lambda v: fmt(v, 1)),
        header[5]: wide["flat_over_hierarchical"].map(lambda v: fmt(v, 3)),
        header[6]: (wide["sweep_s"] * 1e3).map(lambda v: fmt(v, 1)),
    })
    return out, "lllrrrr"
