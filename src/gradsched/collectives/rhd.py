"""Recursive halving/doubling (Rabenseifner) all-reduce over point-to-point operations.

Thakur, Rabenseifner & Gropp, "Optimization of collective communication operations in
MPICH", IJHPCA 19(1), 2005, Sec. 4.4 ("Rabenseifner's algorithm"): a reduce-scatter by
recursive halving (step ``k`` exchanges half of the current segment with the rank at
distance ``P'/2**(k+1)`` and keeps the other half, adding) followed by an all-gather by
recursive doubling (the reverse exchanges, copying). Cost on a power of two:
``2 log2 P alpha + 2 (P-1)/P M beta + (P-1)/P M gamma``.

The vector is cut into ``P'`` blocks of :func:`~.common.block_bounds` (any length;
blocks may be empty) and segments are unions of whole blocks, so sizes not divisible by
``P`` work. Non-power-of-two ``P`` folds exactly as in :mod:`.rd` (Thakur et al.'s
pre- and post-step), adding ``2 alpha + 2 M beta + M gamma``.
"""

from __future__ import annotations

from typing import Any

import torch

from gradsched.collectives.common import Comm, add_into, block_bounds, flat, unfold_rank
from gradsched.collectives.rd import fold_in, fold_out


def all_reduce(tensor: torch.Tensor, group: Any = None) -> None:
    """Rabenseifner all-reduce (sum), in place, for any group size."""
    comm = Comm(group, tensor.device)
    x = flat(tensor)
    if comm.size == 1:
        return
    new, pof2, rem = fold_in(comm, x)
    if new >= 0:
        blocks = block_bounds(x.numel(), pof2)

        def span(lo: int, hi: int) -> tuple[int, int]:  # blocks [lo, hi) -> elements
            return blocks[lo][0], blocks[hi - 1][1]

        scratch = torch.empty((x.numel() + 1) // 2 + pof2, dtype=x.dtype, device=x.device)
        # Reduce-scatter by recursive halving: rank `new` ends with block `new`.
        lo, hi = 0, pof2
        mask = pof2 >> 1
        while mask > 0:
            peer = unfold_rank(new ^ mask, rem)
            mid = lo + (hi - lo) // 2
            if new & mask:
                keep, give = (mid, hi), (lo, mid)
            else:
                keep, give = (lo, mid), (mid, hi)
            k0, k1 = span(*keep)
            g0, g1 = span(*give)
            buf = scratch[: k1 - k0]
            comm.sendrecv(x[g0:g1], peer, buf, peer)
            add_into(x[k0:k1], buf)
            lo, hi = keep
            mask >>= 1
        # All-gather by recursive doubling: segments of `mask` blocks double each step.
        mask = 1
        while mask < pof2:
            peer_new = new ^ mask
            peer = unfold_rank(peer_new, rem)
            mine = (new // mask) * mask
            theirs = (peer_new // mask) * mask
            s0, s1 = span(mine, mine + mask)
            r0, r1 = span(theirs, theirs + mask)
            comm.sendrecv(x[s0:s1], peer, x[r0:r1], peer)
            mask <<= 1
    fold_out(comm, x, rem)
