"""Launcher tasks of the executor (``gradsched.runtime.tasks:NAME``).

* :func:`exactness_cases` -- train many small (model, optimizer, plan) cases with the
  executor, and PyTorch DDP as a second reference, in one process group; return the final
  parameters and the per-step communication counts of every case.
"""

from __future__ import annotations

import datetime as dt
import itertools
import os
import time
from typing import Any

import torch
import torch.distributed as dist

from gradsched.compression import make_compressor
from gradsched.plan import Bucket, Plan
from gradsched.plan_sharded import ShardedPlan, Unit
from gradsched.runtime.executor import PlanExecutor
from gradsched.runtime.fsdp2 import apply_plan
from gradsched.runtime.ps import PSClient, PSLayout, partition_schedule, serve, workers_group
from gradsched.runtime.reference import (
    loss_of,
    make_optimizer,
    make_shard,
    make_test_model,
    train_ddp,
)
from gradsched.runtime.runners import accumulate, fsdp2_silence


def _flat(params: dict[str, Any]) -> dict[str, list[float]]:
    return {n: p.detach().reshape(-1).tolist() for n, p in params.items()}


def exactness_cases(rank: int, world_size: int, payload: dict[str, Any]) -> dict[str, Any]:
    """Run ``payload['cases']`` (each: id, model, optimizer, plan (dict), steps, batch,
    find_unused) with the executor and ``payload['ddp']`` (each: id, model, optimizer,
    steps, batch, bucket_cap_mb) with DDP. Fault injection for the tests:
    ``payload['die'] = [rank, step]`` makes that rank exit abruptly at that step."""
    out: dict[str, Any] = {"cases": {}, "ddp": {}}
    for case in payload.get("cases", []):
        seed = int(case.get("seed", 0))
        model = make_test_model(case["model"], seed)
        opt = make_optimizer(case["optimizer"], model.parameters())
        plan = Plan.from_dict(case["plan"])
        compressor = None
        if case.get("compressor"):
            compressor = make_compressor(**case["compressor"])
        ex = PlanExecutor(model, plan, opt, find_unused_parameters=bool(case["find_unused"]),
                          timeout_s=float(payload.get("timeout_s", 60)), compressor=compressor,
                          ranks_per_node=payload.get("ranks_per_node"))
        steps = []
        for step in range(int(case["steps"])):
            if payload.get("die") == [rank, step]:  # fault injection for the tests
                os._exit(17)
            x, y = make_shard(step, rank, world_size, int(case["batch"]), seed)
            loss_of(model, x, y).backward()
            ex.step()
            steps.append(ex.stats.to_dict())
        ex.flush()
        ex.close()
        out["cases"][case["id"]] = {"params": _flat(dict(model.named_parameters())),
                                    "stats": steps, "expected": ex.expected_stats()}
    for ref in payload.get("ddp", []):
        params = train_ddp(ref["model"], ref["optimizer"], rank, world_size, int(ref["steps"]),
                           int(ref["batch"]), int(ref.get("seed", 0)),
                           float(ref.get("bucket_cap_mb", 25.0)))
        out["ddp"][ref["id"]] = _flat(params)
    return out


def ps_exactness_cases(rank: int, world_size: int, payload: dict[str, Any]) -> dict[str, Any]:
    """Parameter-server runs of ``payload['cases']`` (as :func:`exactness_cases`) with
    ``payload['workers']`` workers; the other ranks are servers (runtime/ps.py).

    Fault injection for the tests: ``payload['die'] = [rank, step]`` makes that rank exit
    abruptly (``os._exit``) at the start of that step of the first case."""
    layout = PSLayout(int(payload["workers"]), world_size - int(payload["workers"]))
    timeout = dt.timedelta(seconds=float(payload.get("timeout_s", 60)))
    group = workers_group(layout, timeout)
    out: dict[str, Any] = {"cases": {}, "served": {}}
    for case in payload["cases"]:
        seed = int(case.get("seed", 0))
        model = make_test_model(case["model"], seed)
        plan = Plan.from_dict(case["plan"])
        numel = {n: p.numel() for n, p in model.named_parameters() if p.requires_grad}
        schedule = partition_schedule(plan, numel, layout.servers, bool(case["find_unused"]))
        die = payload.get("die")
        if die is not None and die[0] == rank and die[1] == 0:
            os._exit(17)
        if layout.is_server(rank):
            out["served"][case["id"]] = serve(layout, schedule, int(case["steps"]), timeout)
            continue
        opt = make_optimizer(case["optimizer"], model.parameters())
        ex = PlanExecutor(model, plan, opt, process_group=group,
                          find_unused_parameters=bool(case["find_unused"]),
                          timeout_s=timeout.total_seconds(),
                          ps_client=PSClient(layout, schedule))
        steps = []
        for step in range(int(case["steps"])):
            if die is not None and die[0] == rank and die[1] == step:
                os._exit(17)
            x, y = make_shard(step, rank, layout.workers, int(case["batch"]), seed)
            loss_of(model, x, y).backward()
            ex.step()
            steps.append(ex.stats.to_dict())
        ex.flush()
        ex.close()
        out["cases"][case["id"]] = {"params": _flat(dict(model.named_parameters())),
                                    "stats": steps}
    return out


