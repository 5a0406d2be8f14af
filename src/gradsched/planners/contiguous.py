"""``contiguous_optimum`` (ours): the exact optimum of the contiguous-bucket family (up to
:data:`gradsched.planners._family.MAX_EXACT_TENSORS` tensors; beyond, the best grouping with
boundaries every ``k``-th tensor, said in the plan's info ``coarsened``).

The family: every bucket is a contiguous run of tensors in ready order, all-reduced once
on one communication stream, with one global update after the last all-reduce; WFBP,
SyncSGD, DDP, MG-WFBP and Horovod's fusion are members. Within it, the dynamic program of
:func:`gradsched.planners._family.optimal_ends`

    f(0) = -inf,   f(i) = min_{j<i} [ max(r_i, f(j)) + T(S_i - S_j) ]

(``r_i``: ready time of the i-th ready tensor, ``S``: prefix sums of bytes, ``T``: the
full fitted, wire-floored cost model) minimises the finish of the last all-reduce, hence
the iteration time ``forward + max(backward, finish) + update``; it is exact because the
finish is non-decreasing in ``f(j)``. Plans outside the family (chunks, priorities,
reduce-scatter + all-gather, per-layer updates) can be faster: ``search`` looks there.
``oasr`` runs the same program as our reconstruction of OASR-WFBP from its abstract.
"""

from __future__ import annotations

from typing import Any

from gradsched.costmodel.base import CommModel
from gradsched.plan import Plan
from gradsched.planners._family import (
    Knob,
    base_info,
    bounded_optimal_ends,
    iteration_from_finish,
    plan_from_ends,
    ready_seq,
)
from gradsched.traces.bundle import ComputeTrace

NAME = "contiguous_optimum"
SUMMARY = ("exact optimum of contiguous all-reduce buckets on one stream, global update "
           "(DP; ours)")
KNOBS: tuple[Knob, ...] = ()


def plan(trace: ComputeTrace, model: CommModel, world_size: int, **knobs: Any) -> Plan:
    """The DP's grouping; info records the predicted finish and iteration time."""
    seq = ready_seq(trace)
    ends, finish, bounded = bounded_optimal_ends(seq, model, world_size)
    info = base_info(trace, world_size) | bounded | {
        "finish_s": finish, "iteration_s": iteration_from_finish(seq, finish)}
    return plan_from_ends(NAME, seq, ends, knobs={}, info=info)
