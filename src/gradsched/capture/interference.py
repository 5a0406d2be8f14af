"""Calibrate the replay's interference factors on the machine at hand (a measurement of the
machine, beside the collective sweeps of :mod:`gradsched.capture.sweep`).

The replay (:mod:`gradsched.replay.engine`) models three interference effects: backward
compute loses ``collective_cpu_s`` for every collective started while it runs, and
progresses at 1/``compute_slowdown`` of its speed while a collective is in its bandwidth
phase; collectives progress at 1/``comm_slowdown`` while backward computes. All three are
properties of the machine and the backend: with gloo on CPU the collective's threads
(wake-ups, copies, reductions, socket I/O) take CPU time from the compute thread and vice
versa; with NCCL on a GPU the all-reduce kernels take SMs and memory bandwidth from the
compute kernels. This module measures them, on ``world_size`` ranks (default 2;
:class:`~gradsched.distributed.placement.Launch`) with the settings of a
:class:`Calibration`, one command::

    gradsched reexec interference -o interference.json                  # gloo, CPU
    gradsched reexec interference --backend nccl -o interference.json   # one GPU per rank

Method (every rank does the same thing at the same time, aligned by barriers; ``rounds``
rounds, each with the five phases in this order, so that a drift of the machine's load
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
4. **compute with small collectives** -- as phase 3 with all-reduces of ``small_bytes``
   (default 4 KiB; up to 4096 per repetition), whose bandwidth phase is negligible; each
   repetition also counts the collectives completed during it.
5. **communication with compute** -- the all-reduces of phase 2 while a second thread of
   the rank runs the compute kernel back to back (PyTorch releases the GIL inside kernels;
   on CUDA the kernel thread uses its own stream).

Per rank and round: ``collective_cpu_s`` = (median kernel time in phase 4 - median alone)
/ median collectives completed per repetition; ``compute_slowdown`` = median kernel time
in phase 3 / (median alone + ``collective_cpu_s`` x median collectives completed per
repetition); ``comm_slowdown`` = median all-reduce time in phase 5 / phase 2. Each
parameter is the median over ranks and rounds. A value below its neutral value (noise) is
kept in the raw record, and the one handed to the replay is clamped (to 1, or 0 s).
The JSON keeps every raw timing, the load average, the machine and the command.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import statistics
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gradsched.distributed import LaunchSpec, launch
from gradsched.distributed.cluster import EmulatedCluster
from gradsched.distributed.placement import Launch
from gradsched.errors import ConfigError
from gradsched.io import write_json_atomic
from gradsched.provenance import machine_versions


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


def _timed(n: int, fn: Any) -> list[float]:
    """Wall-clock times of ``n`` calls of ``fn``."""
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return times


class _Phases:
    """One rank's kernel, all-reduce buffers and the measurements of one round's phases."""

    def __init__(self, payload: dict[str, Any]) -> None:
        import torch
        import torch.distributed as dist

        self.cuda = dist.get_backend() == "nccl"
        self.device = f"cuda:{torch.cuda.current_device()}" if self.cuda else "cpu"
        self.run = _kernel(payload["kernel"], self.device)
        self.buf = torch.ones(int(payload["comm_bytes"]) // 4, dtype=torch.float32,
                              device=self.device)
        self.small = torch.ones(max(int(payload.get("small_bytes", 4096)) // 4, 1),
                                dtype=torch.float32, device=self.device)
        self.reps, self.comm_reps = int(payload["reps"]), int(payload["comm_reps"])

    def sync(self) -> None:
        import torch

        if self.cuda:
            torch.cuda.current_stream().synchronize()

    def comm_done(self, work: Any) -> None:
        work.wait()
        self.sync()

    def warm_up(self) -> None:
        """Kernel and all-reduce, twice."""
        import torch.distributed as dist

        for _ in range(2):
            self.run()
            dist.all_reduce(self.buf)
        self.sync()

    def compute_once(self) -> None:
        self.run()
        self.sync()

    def comm_alone(self, tensor: Any) -> list[float]:
        """Times of all-reduces of ``tensor`` with nothing else running (phases 2, 4)."""
        import torch.distributed as dist

        dist.barrier()
        return _timed(self.comm_reps,
                      lambda: self.comm_done(dist.all_reduce(tensor, async_op=True)))

    def with_stream(self, rec: dict[str, Any], name: str, tensor: Any,
                    comm_alone: list[float], cap: int) -> None:
        """Kernel repetitions while all-reduces of ``tensor`` are queued (phases 3, 4):
        every rank issues the same number per repetition, agreed on from the times alone
        so that the queue never runs dry."""
        import torch.distributed as dist

        k = _agreed_k(rec["compute_alone_s"], comm_alone, self.device, cap=cap)
        dist.barrier()
        times, overlapped, completed = _with_stream(
            self.run, self.sync, lambda: dist.all_reduce(tensor, async_op=True), self.reps,
            k, self.comm_done)
        rec[f"compute_with_{name}_s"] = times
        rec[f"compute_with_{name}_overlapped"] = overlapped
        rec[f"compute_with_{name}_completed"] = completed
        rec[f"{name}_allreduces_per_rep"] = k

    def comm_with_compute(self, rec: dict[str, Any]) -> None:
        """Phase 5: all-reduces while a second thread computes."""
        import torch.distributed as dist

        dist.barrier()
        stop = threading.Event()
        started = threading.Event()
        kernels = [0]

        worker = threading.Thread(target=_background, daemon=True,
                                  args=(self.run, self.cuda, stop, started, kernels))
        worker.start()
        started.wait(timeout=60)
        times = []
        for _ in range(self.comm_reps):
            t0 = time.perf_counter()
            self.comm_done(dist.all_reduce(self.buf, async_op=True))
            times.append(time.perf_counter() - t0)
        stop.set()
        worker.join()
        rec["comm_with_compute_s"] = times
        rec["background_kernels"] = kernels[0]

    def round(self) -> dict[str, Any]:
        """The phases of one round (see the module docstring)."""
        import torch.distributed as dist

        rec: dict[str, Any] = {}
        # 1. compute alone
        dist.barrier()
        rec["compute_alone_s"] = _timed(self.reps, self.compute_once)
        # 2. communication alone
        rec["comm_alone_s"] = self.comm_alone(self.buf)
        # 3. compute with all-reduces of comm_bytes in flight
        self.with_stream(rec, "comm", self.buf, rec["comm_alone_s"], 256)
        # 4. compute with small all-reduces in flight: the compute time one collective
        # costs, whatever its size (phase 3 is dominated by its bandwidth part).
        rec["small_comm_alone_s"] = self.comm_alone(self.small)
        self.with_stream(rec, "small", self.small, rec["small_comm_alone_s"], 4096)
        # 5. communication while a second thread computes
        self.comm_with_compute(rec)
        rec["load_avg_1m"] = os.getloadavg()[0]
        return rec


def interference_task(rank: int, world_size: int, payload: dict[str, Any]) -> dict[str, Any]:
    """Launcher task: the four phases of every round (see the module docstring)."""
    phases = _Phases(payload)
    phases.warm_up()
    out = [phases.round() for _ in range(int(payload["rounds"]))]
    return {"rank": rank, "rounds": out}


def _agreed_k(compute_s: list[float], comm_s: list[float], device: str,
              cap: int = 256) -> int:
    """All-reduces to issue per kernel repetition so that the queue never runs dry:
    2 + 2 x kernel time / all-reduce time, the maximum over ranks, at most ``cap``."""
    import torch
    import torch.distributed as dist

    per_rep = statistics.median(compute_s) / max(statistics.median(comm_s), 1e-9)
    k = torch.tensor([2 * int(per_rep) + 2], dtype=torch.int64, device=device)
    dist.all_reduce(k, op=dist.ReduceOp.MAX)
    return min(int(k.item()), cap)


def _with_stream(run: Any, sync: Any, issue: Any, reps: int, k_rep: int,
                 comm_done: Any) -> tuple[list[float], list[bool], list[int]]:
    """Time ``reps`` kernel repetitions while ``k_rep`` collectives per repetition are
    queued; per repetition: its time, whether a collective was still in flight at its end,
    and how many collectives completed during it (gloo and NCCL complete the works of one
    process group in issue order)."""
    issued: list[Any] = []
    done = 0
    times, overlapped, completed = [], [], []

    def advance() -> int:
        nonlocal done
        while done < len(issued) and issued[done].is_completed():
            done += 1
        return done

    for _ in range(reps):
        issued.extend(issue() for _ in range(k_rep))
        before = advance()
        t0 = time.perf_counter()
        run()
        sync()
        times.append(time.perf_counter() - t0)
        after = advance()
        overlapped.append(after < len(issued))
        completed.append(after - before)
    for w in issued[done:]:
        comm_done(w)
    return times, overlapped, completed


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
def _overlapped(times: list[float], flags: list[bool],
                counts: list[int] | None) -> tuple[list[float], list[int]]:
    """The repetitions that ended with a collective still in flight."""
    counts = counts if counts is not None else [0] * len(times)
    kept = [(t, c) for t, ok, c in zip(times, flags, counts, strict=True) if ok]
    return [t for t, _ in kept], [c for _, c in kept]


def _round_factors(rec: dict[str, Any]) -> tuple[float | None, float | None, float | None]:
    """(collective_cpu_s, compute ratio, comm ratio) of one rank's round (None: unusable).

    The replay's model: compute loses ``collective_cpu_s`` per collective started while it
    runs, and progresses at 1/compute_slowdown while a collective is in its bandwidth
    phase. Phase 5 (small all-reduces: no bandwidth phase to speak of) gives the first:
    (median time with - median time alone) / median collectives completed per repetition;
    phase 3 then gives compute_slowdown = median time with / (median time alone +
    collective_cpu_s x median collectives completed per repetition)."""
    alone = statistics.median(rec["compute_alone_s"]) if rec["compute_alone_s"] else None
    cpu_s = None
    if alone is not None and "compute_with_small_s" in rec:
        small, n_small = _overlapped(rec["compute_with_small_s"],
                                     rec["compute_with_small_overlapped"],
                                     rec["compute_with_small_completed"])
        if small and statistics.median(n_small) > 0:
            cpu_s = (statistics.median(small) - alone) / statistics.median(n_small)
    ratio = None
    with_comm, n_big = _overlapped(rec["compute_with_comm_s"],
                                   rec["compute_with_comm_overlapped"],
                                   rec.get("compute_with_comm_completed"))
    if with_comm and alone is not None:
        own = max(cpu_s or 0.0, 0.0) * statistics.median(n_big)
        ratio = statistics.median(with_comm) / (alone + own)
    comm = None
    if rec["comm_alone_s"] and rec["comm_with_compute_s"]:
        comm = statistics.median(rec["comm_with_compute_s"]) / statistics.median(
            rec["comm_alone_s"])
    return cpu_s, ratio, comm


def factors(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Interference parameters from the ranks' raw records (see the module docstring):
    medians over ranks and rounds; values below their neutral value (noise) are kept in
    the ``*_raw`` fields and clamped in the ones the replay uses."""
    cpu, compute_ratios, comm_ratios = [], [], []
    for res in results:
        for rec in res["rounds"]:
            c, r, m = _round_factors(rec)
            for out, value in ((cpu, c), (compute_ratios, r), (comm_ratios, m)):
                if value is not None:
                    out.append(value)
    if not compute_ratios or not comm_ratios:
        raise ConfigError("interference: no usable measurement (no repetition overlapped an "
                          "all-reduce); raise --reps or --comm-bytes")
    raw_compute = statistics.median(compute_ratios)
    raw_comm = statistics.median(comm_ratios)
    raw_cpu = statistics.median(cpu) if cpu else 0.0
    return {"compute_slowdown": max(raw_compute, 1.0), "comm_slowdown": max(raw_comm, 1.0),
            "collective_cpu_s": max(raw_cpu, 0.0),
            "compute_slowdown_raw": raw_compute, "comm_slowdown_raw": raw_comm,
            "collective_cpu_s_raw": raw_cpu, "collective_cpu_s_per_round": cpu,
            "compute_ratios": compute_ratios, "comm_ratios": comm_ratios}


