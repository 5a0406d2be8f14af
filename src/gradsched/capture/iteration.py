"""Profiled data-parallel iterations: ``gradsched capture iteration``.

Runs real ``torch.nn.parallel.DistributedDataParallel`` training iterations of a zoo model
(:mod:`gradsched.workloads`) on ``world_size`` ranks, once per ``bucket_cap_mb``
value, under ``torch.profiler`` (CPU activity, plus CUDA on GPUs, ``record_shapes=True``
so gloo spans carry their sizes). Per bucket cap, each rank

1. builds the model (same seed on every rank; DDP broadcasts rank 0's weights anyway) and
   wraps it in DDP with that ``bucket_cap_mb``; SGD with momentum;
2. runs ``warmup`` iterations unprofiled (DDP rebuilds its buckets after the first);
3. runs 1 + ``iters`` iterations under the profiler with ``schedule(wait=0, warmup=1,
   active=iters)``: the profiler's own warm-up step is not recorded;
4. writes its Kineto trace ``DIR/bucket-<cap>mb/rank<r>.json.gz`` (gzip) and the wall time
   of every step (``time.perf_counter``, after ``torch.cuda.synchronize`` on GPUs).

Every rank uses its own random batch (seed + rank). The driver then imports every trace
with :mod:`gradsched.traces.importers.kineto` and writes ``DIR/summary.csv`` (one row per
bucket cap, rank and profiled iteration: profiler step time, wall time, comm_s, overlap_s,
exposed comm, collectives, all-reduced bytes) and ``DIR/meta.json`` (settings, machine,
software, the model's gradient bytes, load average).

Everything is written into a staging folder beside ``DIR`` and moved into place only when
all ranks and bucket caps succeeded: a failed run leaves no partial output.

Ranks are started with :func:`gradsched.distributed.launch` (local processes, fail-fast,
timeouts) or, with ``--torchrun``, are the processes torchrun started (the staging folder
must then be on a file system every rank sees).
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from gradsched.distributed import LaunchSpec, launch
from gradsched.distributed.launch import collective_failed
from gradsched.distributed.rank_files import result_name
from gradsched.distributed.worker import init_group
from gradsched.errors import ConfigError, InputError
from gradsched.io import readable_mode, write_csv_atomic, write_json_atomic
from gradsched.provenance import load_average, machine_info, software_versions
from gradsched.readback import count, mapping, rank_in, seconds, sequence
from gradsched.traces.importers.kineto import import_kineto
from gradsched.workloads import build_model

TASK = "gradsched.capture.iteration:profile_task"
SUMMARY_COLUMNS = ["bucket_cap_mb", "rank", "iteration", "iteration_s", "wall_s", "comm_s",
                   "overlap_s", "exposed_comm_s", "n_collectives", "n_all_reduce",
                   "all_reduce_bytes", "comm_bytes"]


@dataclass
class IterationOptions:
    """Settings of ``capture iteration``."""

    model: str
    batch_size: int
    world_size: int = 2
    backend: str = "gloo"
    bucket_caps_mb: list[float] = field(default_factory=lambda: [25.0])
    iters: int = 3
    warmup: int = 2
    device: str = "cpu"
    dtype: str = "fp32"
    seq_len: int | None = None
    threads_per_rank: int = 1
    seed: int = 0
    deadline_s: float = 1800.0

    def check(self) -> None:
        """Refuse impossible settings."""
        if self.world_size < 1:
            raise ConfigError("--world-size must be >= 1")
        if self.iters < 1 or self.warmup < 0:
            raise ConfigError("--iters must be >= 1 and --warmup >= 0")
        if not self.bucket_caps_mb or any(c <= 0 for c in self.bucket_caps_mb):
            raise ConfigError("--bucket-cap-mb needs positive values, e.g. 1,25")
        if self.backend not in ("gloo", "nccl"):
            raise ConfigError(f"--backend must be gloo or nccl, not {self.backend!r}")
        if self.backend == "nccl" and self.device != "cuda":
            raise ConfigError("--backend nccl needs --device cuda")
        if self.device not in ("cpu", "cuda"):
            raise ConfigError(f"--device must be cpu or cuda, not {self.device!r}")
        if self.device == "cuda":
            import torch

            if not torch.cuda.is_available():
                raise ConfigError("--device cuda: CUDA is not available here")


def cap_label(cap: float) -> str:
    """``25.0`` -> ``25``; ``0.5`` -> ``0.5`` (folder names ``bucket-25mb``)."""
    return f"{cap:g}"


def trace_path(root: Path, cap: float, rank: int) -> Path:
    """Where rank ``rank``'s trace for ``cap`` goes under ``root``."""
    return root / f"bucket-{cap_label(cap)}mb" / f"rank{rank}.json.gz"


