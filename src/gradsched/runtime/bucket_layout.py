"""A plan's buckets laid onto a model's parameters, for the plan executor
(:mod:`gradsched.runtime.executor`): which parameters each bucket holds, checked against
the model (every name a trainable dense parameter, each in exactly one bucket, one dtype
and device per bucket, a known bucket algorithm), the module that owns each parameter, and
the per-layer index that a per-layer update (ByteScheduler, Peng et al., SOSP 2019; DeAR,
Zhang, Shi et al., ICDCS 2023) walks. Everything here runs once, at construction."""

from __future__ import annotations

from typing import Any

from torch import nn

from gradsched.collectives import algorithms
from gradsched.errors import ConfigError
from gradsched.plan import Bucket, Plan
from gradsched.runtime.bucket_state import BucketState

REDUCER_ALGORITHMS = ("hierarchical", "ps")
"""Bucket algorithms run by a reducer object on a background thread:
:mod:`gradsched.runtime.hierarchical` (two-level all-reduce) and
:mod:`gradsched.runtime.ps` (parameter servers)."""

Slots = dict[nn.Parameter, tuple[int, int]]
"""(bucket index, member index) of every bucketed parameter."""

LayerMembers = list[list[tuple[BucketState, int]]]
"""(bucket, member) of every parameter of each layer, layers in forward order."""


def check_algorithm(plan_name: str, k: int, spec: Any) -> None:
    """A bucket may name one of gradsched's all-reduce algorithms (lp, ring, mst, rd, rhd)
    or a reducer (:data:`REDUCER_ALGORITHMS`)."""
    if spec.collective != "all_reduce":
        raise ConfigError(f"plan '{plan_name}': bucket {k} names algorithm "
                          f"{spec.algorithm!r}, but only all_reduce buckets can use one")
    known = [*algorithms("all_reduce"), *REDUCER_ALGORITHMS]
    if spec.algorithm not in known:
        raise ConfigError(f"plan '{plan_name}': bucket {k}: unknown all-reduce algorithm "
                          f"{spec.algorithm!r}; known: {', '.join(known)}")


def _bucket_params(plan: Plan, k: int, spec: Bucket, named: dict[str, nn.Parameter],
                   trainable: set[str], seen: dict[str, int]
                   ) -> tuple[list[nn.Parameter], list[str]]:
    """The parameters bucket ``k`` names, checked (known, trainable, in one bucket)."""
    params, names = [], []
    for name in spec.tensors:
        if name not in named:
            raise ConfigError(f"plan '{plan.algorithm}': bucket {k} names {name!r}, "
                              "which is not a parameter of the model (names are "
                              "those of model.named_parameters())")
        if name not in trainable:
            raise ConfigError(f"plan '{plan.algorithm}': bucket {k} names {name!r}, "
                              "which is frozen (requires_grad=False); leave frozen "
                              "parameters out of the plan")
        if name in seen:
            raise ConfigError(f"plan '{plan.algorithm}': parameter {name!r} is in "
                              f"buckets {seen[name]} and {k}")
        seen[name] = k
        params.append(named[name])
        names.append(name)
    return params, names


def bucket_layout(model: nn.Module, plan: Plan, world: int,
                  find_unused: bool) -> list[BucketState]:
    """One :class:`BucketState` per plan bucket, its parameters checked against ``model``;
    a trainable parameter in no bucket is refused."""
    named = dict(model.named_parameters())
    trainable = {n for n, p in named.items() if p.requires_grad}
    seen: dict[str, int] = {}
    buckets = []
    for k, spec in enumerate(plan.buckets):
        if not spec.tensors:
            raise ConfigError(f"plan '{plan.algorithm}': bucket {k} is empty")
        params, names = _bucket_params(plan, k, spec, named, trainable, seen)
        kinds = {(p.dtype, p.device) for p in params}
        if len(kinds) > 1:
            raise ConfigError(f"plan '{plan.algorithm}': bucket {k} mixes dtypes/devices "
                              f"{sorted(str(x) for x in kinds)}")
        if spec.algorithm != "default":
            check_algorithm(plan.algorithm, k, spec)
        if any(p.is_sparse for p in params):
            raise ConfigError(f"plan '{plan.algorithm}': bucket {k}: sparse parameters "
                              "are not supported")
        buckets.append(BucketState(k, spec, params, names, world, find_unused))
    missing = [n for n in named if n in trainable and n not in seen]
    if missing:
        raise ConfigError(f"plan '{plan.algorithm}': {len(missing)} trainable parameters "
                          f"are in no bucket, first {missing[0]!r}")
    return buckets


def bucket_slots(buckets: list[BucketState]) -> Slots:
    """(bucket index, member index) of every parameter of ``buckets``."""
    slots: Slots = {}
    for b in buckets:
        for m, p in enumerate(b.params):
            slots[p] = (b.index, m)
    return slots


def parameter_owners(model: nn.Module, slots: Slots) -> tuple[dict[nn.Parameter, nn.Module],
                                                            dict[nn.Parameter, int]]:
    """The module that directly owns each bucketed parameter, and its layer index (order
    of first appearance in ``named_parameters``, i.e. forward order for ordinary models)."""
    owner: dict[nn.Parameter, nn.Module] = {}
    for module in model.modules():
        for p in module.parameters(recurse=False):
            if p in slots and p not in owner:
                owner[p] = module
    layer_of: dict[nn.Parameter, int] = {}
    module_index: dict[int, int] = {}
    for _, p in model.named_parameters():
        if p in owner:
            mid = id(owner[p])
            module_index.setdefault(mid, len(module_index))
            layer_of[p] = module_index[mid]
    return owner, layer_of


def layer_index(buckets: list[BucketState], slots: Slots,
                owner: dict[nn.Parameter, nn.Module],
                layer_of: dict[nn.Parameter, int]) -> tuple[LayerMembers, dict[int, int]]:
    """(bucket, member) of every parameter of each layer (layers in forward order,
    parameters in ``named_parameters`` order), and the layer of each owning module (by
    ``id``): the per-layer update's index, built once."""
    layers: LayerMembers = [[] for _ in set(layer_of.values())]
    for p, layer in layer_of.items():
        k, m = slots[p]
        layers[layer].append((buckets[k], m))
    module_layer = {id(owner[p]): layer for p, layer in layer_of.items()}
    return layers, module_layer
