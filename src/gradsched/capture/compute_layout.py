"""Which parameters of a model are the rows of a compute trace, and where forward time
goes (see :mod:`gradsched.capture.compute` for the rules): one forward/backward with hooks
on every module finds the layers, their forward order, tied and frozen parameters and the
parameters whose owning module never runs its own forward."""

from __future__ import annotations

import collections
import threading
from dataclasses import dataclass, field
from typing import Any

from gradsched.errors import ConfigError
from gradsched.workloads import ModelSpec


@dataclass
class Layout:
    """Which parameters are rows, which modules cut the forward, and where time goes."""

    params: list[Any]  # trainable parameters that get a gradient, row order
    names: list[str]
    layer_of_row: list[int]
    boundary_modules: list[Any]  # modules whose post-hook ends a forward segment
    target_row: dict[int, int]  # id(module) -> row that receives its segments
    last_module: Any
    tied: dict[str, list[str]] = field(default_factory=dict)
    excluded: list[dict[str, Any]] = field(default_factory=list)
    fallback_owners: list[str] = field(default_factory=list)
    backward_on_caller: bool = True


def _observe(spec: ModelSpec, batch: Any) -> tuple[list[Any], dict[int, int], set[int]]:
    """One forward/backward with hooks on every module: the modules in the order their
    forward finished (with repeats), the index of each module's first finish, and the
    threads on which gradients became ready."""
    model = spec.model
    finished: list[Any] = []
    ran: dict[int, int] = {}

    def post(module: Any, _inp: Any, _out: Any) -> None:
        ran.setdefault(id(module), len(ran))
        finished.append(module)

    threads: set[int] = set()

    def ready(_p: Any) -> None:
        threads.add(threading.get_ident())

    handles = [m.register_forward_hook(post) for m in model.modules()]
    handles += [p.register_post_accumulate_grad_hook(ready) for p in model.parameters()
                if p.requires_grad]
    try:
        model.zero_grad(set_to_none=True)
        loss = spec.loss(model, batch)
        loss.backward()
    finally:
        for h in handles:
            h.remove()
    return finished, ran, threads


def _trainable(spec: ModelSpec) -> tuple[dict[int, list[str]], list[dict[str, Any]],
                                         dict[int, Any], dict[int, str]]:
    """(every name of each parameter, the excluded parameters, the trainable ones that got
    a gradient, the canonical name of each) after :func:`_observe`."""
    model = spec.model
    all_names: dict[int, list[str]] = collections.defaultdict(list)
    for name, p in model.named_parameters(remove_duplicate=False):
        all_names[id(p)].append(name)
    excluded: list[dict[str, Any]] = []
    trainable: dict[int, Any] = {}
    canonical: dict[int, str] = {}
    for name, p in model.named_parameters():
        if not p.requires_grad:
            excluded.append({"name": name, "numel": int(p.numel()), "reason": "frozen "
                             "(requires_grad=False)"})
        elif p.grad is None:
            excluded.append({"name": name, "numel": int(p.numel()), "reason": "no gradient "
                             "(not used in the forward pass)"})
        else:
            trainable[id(p)] = p
            canonical[id(p)] = name
    if not trainable:
        raise ConfigError(f"model {spec.name!r} has no trainable parameter that receives a "
                          "gradient")
    return all_names, excluded, trainable, canonical


