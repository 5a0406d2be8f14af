"""Parameter-server execution of a plan: buckets with ``algorithm: ps``.

A reconstruction of BytePS-style synchronous push/pull (Jiang et al., "A Unified
Architecture for Accelerating Distributed DNN Training in Heterogeneous GPU/CPU
Clusters", OSDI 2020; ByteScheduler's PS mode, Peng et al., SOSP 2019), not their code:

* **Ranks.** ``world = P + S``: global ranks ``0 .. P-1`` are workers, ``P .. P+S-1``
  servers (extra processes; on the emulated cluster each in its own namespace). Workers
  run the :class:`~gradsched.runtime.executor.PlanExecutor` on the workers' subgroup (so
  gradients are pre-divided by ``P``), servers run :func:`serve`.
* **Partitions.** Each chunk of each bucket is one partition (BytePS splits tensors into
  partitions of ``BYTEPS_PARTITION_BYTES`` and each partition key lives on one server).
  Partitions are taken in the executor's issue order (:func:`gradsched.plan.launch_order`:
  plan order, or ByteScheduler's priority order when the plan has priorities), and the
  ``i``-th partition of an iteration lives on server ``i mod S``. BytePS picks the server
  by a hash of the key (byteps/common/global.cc); round-robin gives the even load that
  hash aims for, deterministically.
* **Push / pull.** A worker pushes a partition as soon as the executor issues it
  (``dist.isend`` of a copy to its server, tag = the partition's index in the iteration)
  and posts the pull (``dist.irecv`` into the bucket buffer, same tag). The server takes
  the partitions of an iteration in that same order: receives the partition from every
  worker, sums them in worker-rank order (the sum of pre-divided gradients is the
  average) and sends the result back to every worker. Workers then apply the update as
  the executor does (global or per-layer).
* **Timeouts.** Every wait is bounded by the executor's / :func:`serve`'s timeout: a dead
  worker or server ends each rank with an error, and the launcher
  (:mod:`gradsched.distributed.launch`) stops the others.

The sequence of partitions (sizes and servers) is computed the same way on workers and
servers from the plan and the model's parameter sizes (:func:`partition_schedule`), so no
header message is exchanged.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import torch
import torch.distributed as dist

from gradsched.errors import ConfigError
from gradsched.plan import Plan, launch_order


@dataclass(frozen=True)
class Partition:
    """One pushed/pulled partition: bucket ``bucket``, chunk ``chunk``, on ``server``."""

    bucket: int
    chunk: int
    numel: int
    server: int


@dataclass(frozen=True)
class PSLayout:
    """``workers`` worker ranks followed by ``servers`` server ranks."""

    workers: int
    servers: int

    def __post_init__(self) -> None:
        if self.workers < 1 or self.servers < 1:
            raise ConfigError(f"a parameter-server run needs >= 1 worker and >= 1 server, "
                              f"got {self.workers} workers and {self.servers} servers")

    @property
    def world(self) -> int:
        return self.workers + self.servers

    def server_rank(self, server: int) -> int:
        return self.workers + server

    def is_server(self, rank: int) -> bool:
        return rank >= self.workers


def partition_schedule(plan: Plan, numel: Mapping[str, int], servers: int,
                       find_unused: bool = False) -> list[Partition]:
    """The partitions of one iteration in issue order, with their sizes (elements, as
    the executor lays out a chunk: ``ceil(payload / chunks)``, the payload including one
    used-flag per member with ``find_unused``) and their servers (round-robin)."""
    for k, b in enumerate(plan.buckets):
        if b.algorithm != "ps":
            raise ConfigError(f"plan '{plan.algorithm}': bucket {k} has algorithm "
                              f"{b.algorithm!r}; a parameter-server run needs every bucket "
                              "to be 'ps'")
        if b.collective != "all_reduce":
            raise ConfigError(f"plan '{plan.algorithm}': bucket {k} is {b.collective}; "
                              "parameter-server buckets are all_reduce (push + pull)")
    sizes = [sum(numel[n] for n in b.tensors) for b in plan.buckets]
    out = []
    for i, (k, c) in enumerate(launch_order(plan, sizes)):
        b = plan.buckets[k]
        payload = sizes[k] + (len(b.tensors) if find_unused else 0)
        out.append(Partition(k, c, math.ceil(payload / b.chunks), i % servers))
    return out


def _wait(work: Any, timeout: dt.timedelta, what: str) -> None:
    try:
        ok = work.wait(timeout=timeout)
    except RuntimeError as exc:
        raise RuntimeError(f"parameter server: {what} failed or timed out after "
                           f"{timeout.total_seconds():g} s: {exc}") from exc
    if ok is False:
        raise RuntimeError(f"parameter server: {what} did not complete within "
                           f"{timeout.total_seconds():g} s")


class _PushPull:
    """Work handle of one partition on a worker: the push and the pull."""

    def __init__(self, push: Any, pull: Any, sent: torch.Tensor, what: str) -> None:
        self._push, self._pull, self._sent, self._what = push, pull, sent, what

    def wait(self, timeout: dt.timedelta | None = None) -> bool:
        limit = timeout or dt.timedelta(seconds=300)
        _wait(self._push, limit, f"push of {self._what}")
        _wait(self._pull, limit, f"pull of {self._what}")
        self._sent = torch.empty(0)
        return True

    def is_completed(self) -> bool:
        return bool(self._push.is_completed() and self._pull.is_completed())


class PSClient:
    """The worker side, the executor's reducer for ``ps`` buckets: the ``i``-th submitted
    chunk of an iteration is partition ``i`` of the schedule."""

    def __init__(self, layout: PSLayout, schedule: list[Partition]) -> None:
        if not schedule:
            raise ConfigError("a parameter-server plan needs at least one partition")
        self.layout = layout
        self.schedule = schedule
        self._next = 0

    def submit(self, chunk: torch.Tensor) -> _PushPull:
        index = self._next
        part = self.schedule[index]
        self._next = (index + 1) % len(self.schedule)
        if chunk.numel() != part.numel:
            raise ConfigError(f"parameter server: partition {index} (bucket {part.bucket}, "
                              f"chunk {part.chunk}) has {chunk.numel()} elements, the "
                              f"schedule says {part.numel}")
        server = self.layout.server_rank(part.server)
        sent = chunk.detach().clone()
        push = dist.isend(sent, dst=server, tag=index)
        pull = dist.irecv(chunk, src=server, tag=index)
        return _PushPull(push, pull, sent, f"bucket {part.bucket} chunk {part.chunk}")

    def close(self) -> None:
        """Nothing to release (every handle is waited by the executor)."""


def serve(layout: PSLayout, schedule: list[Partition], iterations: int, timeout: dt.timedelta,
          dtype: torch.dtype = torch.float32, device: str = "cpu") -> int:
    """Server loop of this rank for ``iterations`` iterations; returns partitions served."""
    me = dist.get_rank() - layout.workers
    if not 0 <= me < layout.servers:
        raise ConfigError(f"rank {dist.get_rank()} is not a server rank")
    mine = [(i, p) for i, p in enumerate(schedule) if p.server == me]
    served = 0
    for it in range(iterations):
        sends: list[Any] = []
        keep: list[torch.Tensor] = []
        for index, part in mine:
            what = f"iteration {it}, bucket {part.bucket} chunk {part.chunk}"
            bufs = [torch.empty(part.numel, dtype=dtype, device=device)
                    for _ in range(layout.workers)]
            works = [dist.irecv(buf, src=w, tag=index) for w, buf in enumerate(bufs)]
            for w, work in enumerate(works):
                _wait(work, timeout, f"push from worker {w}, {what}")
            total = bufs[0]
            for buf in bufs[1:]:
                total.add_(buf)  # worker-rank order: the same sum on every run
            keep.append(total)
            sends.extend(dist.isend(total, dst=w, tag=index) for w in range(layout.workers))
            served += 1
        for work in sends:
            _wait(work, timeout, f"pull of iteration {it}")
    return served


def workers_group(layout: PSLayout, timeout: dt.timedelta) -> Any:
    """The workers' subgroup (every rank, servers included, must call this)."""
    if dist.get_world_size() != layout.world:
        raise ConfigError(f"parameter-server layout has {layout.world} ranks "
                          f"({layout.workers} workers + {layout.servers} servers), the "
                          f"process group {dist.get_world_size()}")
    return dist.new_group(list(range(layout.workers)), timeout=timeout)


def bench_server(layout: PSLayout, plan: Plan, numel: Mapping[str, int], warmup: int,
                 iters: int, timeout: dt.timedelta) -> int:
    """A server's side of one timed run of ``gradsched run`` (runtime/bench.py): serve the
    warm-up iterations, join the workers' barrier before the timed ones, serve those."""
    schedule = partition_schedule(plan, numel, layout.servers)
    served = serve(layout, schedule, warmup, timeout)
    dist.barrier()
    return served + serve(layout, schedule, iters, timeout)


def as_ps_plan(plan: Plan) -> Plan:
    """The same buckets (members, chunks, priorities, update) pushed and pulled through
    the servers: every bucket becomes ``all_reduce`` with ``algorithm: ps``. The PS
    planners (planners/wfbp_ps.py, bsp_ps.py, bytescheduler_ps.py) write buckets for the
    PS cost model (``all_reduce`` = push + pull, ``rs_ag`` = push now, pull later); on the
    executor both are a push and a pull."""
    buckets = tuple(replace(b, collective="all_reduce", algorithm="ps") for b in plan.buckets)
    return replace(plan, buckets=buckets, info={**plan.info, "executed_as": "ps"})
