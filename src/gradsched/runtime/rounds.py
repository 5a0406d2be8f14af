"""The one protocol for timing items on real ranks: seeded interleaved rounds.

Behind ``gradsched run``, ``gradsched advise --validate``, the all-reduce re-execution
(:mod:`gradsched.reexec.run`) and the sharded one (:mod:`gradsched.reexec.sharded`). An
*item* (:class:`Item`) is a plan through gradsched's executor, stock PyTorch DDP with one
``bucket_cap_mb`` or a ``bucket_cap_mb_list``, an FSDP2 plan, ZeRO-1 (stock DDP with torch's
``ZeroRedundancyOptimizer``, with or without ``overlap_with_ddp``), or the compute-only control
(how each trains: :mod:`gradsched.runtime.runners`).

On every rank, ``rounds`` rounds each run every item once, in the round's seeded random
order (:func:`gradsched.run_order.round_order`, the same on every rank), so that neither a
drift of the machine's load nor the item run before it biases one item in one direction.
Per item and round: a fresh model (fixed seed, by name from :mod:`gradsched.workloads`) and
``n_batches`` synthetic batches (made before timing, then cycled); ``warmup`` untimed and
``iters`` timed iterations (:func:`timed_iterations`: the periods between the starts of
consecutive iterations, ranks aligned by a barrier first, the last one ending after the
pending work settled; the replay's steady-state period); around it the load sample
(1-minute load average, this rank's CPU time and the machine's busy time,
:mod:`gradsched.runtime.load`) and the micro-batches the warm-up and timed iterations ran
(``micro_batches``: calls of the model's loss, ``grad_accum`` per iteration when every
step accumulated as asked; :func:`micro_batches_per_step`). The launcher keeps, per
iteration, the slowest rank's period (:func:`slowest`) and, per run, the cores that
anything but the ranks used (:func:`foreign_cores_of`).

Parameter servers (``ps_servers`` S > 0, :mod:`gradsched.runtime.ps`): ranks
``P .. P+S-1`` serve every plan item and time nothing. Optional, after an item's timed
iterations: a profile of 3 more iterations (Chrome trace per rank) and one more
iteration's peak of allocated CPU memory (:mod:`gradsched.runtime.cpu_memory`).
"""

from __future__ import annotations

import datetime as dt
import functools
import itertools
import math
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from gradsched.distributed import LaunchSpec, launch
from gradsched.distributed.cluster import EmulatedCluster
from gradsched.distributed.placement import Launch  # re-exported: runtime.rounds.Launch
from gradsched.errors import ConfigError
from gradsched.limits import MAX_GRAD_ACCUM, is_grad_accum
from gradsched.run_order import round_order
from gradsched.runtime import load
from gradsched.runtime.cpu_memory import iteration_peak_bytes
from gradsched.runtime.ps import PSLayout, workers_group
from gradsched.runtime.records import check_records
from gradsched.runtime.runners import RunContext, make_runner, serve_item
from gradsched.workloads import build_model

KINDS = ("plan", "ddp", "ddp-list", "fsdp2", "zero1", "control")
"""Item kinds (:mod:`gradsched.runtime.runners`)."""

TASK = "gradsched.runtime.rounds:rounds_task"


class MachineBusyError(ConfigError):
    """Something else uses the machine: a measurement now would not be the items' own."""


@dataclass(frozen=True)
class Item:
    """One thing to time. ``plan``: an executor plan's or a sharded plan's JSON dict (a
    ``zero1`` item: its ``zero1_torch`` plan, whose ``optimizer`` says overlap or not);
    ``bucket_cap_mb`` / ``bucket_cap_mb_list``: stock DDP's caps (MiB);
    ``expected_buckets``: the tensor names of each bucket a ``ddp-list`` item should rebuild
    (checked by the caller); ``name``: the file-safe stem of its profiles (default ``key``)."""

    key: str
    kind: str
    plan: dict[str, Any] | None = None
    bucket_cap_mb: float | None = None
    bucket_cap_mb_list: list[float] | None = None
    expected_buckets: list[list[str]] | None = None
    name: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ConfigError(f"item {self.key!r}: kind {self.kind!r} is not one of "
                              f"{', '.join(KINDS)}")
        if self.kind in ("plan", "fsdp2", "zero1") and self.plan is None:
            raise ConfigError(f"item {self.key!r}: a {self.kind} item needs its plan")
        if self.kind == "ddp-list" and not self.bucket_cap_mb_list:
            raise ConfigError(f"item {self.key!r}: a ddp-list item needs bucket_cap_mb_list")


