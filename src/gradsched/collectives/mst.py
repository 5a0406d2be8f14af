"""Binomial-tree (minimum spanning tree, MST) broadcast, reduce and all-reduce.

Thakur, Rabenseifner & Gropp, "Optimization of collective communication operations in
MPICH", IJHPCA 19(1), 2005, Sec. 4.1 (broadcast) and 4.5 (reduce); the tree is MPICH's
binomial tree on ranks relative to the root, so any ``P`` works. Every message is the
whole vector: broadcast costs ``ceil(log2 P) (alpha + M beta)``, reduce
``ceil(log2 P) (alpha + M beta + M gamma)``, all-reduce = reduce to rank 0 followed by a
broadcast from rank 0 (:func:`gradsched.costmodel.formulas.linear_coefficients`).
"""

from __future__ import annotations

from typing import Any

import torch

from gradsched.collectives.common import Comm, add_into, flat


def _bcast(comm: Comm, x: torch.Tensor, root: int) -> None:
    p = comm.size
    vr = (comm.rank - root) % p
    mask = 1
    while mask < p:
        if vr & mask:
            comm.recv(x, (vr - mask + root) % p)
            break
        mask <<= 1
    mask >>= 1
    while mask > 0:
        if vr + mask < p:
            comm.send(x, (vr + mask + root) % p)
        mask >>= 1


def _reduce(comm: Comm, x: torch.Tensor, root: int) -> None:
    p = comm.size
    vr = (comm.rank - root) % p
    scratch: torch.Tensor | None = None
    mask = 1
    while mask < p:
        if vr & mask:
            comm.send(x, (vr - mask + root) % p)
            return
        src = vr | mask
        if src < p:
            if scratch is None:
                scratch = torch.empty_like(x)
            comm.recv(scratch, (src + root) % p)
            add_into(x, scratch)
        mask <<= 1


def broadcast(tensor: torch.Tensor, src: int = 0, group: Any = None) -> None:
    """Binomial-tree broadcast of ``tensor`` from group rank ``src``, in place."""
    comm = Comm(group, tensor.device)
    _bcast(comm, flat(tensor), src)


def reduce(tensor: torch.Tensor, dst: int = 0, group: Any = None) -> None:
    """Binomial-tree reduce (sum) to group rank ``dst``, in place; on other ranks the
    tensor is left holding a partial sum (as MPI, its content there is unspecified)."""
    comm = Comm(group, tensor.device)
    _reduce(comm, flat(tensor), dst)


def all_reduce(tensor: torch.Tensor, group: Any = None) -> None:
    """Binomial reduce to rank 0, then binomial broadcast from rank 0, in place."""
    comm = Comm(group, tensor.device)
    x = flat(tensor)
    _reduce(comm, x, 0)
    _bcast(comm, x, 0)
