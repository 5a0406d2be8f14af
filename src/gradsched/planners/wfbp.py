"""WFBP: one all-reduce per gradient tensor, launched as soon as it is ready.

Wait-free backpropagation (Zhang et al., "Poseidon: An Efficient Communication
Architecture for Distributed Deep Learning on GPU Clusters", USENIX ATC 2017). Rule: every
tensor is its own bucket, in gradient-ready order, on one stream, global update.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gradsched.costmodel.base import CommModel
from gradsched.plan import Plan
from gradsched.planners._family import Knob, base_info, plan_from_ends, ready_seq
from gradsched.traces.bundle import ComputeTrace

NAME = "wfbp"
SUMMARY = "one all-reduce per tensor as soon as it is ready (Zhang et al. 2017)"
KNOBS: tuple[Knob, ...] = ()


def plan(trace: ComputeTrace, model: CommModel, world_size: int, **knobs: Any) -> Plan:
    """One bucket per tensor, in ready order."""
    seq = ready_seq(trace)
    ends = np.arange(1, seq.n + 1, dtype=np.int64)
    return plan_from_ends(NAME, seq, ends, knobs={}, info=base_info(trace, world_size))
