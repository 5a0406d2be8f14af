"""Layout and per-iteration state of one plan bucket in the executor
(:mod:`gradsched.runtime.executor`): the flat buffer its gradients are copied into, each
member's view of it, the equal partitions its collectives reduce (ByteScheduler's chunks:
Peng et al., SOSP 2019; DeAR's reduce-scatter shards: Zhang, Shi et al., ICDCS 2023), all
made once at construction, and what arrived in the current iteration."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from gradsched.plan import Bucket


class BucketState:
    """Layout and per-iteration state of one plan bucket."""

    def __init__(self, index: int, spec: Bucket, params: list[nn.Parameter], names: list[str],
                 world: int, with_flags: bool) -> None:
        self.index = index
        self.spec = spec
        self.params = params
        self.names = names
        # a reduce_scatter bucket's shards are gathered back like rs_ag's: the executor
        # steps every parameter on every rank (no sharded optimizer), the same arithmetic
        self.decoupled = spec.collective in ("rs_ag", "reduce_scatter")
        self.numels = [p.numel() for p in params]
        self.offsets = [0]
        for n in self.numels[:-1]:
            self.offsets.append(self.offsets[-1] + n)
        self.numel = sum(self.numels)
        self.flag_offset = self.numel  # used flags (one per member) follow the gradients
        payload = self.numel + (len(params) if with_flags else 0)
        chunks = spec.chunks
        if self.decoupled:
            self.chunk_numel = math.ceil(payload / (chunks * world)) * world
        else:
            self.chunk_numel = math.ceil(payload / chunks)
        first = params[0]
        self.dtype = first.dtype
        self.device = first.device
        self.flat = torch.zeros(self.chunk_numel * chunks, dtype=self.dtype, device=self.device)
        self.views = [self.flat[o:o + n].view(p.shape)
                      for o, n, p in zip(self.offsets, self.numels, params, strict=True)]
        # the collectives' partitions of ``flat``, made once (not per launch)
        self.chunk_views = [self.flat[c * self.chunk_numel:(c + 1) * self.chunk_numel]
                            for c in range(chunks)]
        self.chunk_bytes = self.chunk_numel * self.flat.element_size()
        self.shards = (torch.zeros(chunks, self.chunk_numel // world, dtype=self.dtype,
                                   device=self.device) if self.decoupled else None)
        self.world = world
        self.with_flags = with_flags
        # per-iteration state
        self.seen = [False] * len(params)
        self.missing = len(params)
        self.complete = False
        self.works: list[Any] = []  # AR or RS works
        self.gather_works: list[Any] = []
        self.arrived = False  # every collective finished and the result is in ``flat``
        self.used = [True] * len(params)  # globally used members (read from the flags)
        # NCCL on a GPU: wait on the stream, not on the host (set by the executor).
        self.stream_wait = False

    def reset(self) -> None:
        seen = self.seen
        for m in range(len(seen)):
            seen[m] = False
        self.missing = len(seen)
        self.complete = False
        self.works.clear()
        self.gather_works.clear()
        self.arrived = False

    def read_flags(self) -> None:
        """After the reduction: which members some rank produced a gradient for (one
        device-to-host read per bucket)."""
        if self.with_flags:
            flags = self.flat[self.flag_offset:self.flag_offset + len(self.params)]
            self.used = (flags > 0).tolist()
