"""Collective sweeps with ``torch.distributed``: ``gradsched capture comm``.

    gradsched capture comm --backend gloo --world-size 4 \\
        --collectives all_reduce,reduce_scatter,all_gather,broadcast \\
        --min-bytes 4 --max-bytes 256M --factor 2 [--iters 20] [--warmup 3] \\
        [--time-budget-s 1] [--cluster 1gbit] [--torchrun] -o OUT.csv

Measures each collective at message sizes from ``--min-bytes`` to ``--max-bytes`` (growing
by ``--factor``) and writes a comm trace (``traces/README.md``) plus its sidecar.
The command line is in :mod:`gradsched.commands.capture`.

Method (per collective and size, on every rank, fp32 tensors):

* the first warm-up operation runs on known data and its result is checked (a wrong
  result fails the run); the buffers are then zeroed;
* up to ``--warmup`` warm-up operations in all (fewer when they would take more than a
  quarter of ``--time-budget-s``), then ``n`` timed operations, where
  ``n = clamp(time_budget_s / t_warm, min_iters, iters)`` and ``t_warm`` is the slowest
  rank's last warm-up time: small messages get ``--iters`` iterations, large ones fewer,
  so the whole sweep stays bounded. All ranks agree on every count (a tiny all-reduce);
* each timed operation starts after a barrier and is timed on each rank with
  ``time.perf_counter`` (plus ``torch.cuda.synchronize`` for NCCL);
* ``time_s`` is the slowest rank's median over the timed iterations (``statistic`` =
  ``median``); ``time_min_s`` / ``time_max_s`` are the largest per-rank minimum and
  maximum. ``algbw_Bps = bytes / time_s`` and ``busbw_Bps = algbw_Bps x factor`` with
  nccl-tests' factors: 2(n-1)/n for all_reduce, (n-1)/n for all_gather and
  reduce_scatter, 1 for broadcast and reduce.

``p2p`` (``--collectives p2p``, exactly 2 ranks): a ping-pong between rank 0 and rank 1
with blocking ``send``/``recv``, as OSU's ``osu_latency`` measures it (rank 0 sends then
receives, rank 1 receives then sends the message back: OSU Micro-Benchmarks
``mpi/pt2pt/osu_latency.c``, whose latency is ``(t_end - t_start) / (2 iterations)``; it
times the whole loop, a mean, where gradsched times each round trip and takes the median,
the ``statistic`` of every sweep here). The first round trip is checked (rank 1 echoes
what it received; both ranks check the values); after the warm-ups one barrier, then the
timed round trips back to back, each timed on rank 0.
``time_s`` is half of rank 0's median round trip (the one-way time of one message),
``time_min_s`` / ``time_max_s`` half of its fastest / slowest round trip; ``busbw_Bps`` =
``algbw_Bps`` = ``bytes / time_s``; ``in_place`` is 0 and ``world_size`` 2.

``bytes`` is nccl-tests' ``size``: the per-rank buffer of all_reduce / broadcast / reduce,
and the *total* (gathered output / scattered input) buffer of all_gather / reduce_scatter,
which must therefore be a multiple of ``4 x world_size``: such sizes are rounded up (and the
sidecar says so). ``torch.distributed``'s all_reduce, broadcast and reduce work in place
only, so their rows have ``in_place`` 1; all_gather and reduce_scatter are out of place
(``in_place`` 0) unless ``--in-place``.

Ranks are local processes started with :func:`gradsched.distributed.launch` (loopback, or
one network namespace per rank with ``--cluster RATE``; see
:mod:`gradsched.distributed.cluster`), or, with
``--torchrun``, the processes ``torchrun`` started (multi-node): each reads its rank from
the environment and rank 0 writes the output. Nothing is written unless the whole sweep
succeeded; a dead or unreachable rank ends the run with an error naming it.
"""

from __future__ import annotations

import datetime as dt
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gradsched.capture.sweep_rank import sweep_task
from gradsched.capture.sweep_settings import SweepConfig, SweepError, timeouts
from gradsched.capture.sweep_trace import SweepRun, notes_to_warnings, to_trace
from gradsched.distributed.cluster import EmulatedCluster
from gradsched.distributed.launch import LaunchSpec, launch
from gradsched.provenance import load_average

TASK = "gradsched.capture.sweep_rank:sweep_task"


# ----------------------------------------------------------------------------- drivers