@dataclass(frozen=True)
class Timing:
    """How every item is timed: the protocol's settings (module docstring)."""

    model: str
    batch_size: int
    rounds: int = 1
    warmup: int = 5
    iters: int = 20
    seed: int = 0
    seq_len: int | None = None
    timeout_s: float = 300.0
    n_batches: int = 2
    memory: bool = False
    profile_dir: str | None = None
    ranks_per_node: int | None = None
    ps_servers: int = 0
    grad_accum: int = 1
    """Micro-batches per timed iteration (one optimizer step; :mod:`.runners`)."""


def check_counts(items: Sequence[Item], timing: Timing) -> None:
    """Refuse counts the items cannot run with, before any rank starts."""
    if not items:
        raise ConfigError("nothing to run: no item to time")
    if timing.iters < 1 or timing.warmup < 0 or timing.rounds < 1:
        raise ConfigError("--iters and --rounds must be >= 1 and --warmup >= 0")
    if not is_grad_accum(timing.grad_accum):
        raise ConfigError(f"--grad-accum must be an integer in [1, {MAX_GRAD_ACCUM}], got "
                          f"{timing.grad_accum!r}")
    if timing.grad_accum != 1 and timing.ps_servers:
        raise ConfigError("--grad-accum with parameter servers is not supported (the PS "
                          "client's state is per step)")
    if timing.warmup < 1 and any(i.kind == "ddp-list" for i in items):
        raise ConfigError("--warmup 0 with a per-bucket DDP list (bucket_cap_mb_list): DDP "
                          "rebuilds its buckets only after the first iteration, so give "
                          "--warmup >= 1")
    if timing.warmup < 1 and any(i.kind == "fsdp2" for i in items):
        raise ConfigError("--warmup must be >= 1 for FSDP2 plans (FSDP2's first iteration "
                          "initialises lazily)")


def payload_of(items: Sequence[Item], timing: Timing) -> dict[str, Any]:
    """What every rank receives."""
    return {"items": [asdict(i) for i in items], "timing": asdict(timing)}


# --------------------------------------------------------------------------- rank side
def rounds_task(rank: int, world_size: int, payload: dict[str, Any]) -> dict[str, Any]:
    """Launcher task: every item in every round, in the round's order; one record per run
    (:func:`time_item`), in run order."""
    timing = Timing(**payload["timing"])
    items = [Item(**raw) for raw in payload["items"]]
    return {"rank": rank, "runs": rank_runs(rank, world_size, items, timing)}


def rank_runs(rank: int, world_size: int, items: Sequence[Item],
              timing: Timing) -> list[dict[str, Any]]:
    """This rank's records of every run (every round), in run order."""
    device = "cpu"
    if dist.get_backend() == "nccl":
        device = f"cuda:{torch.cuda.current_device()}"
    ps = _ps_setup(world_size, timing)
    out = []
    for r in range(timing.rounds):
        for position, index in enumerate(round_order(len(items), r, timing.seed)):
            record = time_item(rank, items[index], index, timing, device, ps)
            out.append({"round": r, "position": position, "item": index, **record})
    return out


def _ps_setup(world_size: int, timing: Timing) -> tuple[Any, Any] | None:
    """(layout, workers' subgroup) of a parameter-server run, created by every rank."""
    if not timing.ps_servers:
        return None
    layout = PSLayout(world_size - timing.ps_servers, timing.ps_servers)
    return layout, workers_group(layout, dt.timedelta(seconds=timing.timeout_s))


