"""Identify the inter-node level of a :class:`~gradsched.costmodel.topology.Topology` from
an all-ranks multi-node sweep, and check the topology against larger sweeps.

Public multi-node sweeps (nccl-tests on ABCI: ``nccl-abci-inter-anode-N.csv``) time an
all-reduce over *all* ``N x R`` GPUs; no sweep isolates the network between nodes. Given
the intra-node level (the one-node sweep at ``R`` ranks), the inter-node level is
*identified* (a reconstruction, not a measurement) as the
:class:`~gradsched.costmodel.formulas.AnalyticModel` (per-hop ``alpha``, per-byte
``beta``; Thakur, Rabenseifner & Gropp 2005; the ring, or another of its algorithms, or
``best``, their minimum) whose topology cost best matches the
smallest multi-node sweep under the chosen collective model:

* ``hierarchical``: ``T(M) - RS_intra(M, R) - AG_intra(M, R) = AR_inter(M / R, N)``,
* ``flat``: ``T(M) = F_inter(M)`` (:func:`~gradsched.costmodel.topology.ring_level_time`;
  the intra term of the flat ring's ``max`` is left out of the fit).

Both are linear in ``(alpha, beta)``; the fit is a non-negative least squares of the
*relative* residuals (every size weighs the same, 4 B to the largest). The identified
inter level then predicts the larger sweeps (:func:`predict_sweep`), out of sample.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from gradsched.costmodel.base import CommModel
from gradsched.costmodel.fit import load_trace_series
from gradsched.costmodel.formulas import AnalyticModel
from gradsched.costmodel.topology import TOPOLOGY_COLLECTIVES, Topology, ring_level_time
from gradsched.errors import ConfigError, InputError

UNIT_ALPHA_S = 1e-6
UNIT_BETA_S_PER_BYTE = 1e-9
"""Unit parameters of the design-matrix columns (the models are linear in each)."""


def _inter_part(inter: CommModel, collective_model: str, nbytes: np.ndarray, nodes: int,
                ranks_per_node: int) -> np.ndarray:
    """The inter-node level's share of the topology's all-reduce of ``nbytes``."""
    if collective_model == "hierarchical":
        return inter.raw_times("all_reduce", nbytes / ranks_per_node, nodes)
    return ring_level_time(inter, "all_reduce", nbytes, nodes, nodes * ranks_per_node)


def identify_inter_level(intra: CommModel, nbytes: np.ndarray, times_s: np.ndarray,
                         nodes: int, ranks_per_node: int, collective_model: str = "hierarchical",
                         algorithm: str = "ring") -> AnalyticModel:
    """The inter-node ``AnalyticModel(alpha, beta, 0, algorithm)`` that makes the topology's
    ``collective_model`` all-reduce at ``nodes x ranks_per_node`` fit the measured
    ``(nbytes, times_s)`` best in relative least squares (module docstring)."""
    from scipy.optimize import nnls

    if collective_model not in TOPOLOGY_COLLECTIVES:
        raise ConfigError(f"unknown topology collective {collective_model!r}")
    if nodes < 2 or ranks_per_node < 2:
        raise ConfigError("identifying the inter-node level needs >= 2 nodes of >= 2 ranks, "
                          f"got {nodes} x {ranks_per_node}")
    m = np.asarray(nbytes, dtype=float)
    t = np.asarray(times_s, dtype=float)
    if m.size < 2 or m.shape != t.shape or not np.all(t > 0):
        raise ConfigError("need >= 2 measured sizes with positive times")
    target = t.copy()
    if collective_model == "hierarchical":
        target -= (intra.times("reduce_scatter", m, ranks_per_node)
                   + intra.times("all_gather", m, ranks_per_node))
    col_a = _inter_part(AnalyticModel(UNIT_ALPHA_S, 0.0, 0.0, algorithm), collective_model,
                        m, nodes, ranks_per_node) / UNIT_ALPHA_S
    col_b = _inter_part(AnalyticModel(0.0, UNIT_BETA_S_PER_BYTE, 0.0, algorithm),
                        collective_model, m, nodes, ranks_per_node) / UNIT_BETA_S_PER_BYTE
    (alpha, beta), _ = nnls(np.c_[col_a, col_b] / t[:, None], target / t)
    return AnalyticModel(float(alpha), float(beta), 0.0, algorithm)


def load_all_reduce_sweep(path: str | Path) -> tuple[np.ndarray, np.ndarray, int, int]:
    """(bytes, time_s, world_size, nodes) of the out-of-place all-reduce series of a
    multi-node comm trace (``nodes`` from its ``nodes`` column)."""
    for info, rows in load_trace_series(path):
        if info["collective"] == "all_reduce":
            nodes = rows["nodes"].unique() if "nodes" in rows else []
            if len(nodes) != 1:
                raise InputError("expected one value in the nodes column", path=path,
                                 field="nodes")
            return (rows["bytes"].to_numpy(float), rows["time_s"].to_numpy(float),
                    int(info["world_size"]), int(nodes[0]))
    raise InputError("no all_reduce series", path=path, field="collective")


def predict_sweep(intra: CommModel, inter: CommModel, path: str | Path,
                  collective_model: str) -> pd.DataFrame:
    """Measured vs predicted all-reduce of one multi-node sweep: one row per size."""
    nbytes, times, world, nodes = load_all_reduce_sweep(path)
    topology = Topology.from_world(world, nodes, intra, inter)
    predicted = topology.collective_model(collective_model).times("all_reduce", nbytes, world)
    return pd.DataFrame({"sweep": Path(path).name, "nodes": nodes, "world_size": world,
                         "collective_model": collective_model, "bytes": nbytes,
                         "measured_s": times, "predicted_s": predicted,
                         "error_pct": 100.0 * (predicted - times) / times})
