"""Hierarchical (two-level) all-reduce for the executor: buckets with ``algorithm: hierarchical``.

What it follows: Horovod's ``HOROVOD_HIERARCHICAL_ALLREDUCE``,
``NCCLHierarchicalAllreduce::Execute`` in horovod/common/ops/nccl_operations.cc (horovod/horovod,
commit 0246ec05): ``ncclReduceScatter`` inside the node (over the node's local ranks), an
``MPI_Allreduce`` of each rank's shard across nodes (one cross-node communicator per local
rank index), then ``ncclAllGather`` inside the node. Horovod pads the fused buffer so that
it divides by the local size; here the bucket chunk is zero-padded to a multiple of the
ranks per node (the padding is reduced and discarded). The cost model of the same
algorithm is :class:`gradsched.costmodel.topology.HierarchicalModel`.

Differences from Horovod (a reconstruction, not its code): the three steps are
``torch.distributed`` collectives of whatever backend the default group uses (gloo on the
emulated cluster, NCCL on GPUs) on process subgroups, not NCCL + MPI; the reductions run
on one background thread per executor (Horovod's background thread), in the order the
executor issues them, which is the same on every rank.

Node membership: ``P`` ranks, ``R`` ranks per node, node ``n`` holds global ranks
``n*R .. n*R+R-1`` (torchrun's and the emulated cluster's numbering). ``R`` comes from the
executor's ``ranks_per_node`` argument, else the ``LOCAL_WORLD_SIZE`` environment variable
(set by torchrun). Every subgroup is created once, by every rank in the same order (as
``dist.new_group`` requires), with the executor's timeout; every wait is bounded by it, so
a dead peer ends the run with an error instead of a hang.
"""

from __future__ import annotations

import datetime as dt
import math
import os
import queue
import threading
from dataclasses import dataclass, replace
from typing import Any

import torch
import torch.distributed as dist

from gradsched.errors import ConfigError

_reduce_scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
_all_gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor


@dataclass(frozen=True)
class NodeLayout:
    """``world`` ranks in nodes of ``ranks_per_node`` consecutive ranks."""

    world: int
    ranks_per_node: int

    def __post_init__(self) -> None:
        if self.ranks_per_node < 1 or self.world < 1:
            raise ConfigError(f"ranks per node ({self.ranks_per_node}) and world size "
                              f"({self.world}) must be >= 1")
        if self.world % self.ranks_per_node:
            raise ConfigError(f"world size {self.world} is not a multiple of the ranks per "
                              f"node ({self.ranks_per_node})")

    @property
    def nodes(self) -> int:
        return self.world // self.ranks_per_node

    def node_ranks(self, node: int) -> list[int]:
        """Global ranks of node ``node`` (its intra-node group)."""
        return list(range(node * self.ranks_per_node, (node + 1) * self.ranks_per_node))

    def cross_ranks(self, local: int) -> list[int]:
        """Global ranks with local index ``local`` on every node (one inter-node group)."""
        return [n * self.ranks_per_node + local for n in range(self.nodes)]


def resolve_ranks_per_node(world: int, ranks_per_node: int | None) -> NodeLayout:
    """The node layout from the argument, else ``LOCAL_WORLD_SIZE`` (torchrun)."""
    if ranks_per_node is None:
        raw = os.environ.get("LOCAL_WORLD_SIZE")
        if raw is None:
            raise ConfigError("a hierarchical bucket needs the ranks per node: pass "
                              "ranks_per_node (gradsched run --ranks-per-node) or set "
                              "LOCAL_WORLD_SIZE")
        try:
            ranks_per_node = int(raw)
        except ValueError:
            raise ConfigError(f"LOCAL_WORLD_SIZE={raw!r} is not an integer") from None
    return NodeLayout(world, ranks_per_node)


@dataclass
class NodeGroups:
    """This rank's intra-node and inter-node process subgroups."""

    layout: NodeLayout
    intra: Any
    inter: Any
    intra_size: int
    inter_size: int

    @classmethod
    def create(cls, layout: NodeLayout, timeout: dt.timedelta) -> NodeGroups:
        """Create every subgroup (all ranks call this, same order) and keep this rank's."""
        rank = dist.get_rank()
        if dist.get_world_size() != layout.world:
            raise ConfigError(f"hierarchical all-reduce: the default group has "
                              f"{dist.get_world_size()} ranks, the layout {layout.world}")
        intra = inter = None
        for node in range(layout.nodes):
            ranks = layout.node_ranks(node)
            group = dist.new_group(ranks, timeout=timeout)
            if rank in ranks:
                intra = group
        for local in range(layout.ranks_per_node):
            ranks = layout.cross_ranks(local)
            group = dist.new_group(ranks, timeout=timeout)
            if rank in ranks:
                inter = group
        return cls(layout, intra, inter, layout.ranks_per_node, layout.nodes)


