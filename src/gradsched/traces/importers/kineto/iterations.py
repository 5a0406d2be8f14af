"""Per-iteration and per-collective tables of one or more Kineto traces (the CPU path of
``gradsched import kineto``; see the package docstring for the columns)."""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from gradsched.errors import InputError
from gradsched.io import write_csv_atomic, write_json_atomic
from gradsched.limits import MAX_RANKS
from gradsched.traces.importers.kineto.comm_meta import NCCL_KERNEL_RE
from gradsched.traces.importers.kineto.events import (
    STEP_RE,
    Event,
    check_step_names,
    complete_events,
    read_trace_json,
)
from gradsched.traces.importers.kineto.intervals import (
    intersection_length,
    length,
    subtract,
    union,
)
from gradsched.traces.importers.kineto.sources import clip_thread_spans, collective_rows

IMPORTER = "kineto"
IMPORTER_VERSION = "1"

_COMM_NAME_RE = re.compile(r"^(c10d::|gloo:|nccl:|record_param_comms)")

ITERATION_COLUMNS = ["file", "rank", "iteration", "start_s", "end_s", "iteration_s",
                     "comm_s", "overlap_s", "exposed_comm_s", "n_collectives", "comm_bytes"]
COLLECTIVE_COLUMNS = ["file", "rank", "iteration", "collective", "bytes", "world_size",
                      "start_s", "duration_s", "recorded_duration_s", "stream", "source",
                      "dtype", "nelems"]


@dataclass
class KinetoFile:
    """What one trace file gave."""

    path: str
    rank: int | None
    world_size: int | None
    backend: str | None
    source: str | None
    iterations: pd.DataFrame
    collectives: pd.DataFrame
    warnings: list[str] = field(default_factory=list)


@dataclass
class KinetoImport:
    """The import of one or more trace files."""

    files: list[KinetoFile]
    iterations: pd.DataFrame
    collectives: pd.DataFrame
    warnings: list[str]

    def meta(self) -> dict[str, Any]:
        """The ``PREFIX.meta.json`` content."""
        return {
            "kind": "kineto-import",
            "importer": IMPORTER,
            "importer_version": IMPORTER_VERSION,
            "files": [{"file": Path(f.path).name, "rank": f.rank, "world_size": f.world_size,
                       "backend": f.backend, "source": f.source,
                       "iterations": len(f.iterations), "collectives": len(f.collectives),
                       "warnings": f.warnings} for f in self.files],
            "warnings": self.warnings,
            "notes": ("times in seconds from the first ProfilerStep of each file; comm_s = "
                      "union of the iteration's collective spans; overlap_s = the part of "
                      "comm_s during which computation runs (GPU: non-NCCL kernels and "
                      "memcpy/memset; CPU: cpu_op spans of threads without collectives, "
                      "minus communication ops and waits); bytes = max(in, out) nelems x "
                      "dtype size (nccl-tests size); NCCL algorithm/protocol are not "
                      "inferred"),
        }

    def write(self, prefix: str | Path) -> list[Path]:
        """Write ``PREFIX.iterations.csv``, ``PREFIX.collectives.csv``, ``PREFIX.meta.json``."""
        prefix = str(prefix)
        paths = [Path(prefix + ".iterations.csv"), Path(prefix + ".collectives.csv"),
                 Path(prefix + ".meta.json")]
        write_csv_atomic(paths[0], self.iterations)
        write_csv_atomic(paths[1], self.collectives)
        write_json_atomic(paths[2], self.meta())
        return paths


def _compute_intervals(events: list[Event], source: str | None,
                       lanes: set[Any]) -> list[tuple[float, float]]:
    gpu = [ev for ev in events if ev.cat in ("kernel", "gpu_memcpy", "gpu_memset")]
    if gpu:
        spans = [(ev.ts, ev.end) for ev in gpu
                 if not (ev.cat == "kernel" and NCCL_KERNEL_RE.match(ev.name))]
        return union(spans)
    comm_threads = {lane[1] for lane in lanes if lane[0] == "thread"} if source == "gloo" \
        else set()
    ops = [ev for ev in events if ev.cat == "cpu_op" and ev.tid not in comm_threads]
    busy = union((ev.ts, ev.end) for ev in ops if not _COMM_NAME_RE.match(ev.name))
    comm_ops = union((ev.ts, ev.end) for ev in ops
                     if _COMM_NAME_RE.match(ev.name) or "wait" in ev.name.lower())
    return subtract(busy, comm_ops)


def _whole(info: dict[str, Any], key: str, low: int, high: int, path: str) -> int | None:
    """``distributedInfo[key]``: None when absent, else an integer in ``[low, high]``."""
    value = info.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InputError(f"{value!r} is not an integer in {low}..{high}", path=path,
                         field=f"distributedInfo.{key}")
    return value


