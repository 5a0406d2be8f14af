"""Calibrate the replay's interference factors on the machine at hand.

The replay (:mod:`gradsched.replay.engine`) can slow backward compute by
``compute_slowdown`` while a collective runs, and collectives by ``comm_slowdown`` while
backward computes. Both factors are properties of the machine and the backend: with gloo
on CPU the collective's threads (copies, reductions, socket I/O) take CPU time from the
compute thread and vice versa; with NCCL on a GPU the all-reduce kernels take SMs and
memory bandwidth from the compute kernels. This module measures them, on ``world_size``
ranks (default 2), one command::

    gradsched reexec interference -o interference.json                  # gloo, CPU
    gradsched reexec interference --backend nccl -o interference.json   # one GPU per rank

Method (every rank does the same thing at the same time, aligned by barriers; ``rounds``
rounds, each with the four phases in this order, so that a drift of the machine's load
affects the "alone" and "with" phases of a round alike):

1. **compute alone** -- ``reps`` repetitions of a compute kernel (default ``conv``: the
   forward and backward of a 64-channel 3x3 convolution on 56x56 images, ResNet's first
   stage; ``matmul``: a square matrix product), each timed (CPU: wall clock; CUDA: after a
   synchronisation of the compute stream).
2. **communication alone** -- ``comm_reps`` blocking all-reduces of ``comm_bytes``, timed.
3. **compute with communication** -- the same kernel repetitions while all-reduces of
   ``comm_bytes`` are in flight: before each repetition every rank issues ``k``
   asynchronous all-reduces (``k`` = 2 + 2 x kernel time / all-reduce time from phases 1
   and 2, the maximum over ranks, at most 256: every rank issues the same sequence and the
   queue grows, so it never runs dry; the backlog is drained untimed after the phase).
   Only repetitions that ended with an all-reduce still in flight count.
4. **communication with compute** -- the same all-reduces while a second thread of the
   rank runs the compute kernel back to back (PyTorch releases the GIL inside kernels;
   on CUDA the kernel thread uses its own stream).

``compute_slowdown`` = median over rounds and ranks of (median time of a kernel repetition
with communication / alone), ``comm_slowdown`` likewise for the all-reduce. A ratio below 1
(noise) is kept in the raw record, and the factor handed to the replay is clamped to 1.
The JSON keeps every raw timing, the load average, the machine and the command.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import re
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

from gradsched.errors import ConfigError
from gradsched.io import write_json_atomic

_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kKmMgG]i?[bB]?|[bB]?)\s*$")


def parse_size(text: str | int) -> int:
    """``8M`` -> 8388608 (binary multiples; a plain number is bytes)."""
    if isinstance(text, int):
        return text
    match = _SIZE_RE.match(str(text))
    if not match:
        raise ConfigError(f"not a size: {text!r} (e.g. 4096, 64K, 8M, 1G)")
    number, unit = float(match.group(1)), match.group(2)[:1].lower()
    factor = {"": 1, "b": 1, "k": 1024, "m": 1024**2, "g": 1024**3}[unit]
    size = int(number * factor)
    if size < 4:
        raise ConfigError(f"size must be >= 4 bytes, got {text!r}")
    return size


# --------------------------------------------------------------------------- rank side
def _kernel(kind: str, device: str) -> Any:
    """A closure running one repetition of the compute kernel."""
    import torch

    gen = torch.Generator(device="cpu").manual_seed(0)
    if kind == "conv":
        conv = torch.nn.Conv2d(64, 64, 3, padding=1).to(device)
        batch = 2 if device == "cpu" else 64
        x = torch.randn(batch, 64, 56, 56, generator=gen).to(device).requires_grad_(True)

        def run() -> None:
            conv(x).sum().backward()
            conv.zero_grad(set_to_none=True)
            x.grad = None
    elif kind == "matmul":
        n = 768 if device == "cpu" else 8192
        a = torch.randn(n, n, generator=gen).to(device)
        b = torch.randn(n, n, generator=gen).to(device)

        def run() -> None:
            torch.mm(a, b)
    else:
        raise ConfigError(f"unknown kernel {kind!r}; use conv or matmul")
    return run


def interference_task(rank: int, world_size: int, payload: dict[str, Any]) -> dict[str, Any]:
    """Launcher task: the four phases of every round (see the module docstring)."""
    import torch
    import torch.distributed as dist

    cuda = dist.get_backend() == "nccl"
    device = f"cuda:{torch.cuda.current_device()}" if cuda else "cpu"
    run = _kernel(payload["kernel"], device)
    buf = torch.ones(int(payload["comm_bytes"]) // 4, dtype=torch.float32, device=device)
    reps, comm_reps = int(payload["reps"]), int(payload["comm_reps"])

    def sync() -> None:
        if cuda:
            torch.cuda.current_stream().synchronize()

    def comm_done(work: Any) -> None:
        work.wait()
        sync()

    # warm-up: kernel and all-reduce
    for _ in range(2):
        run()
        dist.all_reduce(buf)
    sync()
    out: list[dict[str, Any]] = []
    for _ in range(int(payload["rounds"])):
        rec: dict[str, Any] = {}
        # 1. compute alone
        dist.barrier()
        times = []
        for _ in range(reps):
            t0 = time.perf_counter()
            run()
            sync()
            times.append(time.perf_counter() - t0)
        rec["compute_alone_s"] = times
        # 2. communication alone
        dist.barrier()
        times = []
        for _ in range(comm_reps):
            t0 = time.perf_counter()
            comm_done(dist.all_reduce(buf, async_op=True))
            times.append(time.perf_counter() - t0)
        rec["comm_alone_s"] = times
        # 3. compute with all-reduces in flight. Every rank issues the same number (k per
        # repetition, k agreed on from phases 1 and 2 so that the queue never runs dry).
        per_rep = statistics.median(rec["compute_alone_s"]) / max(statistics.median(times),
                                                                  1e-9)
        k = torch.tensor([2 * int(per_rep) + 2], dtype=torch.int64, device=device)
        dist.all_reduce(k, op=dist.ReduceOp.MAX)
        k_rep = min(int(k.item()), 256)
        dist.barrier()
        inflight: list[Any] = []
        times, overlapped = [], []
        for _ in range(reps):
            inflight = [w for w in inflight if not w.is_completed()]
            inflight.extend(dist.all_reduce(buf, async_op=True) for _ in range(k_rep))
            t0 = time.perf_counter()
            run()
            sync()
            times.append(time.perf_counter() - t0)
            overlapped.append(not inflight[-1].is_completed())
        for w in inflight:
            comm_done(w)
        rec["compute_with_comm_s"] = times
        rec["compute_with_comm_overlapped"] = overlapped
        rec["allreduces_per_rep"] = k_rep
        # 4. communication while a second thread computes
        dist.barrier()
        stop = threading.Event()
        started = threading.Event()
        kernels = [0]

        worker = threading.Thread(target=_background, daemon=True,
                                  args=(run, cuda, stop, started, kernels))
        worker.start()
        started.wait(timeout=60)
        times = []
        for _ in range(comm_reps):
            t0 = time.perf_counter()
            comm_done(dist.all_reduce(buf, async_op=True))
            times.append(time.perf_counter() - t0)
        stop.set()
        worker.join()
        rec["comm_with_compute_s"] = times
        rec["background_kernels"] = kernels[0]
        rec["load_avg_1m"] = os.getloadavg()[0]
        out.append(rec)
    return {"rank": rank, "rounds": out}


def _background(run: Any, cuda: bool, stop: threading.Event, started: threading.Event,
                kernels: list[int]) -> None:
    """Run the kernel back to back until ``stop`` (phase 4); on CUDA on its own stream."""
    import torch

    ctx = torch.cuda.stream(torch.cuda.Stream()) if cuda else contextlib.nullcontext()
    with ctx:
        while not stop.is_set():
            run()
            if cuda:
                torch.cuda.current_stream().synchronize()
            kernels[0] += 1
            started.set()


# --------------------------------------------------------------------------- launcher side
def factors(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Slowdown factors from the ranks' raw records (see the module docstring)."""
    compute_ratios, comm_ratios = [], []
    for res in results:
        for rec in res["rounds"]:
            with_comm = [t for t, ok in zip(rec["compute_with_comm_s"],
                                            rec["compute_with_comm_overlapped"], strict=True)
                         if ok]
            if with_comm and rec["compute_alone_s"]:
                compute_ratios.append(statistics.median(with_comm)
                                      / statistics.median(rec["compute_alone_s"]))
            if rec["comm_alone_s"] and rec["comm_with_compute_s"]:
                comm_ratios.append(statistics.median(rec["comm_with_compute_s"])
                                   / statistics.median(rec["comm_alone_s"]))
    if not compute_ratios or not comm_ratios:
        raise ConfigError("interference: no usable measurement (no repetition overlapped an "
                          "all-reduce); raise --reps or --comm-bytes")
    raw_compute = statistics.median(compute_ratios)
    raw_comm = statistics.median(comm_ratios)
    return {"compute_slowdown": max(raw_compute, 1.0), "comm_slowdown": max(raw_comm, 1.0),
            "compute_slowdown_raw": raw_compute, "comm_slowdown_raw": raw_comm,
            "compute_ratios": compute_ratios, "comm_ratios": comm_ratios}


