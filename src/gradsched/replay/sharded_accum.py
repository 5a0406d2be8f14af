"""FSDP2's gradient-accumulation modes replayed side by side: one optimizer step of ``k``
micro-batches of a :class:`~gradsched.plan_sharded.ShardedPlan`, per mode its step time,
its collectives by kind and its peak of gathered parameters and unsharded gradients.

What each mode does, in FSDP2 (torch 2.14, ``torch/distributed/fsdp/_fully_shard/``):

* ``no-sync``: ``set_requires_gradient_sync(False)`` on the first ``k - 1`` micro-batches
  (``_fully_shard.py`` L413-435: ``reduce_grads`` and ``all_reduce_grads`` of every
  parameter group set false). ``post_backward`` then accumulates the unsharded gradient,
  reshards and returns before any reduction (``_fsdp_param_group.py`` L624-632); so the
  unsharded gradients of every unit live from the first micro-batch's backward until the
  last one's reduce-scatter: the peak grows by up to the full unsharded gradient size, and
  one reduce-scatter per unit and step. This is :func:`gradsched.replay.sharded.replay_sharded`
  with ``grad_accum = k``, which this module calls unchanged.
* ``sync-every``: nothing set (FSDP2's default): every micro-batch's ``post_backward``
  reduce-scatters (``foreach_reduce``, ``_fsdp_param_group.py`` L712-735) and the sharded
  gradient is accumulated; the unsharded gradient of a unit is freed once its
  reduce-scatter has its input (L639-652: ``unsharded_param.grad = None``). ``k``
  reduce-scatters per unit and step, the memory of one micro-batch.
* ``no-all-reduce``: HSDP only (a replicate dimension): ``set_requires_all_reduce(False)``
  on the first ``k - 1`` micro-batches (``_fully_shard.py`` L437-451: ``all_reduce_grads``
  false, ``reduce_grads`` true). ``post_backward`` reduce-scatters within the shard group
  every micro-batch and frees the unsharded gradient as in ``sync-every``
  (``_fsdp_param_group.py`` L639-652, L703-735); ``foreach_reduce`` then, with
  ``all_reduce_grads`` false, adds the reduce-scatter's output into the group's
  ``partial_reduce_output`` and returns before the all-reduce and before any sharded
  gradient is written (``_fsdp_collectives.py`` L634-649); the group keeps it as
  ``_partial_reduce_output`` across micro-batches (``_fsdp_param_group.py`` L734, reset
  only by ``_reset_iter_state``, L545). The last micro-batch adds it to its own output
  (``_fsdp_collectives.py`` L650-651), all-reduces among the replicas once (L657-662) and
  writes the sharded gradient; ``foreach_reduce`` returns ``None`` for the partial output
  (L767-775), which frees it. So per step: ``k`` reduce-scatters per unit over the shard
  group, one all-reduce over the replicate group, and between micro-batches each group
  holds its reduce-scatter output, ``bytes / S`` (``partial_grad_bytes``; in
  ``sync-every`` the sharded gradient, of the same size, is held instead: both are shards,
  beside ``resident_bytes``, not in ``gathered_peak_bytes``). ``sync-every`` on HSDP
  all-reduces after every micro-batch's reduce-scatter (``k`` per unit and step),
  ``no-sync`` once (``set_requires_gradient_sync`` sets both flags, L434-435).
  Without replicas (plain FSDP2) there is no all-reduce to skip: refused
  (:func:`check_mode`).

Every mode all-gathers as the plan says in every micro-batch (``pre_forward`` /
``pre_backward`` call ``unshard`` whatever ``reduce_grads`` is, L550-605).

The ``sync-every`` replay is :func:`gradsched.replay.sharded.replay_sharded` with
``reduce_every``: its micro-batches back to back, each with its reduce-scatters and no
unsharded gradient carried (one engine, not a copy of it). On an HSDP mesh every mode is
the same engine on the mesh's inputs (:func:`gradsched.replay.sharded_mesh.plan_mesh_inputs`:
reduce-scatters and all-gathers over the shard group, all-reduces over the replicate group
on their own channel), ``no-all-reduce`` with the all-reduces in the last micro-batch only
(:class:`gradsched.replay.sharded_mesh_times.MeshTimes` ``all_reduce_last``).

The collectives of a step (:func:`step_collectives`) are counted by kind and group size
from the plan, as a real run's ``torch.distributed`` calls are counted
(:mod:`gradsched.runtime.accum_modes`); their total equals the replay's ``n_collectives``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from gradsched.costmodel.base import CommModel
from gradsched.costmodel.mesh import GroupPricer
from gradsched.errors import ConfigError
from gradsched.plan_mesh import DeviceMeshShape, check_reshard
from gradsched.plan_sharded import ShardedPlan
from gradsched.replay.sharded import (
    SEMANTICS,
    Semantics,
    ShardedReplay,
    StepOptions,
    check_grad_accum,
    replay_layout,
    replay_sharded,
)
from gradsched.replay.sharded_layout import unit_layout
from gradsched.replay.sharded_mesh import MeshCollectives, plan_mesh, plan_mesh_inputs
from gradsched.traces.bundle import ComputeTrace
from gradsched.traces.layers import layer_seq

MODES = ("no-sync", "sync-every", "no-all-reduce")
"""The accumulation modes (module docstring), in the order the advisor prints them."""


@dataclass(frozen=True)
class ModeReplay:
    """One mode's step: the replay, its collectives by kind and group size per step, and
    the not-yet-all-reduced gradient shards held between micro-batches (bytes)."""

    mode: str
    grad_accum: int
    replay: ShardedReplay
    collectives: MeshCollectives
    partial_grad_bytes: float = 0.0

    def count(self, kind: str) -> int:
        """The step's collectives of ``kind``, over every group size."""
        return sum(n for (k, _), n in self.collectives.counts.items() if k == kind)

    @property
    def all_gathers(self) -> int:
        return self.count("all_gather")

    @property
    def reduce_scatters(self) -> int:
        return self.count("reduce_scatter")

    @property
    def all_reduces(self) -> int:
        return self.count("all_reduce")

    def to_dict(self) -> dict[str, float | int | str]:
        return {"mode": self.mode, "grad_accum": self.grad_accum,
                "step_s": self.replay.iteration_s, "compute_s": self.replay.compute_s,
                "exposed_comm_s": self.replay.exposed_comm_s,
                "comm_busy_s": self.replay.comm_busy_s, "all_gathers": self.all_gathers,
                "reduce_scatters": self.reduce_scatters, "all_reduces": self.all_reduces,
                "collectives": " ".join(f"{k}={v}" for k, v in
                                        self.collectives.to_dict().items()),
                "gathered_peak_bytes": self.replay.gathered_peak_bytes,
                "partial_grad_bytes": self.partial_grad_bytes,
                "resident_bytes": self.replay.resident_bytes}


