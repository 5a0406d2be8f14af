"""The measurement on each rank of a collective sweep (see :mod:`gradsched.capture.sweep`
for the method): per point, the buffers and a check of the first result, timed by
:func:`gradsched.capture.timers.time_calls` (checked warm-ups, adaptive iteration counts
agreed by all ranks, timed collectives after a barrier), and the p2p ping-pong
(:func:`gradsched.capture.timers.round_trip`). Imports torch when it runs."""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from typing import Any

from gradsched.capture.sweep_settings import ELEMENT_BYTES, IN_PLACE_ONLY, P2P, SweepError
from gradsched.capture.timers import CallCounts, agree_max, round_trip, time_calls


def sweep_task(rank: int, world_size: int, payload: dict[str, Any]) -> dict[str, Any]:
    """Run the sweep on one rank (the process group is already initialised).

    ``payload``: ``backend``, ``collectives``, ``sizes`` ({collective: [bytes]}),
    ``iters``, ``warmup``, ``min_iters``, ``time_budget_s``, ``in_place``; optionally
    ``fault`` ({"rank", "collective", "bytes"}: that rank exits abruptly there; a test hook).
    Returns the per-iteration times of this rank.
    """
    import torch

    device = torch.device("cuda", torch.cuda.current_device()) if payload["backend"] == "nccl" \
        else torch.device("cpu")
    sync: Callable[[], None] = (torch.cuda.synchronize if device.type == "cuda"
                                else (lambda: None))
    fault = payload.get("fault") or {}
    agree = agree_max(device)
    counts = CallCounts(int(payload["warmup"]), int(payload["min_iters"]),
                        int(payload["iters"]), float(payload["time_budget_s"]))

    results = []
    for coll in payload["collectives"]:
        for nbytes in payload["sizes"][coll]:
            if fault and fault.get("rank") == rank and fault.get("collective") == coll \
                    and int(fault.get("bytes", 0)) <= nbytes:
                os._exit(int(fault.get("exit_code", 17)))
            if coll == P2P:
                results.append(_pingpong(nbytes, rank, counts, device, agree))
                continue
            op, check = _make_op(coll, nbytes, rank, world_size, payload["in_place"], device)

            def synced(op: Callable[[], None] = op) -> None:
                op()
                sync()

            point = time_calls(synced, counts, agree, check)
            results.append({"collective": coll, "bytes": nbytes, "warmup": point.warmup,
                            "times_s": point.times_s})
            del op, check
    return {"rank": rank, "host": socket.gethostname(), "threads": torch.get_num_threads(),
            "results": results}


def _pingpong(nbytes: int, rank: int, counts: CallCounts, device: Any,
              agree: Callable[[float], float]) -> dict[str, Any]:
    """One p2p point on rank 0 or 1: round-trip times (seconds) of ``nbytes`` messages.

    Follows OSU's ``osu_latency`` (rank 0: send then recv; rank 1: recv then send back;
    :func:`~gradsched.capture.timers.round_trip`), timed as the collectives are
    (:func:`~gradsched.capture.timers.time_calls`): the first (checked) round trip sets
    the warm-up and iteration counts, then one barrier and the timed round trips back to
    back.
    """
    import torch

    buf = torch.full((nbytes // ELEMENT_BYTES,), float(rank + 1), dtype=torch.float32,
                     device=device)

    def check() -> None:
        _expect(buf, 1.0, P2P, nbytes, rank)  # rank 1 echoed rank 0's ones back

    point = time_calls(lambda: round_trip(rank, 0, 1, buf, buf), counts, agree, check,
                       barrier_each=False)
    return {"collective": P2P, "bytes": nbytes, "warmup": point.warmup,
            "times_s": point.times_s}


def _make_op(coll: str, nbytes: int, rank: int, world: int, in_place: bool, device: Any
             ) -> tuple[Callable[[], None], Callable[[], None]]:
    """Buffers for one measurement: (the operation, a check of its first result).

    Buffers are filled with ``rank + 1`` for the first (checked) operation, then zeroed so
    repeated in-place reductions cannot overflow.
    """
    import torch
    import torch.distributed as dist

    numel = nbytes // ELEMENT_BYTES
    value = float(rank + 1)
    total = world * (world + 1) / 2.0
    if coll in IN_PLACE_ONLY:
        buf = torch.full((numel,), value, dtype=torch.float32, device=device)
        if coll == "all_reduce":
            def op() -> None:
                dist.all_reduce(buf)
            expected = total
        elif coll == "broadcast":
            def op() -> None:
                dist.broadcast(buf, src=0)
            expected = 1.0
        else:
            def op() -> None:
                dist.reduce(buf, dst=0)
            expected = total if rank == 0 else None

        def check() -> None:
            if expected is not None:
                _expect(buf, expected, coll, nbytes, rank)
            buf.zero_()
        return op, check
    chunk = numel // world
    if coll == "all_gather":
        out = torch.empty(numel, dtype=torch.float32, device=device)
        inp = out.narrow(0, rank * chunk, chunk) if in_place else torch.empty(
            chunk, dtype=torch.float32, device=device)
        inp.fill_(value)

        def op() -> None:
            dist.all_gather_into_tensor(out, inp)

        def check() -> None:
            want = torch.arange(1, world + 1, dtype=torch.float32, device=device)
            got = out.view(world, chunk)
            if not torch.equal(got, want.view(world, 1).expand(world, chunk)):
                raise SweepError(f"all_gather of {nbytes} bytes gave a wrong result on rank "
                                 f"{rank}")
            out.zero_()
            inp.zero_()
        return op, check
    # reduce_scatter
    big = torch.full((numel,), value, dtype=torch.float32, device=device)
    res = big.narrow(0, rank * chunk, chunk) if in_place else torch.empty(
        chunk, dtype=torch.float32, device=device)

    def op() -> None:
        dist.reduce_scatter_tensor(res, big)

    def check() -> None:
        _expect(res, total, coll, nbytes, rank)
        big.zero_()
        res.zero_()
    return op, check


def _expect(tensor: Any, value: float, coll: str, nbytes: int, rank: int) -> None:
    import torch

    if not bool(torch.all(tensor == value)):
        raise SweepError(f"{coll} of {nbytes} bytes gave a wrong result on rank {rank} "
                         f"(expected every element to be {value:g})")


__all__ = ["sweep_task"]
