"""PyTorch DistributedDataParallel gradient buckets, as torch 2.14 builds them.

Li et al., "PyTorch Distributed: Experiences on Accelerating Data Parallel Training",
VLDB 2020, Sec. 3.2.3; the rule below is read from torch 2.14.1's own code.

Bucket caps (``torch/nn/parallel/distributed.py``, torch 2.14.1):

* ``bucket_cap_mb=None`` (the default) means 25 MiB (``_DEFAULT_BUCKET_CAP_MB``, L31) with a
  smaller *first* bucket of ``dist._DEFAULT_FIRST_BUCKET_BYTES`` = 1 MiB;
* an explicit ``bucket_cap_mb`` makes the first bucket equal to the cap:
  ``first_bucket_bytes_cap = dist._DEFAULT_FIRST_BUCKET_BYTES if is_using_default else
  bucket_bytes_cap`` (``_BucketCapacityConfig.create``, L86-110); the cap in bytes is
  ``int(bucket_cap_mb * 1024 * 1024)`` (L104). Both go to the C++ ``Reducer`` (L1449,
  L1455).

Which tensors, in which order (pytorch/pytorch ``torch/csrc/distributed/c10d/reducer.cpp``,
cited by function: the 2.14.1 source tree was not at hand, so the tests check the rule
against the installed torch's real ``DistributedDataParallel``):

* Default (``find_unused_parameters=False``, or ``static_graph=True``): DDP starts with
  one bucket (``compute_bucket_size_limits`` gives ``[sys.maxsize]``, distributed.py
  L152-154) and, in the first backward, records the parameters in the order their
  gradient hooks fire (``autograd_hook`` -> ``push_rebuilt_params``); before the second
  forward (``_pre_forward`` -> ``reducer._rebuild_buckets()``, distributed.py L1776)
  ``Reducer::rebuild_buckets`` calls ``compute_bucket_assignment_by_size`` on that
  gradient-ready order with limits ``{first_bucket_bytes_cap_, bucket_bytes_cap_}``. So
  in steady state the buckets are contiguous runs of the *ready order*; this planner
  uses the trace's ``ready_order`` (gradsched's capture records it with the same
  post-accumulate-grad hooks).
* ``find_unused_parameters=True`` (knob): no rebuild; the buckets are the constructor's
  assignment over the parameters in registration order (``model.parameters()``) with
  limits ``[first, cap]`` if ``first < cap`` else ``[cap]`` (distributed.py L155-159),
  sorted by their smallest parameter index and then reversed (L1440), so the small first
  bucket holds the *input-side* parameters and is reduced last.
* ``compute_bucket_assignment_by_size``: per (dtype, device) key, append the tensor's
  bytes to the open bucket; once the bucket holds >= its limit, close it (the tensor that
  crosses the limit stays in it) and move to the next limit (the last one repeats).
* ``set_last_bucket_cap=True`` (knob) is torch's ``DDP_SET_LAST_BUCKET_CAP=1``
  environment variable: ``rebuild_buckets`` reverses the ready order before filling and
  reverses the buckets back, so the small bucket is the last-ready one.

One all-reduce per bucket on one stream, launched in bucket order (DDP's
``next_bucket_``); global update. MiB = 1024 * 1024 bytes.

Remaining differences from torch (known):

* The trace has one dtype and device, so every tensor shares one bucket key; DDP keeps
  separate buckets per (dtype, device) (mixed-precision parameters would split).
* Steady state only: DDP's first iteration reduces everything in one bucket (default)
  and is not replayed.
* ``find_unused_parameters=True`` takes "registration order" from the trace's row order,
  which gradsched's capture writes in forward-completion order of the owning modules; the
  two agree for sequential models (ResNet, VGG, DenseNet) but not always (a post-norm
  Transformer layer registers ``norm1``/``norm2`` after ``linear2``). With that knob the
  buckets need not be contiguous in ready order, and the replay starts a later bucket
  that is ready before an earlier one, where DDP waits for bucket order.
* Gradient compression hooks are not modelled, and ``first_bucket_mb`` combined with an
  explicit ``bucket_cap_mb`` (torch applies ``dist._DEFAULT_FIRST_BUCKET_BYTES`` only with
  the default cap; here the knob is a what-if with any cap) is not a torch behaviour.

Per-bucket caps (knob ``bucket_cap_mb_list``, torch 2.14's
``DistributedDataParallel(bucket_cap_mb_list=[...])``): ``_BucketCapacityConfig.create``
(distributed.py L93-104) turns each entry into ``int(cap_mb * 1024 * 1024)`` bytes, and
``compute_bucket_size_limits`` ("Case 1", L146-148) hands that list to the ``Reducer`` for
the rebuild too, so the steady-state buckets are ``fill_groups`` over the ready order with
the k-th bucket capped by the k-th entry (the last repeats). The list replaces
``bucket_cap_mb`` and the first-bucket rule, and it is refused with
``find_unused_parameters`` (no rebuild: the constructor's reversed assignment would need the
list reversed too, which is not modelled). :mod:`gradsched.planners.ddp_caps` goes the other
way (a plan -> the list); ``ddp-list`` is the contiguous optimum expressed so.
"""

