"""Timed training iterations: a plan through the executor, or PyTorch DDP itself.

Behind ``gradsched run``. Every rank builds the same model (random init, fixed seed, by
name from :mod:`gradsched.workloads`), an SGD optimizer (lr 0.01, momentum 0.9) and a
few synthetic batches (generated before timing, then cycled), runs ``warmup`` untimed and
``iters`` timed iterations, and records the start of each iteration. An iteration's time
is the period between the starts of consecutive iterations (the steady-state period the
replay predicts, which for per-layer plans includes the update and communication that the
next forward waits for); the last one ends after :meth:`PlanExecutor.flush`. The time of an
iteration is the maximum over ranks (the slowest rank sets the pace). Ranks are aligned
by a barrier before the timed loop.

Parameter servers (``ps_servers`` S > 0, runtime/ps.py): ranks ``P .. P+S-1`` are servers
that time nothing; the workers' times are the run's. Hierarchical buckets take the node
layout from ``ranks_per_node`` (runtime/hierarchical.py).

Baseline: PyTorch DDP (Li et al., VLDB 2020) with ``bucket_cap_mb`` as given, or with a
per-bucket ``bucket_cap_mb_list`` (torch >= 2.14; caps from a contiguous plan by
:func:`gradsched.planners.ddp_caps.ddp_caps`). DDP rebuilds its buckets in the gradient
order of the first iteration, in the second forward (``torch/nn/parallel/distributed.py``,
``_pre_forward``: ``reducer._rebuild_buckets()``), so a list run needs ``warmup >= 1``;
after the timed iterations the rank reads the rebuilt buckets
(``_get_ddp_logging_data()["rebuilt_per_bucket_param_indices"]``, indices into the
trainable parameters) and the summary records their number (``ddp_buckets``) and, when the
item carries the plan's buckets, whether they are the same (``ddp_buckets_match``: a
mismatch is not an error here; ``gradsched run`` reports it loudly). Plans
(ByteScheduler, Peng et al. SOSP 2019; DeAR, Zhang, Shi et al.; ...) run through
:class:`~gradsched.runtime.executor.PlanExecutor`.
"""

from __future__ import annotations

import datetime as dt
import itertools
import os
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import torch
import torch.distributed as dist

from gradsched.distributed import LaunchSpec, launch
from gradsched.distributed.cluster import EmulatedCluster
from gradsched.distributed.launch import collective_failed
from gradsched.distributed.worker import init_group
from gradsched.errors import ConfigError
from gradsched.plan import Plan
from gradsched.runtime.executor import PlanExecutor
from gradsched.runtime.ps import PSClient, PSLayout, bench_server, partition_schedule, workers_group
from gradsched.workloads import build_model

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

    def to_dict(self) -> dict[str, Any]:
        out = {"label": self.label, "algorithm": self.algorithm, "plan": self.plan,
               "bucket_cap_mb": self.bucket_cap_mb}
        if self.bucket_cap_mb_list is not None:
            out["bucket_cap_mb_list"] = list(self.bucket_cap_mb_list)
        if self.expected_buckets is not None:
            out["expected_buckets"] = [list(b) for b in self.expected_buckets]
        return out


@dataclass(frozen=True)
class Timed:
    """What one rank measured of one item: the iteration times, the executor's collective
    count (plans) and DDP's rebuilt buckets (list runs: tensor names per bucket)."""

    times: list[float]
    n_collectives: int | None = None
    rebuilt_buckets: list[list[str]] | None = None


def buckets_match(rebuilt: list[list[str]] | None,
                  expected: list[list[str]] | None) -> bool | None:
    """Whether DDP rebuilt the expected buckets (same buckets in the same order; the order
    of tensors inside a bucket is DDP's own); None when either is unknown."""
    if rebuilt is None or expected is None:
        return None
    return [sorted(b) for b in rebuilt] == [sorted(b) for b in expected]


def parse_bucket_indices(text: str, names: list[str]) -> list[list[str]]:
    """``"3 2, 1 0"`` (DDP's ``rebuilt_per_bucket_param_indices``: buckets separated by
    commas, indices into the trainable parameters by spaces) -> names per bucket."""
    return [[names[int(i)] for i in part.split()] for part in text.split(",") if part.strip()]


