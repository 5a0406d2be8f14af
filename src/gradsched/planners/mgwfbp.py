"""MG-WFBP: merge gradients wisely, layer by layer, from the output side.

Shi, Chu & Li, "MG-WFBP: Efficient Data Communication for Distributed Synchronous SGD
Algorithms", IEEE INFOCOM 2019; extended in IEEE TPDS 32(8), 2021 (Algorithm 1, Theorem 1).

Rule: sweep the tensors in gradient-ready order (the output side first). With the current
grouping's WFBP schedule, merge the next tensor ``l`` into the open group G iff

    ready(l) < comm_start(G) + a,    a = T(m_G) + T(m_l) - T(m_G + m_l)

that is, iff the wait for ``l`` is shorter than the start-up that merging saves. For the
alpha-beta model ``a`` is alpha (the paper's condition); for a general fitted model it is
the start-up actually saved. After a merge the schedule is recomputed; only G's start
changes (earlier groups are fixed, later ones are singletons), so the sweep is O(L).

The unit is the gradient *tensor*, not the layer: tensors of one layer that become ready
at the same time are merged by the rule itself whenever ``a > 0`` (their wait is zero).
One all-reduce per group on one stream; global update. ``Plan.info["groups"]`` lists the
group sizes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gradsched.costmodel.base import CommModel, comm_times
from gradsched.plan import Plan
from gradsched.planners._family import (
    Knob,
    ReadySeq,
    base_info,
    plan_from_ends,
    ready_seq,
    wfbp_finish_s,
)
from gradsched.traces.bundle import ComputeTrace

NAME = "mgwfbp"
SUMMARY = "merge a layer into its predecessor iff its wait < saved start-up (Shi et al. 2019)"
KNOBS: tuple[Knob, ...] = ()


def mgwfbp_ends(seq: ReadySeq, model: CommModel, world_size: int) -> np.ndarray:
    """The MG-WFBP grouping (exclusive ends in ready order).

    The merge test asks the model one size at a time, each a sum the sweep has just formed;
    pricing them one model call each was most of ``advise`` on a model of 45,000 tensors.
    So the sizes are priced ahead, in one call per run: every tensor's size at the start,
    and on each size not yet priced the sizes the open group reaches if the next tensors
    merge too (the same running sums, formed by the same float additions). A model prices
    each size on its own, so the prices, hence the grouping, are those of the one-by-one
    sweep; a run ahead that a cut ends only prices sizes never asked."""
    n = seq.n
    if n == 0:
        return np.zeros(0, dtype=np.int64)

    seen: dict[float, float] = {}  # a merged group's time is asked again as the next step's
    sizes = seq.nbytes.tolist()

    def price(values: list[float]) -> None:
        new = [v for v in dict.fromkeys(values) if v not in seen]
        if new:
            seen.update(zip(new, comm_times(model, "all_reduce", np.asarray(new, dtype=float),
                                            world_size).tolist(), strict=True))

    def ahead(k: int, total: float, run: int) -> None:
        """Price the open group's sums if tensors ``k+1 .. k+run`` merge into it."""
        sums = []
        for size in sizes[k + 1:k + 1 + run]:
            total += size
            sums.append(total)
        price(sums)

    price(sizes)
    ends: list[int] = []
    prev_finish = -np.inf  # finish of the last closed group
    group_bytes = sizes[0]
    group_len = 1
    for k in range(n - 1):
        start = max(float(seq.ready_s[k]), prev_finish)  # comm start of the open group
        nxt = sizes[k + 1]
        if group_bytes + nxt not in seen:  # the run ahead ended: twice the group so far
            ahead(k, group_bytes, max(16, 2 * group_len))
        saved = seen[group_bytes] + seen[nxt] - seen[group_bytes + nxt]
        if seq.ready_s[k + 1] < start + saved:
            group_bytes += nxt
            group_len += 1
        else:
            ends.append(k + 1)
            prev_finish = start + seen[group_bytes]
            group_bytes = nxt
            group_len = 1
    ends.append(n)
    return np.asarray(ends, dtype=np.int64)


def plan(trace: ComputeTrace, model: CommModel, world_size: int, **knobs: Any) -> Plan:
    """MG-WFBP's merged groups."""
    seq = ready_seq(trace)
    ends = mgwfbp_ends(seq, model, world_size)
    sizes = np.diff(np.concatenate([[0], ends])).tolist()
    info = base_info(trace, world_size) | {
        "groups": sizes, "finish_s": wfbp_finish_s(seq, ends, model, world_size)}
    return plan_from_ends(NAME, seq, ends, knobs={}, info=info)