# ----------------------------------------------------------------------------- rank task
def profile_task(rank: int, world_size: int, payload: dict[str, Any]) -> dict[str, Any]:
    """One rank (launcher task): profile DDP iterations for every bucket cap."""
    import torch
    from torch.profiler import ProfilerActivity

    opts = IterationOptions(**payload["options"])
    root = Path(payload["staging"])
    device = "cpu"
    if opts.device == "cuda":
        local = int(os.environ.get("LOCAL_RANK", rank)) % torch.cuda.device_count()
        device = f"cuda:{local}"
        torch.cuda.set_device(local)
    activities = [ProfilerActivity.CPU]
    if device.startswith("cuda"):
        activities.append(ProfilerActivity.CUDA)

    out: dict[str, Any] = {"rank": rank, "host": os.uname().nodename, "caps": {}}
    for cap in opts.bucket_caps_mb:
        out["caps"][cap_label(cap)] = _profile_cap(cap, opts, rank, root, device, activities)
    return out


def _profile_cap(cap: float, opts: IterationOptions, rank: int, root: Path, device: str,
                 activities: list[Any]) -> dict[str, Any]:
    """Profile one bucket cap on this rank; return wall times, gradient bytes, trace path."""
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.profiler import profile, schedule

    spec = build_model(opts.model, opts.batch_size, device=device, dtype=opts.dtype,
                       seq_len=opts.seq_len, seed=opts.seed)
    grad_bytes = sum(p.numel() * p.element_size()
                     for p in spec.model.parameters() if p.requires_grad)
    torch.manual_seed(opts.seed + 1000 + rank)  # dropout differs per rank, as in training
    batch = None
    for _ in range(rank + 1):  # a different batch on every rank
        batch = spec.make_batch()
    ddp = DDP(spec.model, bucket_cap_mb=cap,
              device_ids=[torch.cuda.current_device()] if device != "cpu" else None)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01, momentum=0.9)

    def sync() -> None:
        if device.startswith("cuda"):
            torch.cuda.synchronize()

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        loss = spec.loss(ddp, batch)
        loss.backward()
        opt.step()

    for _ in range(opts.warmup):
        step()
    sync()
    dist.barrier()
    target = trace_path(root, cap, rank)
    target.parent.mkdir(parents=True, exist_ok=True)

    def ready(prof: Any) -> None:
        tmp = target.with_name(f".tmp-{target.name}")
        prof.export_chrome_trace(str(tmp))
        os.replace(tmp, target)

    walls: list[float] = []
    with profile(activities=activities, record_shapes=True,
                 schedule=schedule(wait=0, warmup=1, active=opts.iters),
                 on_trace_ready=ready) as prof:
        for _ in range(opts.iters + 1):
            t0 = time.perf_counter()
            step()
            sync()
            walls.append(time.perf_counter() - t0)
            prof.step()
    dist.barrier()
    return {"wall_s": walls[1:], "grad_bytes": int(grad_bytes),
            "trace": str(target.relative_to(root))}


# ----------------------------------------------------------------------------- driver
def summarise(root: Path, opts: IterationOptions, results: list[dict[str, Any]]
              ) -> tuple[pd.DataFrame, list[str]]:
    """Import every rank's trace; one summary row per (cap, rank, profiled iteration)."""
    check_results(root, opts, results)
    rows: list[dict[str, Any]] = []
    warnings: list[str] = []
    for cap in opts.bucket_caps_mb:
        label = cap_label(cap)
        for res in sorted(results, key=lambda r: r["rank"]):
            info = res["caps"][label]
            imported = import_kineto([root / info["trace"]])
            warnings += [f"bucket {label} MB: {w}" for w in imported.warnings]
            its = imported.iterations.reset_index(drop=True)
            coll = imported.collectives
            walls = info["wall_s"]
            for k, it in its.iterrows():
                mine = coll[coll["iteration"] == it["iteration"]]
                ar = mine[mine["collective"] == "all_reduce"]
                rows.append({
                    "bucket_cap_mb": cap, "rank": res["rank"], "iteration": k,
                    "iteration_s": it["iteration_s"],
                    "wall_s": walls[k] if k < len(walls) else None,
                    "comm_s": it["comm_s"], "overlap_s": it["overlap_s"],
                    "exposed_comm_s": it["exposed_comm_s"],
                    "n_collectives": it["n_collectives"], "n_all_reduce": len(ar),
                    "all_reduce_bytes": int(ar["bytes"].sum()) if len(ar) else 0,
                    "comm_bytes": it["comm_bytes"],
                })
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS), warnings