def rebuilt_buckets(runner: Any, model: Any) -> list[list[str]]:
    """The buckets stock DDP rebuilt after the first iteration, as parameter names. The
    logger records them at the forward *after* the rebuild, so it is refreshed here first
    (outside any timing)."""
    runner.logger.set_runtime_stats_and_log()
    data = runner._get_ddp_logging_data()
    text = data.get("rebuilt_per_bucket_param_indices")
    if not runner._has_rebuilt_buckets or text is None:
        raise ConfigError("PyTorch DDP did not rebuild its buckets (a bucket_cap_mb_list "
                          "run needs --warmup >= 1)")
    names = [n for n, p in model.named_parameters() if p.requires_grad]
    return parse_bucket_indices(str(text), names)


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


# ---------------------------------------------------------------------- rank side
def run_rank(rank: int, world: int, payload: dict[str, Any]) -> dict[str, Any]:
    """Every run of ``payload['runs']`` on this rank; per-iteration times."""
    backend = dist.get_backend()
    device = "cpu"
    if backend == "nccl":
        device = f"cuda:{torch.cuda.current_device()}"
    results = []
    ps = _ps_setup(world, payload)
    for index, raw in enumerate(payload["runs"]):
        item = RunItem(**raw)
        spec = build_model(payload["model"], int(payload["batch_size"]), device=device,
                           seq_len=payload.get("seq_len"), seed=int(payload.get("seed", 0)))
        if ps is not None and ps[0].is_server(rank):
            _serve_run(ps[0], spec.model, item, payload)
            results.append({"label": item.label, "times": [], "n_collectives": None})
            continue
        payload = payload | {"_ps": ps}
        batches = [spec.make_batch() for _ in range(int(payload.get("n_batches", 2)))]
        stem = Path(item.label).stem if item.label.endswith(".json") else item.label
        timed = _timed(rank, spec, batches, item, payload, device,
                       f"{index:02d}-{item.algorithm}-{stem}")
        results.append({"label": item.label, "times": timed.times,
                        "n_collectives": timed.n_collectives,
                        "rebuilt_buckets": timed.rebuilt_buckets})
        del spec, batches
    return {"rank": rank, "runs": results}


def _ps_setup(world: int, payload: dict[str, Any]) -> tuple[Any, Any] | None:
    """(layout, workers' subgroup) of a parameter-server run, created by every rank."""
    servers = int(payload.get("ps_servers") or 0)
    if not servers:
        return None
    layout = PSLayout(world - servers, servers)
    return layout, workers_group(layout, dt.timedelta(seconds=float(payload["timeout_s"])))


def _numel(model: Any) -> dict[str, int]:
    return {n: p.numel() for n, p in model.named_parameters() if p.requires_grad}


def _serve_run(layout: Any, model: Any, item: RunItem, payload: dict[str, Any]) -> None:
    bench_server(layout, Plan.from_dict(item.plan or {}), _numel(model), int(payload["warmup"]),
                 int(payload["iters"]), dt.timedelta(seconds=float(payload["timeout_s"])))


def _ps_client(plan: Any, model: Any, payload: dict[str, Any]) -> dict[str, Any]:
    """Executor arguments of a worker: the workers' group and the PS client (if any)."""
    ps = payload.get("_ps")
    if ps is None:
        return {"ranks_per_node": payload.get("ranks_per_node")}
    layout, group = ps
    schedule = partition_schedule(plan, _numel(model), layout.servers)
    return {"process_group": group, "ps_client": PSClient(layout, schedule)}


