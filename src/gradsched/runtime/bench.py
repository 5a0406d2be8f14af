"""``gradsched run``: plans through the executor, or PyTorch DDP itself, timed on real ranks.

Each :class:`RunItem` is one item of the timing protocol (:mod:`gradsched.runtime.rounds`,
one round: every item once, in the seeded order of :func:`gradsched.run_order.round_order`;
how each trains: :mod:`gradsched.runtime.runners`). An iteration's time is the period
between the starts of consecutive iterations (the steady-state period the replay predicts,
which for per-layer plans includes the update and communication that the next forward
waits for), the slowest rank's; the summary gives the median, p10, p90, mean, min and max
per item, the executor's collectives per iteration and, for stock DDP with a per-bucket
``bucket_cap_mb_list``, the number of buckets DDP rebuilt (``ddp_buckets``) and, when the
item carries the plan's buckets, whether they are the same (``ddp_buckets_match``: a
mismatch is not an error here; ``gradsched run`` reports it loudly).

Parameter servers (``ps_servers`` S > 0, runtime/ps.py): ranks ``P .. P+S-1`` are servers
that time nothing; the workers' times are the run's. Hierarchical buckets take the node
layout from ``ranks_per_node`` (runtime/hierarchical.py).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import torch.distributed as dist

from gradsched.distributed.launch import collective_failed
from gradsched.distributed.worker import init_group
from gradsched.errors import ConfigError
from gradsched.runtime.prelaunch import check_torchrun_env
from gradsched.runtime.records import check_records
from gradsched.runtime.rounds import (
    Item,
    Launch,
    Timing,
    check_counts,
    launch_rounds,
    rank_runs,
    runs_of,
    slowest,
)
from gradsched.runtime.runners import buckets_match

SUMMARY_COLUMNS = ("model", "batch_size", "world_size", "backend", "bandwidth", "algorithm",
                   "plan", "iterations", "median_s", "p10_s", "p90_s", "mean_s", "min_s",
                   "max_s", "n_collectives", "ddp_buckets", "ddp_buckets_match")
ITER_COLUMNS = ("model", "batch_size", "world_size", "backend", "bandwidth", "algorithm",
                "plan", "iteration", "iteration_s")


@dataclass(frozen=True)
class RunItem:
    """One timed run: a plan (JSON dict) through the executor, or stock PyTorch DDP with
    one ``bucket_cap_mb`` or a per-bucket ``bucket_cap_mb_list`` (MiB, torch >= 2.14).
    ``expected_buckets``: the tensor names of each bucket DDP should rebuild (a list run
    whose caps came from a plan), checked against the rebuilt ones."""

    label: str
    algorithm: str
    plan: dict[str, Any] | None = None
    bucket_cap_mb: float | None = None
    bucket_cap_mb_list: list[float] | None = None
    expected_buckets: list[list[str]] | None = None

    def item(self) -> Item:
        """This run as an item of the timing protocol (profiles named
        ``<algorithm>-<plan file stem or label>``)."""
        stem = Path(self.label).stem if self.label.endswith(".json") else self.label
        kind = "plan" if self.plan is not None else \
            "ddp-list" if self.bucket_cap_mb_list else "ddp"
        return Item(key=self.label, kind=kind, plan=self.plan, bucket_cap_mb=self.bucket_cap_mb,
                    bucket_cap_mb_list=(list(self.bucket_cap_mb_list)
                                        if self.bucket_cap_mb_list else None),
                    expected_buckets=self.expected_buckets, name=f"{self.algorithm}-{stem}")


def percentile(values: list[float], q: float) -> float:
    """Linear-interpolation percentile (numpy's default), q in [0, 100]."""
    data = sorted(values)
    if not data:
        raise ValueError("no values")
    pos = (len(data) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(data) - 1)
    return data[lo] + (data[hi] - data[lo]) * (pos - lo)


def summarize(times: list[float]) -> dict[str, float]:
    return {"median_s": statistics.median(times), "p10_s": percentile(times, 10),
            "p90_s": percentile(times, 90), "mean_s": statistics.fmean(times),
            "min_s": min(times), "max_s": max(times)}


# ---------------------------------------------------------------------- launcher side
def run_items(items: list[RunItem], timing: Timing, launch: Launch) -> tuple[Any, Any]:
    """Launch the ranks and time every item (one round of the timing protocol, ``timing``;
    where: ``launch``); return (per-iteration frame, summary frame). ``launch.world_size``
    counts the workers; ``timing.ps_servers`` server ranks are launched after them (each in
    its own namespace on the emulated cluster). ``timing.grad_accum``: micro-batches per
    timed iteration (an optimizer step; :mod:`gradsched.runtime.runners`); the frames then
    carry a ``grad_accum`` column. ``timing.profile_dir``: an absolute path."""
    if not items:
        raise ConfigError("nothing to run: give --plan and/or --baseline ddp")
    if timing.ps_servers and timing.profile_dir:
        raise ConfigError("--profile is not supported with parameter servers")
    launched = launch_rounds([i.item() for i in items], timing, launch)
    cluster = launch.cluster
    return _with_accum(_frames(items, launched.results, model=timing.model,
                               batch_size=timing.batch_size, world_size=launch.world_size,
                               backend=launch.backend,
                               bandwidth=cluster if cluster is not None else "loopback"),
                       timing.grad_accum)


def _with_accum(frames: tuple[Any, Any], grad_accum: int) -> tuple[Any, Any]:
    """The frames with a ``grad_accum`` column when it is not 1 (frames without it are
    the one-micro-batch frames written before the option existed)."""
    if grad_accum != 1:
        for frame in frames:
            frame["grad_accum"] = grad_accum
    return frames


def run_items_torchrun(items: list[RunItem], timing: Timing, *, backend: str = "gloo",
                       threads: int = 1) -> tuple[Any, Any] | None:
    """As :func:`run_items`, in a process that ``torchrun`` started: join the group from
    the environment (``env://``: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT), run this
    rank's share, gather every rank's times; rank 0 returns the frames (column
    ``bandwidth`` = ``torchrun``), the other ranks None. A failed collective (a peer rank or
    its node died) raises :class:`~gradsched.distributed.DistributedError` naming the rank.
    """
    check_torchrun_env()  # the pre-launch gate, before init_process_group
    if not items:
        raise ConfigError("nothing to run: give --plan and/or --baseline ddp")
    timeout_s = timing.timeout_s
    protocol_items = [i.item() for i in items]
    check_counts(protocol_items, timing)
    rank, world = init_group(backend=backend, op_timeout_s=timeout_s, threads=threads)
    try:
        mine = {"rank": rank, "runs": rank_runs(rank, world, protocol_items, timing)}
        gathered: list[Any] = [None] * world
        dist.all_gather_object(gathered, mine)
    except RuntimeError as exc:  # gloo/NCCL errors (DistBackendError is one), not a bug
        raise collective_failed(rank, world, exc) from None
    finally:
        dist.destroy_process_group()
    if rank != 0:
        return None
    check_records(gathered, items=len(protocol_items), rounds=timing.rounds,
                  iters=timing.iters, workers=world)
    return _with_accum(_frames(items, gathered, model=timing.model,
                               batch_size=timing.batch_size, world_size=world,
                               backend=backend, bandwidth="torchrun"),
                       timing.grad_accum)


def _frames(items: list[RunItem], results: list[Any], *, model: str, batch_size: int,
            world_size: int, backend: str, bandwidth: str) -> tuple[Any, Any]:
    """Per-iteration and summary frames from every rank's records (one run per item; the
    slowest rank's time per iteration)."""
    rows, summary = [], []
    base = {"model": model, "batch_size": batch_size, "world_size": world_size,
            "backend": backend, "bandwidth": bandwidth}
    for k, item in enumerate(items):
        (run,) = runs_of(results, k)
        times = slowest(results, run, world_size)
        for i, t in enumerate(times):
            rows.append(base | {"algorithm": item.algorithm, "plan": item.label,
                                "iteration": i, "iteration_s": t})
        first = results[0]["runs"][run]
        rebuilt = first.get("rebuilt_buckets")
        summary.append(base | {"algorithm": item.algorithm, "plan": item.label,
                               "iterations": len(times), **summarize(times),
                               "n_collectives": first["n_collectives"],
                               "ddp_buckets": None if rebuilt is None else len(rebuilt),
                               "ddp_buckets_match": buckets_match(rebuilt,
                                                                  item.expected_buckets)})
    return (pd.DataFrame(rows, columns=list(ITER_COLUMNS)),
            pd.DataFrame(summary, columns=list(SUMMARY_COLUMNS)))
