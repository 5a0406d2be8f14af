"""Linear pipelining (LP): broadcast, reduce and all-reduce over a chain of ranks.

Wang et al., "Efficient communications in training large scale neural networks"
(2017, arXiv:1611.04255), after the pipelined chain broadcast of MPI libraries: the
ranks form a chain and the
vector is cut into chunks of ``b`` bytes that flow down the chain one after another, so
that every link carries a different chunk at the same time.

* broadcast from ``src``: the chain runs ``src, src+1, ...`` (mod P); rank ``j`` of the
  chain receives chunk ``c`` from ``j-1`` and forwards it to ``j+1``;
* reduce to ``dst``: the chain runs the other way and every rank adds its own chunk
  before forwarding the partial sum;
* all-reduce: a reduce towards the chain's end (rank ``P-1``) pipelined into a broadcast
  back towards rank 0; rank ``P-1`` turns chunk ``c`` round as soon as it has added it.
  A middle rank receives and sends two chunks per step.

With ``k = ceil(M/b)`` chunks and pipeline depth ``S`` (``P-1`` for broadcast/reduce,
``2(P-1)`` for all-reduce) the cost is ``T(b) = (S - 1 + k) (alpha + u b)``; the optimal
chunk ``b* = sqrt(M alpha / ((S-1) u))`` and ``T(b*)`` come from
:func:`gradsched.costmodel.formulas.optimal_chunk` / :func:`~gradsched.costmodel.formulas.cost`
(``u = beta`` for broadcast, ``beta + gamma`` for reduce, ``2 beta + gamma`` for
all-reduce). As ``M`` grows, ``T(b*)/M -> u``: the time per byte does not depend on
``P`` (Wang et al.'s claim of P-invariance).

Chunks: ``b`` is rounded down to whole elements (at least one); the last chunk is
shorter when ``M`` is not a multiple of ``b``; at most :data:`MAX_CHUNKS` chunks are
used (``b`` grows for larger vectors), which bounds the number of outstanding requests.
Every wait is bounded by the process group's timeout (:class:`~.common.Comm`).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from gradsched.collectives.common import Comm, SendQueue, add_into, flat
from gradsched.costmodel.formulas import optimal_chunk

MAX_CHUNKS = 1024
"""At most this many chunks per call (a larger vector gets larger chunks)."""

WINDOW = 8
"""Receives posted ahead of the chunk being processed."""


@dataclass(frozen=True)
class LinkParams:
    """Per-hop alpha (s), link beta (s/byte) and reduction gamma (s/byte) used to pick
    the optimal chunk when no chunk size is given."""

    alpha_s: float
    beta_s_per_byte: float
    gamma_s_per_byte: float = 0.0


DEFAULT_LINK = LinkParams(alpha_s=2.0e-4, beta_s_per_byte=5.0e-10, gamma_s_per_byte=2.5e-10)
"""Chunk-choice parameters when none are given: the order of magnitude of gloo on the
loopback of the (shared, 2-core) development machine: alpha ~ 0.2 ms per message under
load, ~2 GB/s per link, ~4 GB/s adds. Pass fitted values (``gradsched bench
collectives-fit``, ``--lp-link``) for another network; with ``--cluster RATE`` the
bench sets beta = 8 / RATE. The chosen chunk is recorded in the bench metadata."""


def optimal_chunk_bytes(collective: str, nbytes: float, world_size: int,
                        link: LinkParams = DEFAULT_LINK) -> float:
    """Wang et al.'s optimal chunk for LP ``collective`` (bytes), via costmodel.formulas."""
    return float(optimal_chunk(collective, "lp", np.asarray([float(nbytes)]), world_size,
                               link.alpha_s, link.beta_s_per_byte, link.gamma_s_per_byte)[0])