def _owners(model: Any, ran: dict[int, int], all_names: dict[int, list[str]],
            trainable: dict[int, Any], canonical: dict[int, str]
            ) -> tuple[dict[int, list[Any]], dict[int, Any], list[str]]:
    """The trainable parameters each module owns (id(module) -> params), the modules by id,
    and the fallback notes: parameters none of whose owners ran go to the deepest ancestor
    that ran."""
    modules = dict(model.named_modules(remove_duplicate=False))
    owners: dict[int, list[Any]] = collections.defaultdict(list)  # id(module) -> params
    owner_mods: dict[int, Any] = {}
    for mod in model.modules():
        for p in mod._parameters.values():
            if p is not None and id(p) in trainable and all(q is not p for q in owners[id(mod)]):
                owners[id(mod)].append(p)
                owner_mods[id(mod)] = mod
    # Parameters none of whose owners ran: give them to the deepest ancestor that ran.
    fallback: list[str] = []
    covered = {id(p) for mid, ps in owners.items() if mid in ran for p in ps}
    for pid, p in trainable.items():
        if pid in covered:
            continue
        host = None
        for alias in all_names[pid]:
            parts = alias.split(".")[:-1]
            while parts and (".".join(parts) not in modules
                             or id(modules[".".join(parts)]) not in ran):
                parts.pop()
            cand = modules[".".join(parts)] if parts else model
            if host is None or len(parts) > host[0]:
                host = (len(parts), cand)
        assert host is not None
        mod = host[1]
        if id(mod) not in ran:
            raise ConfigError(f"parameter {canonical[pid]!r} gets a gradient but no module "
                              "owning it runs a forward")
        owners[id(mod)].append(p)
        owner_mods[id(mod)] = mod
        fallback.append(f"{canonical[pid]} -> {type(mod).__name__}")
    return owners, owner_mods, fallback


def _rows(boundary: list[Any], owners: dict[int, list[Any]]
          ) -> tuple[list[Any], list[int], dict[int, int], dict[int, int]]:
    """(row parameters, layer of each row, id(param) -> row, id(module) -> target row):
    each boundary module in forward order opens a layer with its parameters not yet
    placed; one with none new (tied) sends its time to its first parameter's row."""
    params: list[Any] = []
    layer_of_row: list[int] = []
    row_of: dict[int, int] = {}
    target_row: dict[int, int] = {}
    layer = -1
    for mod in boundary:
        new = [p for p in owners[id(mod)] if id(p) not in row_of]
        if new:
            layer += 1
            target_row[id(mod)] = len(params)
            for p in new:
                row_of[id(p)] = len(params)
                params.append(p)
                layer_of_row.append(layer)
        else:
            target_row[id(mod)] = row_of[id(owners[id(mod)][0])]
    return params, layer_of_row, row_of, target_row


def discover(spec: ModelSpec, batch: Any) -> Layout:
    """One forward/backward with hooks on every module: find layers, order and grads."""
    model = spec.model
    finished, ran, threads = _observe(spec, batch)
    all_names, excluded, trainable, canonical = _trainable(spec)
    owners, owner_mods, fallback = _owners(model, ran, all_names, trainable, canonical)

    # Boundary modules in order of first forward completion.
    boundary = sorted((m for mid, m in owner_mods.items() if mid in ran and owners[mid]),
                      key=lambda m: _first_index(finished, m))
    params, layer_of_row, row_of, target_row = _rows(boundary, owners)
    missing = [canonical[pid] for pid in trainable if pid not in row_of]
    if missing:  # pragma: no cover - every trainable parameter has a running owner above
        raise ConfigError(f"could not place parameters {missing[:5]} in forward order")
    last = max(boundary, key=lambda m: _last_index(finished, m))
    tied = {canonical[id(p)]: all_names[id(p)][1:] for p in params
            if len(set(all_names[id(p)])) > 1}
    return Layout(params=params, names=[canonical[id(p)] for p in params],
                  layer_of_row=layer_of_row, boundary_modules=boundary,
                  target_row=target_row, last_module=last, tied=tied, excluded=excluded,
                  fallback_owners=fallback,
                  backward_on_caller=threads <= {threading.get_ident()})


def _first_index(seq: list[Any], item: Any) -> int:
    return next(i for i, x in enumerate(seq) if x is item)


def _last_index(seq: list[Any], item: Any) -> int:
    return max(i for i, x in enumerate(seq) if x is item)


__all__ = ["Layout", "discover"]