def check_results(root: Path, opts: IterationOptions, results: list[Any]) -> None:
    """Every rank's result (:func:`profile_task`), read back, before it is used: one per
    rank of the world, each bucket cap profiled, the trace the one :func:`trace_path` names
    (a result never points the import elsewhere), the wall times durations
    (:mod:`gradsched.readback`), the gradient bytes a count. Else an
    :class:`~gradsched.errors.InputError` naming the rank's result file and the field."""
    seen: set[int] = set()
    for index, result in enumerate(results):
        where = result_name(index)
        res = mapping(result, where, "")
        rank = rank_in(res.get("rank"), opts.world_size, where, "rank")
        if rank in seen:
            raise InputError(f"a second result of rank {rank}", path=where, field="rank")
        seen.add(rank)
        caps = mapping(res.get("caps"), where, "caps")
        for cap in opts.bucket_caps_mb:
            label = cap_label(cap)
            info = mapping(caps.get(label), where, f"caps.{label}")
            expected = str(trace_path(root, cap, rank).relative_to(root))
            if info.get("trace") != expected:
                raise InputError(f"{info.get('trace')!r} is not this rank's trace "
                                 f"({expected})", path=where, field=f"caps.{label}.trace")
            for i, wall in enumerate(sequence(info.get("wall_s"), where,
                                              f"caps.{label}.wall_s", opts.iters)):
                seconds(wall, where, f"caps.{label}.wall_s[{i}]")
            count(info.get("grad_bytes"), where, f"caps.{label}.grad_bytes")
    if len(seen) != opts.world_size:
        raise InputError(f"{len(seen)} results for {opts.world_size} ranks",
                         path=result_name(0), field="rank")


def _finish(root: Path, out_dir: Path, opts: IterationOptions, results: list[dict[str, Any]],
            started: dt.datetime, load_before: Any, wall: float) -> pd.DataFrame:
    summary, warnings = summarise(root, opts, results)
    write_csv_atomic(root / "summary.csv", summary)
    first = results[0]["caps"][cap_label(opts.bucket_caps_mb[0])]
    meta = {
        "kind": "ddp-iterations",
        "options": asdict(opts),
        "date": started.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "wall_s": round(wall, 3),
        "hosts": sorted({r["host"] for r in results}),
        "gradient_bytes": first["grad_bytes"],
        "machine": machine_info(opts.device if opts.device == "cpu" else "cuda"),
        "software": software_versions(),
        "load_average_before": load_before,
        "load_average_after": load_average(),
        "traces": {cap_label(c): [r["caps"][cap_label(c)]["trace"] for r in results]
                   for c in opts.bucket_caps_mb},
        "warnings": warnings,
        "method": ("torch DDP under torch.profiler (record_shapes=True), schedule(wait=0, "
                   f"warmup=1, active={opts.iters}) after {opts.warmup} unprofiled "
                   "iterations; summary from gradsched import kineto; wall_s = "
                   "perf_counter around each step"),
        "notes": ("CPU ranks share this machine's cores (and, when shared, other jobs'); "
                  f"{opts.threads_per_rank} thread(s) per rank"),
    }
    write_json_atomic(root / "meta.json", meta)
    if out_dir.exists():
        shutil.rmtree(out_dir)
    os.replace(root, out_dir)
    return summary


def capture_iterations(opts: IterationOptions, out_dir: str | Path,
                       progress: Callable[[str], None] | None = None) -> pd.DataFrame:
    """Launch the ranks locally, profile, summarise; return the summary frame."""
    opts.check()
    say = progress or (lambda _m: None)
    out_dir = Path(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    readable_mode(staging, directory=True)
    started = dt.datetime.now(dt.UTC)
    load_before = load_average()
    t0 = time.monotonic()
    try:
        say(f"profiling {opts.model} on {opts.world_size} ranks ({opts.backend}), bucket caps "
            f"{', '.join(cap_label(c) for c in opts.bucket_caps_mb)} MB")
        spec = LaunchSpec(opts.world_size, backend=opts.backend, deadline_s=opts.deadline_s,
                          threads_per_rank=opts.threads_per_rank)
        results = launch(TASK, {"options": asdict(opts), "staging": str(staging)}, spec)
        say("importing the traces")
        return _finish(staging, out_dir, opts, results, started, load_before,
                       time.monotonic() - t0)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def capture_iterations_torchrun(opts: IterationOptions, out_dir: str | Path) -> pd.DataFrame | None:
    """Under ``torchrun``: every rank profiles; rank 0 summarises and moves the output."""
    import torch.distributed as dist

    for var in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        if var not in os.environ:
            raise ConfigError(f"--torchrun: ${var} is not set; start this command with "
                              "torchrun")
    opts.world_size = int(os.environ["WORLD_SIZE"])
    opts.check()
    out_dir = Path(out_dir)
    staging = out_dir.with_name(f".{out_dir.name}.torchrun-partial")
    started = dt.datetime.now(dt.UTC)
    load_before = load_average()
    t0 = time.monotonic()
    rank, world = init_group(backend=opts.backend, op_timeout_s=600.0,
                             threads=opts.threads_per_rank)
    try:
        if rank == 0:
            shutil.rmtree(staging, ignore_errors=True)
            staging.mkdir(parents=True)
        dist.barrier()
        mine = profile_task(rank, world, {"options": asdict(opts), "staging": str(staging)})
        gathered: list[Any] = [None] * world
        dist.all_gather_object(gathered, mine)
    except RuntimeError as exc:  # gloo/NCCL errors (DistBackendError is one), not a bug
        raise collective_failed(rank, world, exc) from None
    finally:
        dist.destroy_process_group()
    if rank != 0:
        return None
    try:
        return _finish(staging, out_dir, opts, gathered, started, load_before,
                       time.monotonic() - t0)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