def _distributed_info(header: dict[str, Any], fallback_rank: int | None, path: str
                      ) -> tuple[Any, Any, Any]:
    """(rank, world size, backend) from the trace's ``distributedInfo``, checked: a world
    size in 1..2^20 and a rank below it."""
    info = header.get("distributedInfo") if isinstance(header.get("distributedInfo"), dict) \
        else {}
    world = _whole(info, "world_size", 1, MAX_RANKS, path)
    rank = _whole(info, "rank", 0, MAX_RANKS - 1, path)
    if rank is not None and world is not None and rank >= world:
        raise InputError(f"rank {rank} of a world of {world} ranks: a rank is below the "
                         "world size", path=path, field="distributedInfo.rank")
    return (fallback_rank if rank is None else rank), world, info.get("backend")


def _profiler_steps(events: list[Event], path: str, warnings: list[str]
                    ) -> list[tuple[int, Event]]:
    """The ``ProfilerStep#N`` spans by start; without any, the whole trace is step 0."""
    check_step_names(events, path)
    steps: list[tuple[int, Event]] = []
    for ev in events:
        match = STEP_RE.match(ev.name)
        if match:
            steps.append((int(match.group(1)), ev))
    steps.sort(key=lambda s: s[1].ts)
    seen: dict[int, Event] = {}
    for (_, ev), (_, before) in zip(steps[1:], steps, strict=False):
        if ev.ts < before.end:
            raise InputError(f"{ev.name} starts at {ev.ts:g} us, before {before.name} ends "
                             f"({before.end:g} us): profiler steps do not overlap",
                             path=path, field=f"traceEvents[{ev.index}].ts")
    for number, ev in steps:
        if number in seen:
            raise InputError(f"{ev.name} appears twice (events {seen[number].index} and "
                             f"{ev.index})", path=path, field=f"traceEvents[{ev.index}].name")
        seen[number] = ev
    if not steps:
        if not events:
            raise InputError("no complete ('X') events: nothing was profiled", path=path,
                             field="traceEvents")
        warnings.append("no ProfilerStep#N spans (profile with a schedule and call "
                        "prof.step() each iteration): the whole trace is one iteration 0")
        start = min(ev.ts for ev in events)
        end = max(ev.end for ev in events)
        steps = [(0, Event(-1, "ProfilerStep#0", "", None, None, start, end - start, {}))]
    return steps


def _assign_to_steps(rows: list[dict[str, Any]], steps: list[tuple[int, Event]],
                     warnings: list[str]) -> list[dict[str, Any]]:
    """Assign each collective to the step whose span holds its start; drop the others."""
    starts = np.array([ev.ts for _, ev in steps])
    ends = np.array([ev.end for _, ev in steps])
    kept: list[dict[str, Any]] = []
    outside = 0
    for row in rows:
        k = int(np.searchsorted(starts, row["ts"], side="right")) - 1
        if k < 0 or row["ts"] >= ends[k]:
            outside += 1
            continue
        row["iteration"] = steps[k][0]
        kept.append(row)
    if outside:
        warnings.append(f"{outside} collectives start outside every ProfilerStep span "
                        "(before the first or between steps): left out")
    return kept


def _iteration_frame(steps: list[tuple[int, Event]], kept: list[dict[str, Any]],
                     compute: list[tuple[float, float]], name: str, rank: Any,
                     t_ref: float) -> pd.DataFrame:
    """One row per step: its span, communication, overlap and bytes."""
    it_rows = []
    for number, ev in steps:
        mine = [r for r in kept if r["iteration"] == number]
        comm = union((r["ts"], r["ts"] + r["dur"]) for r in mine)
        comm_us = length(comm)
        overlap_us = intersection_length(comm, compute)
        byte_values = [r["bytes"] for r in mine if r["bytes"] is not None]
        it_rows.append({
            "file": name, "rank": rank, "iteration": number,
            "start_s": (ev.ts - t_ref) * 1e-6, "end_s": (ev.end - t_ref) * 1e-6,
            "iteration_s": ev.dur * 1e-6, "comm_s": comm_us * 1e-6,
            "overlap_s": overlap_us * 1e-6, "exposed_comm_s": (comm_us - overlap_us) * 1e-6,
            "n_collectives": len(mine),
            "comm_bytes": int(sum(byte_values)) if len(byte_values) == len(mine) else None,
        })
    iterations = pd.DataFrame(it_rows, columns=ITERATION_COLUMNS)
    iterations["comm_bytes"] = iterations["comm_bytes"].astype("Int64")
    return iterations


def _collective_frame(kept: list[dict[str, Any]], name: str, rank: Any, t_ref: float,
                      source: str | None) -> pd.DataFrame:
    """One row per kept collective, by start."""
    coll = pd.DataFrame([{
        "file": name, "rank": rank, "iteration": r["iteration"],
        "collective": r["collective"], "bytes": r["bytes"], "world_size": r["world_size"],
        "start_s": (r["ts"] - t_ref) * 1e-6, "duration_s": r["dur"] * 1e-6,
        "recorded_duration_s": r.get("recorded_dur", r["dur"]) * 1e-6,
        "stream": r["stream"], "source": source, "dtype": r["dtype"], "nelems": r["nelems"],
    } for r in sorted(kept, key=lambda r: r["ts"])], columns=COLLECTIVE_COLUMNS)
    for column in ("bytes", "world_size", "nelems", "iteration"):
        coll[column] = coll[column].astype("Int64")
    return coll


