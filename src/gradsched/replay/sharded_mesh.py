"""Replay of a sharded plan on its device mesh (HSDP, integer ``reshard_after_forward``),
priced on a two-level cluster (:mod:`gradsched.costmodel.mesh`).

What the mesh changes in the sharded replay (:mod:`gradsched.replay.sharded`; FSDP2's code
cited in :mod:`gradsched.plan_mesh`):

* the all-gathers and reduce-scatters run over the shard group of ``S`` ranks (inside a
  node when ``S`` is at most its GPUs), messages of the unit's full bytes as before;
* with ``R > 1`` replicas, each reduce-scatter is followed by an all-reduce of its output,
  the shard (``bytes / S``), over the replicate group, on a second channel (FSDP2's
  ``all_reduce_stream``, which waits for the reduce-scatter and overlaps the next
  all-gathers and reduce-scatters); the step ends when the last all-reduce does;
* a unit with ``reshard_after_forward=g`` all-gathers in backward over its post-forward
  group of ``g`` consecutive ranks, and holds a ``bytes / g`` slice from the end of its
  forward until that all-gather ends (memory);
* the optimizer steps on the shard: the update time divided by ``S``, and the resident
  parameter and gradient shards are ``2 x bytes / S`` (sharded over the shard group only).

With a 1-D mesh and no integer resharding the replay is the plain one priced on the
cluster's whole-world group.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from gradsched.costmodel.mesh import GroupPricer, group_shape, replicate_shape
from gradsched.errors import ConfigError
from gradsched.plan_mesh import DeviceMeshShape, check_reshard
from gradsched.plan_sharded import ShardedPlan
from gradsched.replay.sharded import (
    SEMANTICS,
    Semantics,
    ShardedReplay,
    StepOptions,
    check_compute_slowdown,
    check_grad_accum,
    replay_layout,
)
from gradsched.replay.sharded_layout import UnitLayout, unit_layout
from gradsched.replay.sharded_mesh_times import MeshTimes
from gradsched.traces.bundle import ComputeTrace
from gradsched.traces.layers import LayerSeq, layer_seq


@dataclass(frozen=True)
class MeshCollectives:
    """The collectives of one step of one micro-batch, by kind and group size (the count a
    real run must match): ``(kind, group ranks) -> count``."""

    counts: dict[tuple[str, int], int]

    def to_dict(self) -> dict[str, int]:
        return {f"{kind}@{size}": n for (kind, size), n in sorted(self.counts.items())}


def plan_mesh(plan: ShardedPlan, world_size: int) -> DeviceMeshShape:
    """The plan's mesh (a 1-D mesh of every rank when it names none), checked against the
    world size, with every unit's ``reshard_after_forward`` valid for its shard group."""
    mesh = plan.mesh or DeviceMeshShape(1, world_size)
    if mesh.world_size != world_size:
        raise ConfigError(f"sharded plan '{plan.algorithm}': mesh {mesh.replicate} x "
                          f"{mesh.shard} = {mesh.world_size} ranks, but the world size is "
                          f"{world_size}")
    for k, unit in enumerate(plan.units):
        check_reshard(unit.reshard_after_forward, mesh.shard, f"unit {k} reshard_after_forward")
    return mesh


def mesh_layout(plan: ShardedPlan, layout: UnitLayout, mesh: DeviceMeshShape) -> UnitLayout:
    """The layout with FSDP2's normalised resharding (``g = S``: True, ``g = 1``: False)."""
    return replace(layout, reshard=tuple(check_reshard(u.reshard_after_forward, mesh.shard)
                                         for u in plan.units))


