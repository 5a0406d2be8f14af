"""Host-side cost of the plan executor: PyTorch DDP vs the executor on ONE rank.

World size 1 (one process, gloo on CPU or NCCL on a GPU), so there is no communication at
all and every difference between the runs is what the host spends issuing, waiting and
updating: PyTorch DDP (default ``bucket_cap_mb``) against :class:`PlanExecutor` running the
plans of ``--plans`` (default: ddp, dear = per-layer update with ``rs_ag`` buckets,
bytescheduler = chunked buckets with priorities and per-layer update, mgwfbp). The variants
alternate in every one of ``--rounds`` rounds (same process); reported per plan: the median
iteration over all rounds and the median over rounds of its ratio to DDP in the same round
(less exposed to drifting machine load). Aim: per-layer and chunked plans <= 1.10 x DDP.

Plans: made here with ``python -m gradsched plan`` (whichever gradsched is on PYTHONPATH,
so the script runs unchanged against an old and a new tree) from a committed compute trace
(``--trace``; default ``traces/compute/cpu/resnet18-b4-cpu-fp32.csv`` for resnet18-32 and
``traces/compute/cpu/resnet50-b16-cpu-fp32.csv`` for resnet50) with alpha-beta 20 us +
20 ps/B at P = 8 (the recipe of the H200 executor data), or read from ``--plan-dir``
(``<name>.plan.json`` or ``<model>-<name>.plan.json``).

CPU, host-bound (ResNet-18 on 32x32 images, batch 2: batch 1 leaves layer4 one value per
channel, which training batch norm refuses)::

    PYTHONPATH=src .venv/bin/python benchmarks/bench_executor_host.py -o host-cpu.json

One GPU (ResNet-50, batch 64, 224x224, as the H200 data)::

    PYTHONPATH=src .venv/bin/python benchmarks/bench_executor_host.py --device cuda \\
        --backend nccl --model resnet50 --batch-size 64 --threads 8 -o host-gpu.json

Timing: the period between iteration starts (the host's pace; a per-layer update runs in
the next forward), the last period ending after ``flush()`` and a device synchronisation,
as :func:`gradsched.runtime.rounds.timed_iterations`; beside it the process's CPU seconds per
iteration (all threads), less exposed to foreign load on a shared machine. SGD, momentum
0.9, lr 0.01.
"""

from __future__ import annotations

import argparse
import copy
import itertools
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
TRACES = {"resnet18-32": "traces/compute/cpu/resnet18-b4-cpu-fp32.csv",
          "resnet50": "traces/compute/cpu/resnet50-b16-cpu-fp32.csv"}
COMM = "alpha-beta:alpha=2e-5,beta=2e-11"
PLAN_WORLD = 8
DDP = "ddp-native"


def build(model: str, batch: int, device: str) -> tuple[Any, Any]:
    """(module, batch) for ``model``: torchvision ResNet-18 (10 classes, 32x32) or ResNet-50
    (1000 classes, 224x224), random init, on ``device``."""
    import torch
    import torchvision

    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    if model == "resnet18-32":
        net, side, classes = torchvision.models.resnet18(weights=None, num_classes=10), 32, 10
    else:
        net, side, classes = torchvision.models.resnet50(weights=None), 224, 1000
    x = torch.randn(batch, 3, side, side, generator=gen)
    y = torch.randint(0, classes, (batch,), generator=gen)
    return net.to(device), (x.to(device), y.to(device))


def make_plans(names: list[str], model: str, trace: str | None, plan_dir: Path | None,
               work: Path) -> dict[str, Any]:
    """Each planner's plan, read from ``plan_dir`` or made with ``gradsched plan``."""
    from gradsched.plan import Plan

    plans = {}
    for name in names:
        found = [plan_dir / f for f in (f"{name}.plan.json", f"{model}-{name}.plan.json")
                 if plan_dir is not None and (plan_dir / f).is_file()]
        if found:
            plans[name] = Plan.load(found[0])
            continue
        out = work / f"{name}.plan.json"
        subprocess.run([sys.executable, "-m", "gradsched", "plan", "--compute",
                        str(REPO / (trace or TRACES[model])), "--comm", COMM, "--world-size",
                        str(PLAN_WORLD), "--algorithm", name, "-o", str(out)],
                       check=True, stdout=subprocess.DEVNULL)
        plans[name] = Plan.load(out)
    return plans