from __future__ import annotations

import numpy as np

from gradsched.costmodel.base import CommModel
from gradsched.errors import ConfigError
from gradsched.plan import Bucket, Plan
from gradsched.planners._family import (
    MB,
    Knob,
    ReadySeq,
    base_info,
    check_positive,
    fill_groups,
    plan_from_ends,
    ready_seq,
)
from gradsched.traces.bundle import ComputeTrace

NAME = "ddp"
SUMMARY = ("PyTorch DDP buckets as torch 2.14 builds them: default 25 MiB with a 1 MiB first "
           "bucket, an explicit bucket_cap_mb for every bucket, or per-bucket caps "
           "(bucket_cap_mb_list) (Li et al. 2020)")
DEFAULT_BUCKET_CAP_MB = 25.0  # torch/nn/parallel/distributed.py L31
DEFAULT_FIRST_BUCKET_BYTES = 1024 * 1024  # dist._DEFAULT_FIRST_BUCKET_BYTES
KNOBS: tuple[Knob, ...] = (
    Knob("bucket_cap_mb", float, None, "DDP's bucket_cap_mb in MiB; default (none): 25 MiB "
         "with a 1 MiB first bucket; explicit: every bucket, the first included, has this "
         "cap"),
    Knob("first_bucket_mb", float, None, "first bucket cap in MiB; default (none): torch's "
         "rule (1 MiB with the default cap, else the cap); a value sets "
         "dist._DEFAULT_FIRST_BUCKET_BYTES (a what-if with an explicit cap)"),
    Knob("find_unused_parameters", bool, False, "DDP's find_unused_parameters: no bucket "
         "rebuild; buckets over the trace's row (registration) order, reduced in reverse"),
    Knob("set_last_bucket_cap", bool, False, "torch's DDP_SET_LAST_BUCKET_CAP=1: the small "
         "bucket is the last-ready one"),
    Knob("bucket_cap_mb_list", tuple, None, "DDP's bucket_cap_mb_list: comma-separated caps "
         "in MiB, the k-th for the k-th rebuilt bucket (the last repeats); excludes "
         "bucket_cap_mb, first_bucket_mb and find_unused_parameters"),
)
EXCLUSIVE_WITH_LIST = ("bucket_cap_mb", "first_bucket_mb", "find_unused_parameters")


def bucket_limits_bytes(bucket_cap_mb: float | None,
                        first_bucket_mb: float | None) -> tuple[int, int]:
    """(first bucket cap, bucket cap) in bytes, as ``_BucketCapacityConfig.create``
    (distributed.py L86-110) computes them."""
    cap = int((DEFAULT_BUCKET_CAP_MB if bucket_cap_mb is None else bucket_cap_mb) * MB)
    if first_bucket_mb is not None:
        first = int(first_bucket_mb * MB)
    else:
        first = DEFAULT_FIRST_BUCKET_BYTES if bucket_cap_mb is None else cap
    return first, cap


def cap_list_limits_bytes(caps_mb: tuple[float, ...]) -> list[int]:
    """Per-bucket limits in bytes as ``_BucketCapacityConfig.create`` computes them
    (distributed.py L98-100: ``int(cap_mb * _MB_TO_BYTES)``)."""
    if not caps_mb:
        raise ConfigError("knob bucket_cap_mb_list needs at least one cap")
    for cap in caps_mb:
        check_positive("bucket_cap_mb_list", cap)
    return [int(cap * MB) for cap in caps_mb]


def check_list_alone(bucket_cap_mb: float | None, first_bucket_mb: float | None,
                     find_unused_parameters: bool) -> None:
    """``bucket_cap_mb_list`` replaces the single cap and the first-bucket rule, and is
    modelled for the rebuilt (steady-state) buckets only."""
    given = {"bucket_cap_mb": bucket_cap_mb is not None,
             "first_bucket_mb": first_bucket_mb is not None,
             "find_unused_parameters": find_unused_parameters}
    clash = [name for name in EXCLUSIVE_WITH_LIST if given[name]]
    if clash:
        raise ConfigError(f"planner 'ddp': knob bucket_cap_mb_list excludes knob {clash[0]} "
                          "(the list sets every bucket's cap; give one or the other)")


