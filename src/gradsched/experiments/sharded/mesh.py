"""Which data-parallel mesh to run FSDP2 on: full sharding, full sharding resharded to a
node after forward (``reshard_after_forward=R``), or HSDP with shard groups of one or more
nodes (:mod:`gradsched.plan_mesh`), each replayed on the two-level cluster
(:mod:`gradsched.replay.sharded_mesh`) with its memory per GPU.

Candidates on ``P = N x R`` ranks (``R`` GPUs per node), FSDP2's per-block units
(:func:`gradsched.planners.sharded.hsdp.hsdp`):

* ``fsdp``: a 1-D mesh of ``P`` ranks, ``reshard_after_forward=True`` (FSDP2's default);
* ``fsdp-reshard-node``: the same with ``reshard_after_forward=R``: the backward
  all-gathers stay inside a node, each rank keeps ``1/R`` of every unit between its
  forward and backward;
* ``hsdp-<S>``: HSDP with shard groups of ``S = R, 2R, 4R, ... < P`` ranks (dividing
  ``P``), replicated ``P / S`` times; ``hsdp-<S>-reshard-node`` the same with
  ``reshard_after_forward=R`` where the shard group spans several nodes (FSDP2 reshards a
  2-D mesh's shard dimension to groups of ``R``: ``_fsdp_init.py`` L186-194).

Memory per GPU (bytes): the replay's peak of gathered parameters, unsharded gradients and
post-forward slices, plus the parameter and gradient shards and Adam's state sharded over
the shard group only (:func:`gradsched.experiments.sharded.memory.memory_budget` at ``S``
ranks), plus the trace's activations where it has them. The recommendation is the fastest
candidate that fits the GPU (a tie, :func:`gradsched.ties.same_time`, keeps the earlier,
simpler candidate).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gradsched.costmodel.mesh import GroupPricer
from gradsched.errors import ConfigError
from gradsched.experiments.sharded.memory import ADAM_STATE_BYTES
from gradsched.plan_sharded import ShardedPlan
from gradsched.planners.sharded.hsdp import hsdp
from gradsched.replay.sharded import Semantics, ShardedReplay
from gradsched.replay.sharded_mesh import replay_mesh
from gradsched.ties import faster
from gradsched.traces.bundle import ComputeTrace


@dataclass(frozen=True)
class MeshCase:
    """The settings of one comparison (checked by the replay)."""

    semantics: Semantics = "streams"
    grad_accum: int = 1
    compute_slowdown: float = 1.0
    gpu_memory_bytes: float | None = None


@dataclass(frozen=True)
class MeshResult:
    """One candidate: its plan (with the mesh), replay and memory per GPU."""

    name: str
    plan: ShardedPlan
    replay: ShardedReplay
    state_bytes: float
    """Parameter and gradient shards and Adam's state (sharded over the shard group)."""
    activation_bytes: float

    @property
    def memory_bytes(self) -> float:
        return self.replay.gathered_peak_bytes + self.state_bytes + self.activation_bytes

    def row(self, gpu_bytes: float | None) -> dict[str, Any]:
        mesh = self.plan.mesh
        assert mesh is not None
        reshard = self.plan.units[0].reshard_after_forward if self.plan.units else True
        return {"candidate": self.name, "replicate": mesh.replicate, "shard": mesh.shard,
                "reshard_after_forward": str(reshard).lower(),
                "iteration_s": float(self.replay.iteration_s),
                "exposed_comm_s": float(self.replay.exposed_comm_s),
                "gathered_peak_bytes": float(self.replay.gathered_peak_bytes),
                "state_bytes": self.state_bytes, "activation_bytes": self.activation_bytes,
                "memory_bytes": self.memory_bytes,
                "fits": bool(gpu_bytes is None or self.memory_bytes <= gpu_bytes)}


def candidates(world_size: int, ranks_per_node: int) -> list[tuple[str, int, bool | int]]:
    """``(name, shard, reshard_after_forward)`` of the meshes compared (module docstring)."""
    out: list[tuple[str, int, bool | int]] = [("fsdp", world_size, True)]
    if world_size > ranks_per_node and world_size % ranks_per_node == 0:
        out.append(("fsdp-reshard-node", world_size, ranks_per_node))
        shard = ranks_per_node
        while shard < world_size:
            if world_size % shard == 0:
                out.append((f"hsdp-{shard}", shard, True))
                if shard > ranks_per_node:
                    out.append((f"hsdp-{shard}-reshard-node", shard, ranks_per_node))
            shard *= 2
    return out


def state_bytes(trace: ComputeTrace, shard: int) -> float:
    """Parameter and gradient shards and Adam's state over ``shard`` ranks (the sums of
    :func:`gradsched.experiments.sharded.memory.memory_budget`)."""
    frame = trace.frame
    total = float(frame["bytes"].sum())
    numel = float(frame["numel"].sum())
    element = round(total / numel) if numel else 4
    return (2.0 * total + ADAM_STATE_BYTES.get(element, 12.0) * numel) / shard


def compare_meshes(trace: ComputeTrace, pricer: GroupPricer, case: MeshCase
                   ) -> list[MeshResult]:
    """Every candidate mesh replayed on ``pricer``'s cluster (module docstring)."""
    world = pricer.world_size
    acts = trace.meta.get("activation_bytes")
    activation = float(acts) if isinstance(acts, int | float) and not isinstance(acts, bool) \
        else 0.0
    out = []
    for name, shard, reshard in candidates(world, pricer.ranks_per_node):
        plan = hsdp(trace, None, world, shard=shard,  # type: ignore[arg-type]
                    reshard_after_forward=reshard)
        result = replay_mesh(trace, plan, pricer, semantics=case.semantics,
                             grad_accum=case.grad_accum,
                             compute_slowdown=case.compute_slowdown)
        out.append(MeshResult(name, plan, result, state_bytes(trace, shard), activation))
    return out


def recommended(results: list[MeshResult], gpu_bytes: float | None,
                margin_pct: float = 0.0) -> MeshResult:
    """The fastest candidate that fits (ties keep the earlier); FSDP over every rank (the
    first) when it fits and the fastest gains no more than ``margin_pct`` on it (the comm
    model's error); ``ConfigError`` when none fits, naming the smallest memory."""
    fitting = [r for r in results if gpu_bytes is None or r.memory_bytes <= gpu_bytes]
    if not fitting:
        least = min(results, key=lambda r: r.memory_bytes)
        raise ConfigError(f"no mesh fits the GPU's {gpu_bytes / 2**30:.4g} GiB: the least "
                          f"memory is {least.name}'s {least.memory_bytes / 2**30:.4g} GiB; "
                          "shard over more ranks or add tensor parallelism")
    best = fitting[0]
    for r in fitting[1:]:
        if faster(r.replay.iteration_s, best.replay.iteration_s):
            best = r
    base = results[0]
    if fitting[0] is base and 100.0 * (base.replay.iteration_s / best.replay.iteration_s
                                       - 1.0) <= margin_pct:
        return base
    return best
