"""Top-k sparsification with residual accumulation and momentum correction, by all-gather.

Deep Gradient Compression (Lin, Han, Mao, Wang & Dally, ICLR 2018): every rank accumulates
its gradient locally (with momentum correction and momentum factor masking, see
:mod:`gradsched.compression.base`), sends only the ``k`` entries of largest magnitude of the
accumulation and keeps the rest as residual for later steps. The selected sets differ
between ranks, so the sparse vectors cannot be summed by an all-reduce; they are exchanged
by one **all-gather of (index, value) pairs**: each rank passes ``2k`` 32-bit words (the
int32 indices travel bit-for-bit in a float32 tensor next to the values), and receives
``k x P`` pairs, which it scatter-adds into a dense buffer in rank order (so every rank
computes bit-identical sums). The traffic received therefore grows with P: the cost of
top-k that importance-weighted pruning (Cheng & Xu) and gTop-k (Shi et al., ICDCS 2019)
avoid. DGC's warm-up of the density and local gradient clipping are not implemented.
"""

from __future__ import annotations

from typing import Any

import torch

from gradsched.compression.base import BucketState, Comm, Compressor, Message, as_comm
from gradsched.errors import ConfigError

_MAX_INT32 = 2**31 - 1


class TopKCompressor(Compressor):
    """DGC-style top-k of |v| per bucket, exchanged by all-gather (see module doc)."""

    name = "topk"

    def select(self, acc: torch.Tensor, k: int) -> torch.Tensor:
        """Indices (int64) of the ``k`` largest |acc|."""
        if k >= acc.numel():
            return torch.arange(acc.numel(), device=acc.device)
        return torch.topk(acc.abs(), k, sorted=False).indices

    def compress_and_reduce(self, flat_grad: torch.Tensor, flat_param: torch.Tensor,
                            state: BucketState, comm: Comm | Any, step: int) -> torch.Tensor:
        comm = as_comm(comm)
        n = flat_grad.numel()
        if n > _MAX_INT32:
            raise ConfigError(f"topk: a bucket of {n} elements exceeds int32 indices")
        if flat_grad.dtype != torch.float32:
            raise ConfigError("topk: fp32 buckets only (indices travel as 32-bit words)")
        acc = self._accumulate(flat_grad, state)
        k = self.k(n)
        indices = self.select(acc, k)
        values = self._mask(state, indices)
        packed = torch.cat([indices.to(torch.int32).view(torch.float32), values])
        gathered = comm.all_gather(packed).view(comm.world_size, 2 * k)
        all_idx = gathered[:, :k].contiguous().view(torch.int32).reshape(-1).long()
        all_val = gathered[:, k:].reshape(-1)
        out = torch.zeros_like(flat_grad)
        out.index_add_(0, all_idx, all_val)
        return out.div_(comm.world_size)

    def messages(self, numel: int, world_size: int, element_size: int = 4) -> list[Message]:
        return [Message("all_gather", world_size * self.bytes_sent(numel, world_size,
                                                                   element_size))]

    def bytes_sent(self, numel: int, world_size: int, element_size: int = 4) -> int:
        return 2 * self.k(numel) * 4
