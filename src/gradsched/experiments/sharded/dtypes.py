"""The sharded solvers under a mixed-precision policy
(:class:`gradsched.collective_dtypes.CollectiveDtypes`): the bytes each layer puts in each
collective and each memory, and the plans they return with the policy attached.

Under a policy one tensor has three sizes (:mod:`gradsched.replay.sharded_dtypes`, whose
:func:`~gradsched.replay.sharded_dtypes.layer_bytes` gives them per layer): the all-gather
moves and gathers ``numel x g`` (``g`` the parameter dtype's bytes, one for a float8
weight), the reduce-scatter moves ``numel x r`` (the reduce dtype's), the unsharded
gradient holds ``numel x max(param, reduce)``. The solvers
(:mod:`gradsched.experiments.sharded.optimum` and its programs,
:mod:`~gradsched.experiments.sharded.blocking`, :mod:`~gradsched.experiments.sharded.program`,
:mod:`~gradsched.experiments.sharded.kept`, the scorer of
:mod:`~gradsched.experiments.sharded.candidates`) carry the three as separate per-layer and
per-run quantities (:func:`problem_sizes`; the problem's ``sizes``): every all-gather priced
on its gather bytes, every reduce-scatter on its reduce bytes, and each memory term of their
peak formulas in its own bytes (gathered parameters in gather bytes, unsharded gradients in
gradient bytes). So their memory check is the exact replay's peak and their times the exact
replay's, float8 included: under a cap the optimum is the exact optimum of its space, and
"no layout fits" a proof. Every returned plan carries the policy and is replayed with it
(:meth:`gradsched.experiments.sharded.common.ShardedProblem.replay`), which stays the judge:
reported times and peaks are the replay's.
"""

from __future__ import annotations

from dataclasses import replace

from gradsched.collective_dtypes import CollectiveDtypes
from gradsched.plan_sharded import ShardedPlan
from gradsched.replay.sharded_dtypes import LayerBytes, layer_bytes
from gradsched.traces.bundle import ComputeTrace
from gradsched.traces.layers import LayerSeq


def problem_sizes(trace: ComputeTrace, seq: LayerSeq,
                  dtypes: CollectiveDtypes | None) -> LayerBytes:
    """Per layer of ``seq`` (``trace``'s layers): all-gather, reduce-scatter and
    unsharded-gradient bytes under ``dtypes``; without a policy the trace's bytes for all
    three (one array, so the solvers' sums are those of one size)."""
    if dtypes is None:
        return LayerBytes(gather=seq.nbytes, reduce=seq.nbytes, grad=seq.nbytes)
    return layer_bytes(trace, seq, dtypes)


def with_policy(plan: ShardedPlan, dtypes: CollectiveDtypes | None) -> ShardedPlan:
    """``plan`` carrying the policy ``dtypes`` (the plan's own when it has one)."""
    if dtypes is None or plan.mixed_precision is not None:
        return plan
    return replace(plan, mixed_precision=dtypes)
