"""Ring reduce-scatter, all-gather and all-reduce over point-to-point operations.

Patarasuk & Yuan, "Bandwidth optimal all-reduce algorithms for clusters of
workstations", JPDC 69(2), 2009; Thakur, Rabenseifner & Gropp, "Optimization of
collective communication operations in MPICH", IJHPCA 19(1), 2005, Sec. 4.

The vector of ``n`` elements is cut into ``P`` blocks (:func:`~.common.block_bounds`;
any ``n``, blocks may be empty). In each of the ``P-1`` steps every rank sends one block
to ``rank+1`` and receives one from ``rank-1``:

* reduce-scatter: after step ``s`` the received block is added into the local one; at the
  end rank ``i`` holds the fully reduced block ``i``;
* all-gather: the received block is copied; at the end every rank holds every block;
* all-reduce = reduce-scatter followed by all-gather: ``2(P-1)`` steps of ``M/P`` bytes,
  cost ``2(P-1) alpha + 2(P-1)/P M beta + (P-1)/P M gamma``
  (:func:`gradsched.costmodel.formulas.linear_coefficients`).
"""

from __future__ import annotations

from typing import Any

import torch

from gradsched.collectives.common import Comm, add_into, block_bounds, flat


def _reduce_scatter(comm: Comm, x: torch.Tensor) -> list[tuple[int, int]]:
    p, rank = comm.size, comm.rank
    bounds = block_bounds(x.numel(), p)
    if p == 1:
        return bounds
    right, left = (rank + 1) % p, (rank - 1) % p
    longest = max(b - a for a, b in bounds)
    scratch = torch.empty(longest, dtype=x.dtype, device=x.device)
    for step in range(p - 1):
        s0, s1 = bounds[(rank - step - 1) % p]
        r0, r1 = bounds[(rank - step - 2) % p]
        buf = scratch[: r1 - r0]
        comm.sendrecv(x[s0:s1], right, buf, left)
        add_into(x[r0:r1], buf)
    return bounds


def _all_gather(comm: Comm, x: torch.Tensor) -> None:
    p, rank = comm.size, comm.rank
    if p == 1:
        return
    bounds = block_bounds(x.numel(), p)
    right, left = (rank + 1) % p, (rank - 1) % p
    for step in range(p - 1):
        s0, s1 = bounds[(rank - step) % p]
        r0, r1 = bounds[(rank - step - 1) % p]
        comm.sendrecv(x[s0:s1], right, x[r0:r1], left)


def reduce_scatter(tensor: torch.Tensor, group: Any = None) -> torch.Tensor:
    """Ring reduce-scatter, in place: returns the view of ``tensor`` (block ``rank`` of
    :func:`~.common.block_bounds`) that now holds the sum over ranks; the other blocks
    hold partial sums."""
    comm = Comm(group, tensor.device)
    x = flat(tensor)
    bounds = _reduce_scatter(comm, x)
    a, b = bounds[comm.rank]
    return x[a:b]


def all_gather(tensor: torch.Tensor, group: Any = None) -> None:
    """Ring all-gather, in place: block ``i`` of ``tensor`` is taken from rank ``i``."""
    comm = Comm(group, tensor.device)
    _all_gather(comm, flat(tensor))


def all_reduce(tensor: torch.Tensor, group: Any = None) -> None:
    """Ring all-reduce (sum), in place: reduce-scatter then all-gather."""
    comm = Comm(group, tensor.device)
    x = flat(tensor)
    _reduce_scatter(comm, x)
    _all_gather(comm, x)