def chunk_elements(n: int, element_size: int, collective: str, world_size: int,
                   chunk_bytes: float | None = None, link: LinkParams = DEFAULT_LINK) -> int:
    """Elements per chunk for a vector of ``n`` elements (whole elements, >= 1, and at most
    :data:`MAX_CHUNKS` chunks)."""
    if n <= 0:
        return 1
    if chunk_bytes is None:
        chunk_bytes = optimal_chunk_bytes(collective, n * element_size, world_size, link)
    elems = max(1, int(chunk_bytes // element_size))
    elems = max(elems, -(-n // MAX_CHUNKS))
    return min(elems, n)


def _chunks(n: int, elems: int) -> list[tuple[int, int]]:
    return [(s, min(s + elems, n)) for s in range(0, n, elems)]


class _Receiver:
    """Receives posted ``WINDOW`` chunks ahead, into ``target(c)`` views."""

    def __init__(self, comm: Comm, peer: int, chunks: list[tuple[int, int]],
                 target: Any) -> None:
        self.comm, self.peer, self.chunks, self.target = comm, peer, chunks, target
        self.pending: deque[Any] = deque()
        self.next_post = 0
        for _ in range(min(WINDOW, len(chunks))):
            self._post()

    def _post(self) -> None:
        c = self.next_post
        self.pending.append(self.comm.irecv(self.target(c), self.peer, tag=c))
        self.next_post += 1

    def wait(self) -> None:
        """Wait for the oldest posted chunk."""
        self.comm.wait(self.pending.popleft())

    def refill(self) -> None:
        """Post the next chunk's receive (after the oldest one's buffer is free again)."""
        if self.next_post < len(self.chunks):
            self._post()

    def wait_next(self) -> None:
        """Wait for the oldest posted chunk; post one more."""
        self.wait()
        self.refill()


def _chain(comm: Comm, root: int) -> tuple[int, int | None, int | None]:
    """(position in the chain from root, previous rank, next rank)."""
    p = comm.size
    pos = (comm.rank - root) % p
    prev = (comm.rank - 1) % p if pos > 0 else None
    nxt = (comm.rank + 1) % p if pos < p - 1 else None
    return pos, prev, nxt


def broadcast(tensor: torch.Tensor, src: int = 0, group: Any = None,
              chunk_bytes: float | None = None, link: LinkParams = DEFAULT_LINK) -> None:
    """LP broadcast from group rank ``src``, in place, chunks of ``chunk_bytes`` (None:
    the optimal chunk for ``link``)."""
    comm = Comm(group, tensor.device)
    x = flat(tensor)
    if comm.size == 1 or x.numel() == 0:
        return
    chunks = _chunks(x.numel(), chunk_elements(x.numel(), x.element_size(), "broadcast",
                                               comm.size, chunk_bytes, link))
    _, prev, nxt = _chain(comm, src)
    sends = SendQueue(comm)
    recv = None if prev is None else _Receiver(comm, prev, chunks,
                                                lambda c: x[chunks[c][0]:chunks[c][1]])
    for c, (a, b) in enumerate(chunks):
        if recv is not None:
            recv.wait_next()
        if nxt is not None:
            sends.add(comm.isend(x[a:b], nxt, tag=c))
    sends.drain()


def reduce(tensor: torch.Tensor, dst: int = 0, group: Any = None,
           chunk_bytes: float | None = None, link: LinkParams = DEFAULT_LINK) -> None:
    """LP reduce (sum) to group rank ``dst``, in place (other ranks keep partial sums)."""
    comm = Comm(group, tensor.device)
    x = flat(tensor)
    if comm.size == 1 or x.numel() == 0:
        return
    elems = chunk_elements(x.numel(), x.element_size(), "reduce", comm.size, chunk_bytes, link)
    chunks = _chunks(x.numel(), elems)
    # The reduce chain runs dst+1, dst+2, ..., dst (mod P): position pos = (dst - rank) % P
    # counts hops to dst; the next rank towards dst is rank+1.
    p = comm.size
    pos = (dst - comm.rank) % p
    nxt = (comm.rank + 1) % p if pos > 0 else None
    prev = (comm.rank - 1) % p if pos < p - 1 else None
    _reduce_stream(comm, x, chunks, elems, prev, nxt)


def _reduce_stream(comm: Comm, x: torch.Tensor, chunks: list[tuple[int, int]], elems: int,
                   prev: int | None, nxt: int | None) -> None:
    sends = SendQueue(comm)
    slots = torch.empty((min(WINDOW, len(chunks)), elems), dtype=x.dtype, device=x.device)

    def slot(c: int) -> torch.Tensor:
        a, b = chunks[c]
        return slots[c % WINDOW, : b - a]

    recv = None if prev is None else _Receiver(comm, prev, chunks, slot)
    for c, (a, b) in enumerate(chunks):
        if recv is not None:
            recv.wait()
            add_into(x[a:b], slot(c))
            recv.refill()  # the slot of chunk c is free again
        if nxt is not None:
            sends.add(comm.isend(x[a:b], nxt, tag=c))
    sends.drain()


def all_reduce(tensor: torch.Tensor, group: Any = None, chunk_bytes: float | None = None,
               link: LinkParams = DEFAULT_LINK) -> None:
    """LP all-reduce (sum), in place: a pipelined reduce along 0 -> P-1 turned round at
    rank P-1 into a pipelined broadcast back along P-1 -> 0 (Wang et al.)."""
    comm = Comm(group, tensor.device)
    x = flat(tensor)
    p, i = comm.size, comm.rank
    if p == 1 or x.numel() == 0:
        return
    elems = chunk_elements(x.numel(), x.element_size(), "all_reduce", p, chunk_bytes, link)
    chunks = _chunks(x.numel(), elems)
    k = len(chunks)
    left = i - 1 if i > 0 else None
    right = i + 1 if i < p - 1 else None
    sends = SendQueue(comm, limit=2 * WINDOW)
    slots = torch.empty((min(WINDOW, k), elems), dtype=x.dtype, device=x.device)

    def slot(c: int) -> torch.Tensor:
        a, b = chunks[c]
        return slots[c % WINDOW, : b - a]

    red = None if left is None else _Receiver(comm, left, chunks, slot)
    # The reduced chunk c comes back from the right 2(P-1-i) steps after it left.
    bc = None if right is None else _Receiver(comm, right, chunks,
                                              lambda c: x[chunks[c][0]:chunks[c][1]])
    lag = 2 * (p - 1 - i)
    for t in range(k + lag):
        if t < k:
            a, b = chunks[t]
            if red is not None:
                red.wait()
                add_into(x[a:b], slot(t))
                red.refill()
            if right is not None:
                sends.add(comm.isend(x[a:b], right, tag=t))  # partial sum onwards
            elif left is not None:
                sends.add(comm.isend(x[a:b], left, tag=t))  # chain end: turn round
        c = t - lag
        if bc is not None and 0 <= c < k:
            bc.wait_next()
            if left is not None:
                a, b = chunks[c]
                sends.add(comm.isend(x[a:b], left, tag=c))
    sends.drain()