def time_item(rank: int, item: Item, index: int, timing: Timing, device: str,
              ps: tuple[Any, Any] | None) -> dict[str, Any]:
    """One run of ``item`` on this rank: the timed iterations, what the item reports
    (:class:`~gradsched.runtime.runners.Runner`), the peak memory (if asked) and the load
    sample around it."""
    load_avg = os.getloadavg()[0]
    started = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    before = load.sample()
    spec = build_model(timing.model, timing.batch_size, device=device,
                       seq_len=timing.seq_len, seed=timing.seed)
    record: dict[str, Any] = {"times": [], "n_collectives": None, "rebuilt_buckets": None,
                              "unit_tensors": [], "peak_bytes": None, "micro_batches": None}
    if ps is not None and ps[0].is_server(rank):
        serve_item(ps[0], spec.model, item, timing.warmup, timing.iters,
                   timing.timeout_s)
    else:
        record |= _timed_runner(rank, item, index, timing, spec, device, ps)
    after = load.sample()
    return record | {"load": load_avg, "started_at": started,
                     "cpu_s": after.own_cpu_s - before.own_cpu_s,
                     "busy": [before.machine_busy_s, after.machine_busy_s],
                     "wall": [before.at_s, after.at_s]}


def _timed_runner(rank: int, item: Item, index: int, timing: Timing, spec: Any,
                  device: str, ps: tuple[Any, Any] | None) -> dict[str, Any]:
    batches = [spec.make_batch() for _ in range(timing.n_batches)]
    context = RunContext(timeout_s=timing.timeout_s, ranks_per_node=timing.ranks_per_node,
                         ps=ps, grad_accum=timing.grad_accum)
    losses = [0]  # micro-batches run: calls of the loss (one per forward)

    def counted(model: Any, batch: Any, _loss: Any = spec.loss) -> Any:
        losses[0] += 1
        return _loss(model, batch)

    runner = make_runner(item, replace(spec, loss=counted), batches, device, context)
    losses[0] = 0  # a runner may run untimed steps while it is built (ZeRO-1's warm-up)
    try:
        times = timed_iterations(runner.one, timing.warmup, timing.iters, runner.settle)
        out: dict[str, Any] = {"times": times, "micro_batches": losses[0], **runner.report()}
        after = timing.warmup + timing.iters
        if timing.memory:
            out["peak_bytes"] = iteration_peak_bytes(
                functools.partial(_one_settled, runner, after))
        if timing.profile_dir:
            profile_runs(runner, after + 1, Path(timing.profile_dir),
                         f"{index:02d}-{item.name or item.key}.rank{rank}", device)
        return out
    finally:
        runner.close()


def _one_settled(runner: Any, i: int) -> None:
    runner.one(i)
    runner.settle()


def timed_iterations(one: Any, warmup: int, iters: int, settle: Any) -> list[float]:
    """Run ``one(i)`` for ``warmup`` untimed then ``iters`` timed iterations; ``settle()``
    (flush pending work, synchronise the device) after each phase, ranks aligned by a
    barrier before the timed ones. Returns the periods between iteration starts, the last
    one ending after ``settle()``."""
    for i in range(warmup):
        one(i)
    settle()
    dist.barrier()
    stamps = []
    for i in range(iters):
        stamps.append(time.perf_counter())
        one(warmup + i)
    settle()
    stamps.append(time.perf_counter())
    return [b - a for a, b in itertools.pairwise(stamps)]