def check_mode(mode: str, replicate: int = 1) -> str:
    """``mode`` if the replay prices it for ``replicate`` replicas, else ``ConfigError``."""
    if mode not in MODES:
        raise ConfigError(f"accumulation mode must be one of {', '.join(MODES)}, got {mode!r}")
    if mode == "no-all-reduce" and replicate <= 1:
        raise ConfigError("accumulation mode no-all-reduce (FSDP2 set_requires_all_reduce"
                          "(False)) needs HSDP's replicate dimension; with plain FSDP2 there "
                          "is no all-reduce to skip (use no-sync or sync-every)")
    return mode


def step_collectives(plan: ShardedPlan, mesh: DeviceMeshShape, has_root: bool, mode: str,
                     grad_accum: int) -> MeshCollectives:
    """The collectives of one step of ``grad_accum`` micro-batches in ``mode`` by kind and
    group size (module docstring; groups of one rank issue none): per unit and the root,
    ``k`` forward all-gathers over the shard group (one when the plan keeps the parameters
    gathered between micro-batches), ``k`` backward all-gathers of a resharded unit (over
    its post-forward group for an integer), reduce-scatters over the shard group (``k`` in
    ``sync-every`` and ``no-all-reduce``, else one) and with replicas all-reduces over the
    replicate group (``k`` in ``sync-every``, else one)."""
    k = grad_accum
    counts: dict[tuple[str, int], int] = {}

    def add(kind: str, size: int, n: int) -> None:
        if size > 1 and n > 0:
            counts[(kind, size)] = counts.get((kind, size), 0) + n

    forward = 1 if plan.keep_unsharded_between_microbatches else k
    for unit in [*plan.units, None] if has_root else plan.units:
        add("all_gather", mesh.shard, forward)
        add("reduce_scatter", mesh.shard, 1 if mode == "no-sync" else k)
        if mesh.is_hsdp:
            add("all_reduce", mesh.replicate, k if mode == "sync-every" else 1)
        if unit is None:
            continue
        reshard = check_reshard(unit.reshard_after_forward, mesh.shard)
        if reshard is True:
            add("all_gather", mesh.shard, k)
        elif reshard is not False:
            add("all_gather", int(reshard), k)
    return MeshCollectives(counts)


