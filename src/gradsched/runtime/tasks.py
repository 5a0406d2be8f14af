"""Launcher tasks of the executor (``gradsched.runtime.tasks:NAME``).

* :func:`exactness_cases` -- train many small (model, optimizer, plan) cases with the
  executor, and PyTorch DDP as a second reference, in one process group; return the final
  parameters and the per-step communication counts of every case.
"""

from __future__ import annotations

import datetime as dt
import os
from typing import Any

import torch
import torch.distributed as dist

from gradsched.capture.timers import round_trip
from gradsched.compression import make_compressor
from gradsched.plan import Plan
from gradsched.runtime.executor import PlanExecutor, Reduction
from gradsched.runtime.ps import PSClient, PSLayout, partition_schedule, serve, workers_group
from gradsched.runtime.reference import (
    loss_of,
    make_optimizer,
    make_shard,
    make_test_model,
    train_ddp,
)


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
                          timeout_s=float(payload.get("timeout_s", 60)),
                          reduction=Reduction(compressor=compressor,
                                              ranks_per_node=payload.get("ranks_per_node")))
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
                          reduction=Reduction(ps_client=PSClient(layout, schedule)))
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
    ``payload['iters']`` times, and times each round trip (the peer answers with one fp32
    element; :func:`gradsched.capture.timers.round_trip`); for the emulated cluster's node
    tests (which links are shaped)."""
    data = torch.zeros(int(payload["bytes"]) // 4)
    ack = torch.zeros(1)
    times: dict[str, list[float]] = {}
    for peer in payload["peers"]:
        for _ in range(int(payload["iters"])):
            took = round_trip(rank, 0, peer, data, ack)
            if rank == 0:
                times.setdefault(str(peer), []).append(took)
    dist.barrier()
    return {"rank": rank, "times_s": times}