KERNELS = ("conv", "matmul")
"""The compute kernels (:func:`_kernel`)."""
TASK = "gradsched.capture.interference:interference_task"
DEADLINE_S = 3600.0
"""The launch's deadline when the :class:`Launch` gives none."""


@dataclass(frozen=True)
class Calibration:
    """What one calibration measures (module docstring, Method): the compute ``kernel``,
    the all-reduce sizes (``comm_bytes``; ``small_bytes``: the small ones of phase 4), the
    ``rounds`` of five phases, the kernel repetitions per phase (``reps``) and the
    all-reduces per communication phase (``comm_reps``; default ``max(3, reps // 4)``).
    Checked when made."""

    kernel: str = "conv"
    comm_bytes: int = 8 * 1024**2
    small_bytes: int = 4096
    rounds: int = 5
    reps: int = 20
    comm_reps: int | None = None

    def __post_init__(self) -> None:
        if self.rounds < 1 or self.reps < 1:
            raise ConfigError("--rounds and --reps must be >= 1")
        if self.kernel not in KERNELS:
            raise ConfigError(f"unknown kernel {self.kernel!r}; use conv or matmul")
        if self.comm_reps is not None and self.comm_reps < 1:
            raise ConfigError("comm_reps must be >= 1")

    @property
    def all_reduces(self) -> int:
        """All-reduces per communication phase."""
        return self.comm_reps if self.comm_reps is not None else max(3, self.reps // 4)


def calibrate(settings: Calibration, where: Launch, output: str | Path | None = None
              ) -> dict[str, Any]:
    """Measure the factors with ``settings`` on the ranks ``where`` says (loopback or the
    emulated cluster); write the JSON record to ``output`` when given, and return it."""
    if where.world_size < 2:
        raise ConfigError("interference needs --world-size >= 2")
    if where.busy_limit_cores is not None:
        raise ConfigError("interference: a busy-machine limit is not checked by this "
                          "calibration; leave busy_limit_cores unset")
    comm_reps = settings.all_reduces
    payload = {"kernel": settings.kernel, "comm_bytes": settings.comm_bytes,
               "small_bytes": settings.small_bytes, "reps": settings.reps,
               "comm_reps": comm_reps, "rounds": settings.rounds}
    common = {"backend": where.backend, "threads_per_rank": where.threads,
              "op_timeout_s": 300.0, "deadline_s": where.deadline_s or DEADLINE_S}
    load_before = os.getloadavg()
    start = time.monotonic()
    when = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    if where.cluster is not None:
        with EmulatedCluster(where.world_size, where.cluster) as emu:
            results = launch(TASK, payload, emu.launch_spec(**common))
        network = f"emulated cluster, tbf {where.cluster}"
    else:
        results = launch(TASK, payload, LaunchSpec(where.world_size, **common))
        network = "loopback"
    record = factors(results)
    record.update({
        "kind": "interference", "backend": where.backend, "world_size": where.world_size,
        "threads_per_rank": where.threads, "network": network, "kernel": settings.kernel,
        "comm_bytes": settings.comm_bytes, "small_bytes": settings.small_bytes,
        "rounds": settings.rounds, "reps": settings.reps, "comm_reps": comm_reps,
        "date": when, "wall_s": round(time.monotonic() - start, 1),
        "load_average_before": list(load_before), "load_average_after": list(os.getloadavg()),
        "machine": machine_versions(), "command": "gradsched " + " ".join(sys.argv[1:])
        if Path(sys.argv[0]).name in ("gradsched", "__main__.py") else None,
        "method": __doc__.split("Method", 1)[1].strip() if __doc__ else "",
        "raw": results})
    if output is not None:
        write_json_atomic(output, record)
    return record
