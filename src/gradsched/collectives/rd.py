"""Recursive-doubling all-reduce over point-to-point operations.

Thakur, Rabenseifner & Gropp, "Optimization of collective communication operations in
MPICH", IJHPCA 19(1), 2005, Sec. 4.4: in step ``k`` rank ``i`` exchanges its whole vector
with rank ``i XOR 2**k`` and both add, ``log2 P`` steps of ``M`` bytes:
``log2 P (alpha + M beta + M gamma)``.

Any ``P``: with ``P' = 2**floor(log2 P)`` and ``r = P - P'`` the first ``2r`` ranks fold
first (each even one sends its vector to the odd rank above, which adds it, and sits
out), the ``P'`` remaining ranks run the algorithm, and the odd ranks send the result
back (:func:`~.common.fold_rank`), adding ``2 alpha + 2 M beta + M gamma``.
"""

from __future__ import annotations

from typing import Any

import torch

from gradsched.collectives.common import Comm, add_into, flat, fold_rank, unfold_rank


def fold_in(comm: Comm, x: torch.Tensor) -> tuple[int, int, int]:
    """The fold pre-step (Thakur et al. Sec. 4.4): returns ``fold_rank``'s triple."""
    new, pof2, rem = fold_rank(comm.rank, comm.size)
    if comm.rank < 2 * rem:
        if new < 0:
            comm.send(x, comm.rank + 1)
        else:
            scratch = torch.empty_like(x)
            comm.recv(scratch, comm.rank - 1)
            add_into(x, scratch)
    return new, pof2, rem


def fold_out(comm: Comm, x: torch.Tensor, rem: int) -> None:
    """The fold post-step: odd ranks below ``2r`` send the result to the rank below."""
    if comm.rank < 2 * rem:
        if comm.rank % 2 == 0:
            comm.recv(x, comm.rank + 1)
        else:
            comm.send(x, comm.rank - 1)


def all_reduce(tensor: torch.Tensor, group: Any = None) -> None:
    """Recursive-doubling all-reduce (sum), in place, for any group size."""
    comm = Comm(group, tensor.device)
    x = flat(tensor)
    if comm.size == 1:
        return
    new, pof2, rem = fold_in(comm, x)
    if new >= 0:
        scratch = torch.empty_like(x)
        mask = 1
        while mask < pof2:
            peer = unfold_rank(new ^ mask, rem)
            comm.sendrecv(x, peer, scratch, peer)
            add_into(x, scratch)
            mask <<= 1
    fold_out(comm, x, rem)
