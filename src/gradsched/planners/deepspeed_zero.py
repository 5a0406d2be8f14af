"""DeepSpeed ZeRO stage 1 and 2 (``DeepSpeedZeroOptimizer``).

Read from microsoft/DeepSpeed at commit 38327e07 (2025-02-21); files under
``deepspeed/runtime/``:

* Defaults (``zero/config.py``): ``reduce_bucket_size`` = 5e8 elements (L109),
  ``allgather_bucket_size`` = 5e8 (L128), ``reduce_scatter`` = true (L104), and
  ``overlap_comm`` false for stages 1 and 2 (``None`` resolves to ``stage == 3``,
  L134 and L351-353).
* Bucket rule (``zero/stage_1_and_2.py`` ``reduce_independent_p_g_buckets_and_remove_grads``,
  L939-948): before adding a parameter whose gradient would take the open bucket past
  ``reduce_bucket_size`` elements (``elements_in_ipg_bucket + numel > reduce_bucket_size``),
  the open bucket is reduced (``reduce_ipg_grads``, L1365); a parameter larger than the size
  travels alone (L956-958). The last bucket is reduced by the epilogue
  (``overlapping_partition_gradients_reduce_epilogue``, L874-875) after backward.
* When and in which order: gradient hooks exist iff ``partition_gradients or
  overlap_comm`` (L527-528, hooks L904-921), so with stage 2 or ``overlap_comm`` the
  buckets fill in gradient-ready order and bucket k is issued from the hook of the first
  parameter of bucket k+1 (``Bucket.release_s`` = that gradient's ready time), the last
  one after backward. Stage 1 without ``overlap_comm`` has no hooks: after backward the
  engine calls ``reduce_gradients`` (``engine.py`` ``allreduce_gradients`` L2048-2059;
  ``stage_1_and_2.py`` L706-726), which walks the parameters in their group (registration)
  order through the same bucket rule. Without ``overlap_comm`` the reduction runs on the
  compute stream (``average_tensor``, L1051-1058), so for stage 2 it blocks backward: the
  plan releases every bucket at the end of backward, which gives the same iteration time
  (compute and reductions are serial either way; the timeline differs).
* Which collective (``average_tensor`` L1059-1075, ``reduce_scatter`` = true): each rank
  receives the reduced slice of the bucket that its partition holds (``dist.reduce`` of
  each rank's slice), priced here as one ``reduce_scatter`` of the bucket's bytes.
* After the step (``step``, L1826-1936): each rank steps its partition (``update_s / P``,
  ``Plan.optimizer="sharded"``), then ``all_gather_dp_groups`` (``utils.py`` L965-999):
  with ``dist.has_all_gather_into_tensor()`` (every recent torch) one
  ``all_gather_into_tensor`` of the whole flat group (``all_gather_into_tensor_dp_groups``,
  L954-962), ``allgather_bucket_size`` unused; otherwise ``max(1, partition_numel * P //
  allgather_bucket_size)`` all-gathers of equal shards of the partition, the last taking
  the remainder (knob ``allgather_into_tensor=false``).

A reconstruction, where it differs: one parameter group; the alignment padding
(``nccl_start_alignment_factor``, the partition padding) is ignored; ``reduce_scatter=false``
(all-reduce), ``contiguous_gradients=false``, CPU offload and mixed-precision copies are not
modelled; parameter bytes equal gradient bytes. Stage 1 and stage 2 differ here only in
the bucket order and issue point (stage 2 also frees the gradients it does not own, which is
memory, not time).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gradsched.costmodel.base import CommModel
from gradsched.errors import ConfigError
from gradsched.plan import Bucket, ParamSync, Plan
from gradsched.planners._family import Knob, base_info, fill_groups, ready_seq
from gradsched.traces.bundle import ComputeTrace

NAME = "deepspeed_zero"
SUMMARY = ("DeepSpeed ZeRO-1/2: reduce buckets of reduce_bucket_size elements (after "
           "backward, or during it with overlap_comm / stage 2), each rank steps its "
           "partition, then the parameter all-gather")
STAGES = (1, 2)
DEFAULT_BUCKET = 500_000_000  # zero/config.py L109, L128
KNOBS: tuple[Knob, ...] = (
    Knob("stage", int, 1, "ZeRO stage: 1 (optimizer states) or 2 (and gradients)"),
    Knob("overlap_comm", bool, False, "reduce buckets during backward (default false for "
         "stages 1 and 2)"),
    Knob("reduce_bucket_size", int, DEFAULT_BUCKET, "elements per reduction bucket"),
    Knob("allgather_bucket_size", int, DEFAULT_BUCKET, "elements per parameter all-gather "
         "(only with allgather_into_tensor=false)"),
    Knob("allgather_into_tensor", bool, True, "torch has all_gather_into_tensor: one "
         "all-gather of every parameter, allgather_bucket_size unused"),
)


def ds_buckets(numel: np.ndarray, reduce_bucket_size: int) -> np.ndarray:
    """Exclusive ends of DeepSpeed's buckets over ``numel`` (in the order walked): close the
    open bucket before a parameter that would take it past the size (L942)."""
    return fill_groups(numel.astype(float), [float(reduce_bucket_size)], overflow=False)


def gather_sizes(total_numel: int, world_size: int, allgather_bucket_size: int,
                 into_tensor: bool) -> list[int]:
    """Elements of each parameter all-gather after the step (``utils.py`` L965-999; the
    partition is ``ceil(total / P)`` elements, its alignment padding ignored)."""
    if world_size <= 1:
        return []
    if into_tensor:
        return [int(total_numel)]
    partition = -(-int(total_numel) // world_size)
    shards = max(1, partition * world_size // allgather_bucket_size)
    shard = partition // shards
    sizes = [shard] * (shards - 1) + [partition - (shards - 1) * shard]
    return [s * world_size for s in sizes]


def plan(trace: ComputeTrace, model: CommModel, world_size: int, *, stage: int = 1,
         overlap_comm: bool = False, reduce_bucket_size: int = DEFAULT_BUCKET,
         allgather_bucket_size: int = DEFAULT_BUCKET,
         allgather_into_tensor: bool = True) -> Plan:
    """DeepSpeed ZeRO-1/2's reduction buckets, issue points and parameter all-gathers."""
    if stage not in STAGES:
        raise ConfigError(f"knob stage must be 1 or 2 (ZeRO-3 is the sharded planner "
                          f"zero3), got {stage}")
    for name, value in (("reduce_bucket_size", reduce_bucket_size),
                        ("allgather_bucket_size", allgather_bucket_size)):
        if value < 1:
            raise ConfigError(f"knob {name} must be >= 1 element, got {value}")
    hooked = stage == 2 or overlap_comm
    if hooked:  # gradient hooks: ready order
        seq = ready_seq(trace)
        names, numel, ready = list(seq.names), seq.numel, seq.ready_s
    else:  # reduce_gradients after backward: registration (row) order
        frame = trace.frame
        names = frame["name"].tolist()
        numel = frame["numel"].to_numpy(dtype=np.int64)
        ready = np.zeros(len(names))
    ends = ds_buckets(numel, reduce_bucket_size) if names else np.zeros(0, dtype=np.int64)
    starts = [0, *ends[:-1].tolist()]
    backward = trace.backward_total_s
    buckets = []
    for k, (s, e) in enumerate(zip(starts, ends.tolist(), strict=True)):
        last = k == len(starts) - 1
        # overlap_comm: issued in the hook of the next bucket's first gradient
        release = float(ready[e]) if overlap_comm and not last else backward
        buckets.append(Bucket(tuple(names[s:e]), "reduce_scatter", release_s=release))
    total_numel = int(numel.sum())
    total_bytes = float(trace.frame["bytes"].sum())
    per_element = total_bytes / total_numel if total_numel else 0.0
    sync = tuple(ParamSync("all_gather", n * per_element)
                 for n in gather_sizes(total_numel, world_size, allgather_bucket_size,
                                       allgather_into_tensor))
    knobs: dict[str, Any] = {"stage": stage, "overlap_comm": overlap_comm,
                             "reduce_bucket_size": reduce_bucket_size,
                             "allgather_bucket_size": allgather_bucket_size,
                             "allgather_into_tensor": allgather_into_tensor}
    return Plan(algorithm=NAME, buckets=tuple(buckets), knobs=knobs, update="global",
                info=base_info(trace, world_size), optimizer="sharded", param_sync=sync)
