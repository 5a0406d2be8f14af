"""Where a trace's collectives come from: the first source present in a file (NCCL kernels,
gloo spans, ``record_param_comms`` ops, ``c10d`` calls) gives one row per collective; CPU
spans are then clipped (see the package docstring)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from gradsched.traces.importers.kineto.comm_meta import (
    DTYPE_BYTES,
    KERNEL_OP,
    NCCL_KERNEL_RE,
    meta_from_args,
    normalise_collective,
    shape_bytes,
)
from gradsched.traces.importers.kineto.events import Event

GLOO_RE = re.compile(r"^gloo:([A-Za-z_]+)$")
C10D_RE = re.compile(r"^c10d::([A-Za-z_]+?)_?$")
SOURCES: tuple[str, ...] = ("nccl-kernel", "gloo", "record_param_comms", "c10d")


@dataclass
class _Candidates:
    """A file's events that may be collectives, by source, and the ``record_param_comms``
    metadata by ``External id``."""

    by_extid: dict[Any, dict[str, Any]] = field(default_factory=dict)
    rpc: list[Event] = field(default_factory=list)
    kernels: list[Event] = field(default_factory=list)
    gloo: list[Event] = field(default_factory=list)
    c10d: list[Event] = field(default_factory=list)


def _candidates(events: list[Event], path: str) -> _Candidates:
    found = _Candidates()
    for ev in events:
        if ev.name == "record_param_comms":
            found.rpc.append(ev)
            meta = meta_from_args(ev, path)
            ext = ev.args.get("External id")
            if meta is not None and ext is not None:
                found.by_extid[ext] = meta
        elif ev.cat == "kernel" and NCCL_KERNEL_RE.match(ev.name):
            found.kernels.append(ev)
        elif GLOO_RE.match(ev.name):
            found.gloo.append(ev)
        elif C10D_RE.match(ev.name):
            found.c10d.append(ev)
    return found


@dataclass
class _Rows:
    """Builds one file's rows: the lanes (GPU streams, CPU threads) that carry collectives,
    the dtypes of unknown size and the warnings are collected on the way."""

    path: str
    world: int | None
    warnings: list[str]
    lanes: set[Any] = field(default_factory=set)
    unknown_dtype: set[str] = field(default_factory=set)

    def size_of(self, meta: dict[str, Any]) -> tuple[int | None, int | None]:
        counts = [c for c in (meta["in"], meta["out"]) if c is not None]
        if not counts:
            return None, None
        nelems = max(counts)
        size = DTYPE_BYTES.get(str(meta["dtype"]))
        if size is None:
            self.unknown_dtype.add(str(meta["dtype"]))
            return nelems, None
        return nelems, nelems * size

    def kernels(self, kernels: list[Event], by_extid: dict[Any, dict[str, Any]]
                ) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = []
        for ev in kernels:
            meta = meta_from_args(ev, self.path) or by_extid.get(ev.args.get("External id"))
            if meta is None:
                op = NCCL_KERNEL_RE.match(ev.name)
                meta = {"collective": KERNEL_OP.get(op.group(1), op.group(1).lower())
                        if op else "unknown", "in": None, "out": None, "group": None,
                        "dtype": None}
            nelems, nbytes = self.size_of(meta)
            stream = ev.args.get("stream", ev.tid)
            self.lanes.add(("stream", stream))
            rows.append({"collective": meta["collective"], "nelems": nelems, "bytes": nbytes,
                         "dtype": meta["dtype"], "world_size": meta["group"] or self.world,
                         "ts": ev.ts, "dur": ev.dur, "stream": f"stream {stream}"})
        if any(r["bytes"] is None for r in rows):
            self.warnings.append("some NCCL kernels carry no collective metadata (no "
                                 "'Collective name' in their args nor a matching "
                                 "record_param_comms): their bytes are empty")
        return rows

    def gloo(self, spans: list[Event]) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = []
        world = self.world
        for ev in spans:
            match = GLOO_RE.match(ev.name)
            assert match is not None
            coll = normalise_collective(match.group(1))
            meta = meta_from_args(ev, self.path)
            if meta is not None:
                nelems, nbytes = self.size_of(meta)
                dtype = meta["dtype"]
            else:
                nelems, nbytes, dtype = shape_bytes(ev)
                if nbytes is not None and coll == "all_gather" and world:
                    nelems, nbytes = nelems * world, nbytes * world  # type: ignore[operator]
            self.lanes.add(("thread", ev.tid))
            rows.append({"collective": coll, "nelems": nelems, "bytes": nbytes,
                         "dtype": dtype, "world_size": world, "ts": ev.ts, "dur": ev.dur,
                         "stream": f"thread {ev.tid}"})
        if any(r["bytes"] is None for r in rows):
            self.warnings.append("some gloo spans have no input shapes (profile with "
                                 "record_shapes=True): their bytes are empty")
        return rows

    def record_param_comms(self, rpc: list[Event]) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = []
        for ev in rpc:
            meta = meta_from_args(ev, self.path)
            if meta is None:
                continue
            nelems, nbytes = self.size_of(meta)
            self.lanes.add(("thread", ev.tid))
            rows.append({"collective": meta["collective"], "nelems": nelems, "bytes": nbytes,
                         "dtype": meta["dtype"], "world_size": meta["group"] or self.world,
                         "ts": ev.ts, "dur": ev.dur, "stream": f"thread {ev.tid}"})
        return rows

    def c10d(self, calls: list[Event]) -> list[dict[str, Any]]:
        self.warnings.append("only c10d::* calls found (no gloo spans, NCCL kernels or "
                             "record_param_comms): for asynchronous backends their durations "
                             "are the time to enqueue the collective, not to run it")
        rows: list[dict[str, Any]] = []
        for ev in calls:
            match = C10D_RE.match(ev.name)
            assert match is not None
            nelems, nbytes, dtype = shape_bytes(ev)
            rows.append({"collective": normalise_collective(match.group(1)),
                         "nelems": nelems, "bytes": nbytes, "dtype": dtype,
                         "world_size": self.world, "ts": ev.ts, "dur": ev.dur,
                         "stream": f"thread {ev.tid}"})
        return rows


def _pick_source(found: _Candidates, path: str, build: _Rows
                 ) -> tuple[str | None, list[dict[str, Any]]]:
    """The first source present (:data:`SOURCES` order) and its rows."""
    if found.kernels:
        return "nccl-kernel", build.kernels(found.kernels, found.by_extid)
    if found.gloo:
        return "gloo", build.gloo(found.gloo)
    if any(meta_from_args(ev, path) for ev in found.rpc):
        return "record_param_comms", build.record_param_comms(found.rpc)
    if found.c10d:
        return "c10d", build.c10d(found.c10d)
    return None, []


def collective_rows(events: list[Event], path: str, world: int | None,
                    warnings: list[str]) -> tuple[str | None, list[dict[str, Any]], set[Any]]:
    """Pick the collective source of a file; return (source, rows, comm threads/streams)."""
    found = _candidates(events, path)
    build = _Rows(path, world, warnings)
    source, rows = _pick_source(found, path, build)
    if build.unknown_dtype:
        warnings.append(f"unknown dtype(s) {sorted(build.unknown_dtype)}: bytes left empty")
    return source, rows, build.lanes


def clip_thread_spans(rows: list[dict[str, Any]], step_end: dict[int, float]) -> int:
    """Clip CPU-thread collective spans to their step's end and the next span on the thread.

    A thread runs one collective at a time, and a synchronous consumer (DDP waits for every
    bucket before the optimizer step) has the result before its step ends. The recorded
    end of a gloo span is taken by gloo's worker thread after it signals completion; on a
    loaded CPU that thread can be descheduled first, so the recorded end can lie far after
    the step that already used the result. Returns how many spans were clipped.
    """
    count = 0
    by_lane: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        row["recorded_dur"] = row["dur"]
        by_lane.setdefault(row["stream"], []).append(row)
    for lane in by_lane.values():
        lane.sort(key=lambda r: r["ts"])
        for k, row in enumerate(lane):
            end = min(row["ts"] + row["dur"], step_end[row["iteration"]])
            if k + 1 < len(lane):
                end = min(end, lane[k + 1]["ts"])
            if end < row["ts"] + row["dur"]:
                row["dur"] = max(end - row["ts"], 0.0)
                count += 1
    return count
