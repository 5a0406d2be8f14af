"""SyncSGD / BSP: one all-reduce of all gradients after the backward pass.

Bulk-synchronous data parallelism without overlap, the baseline of SyncEASGD (Zhang,
Choromanska & LeCun, "Deep learning with Elastic Averaging SGD", NeurIPS 2015) and of the
WFBP papers. Rule: a single bucket holding every tensor; it becomes eligible when the last
gradient is ready (end of backward); global update.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gradsched.costmodel.base import CommModel
from gradsched.plan import Plan
from gradsched.planners._family import Knob, base_info, plan_from_ends, ready_seq
from gradsched.traces.bundle import ComputeTrace

NAME = "syncsgd"
SUMMARY = "one all-reduce of all gradients after backward (BSP)"
KNOBS: tuple[Knob, ...] = ()


def plan(trace: ComputeTrace, model: CommModel, world_size: int, **knobs: Any) -> Plan:
    """One bucket of every tensor."""
    seq = ready_seq(trace)
    ends = np.asarray([seq.n] if seq.n else [], dtype=np.int64)
    return plan_from_ends(NAME, seq, ends, knobs={}, info=base_info(trace, world_size))
