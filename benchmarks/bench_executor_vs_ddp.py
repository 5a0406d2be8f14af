"""The executor running DDP's own bucket plan vs PyTorch DDP itself.

Same model, same buckets (DDP's ``_compute_bucket_assignment_by_size`` over the observed
gradient-ready order with torch 2.14's caps: an explicit ``--bucket-cap-mb`` is also the first
bucket's cap, as DDP itself does; see :func:`gradsched.runtime.reference.ddp_bucket_plan`),
gloo, CPU, 2 ranks on
loopback. The two runs alternate ``--rounds`` times inside one launch (the same processes);
reported: the median of each one's pooled timed iterations, and the median over rounds of
the ratio of the two back-to-back runs (less exposed to drifting machine load). The
issue's aim: the executor at most 5 % slower than DDP (PyTorch DDP: Li et al., VLDB 2020).

    .venv/bin/python benchmarks/bench_executor_vs_ddp.py [--model mlp|resnet18-32] \\
        [--iters 10] [--warmup 3] [--rounds 5] [-o results.json]

Models (random init, synthetic data, built here so that every rank builds the same one):
``mlp`` -- 8 linear layers of 768x768 (4.7 M parameters, 18.9 MB of gradients), batch
32; ``resnet18-32`` -- torchvision ResNet-18 on 32x32 images (11.7 M parameters), batch 8.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def mlp_model(batch_size: int = 32, seq_len: int | None = None) -> tuple[Any, Any]:
    """8 x Linear(768, 768) with ReLU; MSE to a random target."""
    import torch
    from torch import nn

    layers: list[nn.Module] = []
    for _ in range(8):
        layers += [nn.Linear(768, 768), nn.ReLU()]
    model = nn.Sequential(*layers[:-1])
    gen = torch.Generator().manual_seed(1)

    def make_batch() -> tuple[torch.Tensor, torch.Tensor]:
        return (torch.randn(batch_size, 768, generator=gen),
                torch.randn(batch_size, 768, generator=gen))

    return model, make_batch


def resnet18_32(batch_size: int = 8, seq_len: int | None = None) -> tuple[Any, Any]:
    """torchvision ResNet-18 (random init) on 32x32 images, 10 classes."""
    import torch
    import torchvision

    model = torchvision.models.resnet18(weights=None, num_classes=10)
    gen = torch.Generator().manual_seed(1)

    def make_batch() -> tuple[torch.Tensor, torch.Tensor]:
        return (torch.randn(batch_size, 3, 32, 32, generator=gen),
                torch.randint(0, 10, (batch_size,), generator=gen))

    return model, make_batch


MODELS = {"mlp": ("benchmarks.bench_executor_vs_ddp:mlp_model", 32),
          "resnet18-32": ("benchmarks.bench_executor_vs_ddp:resnet18_32", 8)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=sorted(MODELS), default="mlp")
    parser.add_argument("--batch-size", type=int, default=None)
    parser.add_argument("--bucket-cap-mb", type=float, default=25.0)
    parser.add_argument("--world-size", type=int, default=2)
    parser.add_argument("--iters", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("-o", "--output", type=Path, default=None, help="results JSON")
    args = parser.parse_args(argv)

    # The ranks import the model factories from this file.
    sys.path.insert(0, str(REPO))
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(REPO), *([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])])
    import torch

    from gradsched.io import write_json_atomic
    from gradsched.runtime.bench import RunItem, run_items
    from gradsched.runtime.reference import ddp_bucket_plan, ready_order
    from gradsched.runtime.rounds import Launch, Timing
    from gradsched.workloads import build_model

    name, default_batch = MODELS[args.model]
    batch = args.batch_size or default_batch
    torch.set_num_threads(args.threads)
    spec = build_model(name, batch, seed=0)
    example = spec.make_batch()
    order = ready_order(spec.model, lambda: spec.loss(spec.model, example))
    plan = ddp_bucket_plan(spec.model, order, args.bucket_cap_mb)
    sizes = [sum(dict(spec.model.named_parameters())[n].numel() * 4 for n in b.tensors)
             for b in plan.buckets]
    print(f"{args.model}: {len(order)} tensors, DDP buckets (MB): "
          f"{[round(s / 2**20, 2) for s in sizes]}")
    items = []
    for _ in range(args.rounds):
        items.append(RunItem(label="executor(ddp buckets)", algorithm="executor",
                             plan=plan.to_dict()))
        items.append(RunItem(label=f"ddp bucket_cap_mb={args.bucket_cap_mb:g}",
                             algorithm="ddp-native", bucket_cap_mb=args.bucket_cap_mb))
    frame, _ = run_items(items, Timing(model=name, batch_size=batch, iters=args.iters,
                                       warmup=args.warmup),
                         Launch(world_size=args.world_size, threads=args.threads))
    pooled = {alg: frame.loc[frame["algorithm"] == alg, "iteration_s"].tolist()
              for alg in ("executor", "ddp-native")}
    med = {alg: statistics.median(v) for alg, v in pooled.items()}
    ratio = med["executor"] / med["ddp-native"]
    # Paired rounds (executor then DDP, back to back) are less exposed to load drift.
    per_round = [statistics.median(pooled["executor"][r * args.iters:(r + 1) * args.iters])
                 / statistics.median(pooled["ddp-native"][r * args.iters:(r + 1) * args.iters])
                 for r in range(args.rounds)]
    paired = statistics.median(per_round)
    try:
        load = os.getloadavg()[0]
    except OSError:  # pragma: no cover - not on every platform
        load = float("nan")
    print(f"median iteration: executor {med['executor'] * 1e3:.2f} ms, "
          f"DDP {med['ddp-native'] * 1e3:.2f} ms -> executor/DDP = {ratio:.3f} pooled, "
          f"{paired:.3f} median of paired rounds {[round(r, 3) for r in per_round]} "
          f"({'within' if paired <= 1.05 else 'OUTSIDE'} the 5% aim); "
          f"{len(pooled['executor'])} iterations each, {args.world_size} ranks, gloo, CPU, "
          f"load average {load:.1f} on {os.cpu_count()} CPUs")
    if args.output is not None:
        write_json_atomic(args.output, {
            "model": args.model, "batch_size": batch, "world_size": args.world_size,
            "bucket_cap_mb": args.bucket_cap_mb, "bucket_bytes": sizes,
            "median_s": med, "ratio": ratio, "paired_ratio": paired,
            "round_ratios": per_round, "load_average": load, "iterations": pooled,
            "threads": args.threads, "torch": torch.__version__})
    return 0


if __name__ == "__main__":
    sys.exit(main())
