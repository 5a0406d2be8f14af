"""Small tasks used by the launcher's own tests (and as examples of the task signature)."""

from __future__ import annotations

import os
import threading
import time
from typing import Any

from gradsched.io import write_text_atomic


def allreduce_ranks(rank: int, world_size: int, payload: dict[str, Any]) -> dict[str, Any]:
    """All-reduce each rank's id; every rank must see sum(range(world_size))."""
    import torch
    import torch.distributed as dist

    value = torch.tensor([float(rank)])
    dist.all_reduce(value)
    return {"rank": rank, "sum": float(value.item())}


def leave_thread_running(rank: int, world_size: int, payload: dict[str, Any]) -> dict[str, Any]:
    """Return while a non-daemon thread still waits (as a task that forgets a helper thread,
    or a library that keeps one, does): the rank must exit anyway once its result is
    written."""
    threading.Thread(target=threading.Event().wait, args=(600.0,), daemon=False).start()
    return {"rank": rank}


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


def block_after_ready(rank: int, world_size: int, payload: dict[str, Any]) -> dict[str, Any]:
    """Write ``rank<k>.ready`` into ``payload['ready_dir']``, then block: rank 0 in Python
    (``time.sleep``), the others inside a C++ all-reduce that rank 0 never joins. For the
    fault tests: whoever kills the launcher must see every rank go."""
    import torch
    import torch.distributed as dist

    write_text_atomic(os.path.join(payload["ready_dir"], f"rank{rank}.ready"), str(os.getpid()))
    if rank == 0:
        time.sleep(float(payload["sleep_s"]))
        return {"rank": rank}
    dist.all_reduce(torch.zeros(1))
    return {"rank": rank}
