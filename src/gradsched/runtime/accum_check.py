"""Launcher task :func:`accumulation_check` (``gradsched.runtime.accum_check:
accumulation_check``): gradient accumulation checked on real ranks, kind by kind.

One optimizer step of ``k`` micro-batches (:func:`gradsched.runtime.runners.accumulate`:
the first ``k - 1`` in the kind's silence, each loss divided by ``k``) on a two-layer MLP,
the same seeded initialisation on every rank and per-rank seeded micro-batches. Kinds:

* ``plan``: gradsched's executor with an all-reduce plan (``ex.no_sync()``);
* ``ddp``: stock DDP (``no_sync()``);
* ``fsdp2``, ``fsdp2-noreshard``, ``fsdp2-keep``, ``fsdp2-keep-noreshard``: FSDP2, two
  units resharded after forward or not (``-noreshard``), the parameters resharded after
  every backward or kept unsharded between micro-batches (``-keep``:
  ``set_reshard_after_backward(False)`` on the silent ones;
  :func:`gradsched.runtime.runners.fsdp2_silence`); reported besides: whether every
  parameter is sharded again after the step;
* ``zero1`` / ``zero1-overlap``: stock DDP (``no_sync()``) with torch's
  ``ZeroRedundancyOptimizer`` (SGD), stepped after the last backward, or inside DDP's comm
  hook with ``overlap_with_ddp`` (:func:`gradsched.runtime.zero1.overlap_hook`; after the
  :data:`~gradsched.runtime.zero1.WARMUP` steps in which that hook steps nothing, run first
  on the same micro-batches).

Per kind: the collectives each micro-batch issued and those of the optimizer step after it
(counted at the ``torch.distributed`` calls: DDP's all-reduces through the Python comm hook
``default_hooks.allreduce_hook``, which calls ``dist.all_reduce``; ZeRO-1's parameter
broadcasts, ``dist.broadcast``), the largest difference between the step's averaged
gradient and the gradient of one un-accumulated backward on the concatenation of every
rank's micro-batches (mean-squared-error loss), and for ZeRO-1 the largest difference
between the step's update and ``-lr`` times that gradient (SGD's first step, momentum or
not).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel as DDP

from gradsched.plan import Bucket, Plan
from gradsched.plan_sharded import ShardedPlan, Unit
from gradsched.runtime.executor import PlanExecutor
from gradsched.runtime.fsdp2 import apply_plan
from gradsched.runtime.runners import accumulate, fsdp2_silence
from gradsched.runtime.zero1 import WARMUP as ZERO1_WARMUP
from gradsched.runtime.zero1 import overlap_hook

FSDP2_KINDS = {"fsdp2": (True, False), "fsdp2-noreshard": (False, False),
               "fsdp2-keep": (True, True), "fsdp2-keep-noreshard": (False, True)}
"""FSDP2 kinds: (units resharded after forward, parameters kept unsharded between
micro-batches)."""
KINDS = ("plan", "ddp", *FSDP2_KINDS, "zero1", "zero1-overlap")
LR = 0.1
COUNTED = (("all_reduce", "all_reduce"), ("all_gather_single", "all_gather"),
           ("all_gather_into_tensor", "all_gather"), ("reduce_scatter_single", "reduce_scatter"),
           ("reduce_scatter_tensor", "reduce_scatter"), ("broadcast", "broadcast"))
"""(``torch.distributed`` function, the collective it counts as)."""

Batch = tuple[torch.Tensor, torch.Tensor]
Grads = dict[str, torch.Tensor]


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))


def _batch(rank: int, micro: int) -> Batch:
    g = torch.Generator().manual_seed(1000 * rank + micro)
    return torch.randn(4, 6, generator=g), torch.randn(4, 3, generator=g)


@contextmanager
def collectives_counted(counts: dict[str, int], label: Callable[[str, dict[str, Any]], str]
                        ) -> Iterator[dict[str, int]]:
    """``counts`` with one added under ``label(kind, keywords)`` for every collective of
    :data:`COUNTED` called inside (the functions of ``torch.distributed`` wrapped, restored
    on exit)."""
    wrapped = {}
    for fn, kind in COUNTED:
        original = getattr(dist, fn, None)
        if original is None:
            continue

        def counted(*args: Any, _f: Any = original, _k: str = kind, **kw: Any) -> Any:
            key = label(_k, kw)
            counts[key] = counts.get(key, 0) + 1
            return _f(*args, **kw)
        wrapped[fn] = original
        setattr(dist, fn, counted)
    try:
        yield counts
    finally:
        for fn, original in wrapped.items():
            setattr(dist, fn, original)


@contextmanager
def counted_collectives() -> Iterator[dict[str, int]]:
    """Counts of the collectives of :data:`COUNTED` called inside, by kind."""
    with collectives_counted(dict.fromkeys(sorted({c for _, c in COUNTED}), 0),
                             lambda kind, _keywords: kind) as counts:
        yield counts


def accumulation_check(rank: int, world_size: int, payload: dict[str, Any]) -> dict[str, Any]:
    """One step of ``payload['k']`` micro-batches per kind of ``payload['kinds']`` (default
    :data:`KINDS`; module docstring): per kind ``per_micro_batch`` (collectives of each
    micro-batch), ``step`` (those of the optimizer step after the last backward),
    ``max_abs_diff`` (gradient against the un-accumulated one) and, for ZeRO-1,
    ``update_diff``."""
    k = int(payload["k"])
    mine = [_batch(rank, m) for m in range(k)]
    every = [_batch(r, m) for r in range(world_size) for m in range(k)]
    ref_model = _model()
    F.mse_loss(ref_model(torch.cat([x for x, _ in every])),
               torch.cat([y for _, y in every])).backward()
    reference = {n: p.grad.detach().clone() for n, p in ref_model.named_parameters()}
    out: dict[str, Any] = {}
    with counted_collectives() as counts:
        for kind in payload.get("kinds", KINDS):
            segments: list[dict[str, int]] = []

            def loss_of(net: Any, _segments: list[dict[str, int]] = segments
                        ) -> Callable[[Batch], torch.Tensor]:
                def loss(b: Batch) -> torch.Tensor:
                    _segments.append(dict(counts))  # the counts when this micro-batch starts
                    return F.mse_loss(net(b[0]), b[1])
                return loss

            grads, update, extra = _one_step(kind, loss_of, mine, k, segments, counts)
            per_micro = [{c: after[c] - before[c] for c in counts}
                         for before, after in itertools.pairwise(segments)]
            record = {"per_micro_batch": per_micro[:k],
                      "step": per_micro[k] if len(per_micro) > k else dict.fromkeys(counts, 0),
                      "max_abs_diff": _diff(grads, reference), **extra}
            if update is not None:
                record["update_diff"] = _diff(update, {n: LR * g for n, g in reference.items()})
            out[kind] = record
    return out


def _diff(a: Grads, b: Grads) -> float:
    return max(float((a[n] - b[n]).abs().max()) for n in b)


def _one_step(kind: str, loss_of: Callable[[Any], Callable[[Batch], torch.Tensor]],
              mine: list[Batch], k: int, segments: list[dict[str, int]],
              counts: dict[str, int]) -> tuple[Grads, Grads | None, dict[str, Any]]:
    """The step of one kind: its averaged gradient, its update (ZeRO-1) and what else it
    reports; ``segments`` gains the counts at the start of every micro-batch, after the
    last backward and (ZeRO-1) after the optimizer step."""
    net = _model()
    if kind == "plan":
        plan = Plan("accum", (Bucket(("2.weight", "2.bias")), Bucket(("0.weight", "0.bias"))))
        ex = PlanExecutor(net, plan, torch.optim.SGD(net.parameters(), lr=LR), timeout_s=60)
        accumulate(loss_of(net), mine, 0, k, ex.no_sync)
        segments.append(dict(counts))
        ex.synchronize_grads()
        grads = {n: p.grad.detach().clone() for n, p in net.named_parameters()}
        ex.close()
        return grads, None, {}
    if kind == "ddp":
        ddp = DDP(net)
        ddp.register_comm_hook(None, default_hooks.allreduce_hook)
        accumulate(loss_of(ddp), mine, 0, k, ddp.no_sync)
        segments.append(dict(counts))
        return {n: p.grad.detach().clone() for n, p in net.named_parameters()}, None, {}
    if kind in ("zero1", "zero1-overlap"):
        return _zero1_step(net, kind == "zero1-overlap", loss_of, mine, k, segments, counts)
    if kind in FSDP2_KINDS:
        from torch.distributed.tensor import DTensor

        reshard, keep = FSDP2_KINDS[kind]
        units = (Unit(("0.weight", "0.bias"), reshard), Unit(("2.weight", "2.bias"), reshard))
        plan = ShardedPlan("accum", units=units, forward_prefetch=0, backward_prefetch=1,
                           keep_unsharded_between_microbatches=keep)
        apply_plan(net, plan)
        accumulate(loss_of(net), mine, 0, k,
                   fsdp2_silence(net, plan.keep_unsharded_between_microbatches))
        segments.append(dict(counts))
        sharded = all(isinstance(p, DTensor) for p in net.parameters())
        return ({n: p.grad.full_tensor().detach().clone() for n, p in net.named_parameters()},
                None, {"sharded_after_step": sharded})
    raise ValueError(f"unknown kind {kind!r}")


def _zero1_step(net: nn.Module, overlap: bool,
                loss_of: Callable[[Any], Callable[[Batch], torch.Tensor]], mine: list[Batch],
                k: int, segments: list[dict[str, int]], counts: dict[str, int]
                ) -> tuple[Grads, Grads, dict[str, Any]]:
    """ZeRO-1 as :func:`gradsched.runtime.runners.make_runner` runs it (``zero1``)."""
    ddp = DDP(net)
    opt = ZeroRedundancyOptimizer(list(net.parameters()), optimizer_class=torch.optim.SGD,
                                  overlap_with_ddp=overlap, lr=LR)
    ddp.register_comm_hook(None, overlap_hook(ddp, opt) if overlap
                           else default_hooks.allreduce_hook)
    for _ in range(ZERO1_WARMUP if overlap else 0):  # the hook steps nothing yet
        accumulate(lambda b: F.mse_loss(ddp(b[0]), b[1]), mine, 0, k, ddp.no_sync)
        ddp.zero_grad(set_to_none=True)
    before = {n: p.detach().clone() for n, p in net.named_parameters()}
    accumulate(loss_of(ddp), mine, 0, k, ddp.no_sync)
    segments.append(dict(counts))
    grads = {n: p.grad.detach().clone() for n, p in net.named_parameters()}
    if not overlap:  # with overlap the hook stepped in the last backward
        opt.step()
    segments.append(dict(counts))
    update = {n: before[n] - p.detach() for n, p in net.named_parameters()}
    return grads, update, {}
