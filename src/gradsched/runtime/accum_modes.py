"""Launcher task :func:`accumulation_modes` (``gradsched.runtime.accum_modes:
accumulation_modes``): FSDP2's gradient-accumulation modes run for real, their collectives
counted and their memory peak measured.

One optimizer step of ``k`` micro-batches (:func:`gradsched.runtime.runners.accumulate`,
each loss divided by ``k``) of a stack of ``layers`` square ``Linear(width, width)`` layers
(batch ``batch``, mean-squared error; parameters dominate the memory on purpose: the modes
differ in what they keep of the parameters and gradients), every layer its own FSDP2 unit
resharded after forward (:func:`gradsched.runtime.fsdp2.apply_plan`), SGD with momentum.
Modes (:mod:`gradsched.replay.sharded_accum`):

* ``no-sync``: ``set_requires_gradient_sync(False)`` on the first ``k - 1`` micro-batches
  (:func:`gradsched.runtime.runners.fsdp2_silence`): the unsharded gradients are kept
  between micro-batches, one reduce-scatter per unit and step;
* ``sync-every``: nothing set: FSDP2 reduce-scatters after every micro-batch's backward
  and accumulates the sharded gradients (on HSDP, all-reducing each among the replicas);
* ``no-all-reduce``: HSDP only (``payload['mesh'] = [replicate, shard]``, the ranks formed
  into ``init_device_mesh("cpu", (replicate, shard), mesh_dim_names=("replicate",
  "shard"))`` as :mod:`gradsched.runtime.mesh_run` does):
  ``set_requires_all_reduce(False)`` on the first ``k - 1`` micro-batches
  (:func:`hsdp_silence`): a reduce-scatter within the shard group every micro-batch, the
  all-reduce among the replicas in the last one only.

Per (mode, ``k``): one untimed warm-up step (FSDP2 initialises lazily; SGD allocates its
momentum), then one step with the ``torch.distributed`` collectives counted by kind
(``collectives``) and by kind and the size of the group they were given (``by_group``,
``"all_reduce@2"``; :func:`counted_by_group`, the functions of
:data:`gradsched.runtime.accum_check.COUNTED`) and these memory readings:

* ``fsdp_peak_bytes``: the most bytes of FSDP2's unsharded parameters and unsharded
  gradients alive at once, read from FSDP2's own tensors (:func:`fsdp_live_bytes`: the
  storage of every ``FSDPParam``'s unsharded parameter, its ``.grad`` and its
  ``unsharded_accumulated_grad``) at every unit's pre-forward (after FSDP2's all-gather)
  and after every gradient accumulation into an unsharded parameter
  (``register_post_accumulate_grad_hook``): the quantity the sharded replay's
  ``gathered_peak_bytes`` predicts. Transient copies inside FSDP2's collectives (the
  all-gather output before its copy-out, the reduce-scatter input) are not in it.
* ``partial_peak_bytes``: the most bytes of HSDP's not-yet-all-reduced gradient shards
  alive at once, read at the same instants: the storage of every parameter group's
  ``_partial_reduce_output`` (``_fsdp_param_group.py`` L263, L734; kept between
  micro-batches in ``no-all-reduce``), the quantity of the replay's
  ``partial_grad_bytes``;
* ``allocator_peak_bytes`` (only with ``payload['allocator']``, default true): the
  profiler's running sum of CPU allocations
  (:func:`gradsched.runtime.cpu_memory.iteration_peak_bytes`), for reference only: on
  these runs it differs between ranks running the same program and misses frees (an
  address allocated twice with no free reported between), so no prediction is checked
  against it.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from gradsched.plan_sharded import ShardedPlan, Unit
from gradsched.runtime.accum_check import COUNTED, collectives_counted
from gradsched.runtime.cpu_memory import iteration_peak_bytes
from gradsched.runtime.fsdp2 import apply_plan
from gradsched.runtime.runners import Silence, accumulate, fsdp2_silence, sgd

MODES = ("no-sync", "sync-every", "no-all-reduce")
"""The modes this task runs (``no-all-reduce`` on an HSDP mesh only)."""


def stack(layers: int, width: int) -> nn.Module:
    """The measured model: ``layers`` square linear layers, seeded."""
    torch.manual_seed(0)
    return nn.Sequential(*(nn.Linear(width, width) for _ in range(layers)))


def stack_plan(layers: int) -> ShardedPlan:
    """Every layer its own unit, resharded after forward; FSDP2's default prefetch."""
    return ShardedPlan("per-layer", tuple(Unit((f"{i}.weight", f"{i}.bias"))
                                         for i in range(layers)))


def hsdp_silence(model: Any) -> Silence:
    """HSDP's reduce-scatter-only accumulation: ``set_requires_all_reduce(False)`` inside,
    true after (torch 2.14, ``_fully_shard.py`` L437-451, every unit: ``recurse=True``)."""
    @contextlib.contextmanager
    def silence() -> Iterator[None]:
        model.set_requires_all_reduce(False)
        try:
            yield
        finally:
            model.set_requires_all_reduce(True)
    return silence


def counted_by_group(world_size: int) -> contextlib.AbstractContextManager[Counter[str]]:
    """Counts ``"<kind>@<group ranks>"`` of the collectives of
    :data:`gradsched.runtime.accum_check.COUNTED` called inside (``group=`` as FSDP2 passes
    it; none: the world), the ``torch.distributed`` functions restored on exit."""

    def label(kind: str, keywords: dict[str, Any]) -> str:
        group = keywords.get("group")
        return f"{kind}@{dist.get_world_size(group) if group is not None else world_size}"
    return collectives_counted(Counter(), label)  # type: ignore[return-value]


