"""The compressor interface, per-bucket state, and the counted communication layer.

A compressor works on one *bucket*: the flat fp32 gradient buffer of some parameters (as
the plan executor's buckets, :mod:`gradsched.runtime.executor`) and the matching flat
parameter values. One call per bucket and step,

    averaged = compressor.compress_and_reduce(flat_grad, flat_param, state, comm, step)

takes this rank's *raw* local gradient (not pre-divided) and returns the averaged gradient
(sum over ranks / P, dense layout) that every rank applies. ``state`` holds what the
compressor keeps between steps (residuals, momentum; :class:`BucketState`); ``comm`` is a
:class:`Comm` (or a process group, or ``None`` = the default group) through which every
collective goes, so that the elements actually passed to collectives are *counted*, not
inferred. ``bytes_sent(numel, world_size)`` is the formula of that count (bytes per rank and
step, the sum of the input sizes of the collectives this rank calls); ``messages(numel,
world_size)`` is the list of collectives in the cost model's convention (``nbytes`` as a
comm trace's ``bytes`` column, nccl-tests' "size": the *output* size for an all-gather), which
is what :mod:`gradsched.compression.pricing` prices.

Residual accumulation and momentum correction are the local part of Deep Gradient
Compression (Lin, Han, Mao, Wang & Dally, "Deep Gradient Compression: Reducing the
Communication Bandwidth for Distributed Training", ICLR 2018): with momentum ``m``

    u <- m u + g;   v <- v + u;   select a mask from v;   send v[mask];
    v[mask] <- 0;   u[mask] <- 0       (momentum factor masking)

and with ``m = 0`` this is plain residual accumulation (v <- v + g). The optimizer then
runs *without* momentum (it is already in ``u``). Every rank's mass is conserved exactly
(up to fp32 rounding): sum over steps of what it sent plus its residual ``v`` equals the
sum of its ``u`` (= of its raw gradients when ``m = 0``).

Seconds and bytes everywhere.
"""

from __future__ import annotations

import math
import random
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch
import torch.distributed as dist

from gradsched.errors import ConfigError

DENSITIES = (1 / 16, 1 / 64, 1 / 256)


@dataclass(frozen=True)
class Message:
    """One collective of a compressed bucket, in the cost model's size convention."""

    collective: str  # all_reduce | all_gather | broadcast
    nbytes: int  # as a comm trace's ``bytes`` (all_gather: output size = P x input)


class Comm(ABC):
    """Collectives used by compressors; every call counts the bytes it is *given*.

    ``sent_bytes[collective]`` accumulates ``numel x element_size`` of the input tensor of
    every call (per rank); ``received_bytes[collective]`` the size of the result a rank
    gets back (all-gather: P x the input; all-reduce, broadcast, exchange: the input's
    size). :meth:`reset` clears both (the trainer calls it every step).
    """

    def __init__(self, world_size: int, rank: int) -> None:
        self.world_size = world_size
        self.rank = rank
        self.sent_bytes: dict[str, int] = {}
        self.received_bytes: dict[str, int] = {}
        self.calls: dict[str, int] = {}

    def _count(self, collective: str, tensor: torch.Tensor,
               result: torch.Tensor | None = None) -> None:
        nbytes = tensor.numel() * tensor.element_size()
        got = nbytes if result is None else result.numel() * result.element_size()
        self.sent_bytes[collective] = self.sent_bytes.get(collective, 0) + nbytes
        self.received_bytes[collective] = self.received_bytes.get(collective, 0) + got
        self.calls[collective] = self.calls.get(collective, 0) + 1

    def reset(self) -> None:
        self.sent_bytes = {}
        self.received_bytes = {}
        self.calls = {}

    def holds_root(self, root: int) -> bool:
        """Whether this process computes what rank ``root`` computes (its own rank; with
        :class:`LocalComm` always, since every simulated rank holds the same data)."""
        return self.rank == root

    @property
    def total_sent_bytes(self) -> int:
        return sum(self.sent_bytes.values())

    @property
    def total_received_bytes(self) -> int:
        return sum(self.received_bytes.values())

    def all_reduce(self, tensor: torch.Tensor) -> None:
        """Sum ``tensor`` over ranks, in place."""
        self._count("all_reduce", tensor)
        self._all_reduce(tensor)

    def all_gather(self, tensor: torch.Tensor) -> torch.Tensor:
        """Concatenation of every rank's ``tensor`` (same size on every rank), rank order."""
        out = self._all_gather(tensor)
        self._count("all_gather", tensor, out)
        return out

    def broadcast(self, tensor: torch.Tensor, src: int) -> None:
        """Overwrite ``tensor`` with rank ``src``'s, in place."""
        self._count("broadcast", tensor)
        self._broadcast(tensor, src)

    def exchange(self, tensor: torch.Tensor, peer: int) -> torch.Tensor:
        """Send ``tensor`` to rank ``peer`` and receive its tensor of the same size
        (a pairwise exchange; counted as collective ``sendrecv``)."""
        out = self._exchange(tensor, peer)
        self._count("sendrecv", tensor, out)
        return out

    @abstractmethod
    def _all_reduce(self, tensor: torch.Tensor) -> None: ...

    @abstractmethod
    def _exchange(self, tensor: torch.Tensor, peer: int) -> torch.Tensor: ...

    @abstractmethod
    def _all_gather(self, tensor: torch.Tensor) -> torch.Tensor: ...

    @abstractmethod
    def _broadcast(self, tensor: torch.Tensor, src: int) -> None: ...


