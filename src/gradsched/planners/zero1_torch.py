"""torch's ``ZeroRedundancyOptimizer`` (ZeRO-1) behind DistributedDataParallel.

Read from the installed torch 2.14.1, ``torch/distributed/optim/zero_redundancy_optimizer.py``
(``zero.py`` below) and ``torch/distributed/algorithms/ddp_comm_hooks/ddp_zero_hook.py``
(``hook.py``):

* Gradients: DDP all-reduces its buckets during backward exactly as without ZeRO (this
  planner takes the ``ddp`` planner's buckets at its defaults: 25 MiB, 1 MiB first bucket,
  ready order; see :mod:`gradsched.planners.ddp`).
* ``overlap_with_ddp=False`` (default): ``step()`` (zero.py L1124-1156) runs the local
  optimizer on this rank's partition (``_local_step``), then ``_sync_params`` (L813-826):
  for every rank, ``_broadcast_params_from_rank`` (L760-811) broadcasts that rank's
  parameters from it, one ``broadcast`` per parameter (``parameters_as_bucket_view=False``,
  the default, L382) or one per rank's bucket (knob ``parameters_as_bucket_view``); all
  are issued asynchronously and waited for. The partition (``_partition_parameters``,
  L651-705) sorts parameters by size, largest first, and gives each to the rank with the
  fewest elements so far. Replayed as ``Plan.optimizer="sharded"`` (step ``update_s / P``)
  with one ``ParamSync("broadcast")`` per parameter, in rank order then partition order.
* ``overlap_with_ddp=True`` needs a DDP comm hook from hook.py; ``hook_with_zero_step``
  (L183-341): the hook of every bucket runs the all-reduce and saves its future; the hook
  of the *last* bucket (``is_last_bucket``, L306-308) then, for each bucket k in order, has
  the owning rank ``k mod P`` (``_get_assigned_rank``, zero.py L1606-1620; without
  ``shard_buckets``) wait for k's all-reduce and step k's parameters
  (``_perform_local_step``), and every rank issue k's broadcast from the owner
  (``_broadcast_bucket``, L69-105); it waits for all broadcasts before returning
  (``wait_for_broadcasts``, L336-338). Replayed as ``Plan.optimizer="bucket_owner"``
  (:mod:`gradsched.replay.engine`).

Gradient accumulation (``k`` micro-batches per step, :mod:`gradsched.replay.engine`): the
first ``k - 1`` run under DDP's ``no_sync()``, so no all-reduce and no hook
(``torch/nn/parallel/distributed.py`` L1829-1838: the reducer is prepared only when
``require_backward_grad_sync``); the last all-reduces as at ``k = 1``, and the sharded step
and the broadcasts (``step()``, or the last bucket's hook) run once per step after it. The
plan is the same at every ``k``; the replay prices the step as the ``k = 1`` iteration plus
``(k - 1)`` silent forward and backward passes (checked for real by
:mod:`gradsched.runtime.accum_check`).

A reconstruction, where it differs: the sharded step is priced ``update_s / P`` (an even
split; the greedy partition's largest shard is not modelled); the broadcasts, issued all at
once, run one at a time in the replay; ``hook_with_zero_step_interleaved`` and
``shard_buckets=True`` are not modelled; the first two or three iterations with
``overlap_with_ddp`` (no update while DDP's buckets are not final, zero.py L362-373) are
not replayed (steady state only).
"""

from __future__ import annotations

import numpy as np

from gradsched.costmodel.base import CommModel
from gradsched.plan import ParamSync, Plan
from gradsched.planners import ddp
from gradsched.planners._family import Knob, base_info
from gradsched.traces.bundle import ComputeTrace

NAME = "zero1_torch"
SUMMARY = ("torch's ZeroRedundancyOptimizer (ZeRO-1) behind DDP: all-reduce buckets, each "
           "rank steps its partition, then parameter broadcasts from their owners; "
           "overlap_with_ddp: per-bucket step in DDP's comm hook (hook_with_zero_step)")
KNOBS: tuple[Knob, ...] = (
    Knob("overlap_with_ddp", bool, False, "ZeroRedundancyOptimizer(overlap_with_ddp=True) "
         "with ddp_zero_hook.hook_with_zero_step: bucket k stepped by rank k mod P after "
         "its all-reduce, then broadcast"),
    Knob("parameters_as_bucket_view", bool, False, "one broadcast per rank's shard instead "
         "of one per parameter (ignored with overlap_with_ddp, as torch does)"),
)


def partition(names: list[str], numel: np.ndarray, world_size: int) -> list[list[str]]:
    """``_partition_parameters`` (zero.py L686-698): largest first, each to the rank with
    the fewest elements so far (ties: the lowest rank, ``_get_min_index``); the sort is
    stable, so equal sizes keep registration order."""
    order = sorted(range(len(names)), key=lambda i: -int(numel[i]))
    sizes = [0] * world_size
    ranks: list[list[str]] = [[] for _ in range(world_size)]
    for i in order:
        r = sizes.index(min(sizes))
        ranks[r].append(names[i])
        sizes[r] += int(numel[i])
    return ranks


def plan(trace: ComputeTrace, model: CommModel, world_size: int, *,
         overlap_with_ddp: bool = False, parameters_as_bucket_view: bool = False) -> Plan:
    """DDP's buckets with ZeRO-1's sharded step and parameter broadcasts."""
    buckets = ddp.plan(trace, model, world_size).buckets
    knobs = {"overlap_with_ddp": overlap_with_ddp,
             "parameters_as_bucket_view": parameters_as_bucket_view}
    info = base_info(trace, world_size)
    if overlap_with_ddp:
        return Plan(algorithm=NAME, buckets=buckets, knobs=knobs, update="global",
                    info=info, optimizer="bucket_owner")
    frame = trace.frame
    names = frame["name"].tolist()
    nbytes = dict(zip(names, frame["bytes"].to_numpy(dtype=float).tolist(), strict=True))
    shards = partition(names, frame["numel"].to_numpy(dtype=np.int64), max(world_size, 1))
    if parameters_as_bucket_view:
        sync = tuple(ParamSync("broadcast", float(sum(nbytes[n] for n in shard)))
                     for shard in shards if shard)
    else:
        sync = tuple(ParamSync("broadcast", nbytes[n]) for shard in shards for n in shard)
    return Plan(algorithm=NAME, buckets=buckets, knobs=knobs, update="global", info=info,
                optimizer="sharded", param_sync=sync)
