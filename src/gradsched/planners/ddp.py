"""PyTorch DistributedDataParallel gradient buckets.

Li et al., "PyTorch Distributed: Experiences on Accelerating Data Parallel Training",
VLDB 2020, Sec. 3.2.3, and ``compute_bucket_assignment_by_size`` in PyTorch's
``torch/csrc/distributed/c10d/reducer.cpp``. After the first iteration DDP rebuilds its
buckets in the order gradients became ready (``rebuild_buckets``), so in steady state the
rule is, over tensors in gradient-ready order:

* ``rule=pytorch`` (default, PyTorch's code): append the tensor to the open bucket; once
  the bucket holds >= its cap, close it. The first bucket's cap is ``first_bucket_mb``
  (``dist._DEFAULT_FIRST_BUCKET_BYTES`` = 1 MiB), the others ``bucket_cap_mb`` (25 MiB).
  The tensor that crosses the cap stays in the bucket it closes.
* ``rule=cap``: close the bucket *before* a tensor that would push it past the cap (a
  tensor larger than the cap travels alone); the buckets never exceed the cap.

MB = 1024 * 1024 bytes as in PyTorch. One dtype and device are assumed (DDP keys buckets
by both). One all-reduce per bucket on one stream; global update.
"""

from __future__ import annotations

from gradsched.costmodel.base import CommModel
from gradsched.plan import Plan
from gradsched.planners._family import (
    MB,
    Knob,
    base_info,
    check_choice,
    check_positive,
    fill_groups,
    plan_from_ends,
    ready_seq,
)
from gradsched.traces.bundle import ComputeTrace

NAME = "ddp"
SUMMARY = "PyTorch DDP buckets: 1 MB first bucket, then bucket_cap_mb (Li et al. 2020)"
RULES = ("pytorch", "cap")
KNOBS: tuple[Knob, ...] = (
    Knob("bucket_cap_mb", float, 25.0, "bucket cap in MiB (DDP's bucket_cap_mb)"),
    Knob("first_bucket_mb", float, 1.0, "cap of the first bucket in MiB "
         "(dist._DEFAULT_FIRST_BUCKET_BYTES)"),
    Knob("rule", str, "pytorch", "pytorch: the crossing tensor closes its bucket; "
         "cap: buckets never exceed the cap", RULES),
)


def plan(trace: ComputeTrace, model: CommModel, world_size: int, *,
         bucket_cap_mb: float = 25.0, first_bucket_mb: float = 1.0,
         rule: str = "pytorch") -> Plan:
    """DDP's steady-state buckets over tensors in ready order."""
    check_positive("bucket_cap_mb", bucket_cap_mb)
    check_positive("first_bucket_mb", first_bucket_mb)
    check_choice("rule", rule, RULES)
    seq = ready_seq(trace)
    ends = fill_groups(seq.nbytes, [first_bucket_mb * MB, bucket_cap_mb * MB],
                       overflow=rule == "pytorch")
    knobs = {"bucket_cap_mb": bucket_cap_mb, "first_bucket_mb": first_bucket_mb, "rule": rule}
    return plan_from_ends(NAME, seq, ends, knobs=knobs, info=base_info(trace, world_size))