def run_variant(plan: Any, base: Any, batch: Any, device: str, warmup: int, iters: int
                ) -> tuple[list[float], float]:
    """Periods between iteration starts of ``iters`` timed iterations of one variant
    (``plan`` None: PyTorch DDP) on a fresh copy of ``base``, and the process's CPU
    seconds per timed iteration (all its threads; less sensitive to foreign load)."""
    import torch
    from torch.nn.parallel import DistributedDataParallel

    from gradsched.runtime.executor import PlanExecutor

    model = copy.deepcopy(base)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    ex = None
    if plan is None:
        runner = DistributedDataParallel(
            model, device_ids=[torch.device(device).index or 0] if device != "cpu" else None)
    else:
        ex = PlanExecutor(model, plan, opt)
        runner = model

    def one() -> None:
        loss_fn(runner(batch[0]), batch[1]).backward()
        if ex is not None:
            ex.step()
        else:
            opt.step()
            opt.zero_grad(set_to_none=True)

    def settle() -> None:
        if ex is not None:
            ex.flush()
        if device != "cpu":
            torch.cuda.synchronize()

    for _ in range(warmup):
        one()
    settle()
    starts = []
    cpu0 = time.process_time()
    for _ in range(iters):
        starts.append(time.perf_counter())
        one()
    settle()
    starts.append(time.perf_counter())
    cpu = (time.process_time() - cpu0) / iters
    if ex is not None:
        ex.close()
    return [b - a for a, b in itertools.pairwise(starts)], cpu


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def summarize(times: dict[str, list[list[float]]], cpu: dict[str, list[float]]
              ) -> dict[str, Any]:
    """Median iteration per variant (pooled rounds) and its median per-round ratio to DDP;
    the same for the CPU seconds per iteration."""
    out: dict[str, Any] = {}
    for name, rounds in times.items():
        pooled = [t for r in rounds for t in r]
        ratios = [statistics.median(r) / statistics.median(d)
                  for r, d in zip(rounds, times[DDP], strict=True)]
        out[name] = {"median_s": statistics.median(pooled),
                     "ratio_to_ddp": statistics.median(ratios),
                     "round_ratios": ratios,
                     "cpu_s": statistics.median(cpu[name]),
                     "cpu_ratio_to_ddp": statistics.median(
                         c / d for c, d in zip(cpu[name], cpu[DDP], strict=True))}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=sorted(TRACES), default="resnet18-32")
    parser.add_argument("--batch-size", type=int, default=2)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--backend", choices=["gloo", "nccl"], default="gloo")
    parser.add_argument("--plans", default="ddp,dear,bytescheduler,mgwfbp")
    parser.add_argument("--trace", default=None, help="compute trace to plan from")
    parser.add_argument("--plan-dir", type=Path, default=None)
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("-o", "--output", type=Path, default=None, help="results JSON")
    args = parser.parse_args(argv)

    import torch
    import torch.distributed as dist

    from gradsched.io import write_json_atomic
    from gradsched.provenance import load_average, machine_info

    torch.set_num_threads(args.threads)
    if args.device.startswith("cuda"):
        torch.cuda.set_device(torch.device(args.device).index or 0)
    with tempfile.TemporaryDirectory() as tmp:
        plans = make_plans(args.plans.split(","), args.model, args.trace, args.plan_dir,
                           Path(tmp))
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(_free_port()))
    dist.init_process_group(args.backend, rank=0, world_size=1)
    base, batch = build(args.model, args.batch_size, args.device)
    load_before = load_average()
    times: dict[str, list[list[float]]] = {DDP: [], **{n: [] for n in plans}}
    cpu: dict[str, list[float]] = {name: [] for name in times}
    for _ in range(args.rounds):
        for name in times:
            periods, cpu_s = run_variant(plans.get(name), base, batch, args.device,
                                         args.warmup, args.iters)
            times[name].append(periods)
            cpu[name].append(cpu_s)
    load_after = load_average()
    dist.destroy_process_group()
    result = summarize(times, cpu)
    for name, r in result.items():
        print(f"{name:>14}: {r['median_s'] * 1e3:8.2f} ms  x{r['ratio_to_ddp']:.3f} DDP;  "
              f"CPU {r['cpu_s'] * 1e3:8.2f} ms  x{r['cpu_ratio_to_ddp']:.3f} DDP")
    print(f"{args.model} b{args.batch_size} on {args.device} ({args.backend}, 1 rank), "
          f"{args.rounds} rounds x {args.iters} iterations, load average "
          f"{load_before} -> {load_after}")
    if args.output is not None:
        write_json_atomic(args.output, {
            "model": args.model, "batch_size": args.batch_size, "device": args.device,
            "backend": args.backend, "world_size": 1, "threads": args.threads,
            "iters": args.iters, "warmup": args.warmup, "rounds": args.rounds,
            "plans": {n: p.to_dict() for n, p in plans.items()}, "results": result,
            "iteration_s": times, "cpu_s_per_iteration": cpu, "load_average_before": load_before,
            "load_average_after": load_after, "machine": machine_info(args.device)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
