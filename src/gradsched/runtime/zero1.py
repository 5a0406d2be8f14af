"""ZeRO-1 for real: DDP + torch's ``ZeroRedundancyOptimizer`` on a zoo model (gloo or NCCL).

Launcher task :func:`zero1_check` (``gradsched.runtime.zero1:zero1_check``): on every
rank, train zoo model ``payload['model']`` for ``payload['steps']`` steps three ways from
the same seeded initialisation and the same per-rank batches, and return the final
parameters of each:

* ``ddp``: DDP + ``torch.optim.SGD`` (the reference);
* ``zero``: DDP + ``ZeroRedundancyOptimizer(SGD)``, ``step()`` after backward (each rank
  steps its partition, then ``_sync_params`` broadcasts every parameter from its owner);
* ``zero_overlap``: ``ZeroRedundancyOptimizer(SGD, overlap_with_ddp=True)`` with DDP's comm
  hook ``ddp_zero_hook.hook_with_zero_step(allreduce_hook, ...)`` (the owner of bucket k,
  rank ``k mod P``, steps it after its all-reduce, then broadcasts it; see
  :mod:`gradsched.planners.zero1_torch`).

Two things the torch code imposes (torch 2.14.1):

* ``hook_with_zero_step`` refuses a gloo process group when it is built ("Gloo backend
  using Overlapping DDP with ZeRO may meet hangs", ``ddp_zero_hook.py`` L244-248). On gloo
  this runner builds the hook with that one check answered as ``nccl`` (``dist.get_backend``
  patched for the duration of the call only); the hook itself runs unchanged. Short runs of
  2 ranks and a tiny model finish; whether longer ones hang is not known.
* With ``overlap_with_ddp`` the first ``WARMUP`` = 2 iterations step nothing (DDP's buckets
  are final only at the second forward, ``static_graph=False``;
  ``zero_redundancy_optimizer.py`` L362-373). The reference therefore skips its optimizer
  step in the first ``WARMUP`` iterations of that comparison (``ddp_warmup``), and both run
  ``steps + WARMUP`` iterations.
"""

from __future__ import annotations

from typing import Any
from unittest import mock

import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import ddp_zero_hook, default_hooks
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel as DDP

from gradsched.workloads.zoo import build_model

WARMUP = 2
"""Iterations ``hook_with_zero_step`` runs without an update (``static_graph=False``)."""
LR, MOMENTUM = 0.05, 0.9


def overlap_hook(ddp: Any, opt: Any) -> Any:
    """``hook_with_zero_step(allreduce_hook, ddp, opt)``, built on gloo too (its gloo
    check answered as ``nccl`` for the duration of the call; module docstring)."""
    with mock.patch.object(dist, "get_backend", return_value="nccl"):
        return ddp_zero_hook.hook_with_zero_step(default_hooks.allreduce_hook, ddp, opt)


def _batches(model: str, rank: int, batch: int, n: int) -> list[Any]:
    """This rank's ``n`` batches (seeded by rank, the same for every mode)."""
    spec = build_model(model, batch, seed=1000 + rank)
    return [spec.make_batch() for _ in range(n)]


def _train(mode: str, model: str, rank: int, batches: list[Any], bucket_cap_mb: float,
           skip_steps: int = 0) -> dict[str, list[float]]:
    spec = build_model(model, 1, seed=0)  # the same initialisation on every rank
    net = spec.model
    ddp = DDP(net, bucket_cap_mb=bucket_cap_mb)
    if mode == "ddp":
        opt: Any = torch.optim.SGD(net.parameters(), lr=LR, momentum=MOMENTUM)
    else:
        opt = ZeroRedundancyOptimizer(net.parameters(), optimizer_class=torch.optim.SGD,
                                      overlap_with_ddp=mode == "zero_overlap", lr=LR,
                                      momentum=MOMENTUM)
    if mode == "zero_overlap":
        ddp.register_comm_hook(None, overlap_hook(ddp, opt))
    for i, b in enumerate(batches):
        ddp.zero_grad(set_to_none=True)
        spec.loss(ddp, b).backward()
        if mode != "zero_overlap" and i >= skip_steps:
            opt.step()
    return {n: p.detach().reshape(-1).tolist() for n, p in net.named_parameters()}


def zero1_check(rank: int, world_size: int, payload: dict[str, Any]) -> dict[str, Any]:
    """Final parameters of ``ddp``, ``zero`` (``steps`` iterations) and ``zero_overlap``
    with its reference ``ddp_warmup`` (``steps + WARMUP`` iterations)."""
    model, steps = str(payload.get("model", "tiny-mlp")), int(payload["steps"])
    batch = int(payload.get("batch", 4))
    cap = float(payload.get("bucket_cap_mb", 0.02))  # several buckets for the hook
    batches = _batches(model, rank, batch, steps + WARMUP)
    out = {"initial": _train("ddp", model, rank, [], cap),
           "ddp": _train("ddp", model, rank, batches[:steps], cap),
           "zero": _train("zero", model, rank, batches[:steps], cap),
           "ddp_warmup": _train("ddp", model, rank, batches, cap, skip_steps=WARMUP),
           "zero_overlap": _train("zero_overlap", model, rank, batches, cap)}
    return out
