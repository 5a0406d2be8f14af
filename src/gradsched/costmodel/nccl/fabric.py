"""Inter-node bus bandwidth that falls as a collective spans more nodes.

Cause modelled: a ring (and a tree) between nodes sends every byte over links that, as the
node count doubles, reach further up a multi-level fabric (leaf -> spine -> core in a fat
tree) and share more uplinks with the other rings' flows (hash collisions of adaptive or
ECMP routing); each doubling adds the same extra cost per byte. So the inverse bus bandwidth
grows linearly in log2(nodes):

    1 / B(n) = (1 / B1) * (1 + k * log2 n),     slowdown(n; n0) = (1 + k log2 n) / (1 + k log2 n0)

``k`` is fitted (ordinary least squares of 1/B on log2 n) to the one public at-scale series we
found: reduce-scatter bus bandwidth on H100 clusters at 4..128 nodes, 360 -> 260 GB/s,
reported in NVIDIA/nccl GitHub issue 1229 (data/external/nccl-issue-1229/, numbers restated
in :data:`ISSUE_1229_BUSBW_GBPS`). It is *validated* on the ABCI A100 and V100 all-reduce
sweeps (2..32 nodes), which it never saw; the cross-world-size table reports the error with
and without it (``--fabric none``).

The slowdown is the wire's: a protocol that does not fill the wire (LL, limited by its
kernel's flag-per-8-bytes lines) keeps its rate until the slowed wire falls below it
(:func:`gradsched.costmodel.nccl.tuning.bus_bandwidth_Bps`). Its cause is the oversubscribed
links above a full-bisection domain, so a collective on at most that domain's nodes has none
and beyond it the doublings count from the domain's size
(:meth:`gradsched.costmodel.nccl.tuning.Params.inter_busbw_Bps`,
:attr:`gradsched.costmodel.nccl.hardware.Hardware.full_bisection_nodes`): on ABCI's V-nodes
a rack of 34 (:data:`gradsched.costmodel.nccl.hardware.FULL_BISECTION_NODES`), unknown on its
A-nodes, where the slowdown applies from the fitted scale on.
"""

from __future__ import annotations

import math

import numpy as np

ISSUE_1229_BUSBW_GBPS: dict[int, float] = {4: 360.0, 8: 345.0, 16: 320.0, 32: 300.0,
                                           64: 280.0, 128: 260.0}
"""Nodes -> reduce-scatter bus bandwidth (GB/s), H100, as reported in NVIDIA/nccl issue 1229
(data/external/nccl-issue-1229/reduce_scatter_busbw.csv)."""


def fit_per_doubling(points: dict[int, float]) -> float:
    """``k`` of the module docstring: least squares of 1/B = a + b log2 n, k = b / a."""
    n = np.array(sorted(points), dtype=float)
    inv = 1.0 / np.array([points[int(v)] for v in n])
    b, a = np.polyfit(np.log2(n), inv, 1)
    return float(b / a)


FABRIC_PER_DOUBLING = fit_per_doubling(ISSUE_1229_BUSBW_GBPS)
"""The fitted ``k`` (about 0.09: each doubling of the nodes adds 9 % of a 1-node per-byte time)."""

FABRICS: tuple[str, ...] = ("issue-1229", "none")
"""``--fabric``: the fitted slowdown, or none (bandwidth independent of the node count)."""


def per_doubling(fabric: str) -> float:
    """``k`` of a ``--fabric`` name."""
    return FABRIC_PER_DOUBLING if fabric == "issue-1229" else 0.0


def slowdown(n_nodes: int, ref_nodes: int, k: float) -> float:
    """How much slower per byte the inter-node bandwidth is at ``n_nodes`` than at
    ``ref_nodes`` (1 at ``ref_nodes``; below it, faster)."""
    if k == 0.0 or n_nodes == ref_nodes:
        return 1.0
    return (1.0 + k * math.log2(max(n_nodes, 1))) / (1.0 + k * math.log2(max(ref_nodes, 1)))
