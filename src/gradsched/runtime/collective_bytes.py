"""The bytes and dtypes of the collectives FSDP2 actually issues, recorded on a rank.

FSDP2 (torch 2.14) issues its all-gathers through ``DefaultAllGather`` and its
reduce-scatters through ``DefaultReduceScatter``
(``torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py`` L111-124 and L175-190),
which call ``torch.distributed.all_gather_single`` and
``torch.distributed.reduce_scatter_single`` at call time. :func:`recorded_collectives`
wraps both for the duration of a ``with`` block and records, per call, the collective, the
element dtype and the bytes of the full (unsharded) buffer: the all-gather's output, the
reduce-scatter's input. These are what the sharded replay prices per unit
(:mod:`gradsched.replay.sharded_dtypes`: ``numel x`` the dtype's bytes, padded here to a
multiple of the world size along dim 0).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch
import torch.distributed as dist

DTYPE_NAMES = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}


@dataclass(frozen=True)
class Seen:
    """One collective as issued: ``all_gather`` or ``reduce_scatter``, its dtype, the bytes
    of its unsharded buffer."""

    collective: str
    dtype: str
    bytes: int


@contextmanager
def recorded_collectives() -> Iterator[list[Seen]]:
    """Record FSDP2's all-gathers and reduce-scatters issued inside the block (module
    docstring); the originals are restored on exit."""
    seen: list[Seen] = []
    gather, scatter = dist.all_gather_single, dist.reduce_scatter_single

    def all_gather_single(output_tensor, input_tensor, *args, **kwargs):  # type: ignore[no-untyped-def]
        seen.append(Seen("all_gather", _name(output_tensor.dtype),
                         output_tensor.numel() * output_tensor.element_size()))
        return gather(output_tensor, input_tensor, *args, **kwargs)

    def reduce_scatter_single(*args, **kwargs):  # type: ignore[no-untyped-def]
        tensor = kwargs["input"] if "input" in kwargs else args[1]
        seen.append(Seen("reduce_scatter", _name(tensor.dtype),
                         tensor.numel() * tensor.element_size()))
        return scatter(*args, **kwargs)

    dist.all_gather_single = all_gather_single
    dist.reduce_scatter_single = reduce_scatter_single
    try:
        yield seen
    finally:
        dist.all_gather_single, dist.reduce_scatter_single = gather, scatter


def _name(dtype: torch.dtype) -> str:
    return DTYPE_NAMES.get(dtype, str(dtype).removeprefix("torch."))
