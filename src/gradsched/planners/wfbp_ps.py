"""WFBP over a parameter server: push each gradient when it is ready, pull right after.

Wait-free backpropagation was introduced on a parameter server (Zhang et al., "Poseidon: An
Efficient Communication Architecture for Distributed Deep Learning on GPU Clusters", USENIX
ATC 2017: a layer's gradients are sent as soon as its backward finishes, and its
parameters received back, while the layers below compute). Rule: one bucket per tensor in
ready order with collective ``all_reduce``, which over a
:class:`~gradsched.costmodel.ps.PSModel` is the tensor's push followed by its pull; one
stream; ``update="global"`` as :mod:`gradsched.planners.wfbp`.

Differences (a reconstruction): Poseidon also sends fully-connected layers as sufficient
factors between workers (its hybrid communication), not modelled; pushes of different
tensors run one at a time on the replay's channel, while on a real PS they may go to
different servers at once.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gradsched.costmodel.base import CommModel
from gradsched.costmodel.ps import require_ps_model
from gradsched.plan import Plan
from gradsched.planners._family import Knob, base_info, plan_from_ends, ready_seq
from gradsched.traces.bundle import ComputeTrace

NAME = "wfbp-ps"
SUMMARY = "parameter server: push each tensor when ready, pull right after (Poseidon 2017)"
KNOBS: tuple[Knob, ...] = ()


def plan(trace: ComputeTrace, model: CommModel, world_size: int, **knobs: Any) -> Plan:
    """One push + pull bucket per tensor, in ready order (refuses a non-PS model)."""
    require_ps_model(model, NAME)
    seq = ready_seq(trace)
    ends = np.arange(1, seq.n + 1, dtype=np.int64)
    return plan_from_ends(NAME, seq, ends, knobs={}, info=base_info(trace, world_size))
