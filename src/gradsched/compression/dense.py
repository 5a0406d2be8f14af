"""Dense all-reduce: the uncompressed baseline (what the plan executor and DDP do)."""

from __future__ import annotations

from typing import Any

import torch

from gradsched.compression.base import BucketState, Comm, Compressor, Message, as_comm


class DenseCompressor(Compressor):
    """All-reduce of the whole bucket, divided by P. ``density`` must be 1 (it is ignored
    otherwise: every element is sent); no residual, no momentum of its own."""

    name = "dense"

    def __init__(self, density: float = 1.0, momentum: float = 0.0, seed: int = 0) -> None:
        super().__init__(1.0, 0.0, seed)

    def init_state(self, numel: int, like: torch.Tensor | None = None,
                   track: bool = False) -> BucketState:
        return BucketState(numel, track)

    def compress_and_reduce(self, flat_grad: torch.Tensor, flat_param: torch.Tensor,
                            state: BucketState, comm: Comm | Any, step: int) -> torch.Tensor:
        comm = as_comm(comm)
        out = flat_grad.clone()
        comm.all_reduce(out)
        if state.track:
            state.last_sent = flat_grad.detach().clone()
        return out.div_(comm.world_size)

    def messages(self, numel: int, world_size: int, element_size: int = 4) -> list[Message]:
        return [Message("all_reduce", numel * element_size)]

    def bytes_sent(self, numel: int, world_size: int, element_size: int = 4) -> int:
        return numel * element_size
