"""``ddp-list`` (ours): the contiguous optimum expressed as stock PyTorch DDP's per-bucket
caps, ``DistributedDataParallel(model, bucket_cap_mb_list=[...])`` (torch 2.14).

The buckets are those of :mod:`gradsched.planners.contiguous` (the exact optimum of the
contiguous-bucket family, which DDP's rebuilt buckets belong to); :func:`ddp_caps` turns
them into one cap per bucket such that ``Reducer::rebuild_buckets`` -- filling the
gradient-ready order with the k-th cap for the k-th bucket, torch 2.14.1
``torch/nn/parallel/distributed.py`` L93-104 and L145-148 -- rebuilds exactly these buckets.
``info`` holds the caps to paste (``bucket_cap_mb_list``: the shortest decimal per bucket
inside its safe window), the exact binary caps and the constructor line. Replaying this plan
equals replaying ``ddp`` with the knob ``bucket_cap_mb_list`` set to those caps; a real DDP
builds the same buckets (``tests/planners/test_ddp_caps.py``). DDP's first iteration uses the
same list over registration order (one-off buckets, not replayed), see ``docs/ddp-caps.md``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from gradsched.costmodel.base import CommModel
from gradsched.plan import Plan
from gradsched.planners import contiguous
from gradsched.planners._family import Knob
from gradsched.planners.ddp_caps import ddp_caps
from gradsched.traces.bundle import ComputeTrace

NAME = "ddp-list"
SUMMARY = ("the contiguous optimum as stock DDP's bucket_cap_mb_list (torch 2.14 per-bucket "
           "caps; ours)")
KNOBS: tuple[Knob, ...] = ()


def plan(trace: ComputeTrace, model: CommModel, world_size: int, **knobs: Any) -> Plan:
    """The contiguous optimum's buckets; ``info`` adds the caps and the paste line."""
    optimum = contiguous.plan(trace, model, world_size)
    caps = ddp_caps(optimum, trace)
    info = dict(optimum.info) | {
        "bucket_cap_mb_list": list(caps.paste_mb),
        "bucket_cap_mb_list_exact": list(caps.exact_mb),
        "bucket_bytes": list(caps.bucket_bytes),
        "paste_line": caps.paste_line(),
    }
    return replace(optimum, algorithm=NAME, info=info)
