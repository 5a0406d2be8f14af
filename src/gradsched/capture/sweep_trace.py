"""From per-rank times to a comm trace: the rows (slowest rank's median; half of rank 0's
round trip for p2p), the warnings, and the sidecar (method, machine, software, settings)."""

from __future__ import annotations

import datetime as dt
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import pandas as pd

import gradsched
from gradsched.capture.sweep_settings import IN_PLACE_ONLY, P2P, SweepConfig, SweepError, bus_factor
from gradsched.distributed.rank_files import result_name
from gradsched.distributed.shaping import line_rate_meta
from gradsched.errors import InputError
from gradsched.limits import MAX_BYTES
from gradsched.provenance import comm_software_versions, hardware_summary, load_average
from gradsched.readback import count, mapping, rank_in, seconds, sequence
from gradsched.traces import CommTrace
from gradsched.traces.importers import DROP_FACTOR


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


P2P_METHOD = (
    "p2p rows: a ping-pong between rank 0 and rank 1 with blocking torch.distributed "
    "send/recv, as OSU's osu_latency (rank 0 sends then receives, rank 1 receives then "
    "sends the message back); after the warm-ups one barrier, then the timed round trips "
    "back to back, each timed on rank 0 with time.perf_counter. time_s is half of rank 0's "
    "median round trip (the one-way time of one message), time_min_s/time_max_s half of its "
    "fastest/slowest; busbw = algbw = bytes / time_s; in_place 0, world_size 2.")


@dataclass(frozen=True)
class SweepRun:
    """What the driver knows of one sweep it ran, for the sidecar: where the ranks ran
    (``placement``, ``interconnect``, ``nodes``, ``physical_machines``), the plan's
    ``notes`` and the ``warnings`` raised before the rows were read, when it started, how
    long it took (``wall_s``) and the load average before it (:mod:`gradsched.capture.sweep`
    builds it once per run)."""

    placement: str
    interconnect: str
    nodes: int
    physical_machines: int | None
    notes: tuple[str, ...]
    warnings: tuple[str, ...]
    started: dt.datetime
    wall_s: float
    load_before: tuple[float, ...]


def build_meta(config: SweepConfig, run: SweepRun, per_rank: list[dict[str, Any]],
               warnings: list[str]) -> dict[str, Any]:
    """The sidecar of a captured sweep ``run``; ``warnings``: the run's and the rows'."""
    placement, nodes, started = run.placement, run.nodes, run.started
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
        *run.notes,
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
        "interconnect": run.interconnect,
        **line_rate_meta(config.cluster_rate),
        "software": comm_software_versions(config.backend),
        "statistic": "median",
        "warnings": warnings,
        "notes": " ".join(text),
        "capture_method": "gradsched capture comm",
        "date": started.isoformat(timespec="seconds"),
        "world_size": config.world_size,
        "nodes": nodes,
        "physical_machines": run.physical_machines,
        "threads_per_rank": int(per_rank[0].get("threads", config.threads_per_rank)),
        "load_average": {"before": list(run.load_before), "after": load_average([])},
        "wall_s": round(run.wall_s, 3),
        "settings": settings,
        "iterations": iterations,
        "warmup_iterations": warm,
    }


def check_results(per_rank: Sequence[Any], config: SweepConfig) -> None:
    """Every rank's result (:func:`gradsched.capture.sweep_rank.sweep_task`), read back,
    before it is used: one per rank of the world, each measured collective one that was
    asked for, its size a byte count of :mod:`gradsched.limits`' range, its times durations
    and its warm-ups a positive count (:mod:`gradsched.readback`). Else an
    :class:`~gradsched.errors.InputError` naming the rank's result file and the field."""
    if len(per_rank) != config.world_size:
        raise SweepError(f"{len(per_rank)} results for {config.world_size} ranks")
    for index, result in enumerate(per_rank):
        where = result_name(index)
        res = mapping(result, where, "")
        if rank_in(res.get("rank", index), config.world_size, where, "rank") != index:
            raise InputError(f"rank {res['rank']} wrote the result of rank {index}",
                             path=where, field="rank")
        count(res.get("threads", 1), where, "threads", low=1)
        for i, item in enumerate(sequence(res.get("results"), where, "results")):
            field = f"results[{i}]"
            item = mapping(item, where, field)
            if item.get("collective") not in config.collectives:
                raise InputError(f"{item.get('collective')!r} was not measured (one of "
                                 f"{', '.join(config.collectives)})", path=where,
                                 field=f"{field}.collective")
            count(item.get("bytes"), where, f"{field}.bytes", low=1, high=MAX_BYTES)
            count(item.get("warmup"), where, f"{field}.warmup", low=1)
            for j, t in enumerate(sequence(item.get("times_s"), where, f"{field}.times_s")):
                seconds(t, where, f"{field}.times_s[{j}]")


def to_trace(per_rank: list[dict[str, Any]], config: SweepConfig, run: SweepRun) -> Any:
    """Every rank's result checked (:func:`check_results`), then rows + sidecar -> a
    validated :class:`~gradsched.traces.CommTrace`."""
    check_results(per_rank, config)
    frame = summarise(per_rank, backend=config.backend, world_size=config.world_size,
                      nodes=int(run.nodes), in_place=config.in_place)
    warnings = [*run.warnings, *size_drop_warnings(frame)]
    meta = build_meta(config, run, per_rank, warnings)
    return CommTrace.from_frame(frame, meta)


def notes_to_warnings(notes: Sequence[str]) -> list[str]:
    """Rounding notes are also warnings (the requested sizes were changed)."""
    return [n for n in notes if "rounded up" in n]


__all__ = ["P2P_METHOD", "SweepRun", "build_meta", "check_results", "notes_to_warnings",
           "size_drop_warnings", "summarise", "to_trace"]
