"""``hsdp``: FSDP2's per-block units on a device mesh: HSDP (``replicate`` x ``shard``
ranks, sharded within the shard group, replicated across) and ``reshard_after_forward``
true, false or an integer world size (:mod:`gradsched.plan_mesh`, FSDP2's rules cited
there).

Knobs: ``shard`` (ranks of the shard group; 0, the default, shards over every rank: FSDP
on a 1-D mesh), ``reshard_after_forward`` (``true``, ``false`` or the integer to reshard to,
e.g. the GPUs of a node), and the prefetch depths of :func:`gradsched.planners.sharded.fsdp2`.
"""

from __future__ import annotations

from dataclasses import replace

from gradsched.costmodel.base import CommModel
from gradsched.errors import ConfigError
from gradsched.plan_mesh import DeviceMeshShape, Reshard, check_reshard
from gradsched.plan_sharded import ShardedPlan
from gradsched.planners.sharded import fsdp2
from gradsched.traces.bundle import ComputeTrace


def mesh_for(world_size: int, shard: int) -> DeviceMeshShape:
    """The mesh of ``world_size`` ranks with shard groups of ``shard`` (0: all)."""
    if isinstance(shard, bool) or not isinstance(shard, int) or shard < 0:
        raise ConfigError(f"--knob shard={shard!r}: must be an integer >= 0 (0: every rank)")
    shard = shard or world_size
    if shard > world_size or world_size % shard:
        raise ConfigError(f"--knob shard={shard}: must divide the world size {world_size}")
    return DeviceMeshShape(world_size // shard, shard)


def hsdp(trace: ComputeTrace, model: CommModel, world_size: int, *, shard: int = 0,
         reshard_after_forward: Reshard = True, forward_prefetch: int = 1,
         backward_prefetch: int = 1) -> ShardedPlan:
    """FSDP2's per-block units on the mesh ``(world_size / shard, shard)`` (module
    docstring)."""
    mesh = mesh_for(world_size, shard)
    reshard = check_reshard(reshard_after_forward, mesh.shard)
    plan = fsdp2(trace, model, world_size, forward_prefetch=forward_prefetch,
                 backward_prefetch=backward_prefetch, reshard_after_forward=bool(reshard))
    units = tuple(replace(u, reshard_after_forward=reshard) for u in plan.units)
    return replace(plan, algorithm="hsdp", units=units, mesh=mesh,
                   knobs={**plan.knobs, "shard": mesh.shard,
                          "reshard_after_forward": reshard},
                   info={**plan.info, "mesh": mesh.to_dict()})