def calibrate(*, backend: str = "gloo", world_size: int = 2, threads: int = 1,
              cluster: str | None = None, comm_bytes: int = 8 * 1024**2,
              kernel: str = "conv", rounds: int = 5, reps: int = 20,
              comm_reps: int | None = None, output: str | Path | None = None
              ) -> dict[str, Any]:
    """Measure both factors on ``world_size`` ranks; write and return the JSON record."""
    from gradsched.distributed import LaunchSpec, launch
    from gradsched.reexec.experiment import machine_info

    if world_size < 2:
        raise ConfigError("interference needs --world-size >= 2")
    if rounds < 1 or reps < 1:
        raise ConfigError("--rounds and --reps must be >= 1")
    if backend not in ("gloo", "nccl"):
        raise ConfigError(f"backend must be gloo or nccl, not {backend!r}")
    comm_reps = comm_reps if comm_reps is not None else max(3, reps // 4)
    payload = {"kernel": kernel, "comm_bytes": comm_bytes, "reps": reps,
               "comm_reps": comm_reps, "rounds": rounds}
    common = {"backend": backend, "threads_per_rank": threads, "op_timeout_s": 300.0,
              "deadline_s": 3600.0}
    task = "gradsched.reexec.interference:interference_task"
    load_before = os.getloadavg()
    start = time.monotonic()
    when = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    if cluster is not None:
        from gradsched.capture.cluster import EmulatedCluster

        with EmulatedCluster(world_size, cluster) as emu:
            results = launch(task, payload, emu.launch_spec(**common))
        network = f"emulated cluster, tbf {cluster}"
    else:
        results = launch(task, payload, LaunchSpec(world_size, **common))
        network = "loopback"
    record = factors(results)
    record.update({
        "kind": "interference", "backend": backend, "world_size": world_size,
        "threads_per_rank": threads, "network": network, "kernel": kernel,
        "comm_bytes": comm_bytes, "rounds": rounds, "reps": reps, "comm_reps": comm_reps,
        "date": when, "wall_s": round(time.monotonic() - start, 1),
        "load_average_before": list(load_before), "load_average_after": list(os.getloadavg()),
        "machine": machine_info(), "command": "gradsched " + " ".join(sys.argv[1:])
        if Path(sys.argv[0]).name in ("gradsched", "__main__.py") else None,
        "method": __doc__.split("Method", 1)[1].strip() if __doc__ else "",
        "raw": results})
    if output is not None:
        write_json_atomic(output, record)
    return record
