"""OASR-WFBP: overlap-aware start-up sharing, as the exact DP over contiguous groupings.

Song et al., "OASR-WFBP: An overlapping aware start-up sharing gradient merging strategy
for efficient communication in distributed deep learning", J. Parallel Distrib. Comput.,
2024. RECONSTRUCTION from the paper's abstract: merging shares a start-up cost, and it is
only worth sharing where communication is exposed (not hidden behind backward). We
implement that intent exactly, under the FULL fitted cost model, as the dynamic program
over contiguous groupings of tensors in ready order that minimises the finish of the last
all-reduce:

    f(0) = -inf,   f(i) = min_{j<i} [ max(r_i, f(j)) + T(S_i - S_j) ]

with r_i the ready time of the i-th ready tensor and S the prefix sums of bytes. It is
optimal because the finish is non-decreasing in f(j). The inner minimum is vectorised
(numpy), O(n^2) time, O(n) memory. It is the program of ``contiguous_optimum``: our
reconstruction coincides with that exact optimum, so results belong to it (ours), not
to OASR-WFBP, whose own algorithm is not public beyond its abstract.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from gradsched.costmodel.base import CommModel
from gradsched.plan import Plan
from gradsched.planners import contiguous
from gradsched.planners._family import Knob
from gradsched.traces.bundle import ComputeTrace

NAME = "oasr"
SUMMARY = ("RECONSTRUCTION of OASR-WFBP (Song et al. 2024) from its abstract: runs "
           "contiguous_optimum's program")
KNOBS: tuple[Knob, ...] = ()


def plan(trace: ComputeTrace, model: CommModel, world_size: int, **knobs: Any) -> Plan:
    """:func:`gradsched.planners.contiguous.plan`'s grouping under this planner's name."""
    return replace(contiguous.plan(trace, model, world_size, **knobs), algorithm=NAME)