def parse_kineto(doc: Any, path: str | Path, *, fallback_rank: int | None = None,
                 clip_cpu_spans: bool = True) -> KinetoFile:
    """Parse one loaded trace document (see the package docstring).

    ``clip_cpu_spans``: clip CPU-thread collective spans (gloo, record_param_comms, c10d)
    at the end of their step and at the start of the next span on the same thread (see
    :func:`.sources.clip_thread_spans`); GPU kernels are never clipped.
    """
    path = str(path)
    events, header = complete_events(doc, path)
    warnings: list[str] = []
    rank, world, backend = _distributed_info(header, fallback_rank, path)
    steps = _profiler_steps(events, path, warnings)
    source, rows, lanes = collective_rows(events, path, world, warnings)
    if world is None:
        groups = {r["world_size"] for r in rows if r["world_size"]}
        world = max(groups) if groups else None
    compute = _compute_intervals(events, source, lanes)
    t_ref = steps[0][1].ts
    kept = _assign_to_steps(rows, steps, warnings)
    if clip_cpu_spans and source not in (None, "nccl-kernel"):
        clipped = clip_thread_spans(kept, {n: ev.end for n, ev in steps})
        if clipped:
            warnings.append(f"{clipped} CPU collective spans ended after their step (or "
                            "after the next span on the same thread) and were clipped there; "
                            "recorded_duration_s keeps the recorded length")
    name = Path(path).name
    iterations = _iteration_frame(steps, kept, compute, name, rank, t_ref)
    coll = _collective_frame(kept, name, rank, t_ref, source)
    if source is None:
        warnings.append("no collectives found (no NCCL kernels, gloo spans, "
                        "record_param_comms or c10d calls)")
    return KinetoFile(path=path, rank=rank, world_size=world, backend=backend, source=source,
                      iterations=iterations, collectives=coll, warnings=warnings)


def _distinct(paths: Sequence[str | Path]) -> None:
    """Refuse a file given twice (also under another spelling or through a link): it would
    count as two ranks."""
    seen: dict[tuple[int, int], str] = {}
    for path in paths:
        try:
            info = os.stat(path)
        except OSError:
            continue  # the reader names a missing file
        key = (info.st_dev, info.st_ino)
        if key in seen:
            raise InputError(f"the same file as {seen[key]} (given twice: it would count as "
                             "two ranks)", path=path)
        seen[key] = str(path)


def _only_step(parsed: KinetoFile, step: int) -> KinetoFile:
    """``parsed`` with only the rows of ``ProfilerStep#step``; refused when it has none."""
    numbers = parsed.iterations["iteration"].tolist()
    if step not in numbers:
        raise InputError(f"no ProfilerStep#{step} (the trace has steps "
                         f"{', '.join(map(str, numbers)) or 'none'})", path=parsed.path,
                         field="step")
    its = parsed.iterations[parsed.iterations["iteration"] == step].reset_index(drop=True)
    coll = parsed.collectives[parsed.collectives["iteration"] == step].reset_index(drop=True)
    return dataclasses.replace(parsed, iterations=its, collectives=coll)


def import_kineto(paths: Sequence[str | Path], *, clip_cpu_spans: bool = True,
                  step: int | None = None) -> KinetoImport:
    """Parse every file; concatenate their tables (rank from the trace, else file order).
    ``step``: keep only ``ProfilerStep#step``, refused when a file does not have it. Two
    files of one rank, or one file given twice, are refused."""
    if not paths:
        raise InputError("no trace files given")
    _distinct(paths)
    files = []
    ranks: dict[Any, str] = {}
    for i, path in enumerate(paths):
        parsed = parse_kineto(read_trace_json(path), path, fallback_rank=i,
                              clip_cpu_spans=clip_cpu_spans)
        if parsed.rank in ranks:
            raise InputError(f"rank {parsed.rank} again (also {ranks[parsed.rank]}): one "
                             "trace per rank", path=path, field="distributedInfo.rank")
        ranks[parsed.rank] = str(path)
        if step is not None:
            parsed = _only_step(parsed, step)
        files.append(parsed)
    iterations = pd.concat([f.iterations for f in files], ignore_index=True)
    collectives = pd.concat([f.collectives for f in files], ignore_index=True) \
        if any(len(f.collectives) for f in files) else files[0].collectives
    warnings = [f"{Path(f.path).name}: {w}" for f in files for w in f.warnings]
    return KinetoImport(files=files, iterations=iterations, collectives=collectives,
                        warnings=warnings)