def _timed(rank: int, spec: Any, batches: list[Any], item: RunItem, payload: dict[str, Any],
           device: str, name: str) -> Timed:
    model = spec.model
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.01,
                          momentum=0.9)
    ex = None
    if item.plan is not None:
        plan = Plan.from_dict(item.plan)
        ex = PlanExecutor(model, plan, opt, timeout_s=float(payload.get("timeout_s", 300)),
                          **_ps_client(plan, model, payload))
        runner: Any = model

        def finish() -> None:
            ex.step()
    else:
        from torch.nn.parallel import DistributedDataParallel as DDP

        caps = {"bucket_cap_mb_list": list(item.bucket_cap_mb_list)} \
            if item.bucket_cap_mb_list else {}
        runner = DDP(model, bucket_cap_mb=item.bucket_cap_mb, **caps,
                     device_ids=[torch.device(device).index] if device != "cpu" else None)

        def finish() -> None:
            opt.step()
            opt.zero_grad(set_to_none=True)

    def sync() -> None:
        if device != "cpu":
            torch.cuda.synchronize()

    def one(i: int) -> None:
        spec.loss(runner, batches[i % len(batches)]).backward()
        finish()

    def settle() -> None:
        if ex is not None:
            ex.flush()
        sync()

    warmup, iters = int(payload["warmup"]), int(payload["iters"])
    if item.bucket_cap_mb_list and warmup < 1:
        raise ConfigError("a bucket_cap_mb_list run needs warmup >= 1: DDP rebuilds its "
                          "buckets after the first iteration")
    times = timed_iterations(one, warmup, iters, settle)
    n_coll = sum(ex.stats.collectives.values()) if ex is not None else None
    rebuilt = rebuilt_buckets(runner, model) if item.bucket_cap_mb_list else None
    profile_dir = payload.get("profile_dir")
    if profile_dir:
        _profile(rank, one, warmup + iters, Path(profile_dir), name, device, ex)
    if ex is not None:
        ex.close()
    return Timed(times, n_coll, rebuilt)


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


