"""Collective sweeps with ``torch.distributed``: ``gradsched capture comm``.

    gradsched capture comm --backend gloo --world-size 4 \\
        --collectives all_reduce,reduce_scatter,all_gather,broadcast \\
        --min-bytes 4 --max-bytes 256M --factor 2 [--iters 20] [--warmup 3] \\
        [--time-budget-s 1] [--cluster 1gbit] [--torchrun] -o OUT.csv

Measures each collective at message sizes from ``--min-bytes`` to ``--max-bytes`` (growing
by ``--factor``) and writes a comm trace (``traces/README.md``) plus its sidecar.

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
one network namespace per rank with ``--cluster RATE``; see :mod:`.cluster`), or, with
``--torchrun``, the processes ``torchrun`` started (multi-node): each reads its rank from
the environment and rank 0 writes the output. Nothing is written unless the whole sweep
succeeded; a dead or unreachable rank ends the run with an error naming it.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import socket
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

import gradsched
from gradsched.errors import ConfigError, GradschedError
from gradsched.provenance import comm_software_versions, hardware_summary, load_average
from gradsched.traces.columns import COLLECTIVES
from gradsched.units import parse_size

DEFAULT_COLLECTIVES: tuple[str, ...] = ("all_reduce", "reduce_scatter", "all_gather", "broadcast")
ELEMENT_BYTES = 4  # fp32
IN_PLACE_ONLY: frozenset[str] = frozenset({"all_reduce", "broadcast", "reduce"})
P2P = "p2p"
"""Ping-pong between rank 0 and rank 1 (see the module docstring)."""
SPLIT: frozenset[str] = frozenset({"all_gather", "reduce_scatter"})
TASK = "gradsched.capture.sweep:sweep_task"


class SweepError(GradschedError, RuntimeError):
    """A sweep could not be run or produced no usable measurement."""


# ----------------------------------------------------------------------------- sizes


def geometric_sizes(min_bytes: int, max_bytes: int, factor: float) -> list[int]:
    """``min_bytes, min_bytes*factor, ...`` up to and including ``max_bytes`` (rounded)."""
    if min_bytes < 1 or max_bytes < min_bytes:
        raise ConfigError(f"need 1 <= min-bytes <= max-bytes, got {min_bytes} and {max_bytes}")
    if factor <= 1:
        raise ConfigError(f"factor must be > 1, got {factor:g}")
    sizes: list[int] = []
    value = float(min_bytes)
    while value <= max_bytes * (1 + 1e-12):
        size = round(value)
        if not sizes or size > sizes[-1]:
            sizes.append(size)
        value *= factor
    return sizes


def size_quantum(collective: str, world_size: int) -> int:
    """The multiple that ``bytes`` must be for ``collective``: one fp32, or one per rank."""
    return ELEMENT_BYTES * (world_size if collective in SPLIT else 1)


def round_sizes(collective: str, sizes: Sequence[int], world_size: int
                ) -> tuple[list[int], list[str]]:
    """Round ``sizes`` up to the collective's quantum; return (unique sizes, notes)."""
    quantum = size_quantum(collective, world_size)
    out: list[int] = []
    changed: list[str] = []
    for size in sizes:
        rounded = -(-size // quantum) * quantum
        if rounded != size:
            changed.append(f"{size}->{rounded}")
        if not out or rounded > out[-1]:
            out.append(rounded)
    notes = []
    if changed:
        notes.append(f"{collective}: sizes rounded up to multiples of {quantum} bytes "
                     f"(fp32 x {quantum // ELEMENT_BYTES}): " + ", ".join(changed)
                     + (" (duplicates after rounding dropped)" if len(out) < len(sizes) else ""))
    return out, notes


def bus_factor(collective: str, world_size: int) -> float:
    """nccl-tests' bus-bandwidth factor of ``collective`` on ``world_size`` ranks (1 for a
    point-to-point message: its bytes cross one link once)."""
    n = world_size
    if collective == "all_reduce":
        return 2.0 * (n - 1) / n
    if collective in SPLIT:
        return (n - 1) / n
    if collective in ("broadcast", "reduce", P2P):
        return 1.0
    raise ConfigError(f"unknown collective {collective!r}")


def parse_collectives(text: str) -> list[str]:
    """``all_reduce,all_gather`` (or ``all``) -> validated, de-duplicated list."""
    names = list(DEFAULT_COLLECTIVES) if text.strip() == "all" else [
        part.strip() for part in text.split(",") if part.strip()]
    bad = [n for n in names if n not in COLLECTIVES]
    if bad or not names:
        raise ConfigError(f"collectives {text!r}: choose from {', '.join(COLLECTIVES)} "
                          "(comma-separated) or all")
    return list(dict.fromkeys(names))


# ----------------------------------------------------------------------------- settings


@dataclass
class SweepConfig:
    """What to measure and how."""

    world_size: int
    backend: str = "gloo"
    collectives: list[str] = field(default_factory=lambda: list(DEFAULT_COLLECTIVES))
    min_bytes: int = 4
    max_bytes: int = 1 << 20
    factor: float = 2.0
    iters: int = 50
    warmup: int = 3
    min_iters: int = 3
    time_budget_s: float = 1.0
    in_place: bool = False
    threads_per_rank: int = 1
    cluster_rate: str | None = None
    cluster_prefix: str | None = None
    init_timeout_s: float = 60.0
    op_timeout_s: float | None = None
    deadline_s: float | None = None
    note: str | None = None

    def validate(self) -> None:
        """Raise :class:`ConfigError` on an impossible setting."""
        if self.world_size < 1:
            raise ConfigError("world size must be >= 1")
        if self.backend not in ("gloo", "nccl"):
            raise ConfigError(f"backend {self.backend!r}: gloo or nccl")
        if self.iters < 1 or self.warmup < 1 or self.min_iters < 1:
            raise ConfigError("iters, warmup and min-iters must be >= 1 (the first warm-up "
                              "operation also checks the result)")
        if self.time_budget_s <= 0:
            raise ConfigError("time-budget-s must be positive")
        if self.threads_per_rank < 1:
            raise ConfigError("threads per rank must be >= 1")
        geometric_sizes(self.min_bytes, self.max_bytes, self.factor)
        parse_collectives(",".join(self.collectives))
        if P2P in self.collectives and self.world_size != 2:
            raise ConfigError(f"p2p is a ping-pong between two ranks: use --world-size 2 "
                              f"(got {self.world_size})")

    def plan(self) -> tuple[dict[str, list[int]], list[str]]:
        """Sizes per collective (rounded to each one's quantum) and the rounding notes."""
        base = geometric_sizes(self.min_bytes, self.max_bytes, self.factor)
        sizes: dict[str, list[int]] = {}
        notes: list[str] = []
        for coll in self.collectives:
            sizes[coll], more = round_sizes(coll, base, self.world_size)
            notes += more
        return sizes, notes


def _floor_bandwidth(config: SweepConfig) -> float:
    """A pessimistic bandwidth (bytes/s) to bound timeouts: half the shaped rate, else 20 MB/s."""
    from gradsched.distributed.shaping import parse_rate

    if config.cluster_rate is not None:
        return parse_rate(config.cluster_rate) / 8 / 2
    return 20e6


def _pessimistic_op_s(config: SweepConfig, nbytes: int) -> float:
    return 2.0 * nbytes / _floor_bandwidth(config) + 1e-3


def timeouts(config: SweepConfig, sizes: dict[str, list[int]]) -> tuple[float, float]:
    """(per-collective timeout, whole-run deadline) in seconds, generous but finite."""
    biggest = max(max(v) for v in sizes.values())
    op = config.op_timeout_s or max(60.0, 5 * _pessimistic_op_s(config, biggest))
    if config.deadline_s is not None:
        return op, config.deadline_s
    total = config.init_timeout_s + 30.0
    for values in sizes.values():
        for nbytes in values:
            total += config.time_budget_s * 1.5 + 0.5
            total += (config.min_iters + 2) * _pessimistic_op_s(config, nbytes)
    return op, total


# ----------------------------------------------------------------------------- the rank task


def sweep_task(rank: int, world_size: int, payload: dict[str, Any]) -> dict[str, Any]:
    """Run the sweep on one rank (the process group is already initialised).

    ``payload``: ``backend``, ``collectives``, ``sizes`` ({collective: [bytes]}),
    ``iters``, ``warmup``, ``min_iters``, ``time_budget_s``, ``in_place``; optionally
    ``fault`` ({"rank", "collective", "bytes"}: that rank exits abruptly there; a test hook).
    Returns the per-iteration times of this rank.
    """
    import torch
    import torch.distributed as dist

    device = torch.device("cuda", torch.cuda.current_device()) if payload["backend"] == "nccl" \
        else torch.device("cpu")
    sync: Callable[[], None] = (torch.cuda.synchronize if device.type == "cuda"
                                else (lambda: None))
    fault = payload.get("fault") or {}

    def agree_max(value: float) -> float:
        t = torch.tensor([value], dtype=torch.float64, device=device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return float(t.item())

    results = []
    for coll in payload["collectives"]:
        for nbytes in payload["sizes"][coll]:
            if fault and fault.get("rank") == rank and fault.get("collective") == coll \
                    and int(fault.get("bytes", 0)) <= nbytes:
                os._exit(int(fault.get("exit_code", 17)))
            if coll == P2P:
                results.append(_pingpong(nbytes, rank, payload, device, agree_max))
                continue
            op, check = _make_op(coll, nbytes, rank, world_size, payload["in_place"], device)
            dist.barrier()
            t0 = time.perf_counter()
            op()
            sync()
            first = time.perf_counter() - t0
            check()
            estimate = agree_max(first)
            budget = float(payload["time_budget_s"])
            extra = min(int(payload["warmup"]) - 1, int(0.25 * budget / max(estimate, 1e-9)))
            last = first
            for _ in range(max(extra, 0)):
                dist.barrier()
                t0 = time.perf_counter()
                op()
                sync()
                last = time.perf_counter() - t0
            if extra > 0:
                estimate = agree_max(last)
            iters = int(min(payload["iters"],
                            max(payload["min_iters"], budget // max(estimate, 1e-9))))
            times = []
            for _ in range(iters):
                dist.barrier()
                t0 = time.perf_counter()
                op()
                sync()
                times.append(time.perf_counter() - t0)
            results.append({"collective": coll, "bytes": nbytes, "warmup": 1 + max(extra, 0),
                            "times_s": times})
            del op, check
    return {"rank": rank, "host": socket.gethostname(), "threads": torch.get_num_threads(),
            "results": results}


def _pingpong(nbytes: int, rank: int, payload: dict[str, Any], device: Any,
              agree_max: Callable[[float], float]) -> dict[str, Any]:
    """One p2p point on rank 0 or 1: round-trip times (seconds) of ``nbytes`` messages.

    Follows OSU's ``osu_latency`` (rank 0: send then recv; rank 1: recv then send back),
    with the warm-up/iteration rule of the collectives: the first (checked) round trip
    sets the warm-up and iteration counts, then one barrier and the timed round trips back
    to back.
    """
    import torch
    import torch.distributed as dist

    buf = torch.full((nbytes // ELEMENT_BYTES,), float(rank + 1), dtype=torch.float32,
                     device=device)

    def round_trip() -> float:
        t0 = time.perf_counter()
        if rank == 0:
            dist.send(buf, dst=1)
            dist.recv(buf, src=1)
        else:
            dist.recv(buf, src=0)
            dist.send(buf, dst=0)
        return time.perf_counter() - t0

    dist.barrier()
    estimate = agree_max(round_trip())
    _expect(buf, 1.0, P2P, nbytes, rank)  # rank 1 echoed rank 0's ones back
    budget = float(payload["time_budget_s"])
    extra = max(min(int(payload["warmup"]) - 1, int(0.25 * budget / max(estimate, 1e-9))), 0)
    last = estimate
    for _ in range(extra):
        last = round_trip()
    if extra > 0:
        estimate = agree_max(last)
    iters = int(min(payload["iters"], max(payload["min_iters"], budget // max(estimate, 1e-9))))
    dist.barrier()
    times = [round_trip() for _ in range(iters)]
    return {"collective": P2P, "bytes": nbytes, "warmup": 1 + extra, "times_s": times}


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


# ----------------------------------------------------------------------------- summary


def summarise(per_rank: list[dict[str, Any]], *, backend: str, world_size: int, nodes: int,
              in_place: bool) -> pd.DataFrame:
    """Per-rank times -> comm-trace rows (slowest rank's median; for p2p half of rank 0's
    round trips; see the module doc)."""
    by_key: dict[tuple[str, int], dict[int, list[float]]] = {}
    for index, res in enumerate(per_rank):
        for item in res["results"]:
            by_key.setdefault((item["collective"], int(item["bytes"])), {})[
                int(res.get("rank", index))] = item["times_s"]
    rows = []
    for (coll, nbytes), per in by_key.items():
        lists = list(per.values())
        if len(lists) != world_size or any(not t for t in lists):
            raise SweepError(f"{coll} at {nbytes} bytes: missing times from some rank")
        if coll == P2P:  # one-way = half of rank 0's round trip (osu_latency)
            lists = [[t / 2.0 for t in per[0]]] if 0 in per else []
            if not lists:
                raise SweepError(f"p2p at {nbytes} bytes: no round-trip times of rank 0")
        median = max(statistics.median(t) for t in lists)
        lo = max(min(t) for t in lists)
        hi = max(max(t) for t in lists)
        if median <= 0:
            raise SweepError(f"{coll} at {nbytes} bytes: non-positive time {median}")
        algbw = nbytes / median
        rows.append({
            "collective": coll, "backend": backend, "algorithm": "default",
            "world_size": world_size, "nodes": nodes,
            "in_place": 0 if coll == P2P else int(coll in IN_PLACE_ONLY or in_place),
            "bytes": nbytes, "time_s": median, "time_min_s": lo, "time_max_s": hi,
            "algbw_Bps": algbw, "busbw_Bps": algbw * bus_factor(coll, world_size),
        })
    return pd.DataFrame(rows)


def size_drop_warnings(frame: pd.DataFrame) -> list[str]:
    """Where ``time_s`` falls by more than 1.25x while the size grows (noise / protocol)."""
    from gradsched.traces.importers import DROP_FACTOR

    out = []
    for coll, grp in frame.groupby("collective", sort=True):
        grp = grp.sort_values("bytes")
        sizes, times = grp["bytes"].tolist(), grp["time_s"].tolist()
        for i in range(1, len(times)):
            if times[i] * DROP_FACTOR < times[i - 1]:
                out.append(f"{coll}: time falls from {times[i - 1]:.6g} s at {sizes[i - 1]} B "
                           f"to {times[i]:.6g} s at {sizes[i]} B (more than {DROP_FACTOR:g}x; "
                           "noisy measurement)")
    return out


def line_rate_meta(cluster_rate: str | None) -> dict[str, float]:
    """``{"line_rate_Bps": bytes/s}`` of an emulated cluster's shaped links (the tbf rate,
    per rank and direction), which the wire floor of the cost models uses
    (:mod:`gradsched.costmodel.wire`); empty on loopback, where no rate is set."""
    if cluster_rate is None:
        return {}
    from gradsched.distributed.shaping import parse_rate

    return {"line_rate_Bps": parse_rate(cluster_rate) / 8.0}


P2P_METHOD = (
    "p2p rows: a ping-pong between rank 0 and rank 1 with blocking torch.distributed "
    "send/recv, as OSU's osu_latency (rank 0 sends then receives, rank 1 receives then "
    "sends the message back); after the warm-ups one barrier, then the timed round trips "
    "back to back, each timed on rank 0 with time.perf_counter. time_s is half of rank 0's "
    "median round trip (the one-way time of one message), time_min_s/time_max_s half of its "
    "fastest/slowest; busbw = algbw = bytes / time_s; in_place 0, world_size 2.")


def build_meta(config: SweepConfig, *, placement: str, interconnect: str, nodes: int,
               per_rank: list[dict[str, Any]], notes: list[str], warnings: list[str],
               started: dt.datetime, wall_s: float, load_before: list[float],
               physical_machines: int | None) -> dict[str, Any]:
    """The sidecar of a captured sweep."""
    iterations: dict[str, dict[str, int]] = {}
    warm: dict[str, dict[str, int]] = {}
    for item in per_rank[0]["results"]:
        iterations.setdefault(item["collective"], {})[str(item["bytes"])] = len(item["times_s"])
        warm.setdefault(item["collective"], {})[str(item["bytes"])] = int(item["warmup"])
    settings = {k: v for k, v in asdict(config).items() if k != "note"}
    text = [
        f"Captured with `gradsched capture comm` (torch.distributed, {config.backend}); "
        f"{config.world_size} ranks, {nodes} node(s) ({placement}). fp32 buffers; each "
        "timed operation starts after a barrier and is timed on every rank; time_s is the "
        "slowest rank's median over the timed iterations, time_min_s/time_max_s the largest "
        "per-rank minimum/maximum. busbw uses nccl-tests' factors. all_reduce, broadcast and "
        "reduce are in place (torch.distributed has no out-of-place form); all_gather and "
        f"reduce_scatter are {'in' if config.in_place else 'out of'} place. Iterations "
        "adapt to the size (see 'iterations'): up to 'iters', at least 'min_iters', about "
        "'time_budget_s' of timed operations per size. The first warm-up operation's "
        "result was checked on every rank.",
        *notes,
    ]
    if P2P in config.collectives:
        text.append(P2P_METHOD)
    if config.note:
        text.append(config.note)
    return {
        "kind": "comm",
        "source": f"measured with gradsched {gradsched.__version__} capture comm on "
                  f"{started.date().isoformat()} ({placement})",
        "hardware": f"{hardware_summary()}; {placement}",
        "interconnect": interconnect,
        **line_rate_meta(config.cluster_rate),
        "software": comm_software_versions(config.backend),
        "statistic": "median",
        "warnings": warnings,
        "notes": " ".join(text),
        "capture_method": "gradsched capture comm",
        "date": started.isoformat(timespec="seconds"),
        "world_size": config.world_size,
        "nodes": nodes,
        "physical_machines": physical_machines,
        "threads_per_rank": int(per_rank[0].get("threads", config.threads_per_rank)),
        "load_average": {"before": load_before, "after": load_average([])},
        "wall_s": round(wall_s, 3),
        "settings": settings,
        "iterations": iterations,
        "warmup_iterations": warm,
    }


def to_trace(per_rank: list[dict[str, Any]], config: SweepConfig, **meta_kwargs: Any) -> Any:
    """Rows + sidecar -> a validated :class:`~gradsched.traces.CommTrace`."""
    from gradsched.traces import CommTrace

    nodes = int(meta_kwargs["nodes"])
    frame = summarise(per_rank, backend=config.backend, world_size=config.world_size,
                      nodes=nodes, in_place=config.in_place)
    warnings = [*meta_kwargs.pop("warnings", []), *size_drop_warnings(frame)]
    meta = build_meta(config, per_rank=per_rank, warnings=warnings, **meta_kwargs)
    return CommTrace.from_frame(frame, meta)


# ----------------------------------------------------------------------------- drivers


def run_sweep(config: SweepConfig, *, spec_overrides: dict[str, Any] | None = None,
              payload_extra: dict[str, Any] | None = None,
              log: Callable[[str], None] | None = None) -> Any:
    """Launch the ranks locally (loopback, or the emulated cluster), return a CommTrace.

    ``spec_overrides`` replace :class:`~gradsched.distributed.LaunchSpec` fields (tests
    use it to make a peer unreachable); ``payload_extra`` is merged into the task payload.
    """
    from gradsched.distributed import LaunchSpec, launch

    config.validate()
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
        from gradsched.distributed.cluster import EmulatedCluster

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
    return to_trace(per_rank, config, placement=placement, interconnect=interconnect,
                    nodes=nodes, notes=notes, warnings=list(notes_to_warnings(notes)),
                    started=started, wall_s=time.monotonic() - t0, load_before=load_before,
                    physical_machines=machines)


def notes_to_warnings(notes: Sequence[str]) -> list[str]:
    """Rounding notes are also warnings (the requested sizes were changed)."""
    return [n for n in notes if "rounded up" in n]


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
    finally:
        dist.destroy_process_group()
    if rank != 0:
        return None
    nodes = len({g["host"] for g in gathered})
    trace = to_trace(gathered, config, placement=f"torchrun, {nodes} host(s)",
                     interconnect="as set up for torchrun (not inspected)", nodes=nodes,
                     notes=notes, warnings=notes_to_warnings(notes), started=started,
                     wall_s=time.monotonic() - t0, load_before=load_before,
                     physical_machines=nodes)
    if out is not None:
        trace.save(out)
    return trace


# ----------------------------------------------------------------------------- CLI


def register_cli(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add ``comm`` to the ``capture`` command's sub-parsers; return its parser."""
    parser = subparsers.add_parser(
        "comm", help="sweep collectives with torch.distributed and write a comm trace",
        description=__doc__.split("\n\n", 2)[0] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", choices=("gloo", "nccl"), default="gloo")
    parser.add_argument("--world-size", type=int, default=2,
                        help="ranks to start locally (ignored with --torchrun)")
    parser.add_argument("--collectives", default=",".join(DEFAULT_COLLECTIVES),
                        help="comma-separated, from: " + ", ".join(COLLECTIVES) + "; or all")
    parser.add_argument("--min-bytes", default="4", help="smallest message (64K, 1M, ...)")
    parser.add_argument("--max-bytes", default="1M", help="largest message (binary suffixes)")
    parser.add_argument("--factor", type=float, default=2.0, help="size growth factor")
    parser.add_argument("--iters", type=int, default=50,
                        help="most timed iterations per size (default 50)")
    parser.add_argument("--warmup", type=int, default=3,
                        help="most warm-up iterations per size, >= 1 (default 3)")
    parser.add_argument("--min-iters", type=int, default=3,
                        help="fewest timed iterations per size (default 3)")
    parser.add_argument("--time-budget-s", type=float, default=1.0,
                        help="about this many seconds of timed operations per size (default 1)")
    parser.add_argument("--in-place", action="store_true",
                        help="all_gather / reduce_scatter in place (the others always are)")
    parser.add_argument("--threads-per-rank", type=int, default=1)
    parser.add_argument("--cluster", metavar="RATE", default=None,
                        help="run the ranks in an emulated cluster of network namespaces with "
                        "links shaped to RATE (tc units: 100mbit, 1gbit, 10gbit); needs root")
    parser.add_argument("--torchrun", action="store_true",
                        help="run under torchrun (multi-node): take rank and world size from "
                        "the environment; rank 0 writes the output")
    parser.add_argument("--init-timeout-s", type=float, default=60.0)
    parser.add_argument("--op-timeout-s", type=float, default=None,
                        help="timeout of one collective (default: from the largest size)")
    parser.add_argument("--deadline-s", type=float, default=None,
                        help="bound on the whole run (default: estimated from the sizes)")
    parser.add_argument("--note", default=None, help="text appended to the sidecar's notes")
    parser.add_argument("-o", "--output", type=Path, required=True, help="output CSV")
    parser.set_defaults(func=_cli)
    return parser


def config_from_args(args: argparse.Namespace) -> SweepConfig:
    """The :class:`SweepConfig` of parsed ``capture comm`` arguments."""
    config = SweepConfig(
        world_size=args.world_size, backend=args.backend,
        collectives=parse_collectives(args.collectives),
        min_bytes=parse_size(args.min_bytes), max_bytes=parse_size(args.max_bytes),
        factor=args.factor, iters=args.iters, warmup=args.warmup, min_iters=args.min_iters,
        time_budget_s=args.time_budget_s, in_place=args.in_place,
        threads_per_rank=args.threads_per_rank, cluster_rate=args.cluster,
        init_timeout_s=args.init_timeout_s, op_timeout_s=args.op_timeout_s,
        deadline_s=args.deadline_s, note=args.note)
    if args.cluster is not None:
        from gradsched.distributed.shaping import parse_rate

        parse_rate(args.cluster)
        if args.torchrun:
            raise ConfigError("--cluster and --torchrun exclude each other")
    config.validate()
    return config


def _cli(args: argparse.Namespace) -> int:
    config = config_from_args(args)
    out: Path = args.output
    if out.suffix != ".csv":
        raise ConfigError(f"output {out}: expected a .csv path (the sidecar goes beside it)")
    if args.torchrun:
        trace = run_torchrun(config, out)
        if trace is None:
            return 0
    else:
        trace = run_sweep(config, log=lambda m: print(m, file=sys.stderr))
        trace.save(out)
    frame = trace.frame
    print(f"wrote {out} ({len(frame)} rows, {trace.meta['wall_s']:.1f} s)")
    for coll, grp in frame.groupby("collective", sort=True):
        top = grp.iloc[-1]
        print(f"  {coll}: {int(top['bytes'])} B in {top['time_s'] * 1e3:.3f} ms, busbw "
              f"{top['busbw_Bps'] / 1e6:.1f} MB/s")
    for warning in trace.meta["warnings"]:
        print(f"warning: {out}: {warning}", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m gradsched.capture.sweep ...`` (the same options as ``capture comm``)."""
    parser = argparse.ArgumentParser(prog="gradsched capture")
    sub = parser.add_subparsers(dest="capture_command", required=True)
    register_cli(sub)
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except GradschedError as exc:
        print(f"gradsched capture comm: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())


__all__ = ["SweepConfig", "bus_factor", "geometric_sizes", "parse_size", "register_cli",
           "round_sizes", "run_sweep", "run_torchrun", "summarise", "sweep_task"]
