"""Shared plumbing of the point-to-point collective algorithms.

Every algorithm in :mod:`gradsched.collectives` is written against :class:`Comm`, a thin
wrapper of ``torch.distributed`` point-to-point operations (``dist.isend`` /
``dist.irecv``) that

* translates group ranks to global ranks (``dist.get_global_rank``), so the algorithms
  run on any process group, not only the default one;
* bounds every wait: ``Work.wait(timeout)`` with the process group's own timeout (the
  ``timeout`` given to ``init_process_group``; see
  :func:`gradsched.distributed.worker.init_group`), so a lost peer raises instead of
  hanging;
* skips empty transfers on both sides (sizes are computed identically on every rank),
  which is what makes vectors shorter than P, or than the number of blocks, work.

Reduction semantics (documented once for all algorithms): the reduction is a sum
computed **in the tensor's own dtype** (``torch.add`` of two tensors of that dtype), as
NCCL does for its built-in algorithms. For bf16 every partial sum is therefore rounded
to bf16; the exactness tests bound the error accordingly
(``tests/collectives/test_collectives.py``). All algorithms give bit-identical results on
every rank (each final element is computed once and then copied, or computed
symmetrically with commutative IEEE additions).

Partitioning: a vector of ``n`` elements is cut into ``k`` blocks with
:func:`block_bounds` (the first ``n % k`` blocks one element longer, as
``numpy.array_split``); blocks may be empty when ``n < k``.
"""

from __future__ import annotations

import datetime as dt
import os
from collections import deque
from collections.abc import Sequence
from typing import Any

import torch
import torch.distributed as dist

DEFAULT_TIMEOUT_S = 300.0
"""Used only when the process group's timeout cannot be read."""


def block_bounds(n: int, k: int) -> list[tuple[int, int]]:
    """``k`` contiguous [start, stop) blocks covering ``range(n)`` (array_split sizes)."""
    if k < 1:
        raise ValueError(f"need at least one block, got {k}")
    base, extra = divmod(n, k)
    out, start = [], 0
    for i in range(k):
        stop = start + base + (1 if i < extra else 0)
        out.append((start, stop))
        start = stop
    return out


def group_timeout(group: Any = None, device: torch.device | None = None) -> dt.timedelta:
    """The timeout the process group was initialised with (falls back to
    ``GRADSCHED_P2P_TIMEOUT_S`` or :data:`DEFAULT_TIMEOUT_S`)."""
    env = os.environ.get("GRADSCHED_P2P_TIMEOUT_S")
    if env:
        return dt.timedelta(seconds=float(env))
    pg = group if group is not None else dist.group.WORLD
    try:
        backend = pg._get_backend(device or torch.device("cpu"))
        timeout = backend.options._timeout
        if isinstance(timeout, dt.timedelta) and timeout.total_seconds() > 0:
            return timeout
    except Exception:
        pass
    return dt.timedelta(seconds=DEFAULT_TIMEOUT_S)


class Comm:
    """Point-to-point operations on one process group, with bounded waits."""

    def __init__(self, group: Any = None, device: torch.device | None = None) -> None:
        if not dist.is_initialized():
            raise RuntimeError("torch.distributed is not initialised")
        self.group = group
        self.rank = dist.get_rank(group)
        self.size = dist.get_world_size(group)
        self.timeout = group_timeout(group, device)
        self._global = [r if group is None else dist.get_global_rank(group, r)
                        for r in range(self.size)]

    def isend(self, tensor: torch.Tensor, peer: int, tag: int = 0) -> Any | None:
        """Start sending ``tensor`` to group rank ``peer``; None for an empty tensor."""
        if tensor.numel() == 0:
            return None
        return dist.isend(tensor, self._global[peer], tag=tag)

    def irecv(self, tensor: torch.Tensor, peer: int, tag: int = 0) -> Any | None:
        """Start receiving into ``tensor`` from group rank ``peer``; None when empty."""
        if tensor.numel() == 0:
            return None
        return dist.irecv(tensor, self._global[peer], tag=tag)

    def wait(self, work: Any | None) -> None:
        """Wait for one operation, at most the group timeout (raises on timeout)."""
        if work is None:
            return
        if not work.wait(self.timeout):
            raise RuntimeError(f"rank {self.rank}: point-to-point operation did not complete "
                               f"within {self.timeout.total_seconds():g} s")

    def wait_all(self, works: Sequence[Any | None]) -> None:
        for work in works:
            self.wait(work)

    def sendrecv(self, send: torch.Tensor, dst: int, recv: torch.Tensor, src: int,
                 tag: int = 0) -> None:
        """Send ``send`` to ``dst`` while receiving ``recv`` from ``src``; wait for both."""
        works = [self.irecv(recv, src, tag), self.isend(send, dst, tag)]
        self.wait_all(works)

    def send(self, tensor: torch.Tensor, peer: int, tag: int = 0) -> None:
        self.wait(self.isend(tensor, peer, tag))

    def recv(self, tensor: torch.Tensor, peer: int, tag: int = 0) -> None:
        self.wait(self.irecv(tensor, peer, tag))


class SendQueue:
    """Outstanding sends, waited in FIFO order once more than ``limit`` are in flight.

    A send's buffer must not be modified until it completes; the pipelined algorithms
    only overwrite a chunk after data that causally depends on that chunk's send arrived,
    so bounding the queue only limits memory of pending requests."""

    def __init__(self, comm: Comm, limit: int = 16) -> None:
        self.comm = comm
        self.limit = limit
        self._works: deque[Any] = deque()

    def add(self, work: Any | None) -> None:
        if work is None:
            return
        self._works.append(work)
        while len(self._works) > self.limit:
            self.comm.wait(self._works.popleft())

    def drain(self) -> None:
        while self._works:
            self.comm.wait(self._works.popleft())


def flat(tensor: torch.Tensor) -> torch.Tensor:
    """The tensor as a 1-D view (it must be contiguous: results are written in place)."""
    if not tensor.is_contiguous():
        raise ValueError("collective algorithms work in place and need a contiguous tensor")
    return tensor.view(-1)


def add_into(acc: torch.Tensor, other: torch.Tensor) -> None:
    """``acc += other`` in ``acc``'s dtype (the reduction of every algorithm)."""
    acc.add_(other)


def fold_rank(rank: int, size: int) -> tuple[int, int, int]:
    """Thakur et al. (2005, Sec. 4.4) folding of a non-power-of-two group.

    With ``P' = 2**floor(log2 P)`` and ``r = P - P'``, the first ``2r`` ranks pair up: each
    even rank sends its vector to the odd rank above it and sits out; the odd ones and the
    ranks from ``2r`` on form the power-of-two group. Returns ``(new_rank, P', r)`` with
    ``new_rank = -1`` for a rank that sits out.
    """
    pof2 = 1 << (size.bit_length() - 1)
    rem = size - pof2
    if rank < 2 * rem:
        return (-1 if rank % 2 == 0 else rank // 2), pof2, rem
    return rank - rem, pof2, rem


def unfold_rank(new_rank: int, rem: int) -> int:
    """Inverse of :func:`fold_rank` for a rank of the power-of-two group."""
    return new_rank * 2 + 1 if new_rank < rem else new_rank + rem