def rebuilt_ends(sizes: np.ndarray, first: int, cap: int, *,
                 last_small: bool = False) -> np.ndarray:
    """``Reducer::rebuild_buckets``: fill over the ready order with limits [first, cap];
    with ``last_small`` (DDP_SET_LAST_BUCKET_CAP) fill the reversed order and reverse."""
    if not last_small:
        return fill_groups(sizes, [first, cap], overflow=True)
    n = len(sizes)
    rev = fill_groups(sizes[::-1], [first, cap], overflow=True)
    # a group ending at r in the reversed order starts at n - r in the forward order
    starts = sorted(n - int(r) for r in rev)
    return np.asarray([*starts[1:], n], dtype=np.int64)


def constructor_buckets(trace: ComputeTrace, first: int, cap: int) -> list[list[str]]:
    """The constructor's buckets (``find_unused_parameters=True``): parameters in row
    order, limits [first, cap] if first < cap else [cap] (distributed.py L155-159), then
    the bucket list reversed (L1440)."""
    frame = trace.frame
    limits = [first, cap] if first < cap else [cap]
    ends = fill_groups(frame["bytes"].to_numpy(dtype=float), limits, overflow=True)
    names = frame["name"].tolist()
    starts = [0, *ends[:-1].tolist()]
    groups = [names[s:e] for s, e in zip(starts, ends.tolist(), strict=True)]
    return groups[::-1]


def _ordered_plan(seq: ReadySeq, groups: list[list[str]], knobs: dict[str, object],
                  info: dict[str, object]) -> Plan:
    position = {name: i for i, name in enumerate(seq.names)}
    buckets = tuple(Bucket(tensors=tuple(sorted(g, key=position.__getitem__))) for g in groups)
    return Plan(algorithm=NAME, buckets=buckets, knobs=dict(knobs), info=dict(info))


def plan(trace: ComputeTrace, model: CommModel, world_size: int, *,
         bucket_cap_mb: float | None = None, first_bucket_mb: float | None = None,
         find_unused_parameters: bool = False, set_last_bucket_cap: bool = False,
         bucket_cap_mb_list: tuple[float, ...] | None = None) -> Plan:
    """DDP's steady-state buckets (see the module docstring for the source lines)."""
    if bucket_cap_mb_list is not None:
        check_list_alone(bucket_cap_mb, first_bucket_mb, find_unused_parameters)
        return _list_plan(trace, world_size, tuple(bucket_cap_mb_list), set_last_bucket_cap)
    if bucket_cap_mb is not None:
        check_positive("bucket_cap_mb", bucket_cap_mb)
    if first_bucket_mb is not None:
        check_positive("first_bucket_mb", first_bucket_mb)
    first, cap = bucket_limits_bytes(bucket_cap_mb, first_bucket_mb)
    knobs = {"bucket_cap_mb": bucket_cap_mb, "first_bucket_mb": first_bucket_mb,
             "find_unused_parameters": find_unused_parameters,
             "set_last_bucket_cap": set_last_bucket_cap}
    info = base_info(trace, world_size) | {"first_bucket_bytes": first, "bucket_cap_bytes": cap}
    seq = ready_seq(trace)
    if find_unused_parameters:
        info["order"] = "row order (registration), no rebuild"
        return _ordered_plan(seq, constructor_buckets(trace, first, cap), knobs, info)
    info["order"] = "ready order (Reducer::rebuild_buckets)"
    ends = rebuilt_ends(seq.nbytes, first, cap, last_small=set_last_bucket_cap)
    return plan_from_ends(NAME, seq, ends, knobs=knobs, info=info)


def _list_plan(trace: ComputeTrace, world_size: int, caps_mb: tuple[float, ...],
               set_last_bucket_cap: bool) -> Plan:
    """The buckets ``Reducer::rebuild_buckets`` forms with per-bucket limits."""
    if set_last_bucket_cap:
        raise ConfigError("planner 'ddp': knob bucket_cap_mb_list excludes knob "
                          "set_last_bucket_cap (the reversed fill with a list is not "
                          "modelled)")
    limits = cap_list_limits_bytes(caps_mb)
    seq = ready_seq(trace)
    knobs = {"bucket_cap_mb_list": list(caps_mb)}
    info = base_info(trace, world_size) | {
        "bucket_cap_bytes_list": limits,
        "order": "ready order (Reducer::rebuild_buckets, per-bucket limits)"}
    ends = fill_groups(seq.nbytes, limits, overflow=True)
    return plan_from_ends(NAME, seq, ends, knobs=knobs, info=info)
