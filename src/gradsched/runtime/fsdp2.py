"""A :class:`~gradsched.plan_sharded.ShardedPlan` run by stock PyTorch FSDP2.

:func:`apply_plan` turns the plan into ``fully_shard`` calls, which is what a user pastes:

* each unit: ``fully_shard([modules...], reshard_after_forward=...)`` over the modules that
  own its tensors (FSDP2 accepts a list of modules as one unit, one all-gather and one
  reduce-scatter for all of them; ``torch/distributed/fsdp/_fully_shard/_fully_shard.py``);
  a module whose parameters the plan splits between units is refused;
* the root: ``fully_shard(model)`` (every parameter of no unit);
* prefetch: ``unit_k.set_modules_to_forward_prefetch([units k+1..k+d_f])`` and
  ``unit_k.set_modules_to_backward_prefetch([units k-1..k-d_b])`` on the unit's first
  module. FSDP2 prefetches one unit in backward whenever no explicit list is set
  (``FSDPState._pre_backward``: ``default_prefetch = len(...) == 0``), so a backward depth of
  0 cannot be expressed and is refused.
* mixed precision (the plan's ``mixed_precision``): every ``fully_shard`` call, the root's
  too, gets ``mp_policy=MixedPrecisionPolicy(param_dtype, reduce_dtype)`` (:func:`mp_policy`).
  gloo on CPU runs bf16 and fp16 all-gathers and reduce-scatters (torch 2.14; checked by
  ``tests/runtime/test_fsdp2_dtypes.py``); a float8 all-gather needs torchao and a GPU's
  float8 matmuls, and is refused.

A plan is timed as an ``fsdp2`` item of the timing protocol
(:mod:`gradsched.runtime.rounds`, :mod:`gradsched.runtime.runners`).
"""

from __future__ import annotations

from torch import nn

from gradsched.errors import ConfigError, InputError
from gradsched.plan_sharded import ShardedPlan, covering_modules, tensors_under


def unit_modules(model: nn.Module, plan: ShardedPlan) -> list[list[nn.Module]]:
    """The modules owning each unit's tensors, checked to hold no tensor of another unit."""
    modules = dict(model.named_modules())
    params = {n for n, p in model.named_parameters() if p.requires_grad}
    all_params = sorted(params)
    under = tensors_under(all_params)
    owner_of: dict[str, int] = {}
    out: list[list[nn.Module]] = []
    for k, unit in enumerate(plan.units):
        names: list[str] = []
        for tensor in unit.tensors:
            if tensor not in params:
                raise InputError(f"sharded plan '{plan.algorithm}': unit {k} names {tensor!r}, "
                                 "which is not a trainable parameter of the model",
                                 field="tensors")
            name = tensor.rsplit(".", 1)[0] if "." in tensor else ""
            if owner_of.setdefault(name, k) != k:
                raise InputError(f"module {name!r} has parameters in units {owner_of[name]} "
                                 f"and {k}; FSDP2 shards whole modules", field="tensors")
            if name not in names:
                names.append(name)
        out.append([modules[n] for n in covering_modules(unit.tensors, all_params, under)])
    for name, k in owner_of.items():
        own = {f"{name}.{p}" if name else p for p, q in modules[name].named_parameters(
            recurse=False) if q.requires_grad}
        missing = sorted(own - set(plan.units[k].tensors))
        if missing:
            raise InputError(f"unit {k} holds part of module {name!r} (not {missing[0]!r}); "
                             "FSDP2 shards whole modules", field="tensors")
    return out


def apply_plan(model: nn.Module, plan: ShardedPlan,
               mesh: object | None = None) -> list[list[nn.Module]]:
    """Shard ``model`` in place as ``plan`` says (module docstring); returns each unit's
    modules. ``mesh``: the ``DeviceMesh`` every ``fully_shard`` gets (the plan's HSDP
    mesh, :mod:`gradsched.runtime.mesh_run`); None: FSDP2's default 1-D mesh."""
    from torch.distributed.fsdp import fully_shard

    if plan.backward_prefetch < 1 and plan.n_units > 1:
        raise ConfigError("FSDP2 always prefetches one unit in backward; a backward_prefetch "
                          "of 0 cannot be run")
    if mesh is None and plan.mesh is not None and plan.mesh.is_hsdp:
        raise ConfigError(f"sharded plan '{plan.algorithm}' has an HSDP mesh: run it on its "
                          "mesh (gradsched.runtime.mesh_run), not on FSDP2's default one")
    policy = mp_policy(plan)
    units = unit_modules(model, plan)
    on_mesh = {} if mesh is None else {"mesh": mesh}
    for modules, unit in zip(units, plan.units, strict=True):
        fully_shard(modules, reshard_after_forward=unit.reshard_after_forward, **on_mesh,
                    **policy)
    fully_shard(model, **on_mesh, **policy)
    for k, modules in enumerate(units):
        ahead = [units[j][0] for j in range(k + 1, min(k + plan.forward_prefetch, len(units) - 1)
                                            + 1)]
        if ahead:
            modules[0].set_modules_to_forward_prefetch(ahead)
        behind = [units[j][0] for j in range(k - 1, max(k - plan.backward_prefetch, 0) - 1, -1)]
        if behind:
            modules[0].set_modules_to_backward_prefetch(behind)
    return units


def mp_policy(plan: ShardedPlan) -> dict[str, object]:
    """``{"mp_policy": MixedPrecisionPolicy(...)}`` of the plan's dtypes, or ``{}`` (FSDP2's
    default policy); a float8 all-gather is refused (module docstring)."""
    import torch
    from torch.distributed.fsdp import MixedPrecisionPolicy

    dtypes = plan.mixed_precision
    if dtypes is None:
        return {}
    if dtypes.float8_all_gather:
        raise ConfigError(f"sharded plan '{plan.algorithm}': a float8 all-gather needs torchao "
                          "(convert_to_float8_training) and a GPU with float8 matmuls; the "
                          "CPU FSDP2 runner cannot run it (drop float8_all_gather)")
    torch_dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
    return {"mp_policy": MixedPrecisionPolicy(
        param_dtype=torch_dtype.get(dtypes.param_dtype or ""),
        reduce_dtype=torch_dtype.get(dtypes.reduce_dtype or ""))}


def sharded_groups(units: list[list[nn.Module]]) -> list[list[str]]:
    """The parameter names FSDP2 itself groups in each unit (its ``FSDPParam`` fully
    qualified names), to check that the run grouped what the plan says."""
    out = []
    for modules in units:
        group = modules[0]._get_fsdp_state()._fsdp_param_group
        out.append(sorted(p._param_fqn for p in group.fsdp_params) if group else [])
    return out
