"""Small tasks used by the launcher's own tests (and as examples of the task signature)."""

from __future__ import annotations

import os
import time
from typing import Any


def allreduce_ranks(rank: int, world_size: int, payload: dict[str, Any]) -> dict[str, Any]:
    """All-reduce each rank's id; every rank must see sum(range(world_size))."""
    import torch
    import torch.distributed as dist

    value = torch.tensor([float(rank)])
    dist.all_reduce(value)
    return {"rank": rank, "sum": float(value.item())}


def die_on_rank(rank: int, world_size: int, payload: dict[str, Any]) -> dict[str, Any]:
    """Rank ``payload['victim']`` dies abruptly; the others wait in a collective."""
    import torch
    import torch.distributed as dist

    if rank == payload["victim"]:
        time.sleep(0.2)
        os._exit(17)
    value = torch.zeros(1)
    dist.all_reduce(value)  # never completes: the launcher must stop this rank
    return {"rank": rank}
