"""A two-rank CPU (gloo) DDP run profiled with ``torch.profiler`` (``record_shapes``), one
trace per rank: the real CPU input of ``gradsched diagnose`` in the tests (made here, not
committed). ``python tests/diagnose/gloo_step.py OUT PORT``."""

from __future__ import annotations

import os
import sys


def _rank(rank: int, world: int, out: str, port: int) -> None:
    import torch
    import torch.distributed as dist
    from torch.profiler import ProfilerActivity, profile, schedule

    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = torch.nn.Sequential(*[torch.nn.Linear(512, 512) for _ in range(8)])
    ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=1)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    x = torch.randn(64, 512)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True,
                 schedule=schedule(wait=1, warmup=1, active=3)) as prof:
        for _ in range(5):
            opt.zero_grad()
            ddp(x).sum().backward()
            opt.step()
            prof.step()
    prof.export_chrome_trace(f"{out}/rank{rank}.json")
    dist.destroy_process_group()


if __name__ == "__main__":
    import torch.multiprocessing as mp

    mp.spawn(_rank, args=(2, sys.argv[1], int(sys.argv[2])), nprocs=2)
