"""Megatron-LM's data-parallel gradient buffer (``megatron.core.distributed``).

Read from NVIDIA/Megatron-LM at commit d98e8a64 (2026-08-22); files under
``megatron/core/``:

* Bucket size (``distributed/distributed_data_parallel.py`` L133-137): ``bucket_size``
  defaults to ``max(40000000, 1000000 * dp_size)`` *elements*, and is set to ``None`` (one
  bucket per buffer) when ``overlap_grad_reduce`` is false. This planner refuses an
  explicit ``bucket_size`` without ``overlap_grad_reduce`` (Megatron would ignore it).
* Bucket contents and order (``distributed/param_and_grad_buffer.py``
  ``_compute_default_per_buffer_param_layout``, L954-1002): parameters are walked in
  *reverse* registration order (``params[::-1]``, "backprop order") and a bucket is closed
  once it holds ``>= bucket_size`` elements (the parameter that crosses the size stays in
  it). Bucket 0 is therefore the output end of the model. This planner takes registration
  order from the trace's row order, as the ``ddp`` planner's ``find_unused_parameters``
  does.
* When the reduction is issued: with ``overlap_grad_reduce`` the backward post-hook
  (``distributed_data_parallel.py`` ``_make_backward_post_hook``, L553-587) calls
  ``register_grad_ready``, which starts a bucket's collective asynchronously once every
  parameter of the bucket has its gradient (``param_and_grad_buffer.py`` L863-885); without
  it, ``finish_grad_sync`` (L787-809, called by ``finalize_model_grads`` after the last
  micro-batch's backward) runs ``start_grad_sync`` synchronously for every bucket group,
  in order: after backward (``Bucket.release_s`` = the end of backward).
* Which collective (``start_grad_sync``, L600-785, L708-737): ``all_reduce`` of the
  bucket's gradient buffer, or with ``use_distributed_optimizer`` a ``reduce_scatter``
  (each rank keeps its shard of the bucket).
* After the step: with the distributed optimizer and ``overlap_param_gather`` false (the
  default, ``distributed_data_parallel_config.py`` L21), ``step_with_ready_grads``
  (``optimizer/distrib_optimizer.py`` L3168-3196) launches the synchronous parameter
  all-gathers, one per bucket in bucket order (``start_param_sync``,
  ``param_and_grad_buffer.py`` L383-536). Each rank steps its ``1/P`` shard
  (``Plan.optimizer="sharded"``, priced ``update_s / P`` by the replay).

A reconstruction, where it differs:

* The distributed optimizer pads each bucket to a multiple of the DP size (and, with
  ``pad_buckets_for_high_nccl_busbw``, more); the padding is not modelled, and its
  buckets use the default layout's boundaries above.
* One dtype: one buffer. Megatron keeps one buffer per (param dtype, grad dtype) and
  groups fp8 buckets (``partition_buckets``, L1658); neither is modelled.
* ``overlap_param_gather`` (parameter all-gathers overlapped with the next forward) is not
  modelled, nor ``num_distributed_optimizer_instances > 1``. Parameter bytes are taken to
  equal gradient bytes (``grad_reduce_in_fp32`` is not modelled).
"""

from __future__ import annotations

import numpy as np

from gradsched.costmodel.base import CommModel
from gradsched.errors import ConfigError
from gradsched.plan import Bucket, ParamSync, Plan
from gradsched.planners._family import Knob, base_info, fill_groups
from gradsched.traces.bundle import ComputeTrace

NAME = "megatron"
SUMMARY = ("Megatron-LM's DDP grad buffer: one bucket after backward, or buckets of "
           "max(4e7, 1e6 x P) elements reduced as they fill (overlap_grad_reduce); "
           "all-reduce, or reduce-scatter + sharded step + parameter all-gather "
           "(distributed_optimizer)")
KNOBS: tuple[Knob, ...] = (
    Knob("overlap_grad_reduce", bool, False, "reduce each bucket as soon as its gradients "
         "are in (default false: one bucket, reduced after backward)"),
    Knob("bucket_size", int, None, "bucket size in elements (only with "
         "overlap_grad_reduce); default max(40000000, 1000000 x world size)"),
    Knob("distributed_optimizer", bool, False, "use_distributed_optimizer: reduce-scatter, "
         "each rank steps its shard, then one parameter all-gather per bucket"),
)


def default_bucket_size(world_size: int) -> int:
    """``max(40000000, 1000000 * dp_size)`` (distributed_data_parallel.py L133-134)."""
    return max(40_000_000, 1_000_000 * int(world_size))


def bucket_groups(names: list[str], numel: np.ndarray, bucket_size: int | None) -> list[list[str]]:
    """Megatron's buckets over parameters in registration order ``names``: reversed, closed
    at ``>= bucket_size`` elements; ``None``: one bucket (L954-1002)."""
    rev_names, rev_numel = names[::-1], numel[::-1]
    if bucket_size is None:
        return [rev_names] if rev_names else []
    ends = fill_groups(rev_numel.astype(float), [float(bucket_size)], overflow=True)
    starts = [0, *ends[:-1].tolist()]
    return [rev_names[s:e] for s, e in zip(starts, ends.tolist(), strict=True)]


def plan(trace: ComputeTrace, model: CommModel, world_size: int, *,
         overlap_grad_reduce: bool = False, bucket_size: int | None = None,
         distributed_optimizer: bool = False) -> Plan:
    """Megatron-LM's buckets, issue point and (distributed optimizer) post-step gathers."""
    if bucket_size is not None and not overlap_grad_reduce:
        raise ConfigError("knob bucket_size needs overlap_grad_reduce=true: Megatron sets "
                          "bucket_size to None (one bucket) without it "
                          "(distributed_data_parallel.py L135-137)")
    if bucket_size is not None and bucket_size < 1:
        raise ConfigError(f"knob bucket_size must be >= 1 element, got {bucket_size}")
    size = None
    if overlap_grad_reduce:
        size = bucket_size if bucket_size is not None else default_bucket_size(world_size)
    frame = trace.frame
    names = frame["name"].tolist()
    numel = frame["numel"].to_numpy(dtype=np.int64)
    nbytes = dict(zip(names, frame["bytes"].to_numpy(dtype=float).tolist(), strict=True))
    groups = bucket_groups(names, numel, size)
    release = None if overlap_grad_reduce else trace.backward_total_s
    collective = "reduce_scatter" if distributed_optimizer else "all_reduce"
    buckets = tuple(Bucket(tuple(g), collective, release_s=release) for g in groups)
    sync: tuple[ParamSync, ...] = ()
    if distributed_optimizer:
        sync = tuple(ParamSync("all_gather", float(sum(nbytes[n] for n in g)))
                     for g in groups)
    knobs = {"overlap_grad_reduce": overlap_grad_reduce, "bucket_size": bucket_size,
             "distributed_optimizer": distributed_optimizer}
    info = base_info(trace, world_size) | {"bucket_size_elements": size}
    return Plan(algorithm=NAME, buckets=buckets, knobs=knobs, update="global", info=info,
                optimizer="sharded" if distributed_optimizer else "replicated",
                param_sync=sync)