def mesh_inputs(layout: UnitLayout, mesh: DeviceMeshShape, pricer: GroupPricer
                ) -> tuple[np.ndarray, np.ndarray, MeshTimes]:
    """All-gather and reduce-scatter seconds per unit and the root (shard group), and the
    mesh's all-reduces, backward all-gathers and post-forward slices (module docstring)."""
    pricer.check(mesh.world_size)
    rpn = pricer.ranks_per_node
    sizes = np.append(layout.unit_bytes, layout.root_bytes)
    shard = group_shape(mesh.shard, rpn)
    ag = pricer.times("all_gather", sizes, shard)
    rs = pricer.times("reduce_scatter", sizes, shard)
    ar = np.empty(0)
    if mesh.is_hsdp:
        ar = pricer.times("all_reduce", np.ceil(sizes / mesh.shard),
                          replicate_shape(mesh.shard, mesh.world_size, rpn))
    back = ag[:-1].copy()
    keep = np.zeros(len(layout.ranges))
    for g in sorted({r for r in layout.reshard if not isinstance(r, bool)}):
        which = np.asarray([not isinstance(r, bool) and r == g for r in layout.reshard])
        back[which] = pricer.times("all_gather", layout.unit_bytes[which], group_shape(g, rpn))
        keep[which] = np.ceil(layout.unit_bytes[which] / g)
    return ag, rs, MeshTimes(all_reduce_s=ar, backward_all_gather_s=back,
                             post_forward_bytes=keep)


@dataclass(frozen=True)
class MeshInputs:
    """A plan's replay inputs on its mesh: the layers, the layout with FSDP2's normalised
    resharding, all-gather and reduce-scatter seconds per unit (the root last) and the
    mesh's times (:func:`mesh_inputs`)."""

    seq: LayerSeq
    layout: UnitLayout
    mesh: DeviceMeshShape
    all_gather_s: np.ndarray
    reduce_scatter_s: np.ndarray
    times: MeshTimes


def plan_mesh_inputs(trace: ComputeTrace, plan: ShardedPlan, pricer: GroupPricer
                     ) -> MeshInputs:
    """``plan``'s checked inputs on its mesh over ``pricer``'s cluster."""
    mesh = plan_mesh(plan, pricer.world_size)
    seq = layer_seq(trace)
    layout = mesh_layout(plan, unit_layout(plan, seq, trace.path), mesh)
    ag, rs, times = mesh_inputs(layout, mesh, pricer)
    return MeshInputs(seq, layout, mesh, ag, rs, times)


def replay_mesh(trace: ComputeTrace, plan: ShardedPlan, pricer: GroupPricer, *,
                semantics: Semantics = "streams", grad_accum: int = 1,
                compute_slowdown: float = 1.0) -> ShardedReplay:
    """Replay ``plan`` on its mesh over ``pricer``'s cluster (module docstring)."""
    if semantics not in SEMANTICS:
        raise ConfigError(f"semantics must be one of {', '.join(SEMANTICS)}, got {semantics!r}")
    check_grad_accum(grad_accum)
    check_compute_slowdown(compute_slowdown)
    x = plan_mesh_inputs(trace, plan, pricer)
    return replay_layout(x.seq, x.layout, (plan.forward_prefetch, plan.backward_prefetch),
                         x.all_gather_s, x.reduce_scatter_s, x.mesh.shard, StepOptions(
                             blocking=semantics == "blocking", grad_accum=grad_accum,
                             keep_unsharded=plan.keep_unsharded_between_microbatches,
                             compute_slowdown=compute_slowdown), x.times)


def mesh_collectives(plan: ShardedPlan, world_size: int, has_root: bool) -> MeshCollectives:
    """The collectives one iteration (one micro-batch) of ``plan`` issues, by kind and
    group size: per unit a forward all-gather and a reduce-scatter over the shard group, a
    backward all-gather over the shard group (``True``) or the post-forward group (an
    integer), and with replicas an all-reduce over the replicate group; the root (when it
    holds parameters) one all-gather, one reduce-scatter and its all-reduce."""
    mesh = plan_mesh(plan, world_size)
    counts: dict[tuple[str, int], int] = {}

    def add(kind: str, size: int) -> None:
        if size > 1:
            counts[(kind, size)] = counts.get((kind, size), 0) + 1

    for unit in [*plan.units, None] if has_root else plan.units:
        add("all_gather", mesh.shard)
        add("reduce_scatter", mesh.shard)
        if mesh.is_hsdp:
            add("all_reduce", mesh.replicate)
        if unit is None:
            continue
        reshard = check_reshard(unit.reshard_after_forward, mesh.shard)
        if reshard is True:
            add("all_gather", mesh.shard)
        elif reshard is not False:
            add("all_gather", int(reshard))
    return MeshCollectives(counts)