def _wait(work: Any, timeout: dt.timedelta, what: str) -> None:
    try:
        ok = work.wait(timeout=timeout)
    except RuntimeError as exc:
        raise RuntimeError(f"hierarchical all-reduce: {what} failed or timed out after "
                           f"{timeout.total_seconds():g} s: {exc}") from exc
    if ok is False:
        raise RuntimeError(f"hierarchical all-reduce: {what} did not complete within "
                           f"{timeout.total_seconds():g} s")


def hierarchical_allreduce(tensor: torch.Tensor, groups: NodeGroups,
                           timeout: dt.timedelta) -> None:
    """Sum ``tensor`` (1-D, contiguous) over every rank in place: reduce-scatter inside the
    node, all-reduce of the shard across nodes, all-gather inside the node."""
    r = groups.intra_size
    numel = tensor.numel()
    padded = math.ceil(numel / r) * r
    buf = tensor
    if padded != numel:
        buf = torch.zeros(padded, dtype=tensor.dtype, device=tensor.device)
        buf[:numel].copy_(tensor)
    shard = torch.empty(padded // r, dtype=tensor.dtype, device=tensor.device)
    if r > 1:
        _wait(_reduce_scatter(shard, buf, group=groups.intra, async_op=True), timeout,
              "intra-node reduce-scatter")
    else:
        shard.copy_(buf)
    if groups.inter_size > 1:
        _wait(dist.all_reduce(shard, group=groups.inter, async_op=True), timeout,
              "inter-node all-reduce")
    if r > 1:
        _wait(_all_gather(buf, shard, group=groups.intra, async_op=True), timeout,
              "intra-node all-gather")
    else:
        buf.copy_(shard)
    if buf is not tensor:
        tensor.copy_(buf[:numel])


class _Pending:
    """The work handle of a reduction queued on the background thread."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.error: BaseException | None = None

    def wait(self, timeout: dt.timedelta | None = None) -> bool:
        seconds = None if timeout is None else timeout.total_seconds()
        if not self.done.wait(seconds):
            return False
        if self.error is not None:
            raise RuntimeError(str(self.error)) from self.error
        return True

    def is_completed(self) -> bool:
        return self.done.is_set()


class BackgroundReducer:
    """Runs ``fn(tensor)`` for each submitted tensor, in submission order, on one daemon
    thread (Horovod's background thread): the caller's backward continues meanwhile. A
    daemon thread never keeps a failed rank alive at exit."""

    def __init__(self, fn: Any, name: str) -> None:
        self._fn = fn
        self._queue: queue.SimpleQueue[tuple[torch.Tensor, _Pending] | None] = (
            queue.SimpleQueue())
        self._failed: BaseException | None = None
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def submit(self, tensor: torch.Tensor) -> _Pending:
        pending = _Pending()
        self._queue.put((tensor, pending))
        return pending

    def _loop(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            tensor, pending = item
            if self._failed is not None:  # a failed step leaves the groups unusable
                pending.error = self._failed
            else:
                try:
                    self._fn(tensor)
                except BaseException as exc:  # handed to the waiter
                    self._failed = exc
                    pending.error = exc
            pending.done.set()

    def close(self) -> None:
        self._queue.put(None)


class HierarchicalReducer(BackgroundReducer):
    """The executor's reducer for ``algorithm: hierarchical`` buckets."""

    def __init__(self, world: int, ranks_per_node: int | None, timeout: dt.timedelta) -> None:
        self.layout = resolve_ranks_per_node(world, ranks_per_node)
        self.groups = NodeGroups.create(self.layout, timeout)
        self.timeout = timeout
        super().__init__(lambda t: hierarchical_allreduce(t, self.groups, timeout),
                         "gradsched-hierarchical")


def as_hierarchical_plan(plan: Any) -> Any:
    """The same buckets reduced by the hierarchical all-reduce (``all_reduce`` buckets
    only; an ``rs_ag`` bucket is refused)."""
    for k, b in enumerate(plan.buckets):
        if b.collective != "all_reduce":
            raise ConfigError(f"plan '{plan.algorithm}': bucket {k} is {b.collective}; only "
                              "all_reduce buckets can run hierarchically")
    buckets = tuple(replace(b, algorithm="hierarchical") for b in plan.buckets)
    return replace(plan, buckets=buckets, info={**plan.info, "executed_as": "hierarchical"})