def run_sweep(config: SweepConfig, *, spec_overrides: dict[str, Any] | None = None,
              payload_extra: dict[str, Any] | None = None,
              log: Callable[[str], None] | None = None) -> Any:
    """Launch the ranks locally (loopback, or the emulated cluster), return a CommTrace.

    ``spec_overrides`` replace :class:`~gradsched.distributed.LaunchSpec` fields (tests
    use it to make a peer unreachable); ``payload_extra`` is merged into the task payload.
    """
    config.validate()
    config.admit()  # before any rank starts
    sizes, notes = config.plan()
    op_timeout, deadline = timeouts(config, sizes)
    payload = {"backend": config.backend, "collectives": config.collectives, "sizes": sizes,
               "iters": config.iters, "warmup": config.warmup, "min_iters": config.min_iters,
               "time_budget_s": config.time_budget_s, "in_place": config.in_place,
               **(payload_extra or {})}
    common = {"backend": config.backend, "init_timeout_s": config.init_timeout_s,
              "op_timeout_s": op_timeout, "deadline_s": deadline,
              "threads_per_rank": config.threads_per_rank, **(spec_overrides or {})}
    started = dt.datetime.now(dt.UTC).astimezone()
    load_before = load_average([])
    t0 = time.monotonic()
    if log:
        log(f"sweep: {config.world_size} ranks, {sum(map(len, sizes.values()))} points, "
            f"deadline {deadline:.0f} s")
    if config.cluster_rate is not None:
        with EmulatedCluster(config.world_size, config.cluster_rate,
                             prefix=config.cluster_prefix) as cluster:
            spec = cluster.launch_spec(**common)
            per_rank = launch(TASK, payload, spec)
            placement = cluster.describe()
            interconnect = cluster.interconnect()
        nodes, machines = config.world_size, 1
        notes.append("Emulated cluster: each rank runs in its own network namespace and "
                     "counts as one node (nodes = world_size) although all ranks share one "
                     "physical machine (physical_machines = 1) and its CPUs.")
    else:
        per_rank = launch(TASK, payload, LaunchSpec(config.world_size, **common))
        placement = "loopback"
        interconnect = "loopback (127.0.0.1), all ranks on one machine"
        nodes, machines = 1, 1
    return to_trace(per_rank, config, SweepRun(
        placement=placement, interconnect=interconnect, nodes=nodes,
        physical_machines=machines, notes=tuple(notes),
        warnings=tuple(notes_to_warnings(notes)), started=started,
        wall_s=time.monotonic() - t0, load_before=tuple(load_before)))


def run_torchrun(config: SweepConfig, out: Path | None) -> Any:
    """Under ``torchrun``: join the group from the environment, sweep, rank 0 writes ``out``.

    Returns the trace on rank 0, None elsewhere.
    """
    import torch
    import torch.distributed as dist

    for var in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        if var not in os.environ:
            raise SweepError(f"--torchrun: ${var} is not set; start this command with torchrun")
    config.world_size = int(os.environ["WORLD_SIZE"])
    config.validate()
    config.admit(local_ranks=int(os.environ.get("LOCAL_WORLD_SIZE", "1")))
    sizes, notes = config.plan()
    op_timeout, _ = timeouts(config, sizes)
    rank = int(os.environ["RANK"])
    torch.set_num_threads(config.threads_per_rank)
    if config.backend == "nccl":
        local = int(os.environ.get("LOCAL_RANK", "0"))
        torch.cuda.set_device(local % max(torch.cuda.device_count(), 1))
    started = dt.datetime.now(dt.UTC).astimezone()
    load_before = load_average([])
    t0 = time.monotonic()
    dist.init_process_group(config.backend, init_method="env://",
                            timeout=dt.timedelta(seconds=op_timeout))
    try:
        payload = {"backend": config.backend, "collectives": config.collectives,
                   "sizes": sizes, "iters": config.iters, "warmup": config.warmup,
                   "min_iters": config.min_iters, "time_budget_s": config.time_budget_s,
                   "in_place": config.in_place}
        mine = sweep_task(rank, config.world_size, payload)
        gathered: list[Any] = [None] * config.world_size
        dist.all_gather_object(gathered, mine)
    except RuntimeError as exc:  # gloo/NCCL errors (DistBackendError is one), not a bug
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise SweepError(f"rank {rank} of {config.world_size}: a collective failed, most "
                         f"likely a peer rank or its node died or the network between "
                         f"them failed (check the other nodes' logs): {first[:300]}") from None
    finally:
        dist.destroy_process_group()
    if rank != 0:
        return None
    nodes = len({g["host"] for g in gathered})
    trace = to_trace(gathered, config, SweepRun(
        placement=f"torchrun, {nodes} host(s)",
        interconnect="as set up for torchrun (not inspected)", nodes=nodes,
        physical_machines=nodes, notes=tuple(notes), warnings=tuple(notes_to_warnings(notes)),
        started=started, wall_s=time.monotonic() - t0, load_before=tuple(load_before)))
    if out is not None:
        trace.save(out)
    return trace


__all__ = ["TASK", "run_sweep", "run_torchrun"]