def p2p_link_times(rank: int, world_size: int, payload: dict[str, Any]) -> dict[str, Any]:
    """Rank 0 sends ``payload['bytes']`` to each rank in ``payload['peers']`` in turn,
    ``payload['iters']`` times, and times each round trip's send (the peer answers with
    one byte); for the emulated cluster's node tests (which links are shaped)."""
    data = torch.zeros(int(payload["bytes"]) // 4)
    ack = torch.zeros(1)
    times: dict[str, list[float]] = {}
    for peer in payload["peers"]:
        for _ in range(int(payload["iters"])):
            if rank == 0:
                start = time.perf_counter()
                dist.send(data, dst=peer)
                dist.recv(ack, src=peer)
                times.setdefault(str(peer), []).append(time.perf_counter() - start)
            elif rank == peer:
                dist.recv(data, src=0)
                dist.send(ack, dst=0)
    dist.barrier()
    return {"rank": rank, "times_s": times}


def accumulation_check(rank: int, world_size: int, payload: dict[str, Any]) -> dict[str, Any]:
    """One optimizer step of ``payload['k']`` micro-batches with each of the executor
    (an all-reduce plan), stock DDP and FSDP2, through
    :func:`gradsched.runtime.runners.accumulate`; per kind, the collectives each
    micro-batch issued (counted at the ``torch.distributed`` calls, and for DDP by a
    counting comm hook) and the largest difference between the step's averaged gradient
    and the gradient of one un-accumulated backward on the concatenation of every rank's
    micro-batches (mean-squared-error loss)."""
    import torch.nn.functional as F
    from torch import nn
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    from torch.nn.parallel import DistributedDataParallel as DDP


    k = int(payload["k"])

    def model() -> nn.Module:
        torch.manual_seed(0)
        return nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3))

    def batch(r: int, m: int) -> tuple[torch.Tensor, torch.Tensor]:
        g = torch.Generator().manual_seed(1000 * r + m)
        return torch.randn(4, 6, generator=g), torch.randn(4, 3, generator=g)

    mine = [batch(rank, m) for m in range(k)]
    every = [batch(r, m) for r in range(world_size) for m in range(k)]
    ref_model = model()
    F.mse_loss(ref_model(torch.cat([x for x, _ in every])),
               torch.cat([y for _, y in every])).backward()
    reference = {n: p.grad.detach().clone() for n, p in ref_model.named_parameters()}

    counts = {"all_reduce": 0, "all_gather": 0, "reduce_scatter": 0}
    wrapped = {}
    for fn, kind in (("all_reduce", "all_reduce"), ("all_gather_single", "all_gather"),
                     ("all_gather_into_tensor", "all_gather"),
                     ("reduce_scatter_single", "reduce_scatter"),
                     ("reduce_scatter_tensor", "reduce_scatter")):
        original = getattr(dist, fn, None)
        if original is None:
            continue

        def counted(*args: Any, _f: Any = original, _k: str = kind, **kw: Any) -> Any:
            counts[_k] += 1
            return _f(*args, **kw)
        wrapped[fn] = original
        setattr(dist, fn, counted)

    def ddp_hook(state: Any, bucket: Any) -> Any:
        counts["all_reduce"] += 1
        return default_hooks.allreduce_hook(state, bucket)
    # DDP checks the annotations themselves (strings under postponed evaluation fail)
    ddp_hook.__annotations__.update(bucket=dist.GradBucket,
                                    **{"return": torch.futures.Future[torch.Tensor]})

    def counting_loss(net: Any, segments: list[dict[str, int]]) -> Any:
        def loss(b: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
            segments.append(dict(counts))  # the counts when this micro-batch starts
            return F.mse_loss(net(b[0]), b[1])
        return loss

    out: dict[str, Any] = {}
    try:
        for kind in ("plan", "ddp", "fsdp2"):
            net = model()
            segments: list[dict[str, int]] = []
            loss = counting_loss(net, segments)

            if kind == "plan":
                plan = Plan("accum", (Bucket(("2.weight", "2.bias")),
                                      Bucket(("0.weight", "0.bias"))))
                ex = PlanExecutor(net, plan, torch.optim.SGD(net.parameters(), lr=0.1),
                                  timeout_s=60)
                accumulate(loss, mine, 0, k, ex.no_sync)
                segments.append(dict(counts))
                ex.synchronize_grads()
                grads = {n: p.grad.detach().clone() for n, p in net.named_parameters()}
                ex.close()
            elif kind == "ddp":
                ddp = DDP(net)
                ddp.register_comm_hook(None, ddp_hook)
                accumulate(counting_loss(ddp, segments), mine, 0, k, ddp.no_sync)
                segments.append(dict(counts))
                grads = {n: p.grad.detach().clone() for n, p in net.named_parameters()}
            else:
                units = (Unit(("0.weight", "0.bias"), True), Unit(("2.weight", "2.bias"), True))
                apply_plan(net, ShardedPlan("accum", units=units, forward_prefetch=0,
                                            backward_prefetch=1))
                accumulate(loss, mine, 0, k, fsdp2_silence(net))
                segments.append(dict(counts))
                grads = {n: p.grad.full_tensor().detach().clone()
                         for n, p in net.named_parameters()}
            per_micro = [{c: after[c] - before[c] for c in counts}
                         for before, after in itertools.pairwise(segments)]
            out[kind] = {"per_micro_batch": per_micro,
                         "max_abs_diff": max(float((grads[n] - reference[n]).abs().max())
                                             for n in reference)}
    finally:
        for fn, original in wrapped.items():
            setattr(dist, fn, original)
    return out
