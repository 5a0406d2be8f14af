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
  false, ``reduce_grads`` true): every micro-batch reduce-scatters within its shard group,
  the all-reduce across replicas runs once per step (``foreach_reduce``'s
  ``all_reduce_grads`` argument, L733). The replay has no replicate dimension yet, so this
  mode is refused (:func:`check_mode`), not priced as one of the others.

Every mode all-gathers as the plan says in every micro-batch (``pre_forward`` /
``pre_backward`` call ``unshard`` whatever ``reduce_grads`` is, L550-605).

The ``sync-every`` replay is :func:`gradsched.replay.sharded.replay_sharded` with
``reduce_every``: its micro-batches back to back, each with its reduce-scatters and no
unsharded gradient carried (one engine, not a copy of it).
"""

from __future__ import annotations

from dataclasses import dataclass

from gradsched.costmodel.base import CommModel
from gradsched.errors import ConfigError
from gradsched.plan_sharded import ShardedPlan
from gradsched.replay.sharded import (
    SEMANTICS,
    Semantics,
    ShardedReplay,
    check_grad_accum,
    replay_sharded,
)
from gradsched.replay.sharded_layout import unit_layout
from gradsched.traces.bundle import ComputeTrace
from gradsched.traces.layers import layer_seq

MODES = ("no-sync", "sync-every", "no-all-reduce")
"""The accumulation modes (module docstring), in the order the advisor prints them."""
REPLAYED = ("no-sync", "sync-every")
"""The modes the replay prices without a replicate dimension."""


@dataclass(frozen=True)
class ModeReplay:
    """One mode's step: the replay, its collectives by kind per step."""

    mode: str
    grad_accum: int
    replay: ShardedReplay
    all_gathers: int
    reduce_scatters: int

    def to_dict(self) -> dict[str, float | int | str]:
        return {"mode": self.mode, "grad_accum": self.grad_accum,
                "step_s": self.replay.iteration_s, "compute_s": self.replay.compute_s,
                "exposed_comm_s": self.replay.exposed_comm_s,
                "comm_busy_s": self.replay.comm_busy_s, "all_gathers": self.all_gathers,
                "reduce_scatters": self.reduce_scatters,
                "gathered_peak_bytes": self.replay.gathered_peak_bytes,
                "resident_bytes": self.replay.resident_bytes}


def check_mode(mode: str, replicate: int = 1) -> str:
    """``mode`` if the replay prices it for ``replicate`` replicas, else ``ConfigError``."""
    if mode not in MODES:
        raise ConfigError(f"accumulation mode must be one of {', '.join(MODES)}, got {mode!r}")
    if mode == "no-all-reduce" and replicate <= 1:
        raise ConfigError("accumulation mode no-all-reduce (FSDP2 set_requires_all_reduce"
                          "(False)) needs HSDP's replicate dimension; with plain FSDP2 there "
                          "is no all-reduce to skip (use no-sync or sync-every)")
    if mode not in REPLAYED:
        raise ConfigError(f"accumulation mode {mode!r} is not priced by the sharded replay "
                          "yet (no replicate dimension in it)")
    return mode


def replay_mode(trace: ComputeTrace, plan: ShardedPlan, model: CommModel, world_size: int,
                mode: str, *, grad_accum: int, semantics: Semantics = "streams"
                ) -> ModeReplay:
    """One optimizer step of ``grad_accum`` micro-batches of ``plan`` in accumulation
    ``mode`` (module docstring)."""
    check_mode(mode)
    check_grad_accum(grad_accum)
    if semantics not in SEMANTICS:
        raise ConfigError(f"semantics must be one of {', '.join(SEMANTICS)}, got {semantics!r}")
    seq = layer_seq(trace)
    layout = unit_layout(plan, seq, trace.path)
    reducing = len(layout.ranges) + (1 if layout.root_bytes > 0 else 0)
    result = replay_sharded(trace, plan, model, world_size, semantics=semantics,
                            grad_accum=grad_accum, reduce_every=mode == "sync-every")
    scatters = reducing * (grad_accum if mode == "sync-every" else 1)
    return ModeReplay(mode, grad_accum, result, result.n_collectives - scatters, scatters)