def _profile(rank: int, one: Any, start: int, folder: Path, label: str, device: str,
             ex: Any) -> None:
    """A few extra iterations under ``torch.profiler``; Chrome trace per rank."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU]
    if device != "cpu":
        activities.append(ProfilerActivity.CUDA)
    folder.mkdir(parents=True, exist_ok=True)
    with profile(activities=activities) as prof:
        for i in range(3):
            one(start + i)
        if ex is not None:
            ex.flush()
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in label)
    target = folder / f"{safe}.rank{rank}.trace.json"
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    prof.export_chrome_trace(str(tmp))
    tmp.replace(target)


# ---------------------------------------------------------------------- launcher side
def check_counts(items: list[RunItem], iters: int, warmup: int) -> None:
    """Refuse iteration counts the items cannot run with, before any rank starts."""
    if iters < 1 or warmup < 0:
        raise ConfigError("--iters must be >= 1 and --warmup >= 0")
    if warmup < 1 and any(item.bucket_cap_mb_list for item in items):
        raise ConfigError("--warmup 0 with a per-bucket DDP list (--bucket-cap-mb-list / "
                          "--ddp-caps-from): DDP rebuilds its buckets only after the first "
                          "iteration, so give --warmup >= 1")


def run_items(items: list[RunItem], *, model: str, batch_size: int, world_size: int,
              backend: str = "gloo", iters: int = 20, warmup: int = 5, threads: int = 1,
              cluster: str | None = None, profile_dir: str | Path | None = None,
              seq_len: int | None = None, seed: int = 0, timeout_s: float = 300.0,
              ranks_per_node: int | None = None, ps_servers: int = 0) -> tuple[Any, Any]:
    """Launch the ranks and time every item; return (per-iteration frame, summary frame).
    ``world_size`` counts the workers; ``ps_servers`` server ranks are launched after them
    (each in its own namespace on the emulated cluster)."""
    if not items:
        raise ConfigError("nothing to run: give --plan and/or --baseline ddp")
    check_counts(items, iters, warmup)
    if world_size < 1:
        raise ConfigError("--world-size must be >= 1")
    if backend not in ("gloo", "nccl"):
        raise ConfigError(f"backend must be gloo or nccl, not {backend!r}")
    if ps_servers and profile_dir:
        raise ConfigError("--profile is not supported with parameter servers")
    payload = {"model": model, "batch_size": batch_size, "runs": [i.to_dict() for i in items],
               "iters": iters, "warmup": warmup, "seq_len": seq_len, "seed": seed,
               "timeout_s": timeout_s, "ranks_per_node": ranks_per_node,
               "ps_servers": ps_servers,
               "profile_dir": str(Path(profile_dir).resolve()) if profile_dir else None}
    deadline = max(600.0, timeout_s * 2)
    common = {"backend": backend, "threads_per_rank": threads, "op_timeout_s": timeout_s,
              "deadline_s": deadline}
    if cluster is not None:
        with EmulatedCluster(world_size + ps_servers, cluster,
                             ranks_per_node=ranks_per_node or 1) as emu:
            results = launch("gradsched.runtime.tasks:timed_runs", payload,
                             emu.launch_spec(**common))
        bandwidth = cluster
    else:
        results = launch("gradsched.runtime.tasks:timed_runs", payload,
                         LaunchSpec(world_size + ps_servers, **common))
        bandwidth = "loopback"
    return _frames(items, results, model=model, batch_size=batch_size,
                   world_size=world_size, backend=backend, bandwidth=bandwidth)


def run_items_torchrun(items: list[RunItem], *, model: str, batch_size: int,
                       backend: str = "gloo", iters: int = 20, warmup: int = 5,
                       threads: int = 1, seq_len: int | None = None, seed: int = 0,
                       timeout_s: float = 300.0,
                       ranks_per_node: int | None = None) -> tuple[Any, Any] | None:
    """As :func:`run_items`, in a process that ``torchrun`` started: join the group from
    the environment (``env://``: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT), run this
    rank's share, gather every rank's times; rank 0 returns the frames (column
    ``bandwidth`` = ``torchrun``), the other ranks None. A failed collective (a peer rank or
    its node died) raises :class:`~gradsched.distributed.DistributedError` naming the rank.
    """
    for var in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        if var not in os.environ:
            raise ConfigError(f"--torchrun: ${var} is not set; start this command with "
                              "torchrun")
    if not items:
        raise ConfigError("nothing to run: give --plan and/or --baseline ddp")
    check_counts(items, iters, warmup)
    payload = {"model": model, "batch_size": batch_size, "runs": [i.to_dict() for i in items],
               "iters": iters, "warmup": warmup, "seq_len": seq_len, "seed": seed,
               "timeout_s": timeout_s, "ranks_per_node": ranks_per_node, "ps_servers": 0,
               "profile_dir": None}
    rank, world = init_group(backend=backend, op_timeout_s=timeout_s, threads=threads)
    try:
        mine = run_rank(rank, world, payload)
        gathered: list[Any] = [None] * world
        dist.all_gather_object(gathered, mine)
    except RuntimeError as exc:  # gloo/NCCL errors (DistBackendError is one), not a bug
        raise collective_failed(rank, world, exc) from None
    finally:
        dist.destroy_process_group()
    if rank != 0:
        return None
    return _frames(items, gathered, model=model, batch_size=batch_size, world_size=world,
                   backend=backend, bandwidth="torchrun")


def _frames(items: list[RunItem], results: list[Any], *, model: str, batch_size: int,
            world_size: int, backend: str, bandwidth: str) -> tuple[Any, Any]:
    """Per-iteration and summary frames from every rank's results (the slowest rank's time
    per iteration)."""
    rows, summary = [], []
    base = {"model": model, "batch_size": batch_size, "world_size": world_size,
            "backend": backend, "bandwidth": bandwidth}
    for k, item in enumerate(items):
        per_rank = [r["runs"][k]["times"] for r in results[:world_size]]  # servers: none
        times = [max(ts) for ts in zip(*per_rank, strict=True)]
        for i, t in enumerate(times):
            rows.append(base | {"algorithm": item.algorithm, "plan": item.label,
                                "iteration": i, "iteration_s": t})
        first = results[0]["runs"][k]
        rebuilt = first.get("rebuilt_buckets")
        summary.append(base | {"algorithm": item.algorithm, "plan": item.label,
                               "iterations": len(times), **summarize(times),
                               "n_collectives": first["n_collectives"],
                               "ddp_buckets": None if rebuilt is None else len(rebuilt),
                               "ddp_buckets_match": buckets_match(rebuilt,
                                                                  item.expected_buckets)})
    return (pd.DataFrame(rows, columns=list(ITER_COLUMNS)),
            pd.DataFrame(summary, columns=list(SUMMARY_COLUMNS)))