class DistComm(Comm):
    """The real thing: ``torch.distributed`` collectives on ``group`` (gloo or NCCL)."""

    def __init__(self, group: Any = None) -> None:
        if not dist.is_available() or not dist.is_initialized():
            raise ConfigError("torch.distributed is not initialised")
        super().__init__(dist.get_world_size(group), dist.get_rank(group))
        self.group = group

    def _all_reduce(self, tensor: torch.Tensor) -> None:
        dist.all_reduce(tensor, group=self.group)

    def _all_gather(self, tensor: torch.Tensor) -> torch.Tensor:
        parts = [torch.empty_like(tensor) for _ in range(self.world_size)]
        dist.all_gather(parts, tensor, group=self.group)
        return torch.cat(parts)

    def _broadcast(self, tensor: torch.Tensor, src: int) -> None:
        # ``src`` is a rank of ``group``; torch wants the global rank.
        g_src = dist.get_global_rank(self.group, src) if self.group is not None else src
        dist.broadcast(tensor, src=g_src, group=self.group)

    def _exchange(self, tensor: torch.Tensor, peer: int) -> torch.Tensor:
        g_peer = dist.get_global_rank(self.group, peer) if self.group is not None else peer
        out = torch.empty_like(tensor)
        ops = [dist.P2POp(dist.isend, tensor, g_peer, self.group),
               dist.P2POp(dist.irecv, out, g_peer, self.group)]
        for work in dist.batch_isend_irecv(ops):
            work.wait()
        return out


class LocalComm(Comm):
    """A stand-in for ``world_size`` ranks that all hold this rank's data, in one process.

    Used to time a compressor's own computation (``gradsched compress profile``): the
    collectives do no arithmetic (all-reduce and broadcast leave the tensor as it is;
    all-gather repeats the input ``world_size`` times, so the work after it has the size
    it has on ``world_size`` ranks). The results are not sums over ranks.
    """

    def __init__(self, world_size: int = 1, rank: int = 0) -> None:
        super().__init__(world_size, rank)

    def holds_root(self, root: int) -> bool:
        return True

    def _all_reduce(self, tensor: torch.Tensor) -> None:
        return None

    def _all_gather(self, tensor: torch.Tensor) -> torch.Tensor:
        return tensor.repeat(self.world_size)

    def _broadcast(self, tensor: torch.Tensor, src: int) -> None:
        return None

    def _exchange(self, tensor: torch.Tensor, peer: int) -> torch.Tensor:
        return tensor.clone()


def as_comm(comm: Comm | Any) -> Comm:
    """A :class:`Comm` from a Comm, a process group, or ``None`` (default group)."""
    return comm if isinstance(comm, Comm) else DistComm(comm)


@dataclass
class BucketState:
    """What a compressor keeps for one bucket between steps (this rank's, local).

    ``residual`` (v) and ``momentum`` (u) as in DGC; ``last_indices`` the selected indices
    (int64), ``last_root`` the root of the last step (importance-weighted pruning). With
    ``track=True`` (the exactness checks), ``last_sent`` is this rank's contribution of the
    last step in dense layout (before averaging; zero outside the selected indices); it
    costs a dense buffer per step, so training and profiling leave it off.
    """

    numel: int
    track: bool = False
    residual: torch.Tensor | None = None
    momentum: torch.Tensor | None = None
    last_sent: torch.Tensor | None = None
    last_indices: torch.Tensor | None = None
    last_root: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def density_k(numel: int, density: float) -> int:
    """Number of elements kept: ``ceil(density x numel)``, at least 1, at most numel."""
    if numel < 1:
        raise ConfigError("a bucket must have at least one element")
    return max(1, min(numel, math.ceil(density * numel - 1e-9)))