def _mesh(payload: dict[str, Any]) -> Any:
    """The payload's HSDP mesh (None: FSDP2's default 1-D mesh of every rank)."""
    if payload.get("mesh") is None:
        return None
    from torch.distributed.device_mesh import init_device_mesh

    replicate, shard = (int(v) for v in payload["mesh"])
    return init_device_mesh("cpu", (replicate, shard), mesh_dim_names=("replicate", "shard"))


def _silence(net: Any, mode: str) -> Silence:
    if mode == "no-sync":
        return fsdp2_silence(net)
    if mode == "no-all-reduce":
        return hsdp_silence(net)
    return contextlib.nullcontext


def accumulation_modes(rank: int, world_size: int, payload: dict[str, Any]) -> dict[str, Any]:
    """Per ``"<mode>-k<k>"`` of ``payload['runs']`` (``[[mode, k], ...]``): the collectives
    of the measured step by kind and by kind and group size, FSDP2's held bytes and the
    allocation peak (module docstring); ``payload['mesh']``: ``[replicate, shard]``."""
    layers, width, batch = (int(payload[key]) for key in ("layers", "width", "batch"))
    mesh = _mesh(payload)
    if mesh is None and any(mode == "no-all-reduce" for mode, _ in payload["runs"]):
        raise ValueError("no-all-reduce needs an HSDP mesh (payload['mesh'])")
    out: dict[str, Any] = {}
    for mode, k in payload["runs"]:
        if mode not in MODES:
            raise ValueError(f"unknown accumulation mode {mode!r}")
        net = stack(layers, width)
        apply_plan(net, stack_plan(layers), mesh=mesh)
        opt = sgd(net)
        g = torch.Generator().manual_seed(1000 * rank + int(k))
        batches = [(torch.randn(batch, width, generator=g), torch.randn(batch, width,
                                                                      generator=g))
                   for _ in range(int(k))]
        silence = _silence(net, mode)

        def step(i: int, _net: Any = net, _opt: Any = opt, _b: Any = batches,
                 _k: int = int(k), _s: Any = silence) -> None:
            accumulate(lambda b: F.mse_loss(_net(b[0]), b[1]), _b, i, _k, _s)
            _opt.step()
            _opt.zero_grad(set_to_none=True)

        step(0)
        live, partial = fsdp_live_bytes(net), partial_bytes(net)
        samples: list[tuple[int, int]] = []
        handles = _sample_at_hooks(
            net, lambda _l=live, _p=partial, _s=samples: _s.append((_l(), _p())))
        with counted_by_group(world_size) as counts:
            step(1)
        for handle in handles:
            handle.remove()
        kinds = dict.fromkeys(sorted({kind for _, kind in COUNTED}), 0)
        for key, n in counts.items():
            kinds[key.split("@")[0]] += n
        out[f"{mode}-k{k}"] = {
            "collectives": kinds, "by_group": dict(sorted(counts.items())),
            "fsdp_peak_bytes": max(held for held, _ in samples),
            "partial_peak_bytes": max(shards for _, shards in samples),
            "allocator_peak_bytes": (iteration_peak_bytes(lambda s=step: s(2))
                                     if payload.get("allocator", True) else None)}
    return out


def partial_bytes(net: nn.Module) -> Callable[[], int]:
    """A reader of the bytes of HSDP's not-yet-all-reduced gradient shards (every parameter
    group's ``_partial_reduce_output``) held now."""
    groups = _groups(net)

    def held() -> int:
        return sum(group._partial_reduce_output.untyped_storage().nbytes()
                   for group in groups if group._partial_reduce_output is not None)
    return held


def _groups(net: nn.Module) -> list[Any]:
    """Every ``FSDPParamGroup`` of the sharded model."""
    from torch.distributed.fsdp import FSDPModule

    return [group for m in net.modules() if isinstance(m, FSDPModule)
            for group in m._get_fsdp_state()._fsdp_param_groups]


def _fsdp_params(net: nn.Module) -> list[Any]:
    """Every ``FSDPParam`` of the sharded model."""
    return [p for group in _groups(net) for p in group.fsdp_params]


def fsdp_live_bytes(net: nn.Module) -> Callable[[], int]:
    """A reader of the bytes of unsharded parameters and unsharded gradients FSDP2 holds
    now (module docstring); after the first step, when the unsharded parameters exist."""
    params, groups = _fsdp_params(net), _groups(net)

    def live() -> int:
        total = 0
        for group in groups:  # a prefetched all-gather not yet copied out
            pending = group._all_gather_result
            if pending is not None:
                total += pending.all_gather_output.untyped_storage().nbytes()
        for p in params:
            unsharded = getattr(p, "_unsharded_param", None)
            if unsharded is None:
                continue
            total += unsharded.untyped_storage().nbytes()
            for grad in (unsharded.grad, p.unsharded_accumulated_grad):
                if grad is not None:
                    total += grad.untyped_storage().nbytes()
        return total
    return live


def _sample_at_hooks(net: nn.Module, sample: Callable[[], None]) -> list[Any]:
    """``sample()`` at every unit's pre-forward (after FSDP2's own) and after every
    gradient accumulated into an unsharded parameter; the hooks' handles."""
    handles = [m.register_forward_pre_hook(lambda *_: sample()) for m in net.children()]
    handles += [p._unsharded_param.register_post_accumulate_grad_hook(lambda _: sample())
                for p in _fsdp_params(net)]
    return handles
