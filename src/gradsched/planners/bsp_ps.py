"""BSP over a parameter server: every push after backward, then every pull, then the update.

Bulk-synchronous SGD on a parameter server (the synchronous ``dist_sync`` mode of MXNet's
KVStore and of BytePS without overlap; Li et al., "Scaling Distributed Machine Learning with
the Parameter Server", OSDI 2014): the PS analogue of :mod:`gradsched.planners.syncsgd`.
Rule: one bucket of every tensor with collective ``rs_ag``, which over a
:class:`~gradsched.costmodel.ps.PSModel` is a push (``reduce_scatter``) eligible at the end
of backward and then a pull (``all_gather``, ``Plan.ag_issue="eager"``); ``update="global"``:
the optimizer runs after the pull, then the next forward.

Differences (a reconstruction): the whole gradient is pushed as one buffer partitioned the way
BytePS partitions one tensor (``byteps/common/operations.cc`` L141-175), not tensor by tensor;
the update runs on the worker (with ``update_on_kvstore`` it would run on the servers).
"""

from __future__ import annotations

from typing import Any

from gradsched.costmodel.base import CommModel
from gradsched.costmodel.ps import require_ps_model
from gradsched.plan import Bucket, Plan
from gradsched.planners._family import Knob, base_info, ready_seq
from gradsched.traces.bundle import ComputeTrace

NAME = "bsp-ps"
SUMMARY = "parameter server: all pushes after backward, then all pulls, then update (BSP)"
KNOBS: tuple[Knob, ...] = ()


def plan(trace: ComputeTrace, model: CommModel, world_size: int, **knobs: Any) -> Plan:
    """One push + pull bucket of every tensor (refuses a model that is not a PS)."""
    require_ps_model(model, NAME)
    seq = ready_seq(trace)
    buckets = (Bucket(tensors=seq.names, collective="rs_ag"),) if seq.n else ()
    return Plan(algorithm=NAME, buckets=buckets, knobs={}, update="global",
                info=base_info(trace, world_size), ag_issue="eager")
