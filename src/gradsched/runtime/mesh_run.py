"""A :class:`~gradsched.plan_sharded.ShardedPlan` with a device mesh run by stock FSDP2
on gloo (CPU), with the collectives it issues counted by kind and group size: the check
that the mesh formed and the collectives are the ones the replay prices
(:func:`gradsched.replay.sharded_mesh.mesh_collectives`).

The task (:mod:`gradsched.distributed.launch`) builds the plan's mesh with
``init_device_mesh("cpu", (replicate, shard), mesh_dim_names=("replicate", "shard"))``
(1-D ``(shard,)`` without replicas), applies the plan with ``fully_shard(..., mesh=mesh)``
(:func:`gradsched.runtime.fsdp2.apply_plan`), trains ``iters`` steps and counts, in the
last step, every call FSDP2 makes of ``torch.distributed.all_gather_single``,
``reduce_scatter_single`` and ``all_reduce`` (``_fsdp_collectives.py``: its default
all-gather and reduce-scatter, and HSDP's all-reduce) by the size of the group it is given.
Each step's wall time (after a barrier) is returned too (``step_s``; the counting wrapper
runs in the last step only).
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

from gradsched.plan_sharded import ShardedPlan
from gradsched.workloads.zoo import build_model

COUNTED = {"all_gather_single": "all_gather", "reduce_scatter_single": "reduce_scatter",
           "all_reduce": "all_reduce"}
"""The ``torch.distributed`` functions FSDP2 calls (torch 2.14.1) and the kinds they are."""


def fsdp2_mesh_step(rank: int, world_size: int, payload: dict[str, Any]) -> list[dict[str, Any]]:
    """Run each of the payload's plans on its mesh, one after the other; per plan the
    mesh's groups (their ranks), the units FSDP2 formed and the last step's collectives
    (``"kind@group size" -> count``)."""
    return [_one_plan(rank, world_size, ShardedPlan.from_dict(raw, f"payload plan {i}"),
                      payload) for i, raw in enumerate(payload["plans"])]


def _one_plan(rank: int, world_size: int, plan: ShardedPlan,
              payload: dict[str, Any]) -> dict[str, Any]:
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    from gradsched.runtime.fsdp2 import apply_plan, sharded_groups

    shape = plan.mesh
    if shape is None or shape.world_size != world_size:
        raise ValueError(f"the plan's mesh {shape} does not cover {world_size} ranks")
    if shape.is_hsdp:
        mesh = init_device_mesh("cpu", (shape.replicate, shape.shard),
                                mesh_dim_names=("replicate", "shard"))
        dims = ("replicate", "shard")
    else:
        mesh = init_device_mesh("cpu", (shape.shard,), mesh_dim_names=("shard",))
        dims = ("shard",)
    groups = {d: dist.get_process_group_ranks(mesh.get_group(d)) for d in dims}
    spec = build_model(payload["model"], int(payload["batch_size"]), seed=0)
    units = apply_plan(spec.model, plan, mesh=mesh)
    optimizer = torch.optim.SGD(spec.model.parameters(), lr=0.01)
    counts: Counter[str] = Counter()
    originals = {name: getattr(dist, name) for name in COUNTED}

    def counting(name: str) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            group = kwargs.get("group")
            size = dist.get_world_size(group) if group is not None else world_size
            counts[f"{COUNTED[name]}@{size}"] += 1
            return originals[name](*args, **kwargs)
        return call

    iters = int(payload["iters"])
    losses, steps = [], []
    for step in range(iters):
        dist.barrier()
        start = time.perf_counter()
        if step == iters - 1:  # count the last step only (the first builds FSDP2's state)
            for name in COUNTED:
                setattr(dist, name, counting(name))
        try:
            loss = spec.loss(spec.model, spec.make_batch())
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
        finally:
            for name, fn in originals.items():
                setattr(dist, name, fn)
        losses.append(float(loss.detach()))
        steps.append(time.perf_counter() - start)
    return {"rank": rank, "groups": groups, "collectives": dict(sorted(counts.items())),
            "units": sharded_groups(units), "losses": losses, "step_s": steps}
