"""gTop-k: a global top-k selected by pairwise merging (Shi et al., ICDCS 2019).

Shi, Wang, Chu, Li ("A Distributed Synchronous SGD Algorithm with Global Top-k
Sparsification for Low Bandwidth Networks", ICDCS 2019) replace top-k's all-gather of
``k x P`` pairs by ``log2 P`` rounds in which pairs of ranks exchange their current ``k``
(index, value) pairs, add them (union of the index sets) and keep the ``k`` of largest
magnitude: the traffic per rank is ``O(k log P)`` instead of ``O(k P)``, and the result is
an approximation of the top-k of the *sum* of the gradients.

Here the rounds form a butterfly (recursive doubling: partner ``rank XOR 2^r``), so after
``log2 P`` rounds every rank holds the same ``k`` pairs without the final broadcast of the
paper's tree (P must be a power of two). Both partners merge the two sets in the same order
(lower rank first), so they compute bit-identical sums and selections.

**Residuals (deviation, stated):** a rank's entry contributes to the result only if it
survived every merge on the way; each rank tracks which of its own entries did and returns
all others to its residual, which conserves every rank's gradient mass exactly. (Shi et
al. zero the local residual at the global index set instead, which can drop a contribution
that was pruned in an intermediate merge.) Residual accumulation and momentum correction
are DGC's (:mod:`gradsched.compression.base`).
"""

from __future__ import annotations

from typing import Any

import torch

from gradsched.compression.base import BucketState, Comm, Compressor, Message, as_comm
from gradsched.errors import ConfigError


def _rounds(world_size: int) -> int:
    r = world_size.bit_length() - 1
    if world_size < 1 or (1 << r) != world_size:
        raise ConfigError(f"gtopk needs a power-of-two world size, got {world_size}")
    return r


class GTopKCompressor(Compressor):
    """Global top-k by butterfly merging of (index, value) sets (see module doc)."""

    name = "gtopk"

    def compress_and_reduce(self, flat_grad: torch.Tensor, flat_param: torch.Tensor,
                            state: BucketState, comm: Comm | Any, step: int) -> torch.Tensor:
        comm = as_comm(comm)
        rounds = _rounds(comm.world_size)
        if flat_grad.dtype != torch.float32:
            raise ConfigError("gtopk: fp32 buckets only (indices travel as 32-bit words)")
        n = flat_grad.numel()
        acc = self._accumulate(flat_grad, state)
        k = self.k(n)
        if k >= n:
            idx = torch.arange(n, device=acc.device)
        else:
            idx = torch.topk(acc.abs(), k, sorted=False).indices
        idx = torch.sort(idx).values
        vals = acc.index_select(0, idx)
        alive = idx  # this rank's own entries still part of the running set
        for r in range(rounds):
            peer = comm.rank ^ (1 << r)
            packed = torch.cat([idx.to(torch.int32).view(torch.float32), vals])
            other = comm.exchange(packed, peer)
            o_idx = other[:k].contiguous().view(torch.int32).long()
            o_val = other[k:]
            first, second = ((idx, vals), (o_idx, o_val)) if comm.rank < peer else \
                ((o_idx, o_val), (idx, vals))
            union, inverse = torch.unique(torch.cat([first[0], second[0]]),
                                          return_inverse=True)
            merged = torch.zeros(union.numel(), dtype=vals.dtype, device=vals.device)
            merged.index_add_(0, inverse, torch.cat([first[1], second[1]]))
            if union.numel() > k:
                keep = torch.sort(torch.topk(merged.abs(), k, sorted=False).indices).values
            else:  # both sets hold the same k indices
                keep = torch.arange(union.numel(), device=vals.device)
            idx, vals = union[keep], merged[keep]
            alive = alive[torch.isin(alive, idx)]
        # Only the surviving own entries leave the residual (mass conservation).
        self._mask(state, alive)
        state.extra["global_indices"] = idx
        out = torch.zeros_like(flat_grad)
        out.index_copy_(0, idx, vals)
        return out.div_(comm.world_size)

    def messages(self, numel: int, world_size: int, element_size: int = 4) -> list[Message]:
        rounds = _rounds(world_size)
        return [Message("sendrecv", 8 * self.k(numel)) for _ in range(rounds)]

    def bytes_sent(self, numel: int, world_size: int, element_size: int = 4) -> int:
        return _rounds(world_size) * 8 * self.k(numel)