def profile_runs(runner: Any, start: int, folder: Path, stem: str, device: str) -> None:
    """3 more iterations under ``torch.profiler``; one Chrome trace ``<stem>.trace.json``
    (characters other than letters, digits and ``-_.`` replaced by ``_``)."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU]
    if device != "cpu":
        activities.append(ProfilerActivity.CUDA)
    folder.mkdir(parents=True, exist_ok=True)
    with profile(activities=activities) as prof:
        for i in range(3):
            runner.one(start + i)
        runner.settle()
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in stem)
    target = folder / f"{safe}.trace.json"
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    prof.export_chrome_trace(str(tmp))
    tmp.replace(target)


# --------------------------------------------------------------------------- launcher side
@dataclass(frozen=True)
class Launched:
    """Every rank's records (rank order) and the machine's busy cores sampled just before
    the launch (None when not sampled or without /proc/stat)."""

    results: list[dict[str, Any]]
    busy_cores_before: float | None = None


def launch_rounds(items: Sequence[Item], timing: Timing, where: Launch) -> Launched:
    """Launch ``where.world_size`` ranks (plus ``timing.ps_servers`` servers; loopback, or
    the emulated cluster shaped to ``where.cluster``) running :func:`rounds_task`; every
    rank's records are checked (:func:`gradsched.runtime.records.check_records`). With
    ``where.busy_limit_cores``, the machine is sampled for 2 s first and the launch refused
    (:class:`MachineBusyError`) when other work keeps that many cores busy."""
    check_counts(items, timing)
    busy = _busy_before(where.busy_limit_cores, where.what)
    common = {"backend": where.backend, "threads_per_rank": where.threads,
              "op_timeout_s": timing.timeout_s,
              "deadline_s": where.deadline_s or max(600.0, timing.timeout_s * 2)}
    payload = payload_of(items, timing)
    world_size, cluster = where.world_size, where.cluster
    ranks = world_size + timing.ps_servers
    if cluster is not None:
        with EmulatedCluster(ranks, cluster, ranks_per_node=timing.ranks_per_node or 1) as emu:
            results = launch(TASK, payload, emu.launch_spec(**common))
    else:
        results = launch(TASK, payload, LaunchSpec(ranks, **common))
    check_records(results, items=len(items), rounds=timing.rounds, iters=timing.iters,
                  workers=world_size, servers=timing.ps_servers)
    return Launched(results, busy)


def _busy_before(limit: float | None, what: str) -> float | None:
    if limit is None:
        return None
    busy = load.busy_cores(2.0)
    if busy is not None and busy >= limit:
        raise MachineBusyError(
            f"{what}: {busy:.2f} CPU cores are busy before it starts (limit {limit:g}): "
            "other work would slow the items unevenly. Stop it and re-run, or pass "
            "--allow-load to measure anyway (the items are flagged)")
    return None if busy is None else round(busy, 3)


def slowest(results: Sequence[Mapping[str, Any]], run: int, world_size: int) -> list[float]:
    """Run ``run``'s iteration times: per iteration the slowest of the first
    ``world_size`` ranks (the workers; servers time nothing)."""
    per_rank = [r["runs"][run]["times"] for r in results[:world_size]]
    return [max(ts) for ts in zip(*per_rank, strict=True)]


def foreign_cores_of(results: Sequence[Mapping[str, Any]], run: int) -> float:
    """Cores used by anything but the ranks during run ``run`` (rank 0's window; NaN
    where /proc/stat is unavailable)."""
    first = results[0]["runs"][run]
    start = load.CpuSample(first["busy"][0], 0.0, first["wall"][0])
    end = load.CpuSample(first["busy"][1], 0.0, first["wall"][1])
    value = load.foreign_cores(start, end, sum(float(r["runs"][run]["cpu_s"])
                                               for r in results))
    return math.nan if value is None else value


def micro_batches_per_step(results: Sequence[Mapping[str, Any]], run: int,
                           timing: Timing) -> float:
    """Run ``run``'s micro-batches per iteration (its warm-up and timed ones), the fewest
    over the workers: ``timing.grad_accum`` when every rank accumulated as asked."""
    steps = timing.warmup + timing.iters
    counts = [r["runs"][run]["micro_batches"] for r in results
              if r["runs"][run]["micro_batches"] is not None]
    return min(counts) / steps if counts and steps else math.nan


def runs_of(results: Sequence[Mapping[str, Any]], item: int) -> list[int]:
    """The run indices (positions in every rank's records) of item ``item``, in run
    order."""
    return [k for k, run in enumerate(results[0]["runs"]) if run["item"] == item]