def parse_density(text: str | float) -> float:
    """``0.015625``, ``1/64`` or ``64x`` (compression ratio) -> density in (0, 1]."""
    if isinstance(text, int | float):
        value = float(text)
    else:
        s = str(text).strip()
        try:
            if s.endswith("x"):
                value = 1.0 / float(s[:-1])
            elif "/" in s:
                num, den = s.split("/", 1)
                value = float(num) / float(den)
            else:
                value = float(s)
        except (ValueError, ZeroDivisionError):
            raise ConfigError(f"density {text!r}: expected a number in (0, 1], 1/64 or 64x"
                              ) from None
    if not (0.0 < value <= 1.0) or not math.isfinite(value):
        raise ConfigError(f"density {text!r} must be in (0, 1]")
    return value


def step_root(seed: int, step: int, world_size: int) -> int:
    """The root rank of ``step``: every rank derives the same one from (seed, step)."""
    return random.Random(f"gradsched-root:{int(seed)}:{int(step)}").randrange(world_size)


class Compressor(ABC):
    """Turns one rank's flat bucket gradient into the averaged gradient (see module doc)."""

    name: ClassVar[str] = ""
    #: whether the optimizer must run without its own momentum (momentum correction)
    owns_momentum: bool = False

    def __init__(self, density: float = 1.0, momentum: float = 0.0, seed: int = 0) -> None:
        self.density = parse_density(density)
        if not (0.0 <= momentum < 1.0):
            raise ConfigError(f"momentum must be in [0, 1), got {momentum}")
        self.momentum = float(momentum)
        self.seed = int(seed)
        self.owns_momentum = self.momentum > 0

    def k(self, numel: int) -> int:
        """Elements selected per step in a bucket of ``numel`` elements."""
        return density_k(numel, self.density)

    def init_state(self, numel: int, like: torch.Tensor | None = None,
                   track: bool = False) -> BucketState:
        """Fresh (zero) state for a bucket of ``numel`` elements (``track``: record
        ``last_sent``, see :class:`BucketState`)."""
        dtype = like.dtype if like is not None else torch.float32
        device = like.device if like is not None else torch.device("cpu")
        state = BucketState(numel, track)
        state.residual = torch.zeros(numel, dtype=dtype, device=device)
        if self.momentum > 0:
            state.momentum = torch.zeros(numel, dtype=dtype, device=device)
        return state

    def spec(self) -> dict[str, Any]:
        """JSON description (method, density, momentum, seed)."""
        return {"method": self.name, "density": self.density, "momentum": self.momentum,
                "seed": self.seed}

    @abstractmethod
    def compress_and_reduce(self, flat_grad: torch.Tensor, flat_param: torch.Tensor,
                            state: BucketState, comm: Comm | Any, step: int) -> torch.Tensor:
        """This rank's raw gradient -> the averaged gradient (new tensor, dense layout)."""

    @abstractmethod
    def messages(self, numel: int, world_size: int, element_size: int = 4) -> list[Message]:
        """The collectives of one step, sizes in the cost model's convention."""

    @abstractmethod
    def bytes_sent(self, numel: int, world_size: int, element_size: int = 4) -> int:
        """Bytes this rank passes to collectives per step (sum of their input sizes)."""

    def bytes_received(self, numel: int, world_size: int, element_size: int = 4) -> int:
        """Bytes of collective results this rank gets back per step (all-gather: P x its
        input; the others: the input's size)."""
        total = 0
        for msg in self.messages(numel, world_size, element_size):
            total += msg.nbytes  # all_gather messages are already output-sized
        return total

    # ---------------------------------------------------------------- shared helpers
    def _accumulate(self, flat_grad: torch.Tensor, state: BucketState) -> torch.Tensor:
        """DGC's local accumulation: returns v (u <- m u + g; v <- v + u)."""
        if state.residual is None or state.residual.numel() != flat_grad.numel():
            raise ConfigError(f"{self.name}: state is for {state.numel} elements, the bucket "
                              f"has {flat_grad.numel()}")
        if state.momentum is not None:
            state.momentum.mul_(self.momentum).add_(flat_grad)
            state.residual.add_(state.momentum)
        else:
            state.residual.add_(flat_grad)
        return state.residual

    def _mask(self, state: BucketState, indices: torch.Tensor) -> torch.Tensor:
        """Take v[indices] out of the residual (and mask the momentum); return the values
        this rank sends and record its dense contribution."""
        assert state.residual is not None
        values = state.residual.index_select(0, indices)
        if state.track:
            sent = torch.zeros_like(state.residual)
            sent.index_copy_(0, indices, values)
            state.last_sent = sent
        state.residual.index_fill_(0, indices, 0.0)
        if state.momentum is not None:
            state.momentum.index_fill_(0, indices, 0.0)
        state.last_indices = indices
        return values