def _checked(mode: str, grad_accum: int, semantics: str) -> None:
    check_grad_accum(grad_accum)
    if semantics not in SEMANTICS:
        raise ConfigError(f"semantics must be one of {', '.join(SEMANTICS)}, got {semantics!r}")
    if mode not in MODES:
        check_mode(mode)


def replay_mode(trace: ComputeTrace, plan: ShardedPlan, model: CommModel, world_size: int,
                mode: str, *, grad_accum: int, semantics: Semantics = "streams"
                ) -> ModeReplay:
    """One optimizer step of ``grad_accum`` micro-batches of ``plan`` (plain FSDP2, no
    replicas) in accumulation ``mode`` (module docstring)."""
    _checked(mode, grad_accum, semantics)
    mesh = plan_mesh(plan, world_size)
    check_mode(mode, mesh.replicate)
    layout = unit_layout(plan, layer_seq(trace), trace.path)
    result = replay_sharded(trace, plan, model, world_size, semantics=semantics,
                            grad_accum=grad_accum, reduce_every=mode == "sync-every")
    counts = step_collectives(plan, mesh, layout.root_bytes > 0, mode, grad_accum)
    return ModeReplay(mode, grad_accum, result, counts)


def replay_mode_mesh(trace: ComputeTrace, plan: ShardedPlan, pricer: GroupPricer, mode: str,
                     *, grad_accum: int, semantics: Semantics = "streams") -> ModeReplay:
    """One optimizer step of ``grad_accum`` micro-batches of ``plan`` on its mesh (HSDP
    when it has replicas) over ``pricer``'s cluster in accumulation ``mode`` (module
    docstring)."""
    _checked(mode, grad_accum, semantics)
    x = plan_mesh_inputs(trace, plan, pricer)
    check_mode(mode, x.mesh.replicate)
    times = replace(x.times, all_reduce_last=True) if mode == "no-all-reduce" else x.times
    options = StepOptions(blocking=semantics == "blocking", grad_accum=grad_accum,
                          keep_unsharded=plan.keep_unsharded_between_microbatches,
                          reduce_every=mode != "no-sync")
    result = replay_layout(x.seq, x.layout, (plan.forward_prefetch, plan.backward_prefetch),
                           x.all_gather_s, x.reduce_scatter_s, x.mesh.shard, options, times)
    counts = step_collectives(plan, x.mesh, x.layout.root_bytes > 0, mode, grad_accum)
    partial = 0.0
    if mode == "no-all-reduce" and grad_accum > 1:
        sizes = np.append(x.layout.unit_bytes, x.layout.root_bytes)
        partial = float(np.ceil(sizes[sizes > 0] / x.mesh.shard).sum())
    return ModeReplay(mode, grad_accum, result, counts, partial)
