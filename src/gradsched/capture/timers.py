"""The two timers of the measuring layer, run on every rank of an initialised process group:
one for a collective call (:func:`time_calls`) and one for a point-to-point round trip
(:func:`round_trip`). ``gradsched capture comm`` (:mod:`gradsched.capture.sweep_rank`),
``gradsched bench collectives`` (:mod:`gradsched.collectives.bench`) and the emulated
cluster's link check (:func:`gradsched.runtime.tasks.p2p_link_times`) time with them.

:func:`time_calls`, per point (nccl-tests' warm-up-then-time loop, with the iteration count
adapted to a time budget as OSU's and nccl-tests' ``-N``/``-n`` are set by hand):

1. one barrier, then the first call, timed and its result checked (``check``): the slowest
   rank's time is the first estimate of a call's time;
2. up to ``warmup - 1`` more warm-up calls, as many as fit in a quarter of the time budget
   by that estimate (each after a barrier, or none: see 4); the slowest rank's time of the
   last one is the estimate then;
3. ``iters = clamp(budget_s // estimate, min_iters, max_iters)``, the same on every rank
   (the estimate is the slowest rank's);
4. ``iters`` timed calls, each after a barrier (``barrier_each``); a round trip aligns its
   two ranks by itself, so without ``barrier_each`` one barrier precedes the timed calls.

Each rank returns its own times; :func:`slowest_per_call` gives, per call, the slowest
rank's (what nccl-tests reports).

:func:`round_trip` is OSU's ``osu_latency`` step (``c/mpi/pt2pt/osu_latency.c``): the
origin sends the message and waits for the answer, the peer receives it and answers (with
the message itself: a ping-pong; or with a short acknowledgement). Its wall time on the
origin is one round trip.

Imports torch when it runs.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gradsched.errors import ConfigError

MIN_ESTIMATE_S = 1e-9
"""The smallest call time the counts divide by (a clock that read 0)."""
WARMUP_BUDGET_SHARE = 0.25
"""The share of the time budget the warm-up calls after the first may take."""


@dataclass(frozen=True)
class CallCounts:
    """How many calls one point gets: ``warmup`` warm-up calls in all (the first checked;
    fewer when they would take more than a quarter of ``budget_s``), then between
    ``min_iters`` and ``max_iters`` timed calls, as many as take about ``budget_s``
    (``max_iters`` wins over ``min_iters``)."""

    warmup: int
    min_iters: int
    max_iters: int
    budget_s: float

    def __post_init__(self) -> None:
        if min(self.warmup, self.min_iters, self.max_iters) < 1:
            raise ConfigError("warmup, min_iters and max_iters must be >= 1 (the first "
                              "warm-up call is checked and sets the counts)")
        if not self.budget_s > 0:
            raise ConfigError(f"the time budget of a point must be > 0 s, got {self.budget_s}")


@dataclass(frozen=True)
class TimedCalls:
    """One point on one rank: the timed calls' wall times (seconds) and the warm-up calls
    made before them."""

    times_s: list[float]
    warmup: int


def agree_max(device: Any) -> Callable[[float], float]:
    """``value -> the maximum of value over the ranks`` (one all-reduce on ``device``)."""
    import torch
    import torch.distributed as dist

    def agree(value: float) -> float:
        t = torch.tensor([value], dtype=torch.float64, device=device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return float(t.item())

    return agree


def time_calls(op: Callable[[], Any], counts: CallCounts, agree: Callable[[float], float],
               check: Callable[[], None] | None = None,
               barrier_each: bool = True) -> TimedCalls:
    """Time ``op`` (one synchronised call) on this rank (module docstring, steps 1-4).
    ``check`` runs after the first call (it may raise and may reset the buffers)."""
    import torch.distributed as dist

    def timed() -> float:
        if barrier_each:
            dist.barrier()
        t0 = time.perf_counter()
        op()
        return time.perf_counter() - t0

    if not barrier_each:
        dist.barrier()
    first = timed()
    if check is not None:
        check()
    estimate = agree(first)
    budget = counts.budget_s
    extra = max(min(counts.warmup - 1,
                    int(WARMUP_BUDGET_SHARE * budget / max(estimate, MIN_ESTIMATE_S))), 0)
    last = first
    for _ in range(extra):
        last = timed()
    if extra > 0:
        estimate = agree(last)
    iters = int(min(counts.max_iters,
                    max(counts.min_iters, budget // max(estimate, MIN_ESTIMATE_S))))
    if not barrier_each:
        dist.barrier()
    return TimedCalls([timed() for _ in range(iters)], 1 + extra)


def slowest_per_call(times_s: list[float], device: Any = "cpu") -> list[float]:
    """Per timed call, the slowest rank's time (every rank made the same calls)."""
    import torch
    import torch.distributed as dist

    per_call = torch.tensor(times_s, dtype=torch.float64, device=device)
    dist.all_reduce(per_call, op=dist.ReduceOp.MAX)
    return per_call.tolist()


def round_trip(rank: int, origin: int, peer: int, message: Any, answer: Any) -> float:
    """One round trip between ``origin`` and ``peer`` (module docstring): ``origin`` sends
    ``message`` and receives ``answer``; ``peer`` receives ``message`` and sends ``answer``
    (the same tensor: a ping-pong). This rank's wall time (seconds); 0 on another rank."""
    import torch.distributed as dist

    t0 = time.perf_counter()
    if rank == origin:
        dist.send(message, dst=peer)
        dist.recv(answer, src=peer)
    elif rank == peer:
        dist.recv(message, src=origin)
        dist.send(answer, dst=origin)
    else:
        return 0.0
    return time.perf_counter() - t0


__all__ = ["CallCounts", "TimedCalls", "agree_max", "round_trip", "slowest_per_call",
           "time_calls"]
