"""PyTorch profiler (Kineto / Chrome trace JSON) -> per-iteration and per-collective tables.

``gradsched import kineto TRACE.json[.gz] [...] -o PREFIX`` writes

* ``PREFIX.iterations.csv`` -- one row per (file, ``ProfilerStep#N``): ``rank``,
  ``iteration`` (N), ``start_s``, ``end_s``, ``iteration_s``, ``comm_s`` (time during which
  at least one collective of the iteration runs), ``overlap_s`` (the part of ``comm_s``
  during which computation runs too), ``exposed_comm_s`` (``comm_s - overlap_s``),
  ``n_collectives``, ``comm_bytes``;
* ``PREFIX.collectives.csv`` -- one row per collective: ``rank``, ``iteration``,
  ``collective``, ``bytes``, ``world_size``, ``start_s``, ``duration_s``,
  ``recorded_duration_s``, ``stream`` (GPU stream or CPU thread), ``source``, ``dtype``, ``nelems``;
* ``PREFIX.meta.json`` -- the files, their ranks, backends and sources, warnings and these
  definitions.

Times are seconds from the start of the first ``ProfilerStep`` of the same file (trace
timestamps are microseconds). Rows keep the file name so several ranks can be compared.

Where collectives come from (the first kind present in a file is used):

1. ``nccl-kernel`` -- GPU kernels (``cat`` ``kernel``) named ``ncclKernel_*`` or
   ``ncclDevKernel_*``. Their ``args`` carry PyTorch's collective metadata
   (``Collective name``, ``In msg nelems``, ``Out msg nelems``, ``Group size``,
   ``dtype``); where a kernel lacks them, the ``record_param_comms`` CPU event with the same
   ``External id`` supplies them. The kernel name is only used for the collective's
   operation when no metadata exists (never for NCCL's algorithm or protocol).
2. ``gloo`` -- the ``gloo:<op>`` spans recorded on gloo's worker threads (the actual
   execution of the collective); sizes from ``Input Dims`` and ``Input type`` (recorded
   with ``record_shapes=True``).
3. ``record_param_comms`` -- CPU spans carrying the collective metadata (other backends).
4. ``c10d`` -- ``c10d::allreduce_`` etc. on the calling thread. For asynchronous backends
   these are only the time to *enqueue* the operation; the sidecar warns about it.

CPU collective spans (gloo, record_param_comms, c10d) are clipped at the end of their step
and at the start of the next span on the same thread (``duration_s``);
``recorded_duration_s`` keeps the recorded length. Reason: gloo's worker thread records a
span's end after signalling completion, and on a loaded CPU it can be descheduled in
between, so recorded ends can lie long after the step that already consumed the result
(seen on the shared 2-core capture machine). ``--no-clip`` keeps the recorded spans.
GPU kernels are never clipped.

``bytes`` = max(in, out) elements x the dtype's size, which is nccl-tests' ``size``: the
buffer of all_reduce / broadcast / reduce and the total (gathered output or scattered
input) buffer of all_gather / reduce_scatter. For gloo spans, which record only the
inputs, an all_gather's bytes are the input bytes x the group size.

Computation for the overlap: on a GPU trace, the non-NCCL kernels, memcpys and memsets; on
a CPU trace, the ``cpu_op`` spans of the threads that run no collective, minus the
communication ops themselves (``c10d::*``, ``record_param_comms``, ``gloo:*``, ``nccl:*``)
and minus explicit waits (names containing ``wait``). Annotation spans such as
``ProfilerStep`` or ``DistributedDataParallel.forward`` are not computation.
"""

from __future__ import annotations

import gzip
import json
import re
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from gradsched.errors import InputError
from gradsched.io import read_bytes, write_csv_atomic, write_json_atomic

IMPORTER = "kineto"
IMPORTER_VERSION = "1"

# c10::ScalarType names (record_param_comms / kernel args) and the C++ type names of
# "Input type" in record_shapes output.
DTYPE_BYTES: dict[str, int] = {
    "Byte": 1, "Char": 1, "Short": 2, "Int": 4, "Long": 8, "Half": 2, "Float": 4,
    "Double": 8, "ComplexHalf": 4, "ComplexFloat": 8, "ComplexDouble": 16, "Bool": 1,
    "QInt8": 1, "QUInt8": 1, "QInt32": 4, "BFloat16": 2, "Float8_e5m2": 1,
    "Float8_e4m3fn": 1, "Float8_e5m2fnuz": 1, "Float8_e4m3fnuz": 1, "UInt16": 2,
    "UInt32": 4, "UInt64": 8,
    "float": 4, "double": 8, "c10::Half": 2, "c10::BFloat16": 2, "int": 4, "long int": 8,
    "long": 8, "int64_t": 8, "short int": 2, "short": 2, "signed char": 1,
    "unsigned char": 1, "bool": 1, "c10::complex<float>": 8, "c10::complex<double>": 16,
    "c10::Float8_e4m3fn": 1, "c10::Float8_e5m2": 1, "unsigned short": 2,
    "unsigned int": 4, "unsigned long": 8,
}

_COLLECTIVE_ALIASES: dict[str, str] = {
    "allreduce": "all_reduce", "all_reduce": "all_reduce",
    "allreduce_coalesced": "all_reduce", "allreduce_sparse": "all_reduce",
    "allgather": "all_gather", "all_gather": "all_gather", "allgather_base": "all_gather",
    "all_gather_base": "all_gather", "all_gather_into_tensor": "all_gather",
    "allgather_into_tensor": "all_gather", "allgather_coalesced": "all_gather",
    "allgather_into_tensor_coalesced": "all_gather",
    "reduce_scatter": "reduce_scatter", "reducescatter": "reduce_scatter",
    "reduce_scatter_base": "reduce_scatter", "reduce_scatter_tensor": "reduce_scatter",
    "reduce_scatter_tensor_coalesced": "reduce_scatter",
    "broadcast": "broadcast", "reduce": "reduce", "barrier": "barrier",
    "alltoall": "all_to_all", "all_to_all": "all_to_all", "alltoall_base": "all_to_all",
    "all_to_allv": "all_to_all", "alltoallv": "all_to_all", "sendrecv": "send_recv",
    "send": "send", "recv": "recv", "gather": "gather", "scatter": "scatter",
}

_STEP_RE = re.compile(r"^ProfilerStep#(\d+)$")
_NCCL_KERNEL_RE = re.compile(r"^nccl(?:Dev)?Kernel_([A-Za-z]+)")
_GLOO_RE = re.compile(r"^gloo:([A-Za-z_]+)$")
_C10D_RE = re.compile(r"^c10d::([A-Za-z_]+?)_?$")
_COMM_NAME_RE = re.compile(r"^(c10d::|gloo:|nccl:|record_param_comms)")
_KERNEL_OP = {"AllReduce": "all_reduce", "AllGather": "all_gather",
              "ReduceScatter": "reduce_scatter", "Broadcast": "broadcast", "Reduce": "reduce",
              "SendRecv": "send_recv", "Send": "send", "Recv": "recv"}
SOURCES: tuple[str, ...] = ("nccl-kernel", "gloo", "record_param_comms", "c10d")

ITERATION_COLUMNS = ["file", "rank", "iteration", "start_s", "end_s", "iteration_s",
                     "comm_s", "overlap_s", "exposed_comm_s", "n_collectives", "comm_bytes"]
COLLECTIVE_COLUMNS = ["file", "rank", "iteration", "collective", "bytes", "world_size",
                      "start_s", "duration_s", "recorded_duration_s", "stream", "source",
                      "dtype", "nelems"]


def normalise_collective(name: str) -> str:
    """``allreduce`` / ``_allgather_base`` / ``c10d`` names -> gradsched's spelling."""
    key = name.strip().lower().strip("_")
    return _COLLECTIVE_ALIASES.get(key, key)


# ----------------------------------------------------------------------------- reading
def read_trace_json(path: str | Path) -> Any:
    """Load a (possibly gzipped) Chrome trace JSON file, with clear errors."""
    path = Path(path)
    if not path.is_file():
        raise InputError("file not found", path=path)
    return decode_trace_bytes(read_bytes(path), path)


def _gunzip(raw: bytes, label: str | Path) -> bytes:
    """Decompress gzip data; a truncated or corrupt stream names the byte where it fails."""
    try:
        return gzip.decompress(raw)
    except (OSError, EOFError, zlib.error) as exc:
        inflater = zlib.decompressobj(wbits=47)
        try:
            done = len(inflater.decompress(raw))
            where = (f"the stream ends at byte {len(raw)} without its end marker, after "
                     f"{done} decompressed bytes" if not inflater.eof else "")
        except zlib.error:
            where = f"it is unreadable within its {len(raw)} bytes"
        detail = f"; {where}" if where else ""
        raise InputError(f"corrupt gzip data: {exc}{detail} (a truncated file?)",
                         path=label) from None


def decode_trace_bytes(raw: bytes, label: str | Path) -> Any:
    """Parse the bytes of a (possibly gzipped) Chrome trace; ``label`` names it in errors."""
    if raw[:2] == b"\x1f\x8b":
        raw = _gunzip(raw, label)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text: {exc.reason} at byte {exc.start}",
                         path=label) from None
    if not text.strip():
        raise InputError("empty file: not a Chrome trace", path=label)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"not valid JSON ({exc.msg}, column {exc.colno}, character "
                         f"{exc.pos} of {len(text)}); a truncated profile?", path=label,
                         line=exc.lineno) from None


@dataclass
class _Event:
    index: int
    name: str
    cat: str
    tid: Any
    pid: Any
    ts: float  # us
    dur: float  # us
    args: dict[str, Any]

    @property
    def end(self) -> float:
        return self.ts + self.dur


def _events(doc: Any, path: str) -> tuple[list[_Event], dict[str, Any]]:
    """The complete ("X") events of a trace, checked; plus the top-level header."""
    if isinstance(doc, list):
        raw, header = doc, {}
    elif isinstance(doc, dict):
        if "traceEvents" not in doc:
            raise InputError("no 'traceEvents' list: not a Chrome/Kineto trace", path=path,
                             field="traceEvents")
        raw = doc["traceEvents"]
        header = {k: v for k, v in doc.items() if k != "traceEvents"}
        if not isinstance(raw, list):
            raise InputError("'traceEvents' must be a list", path=path, field="traceEvents")
    else:
        raise InputError("top level must be an object with 'traceEvents' or a list of "
                         "events", path=path)
    out: list[_Event] = []
    for i, ev in enumerate(raw):
        where = f"traceEvents[{i}]"
        if not isinstance(ev, dict):
            raise InputError("event is not an object", path=path, field=where)
        if ev.get("ph") != "X":
            continue
        name = ev.get("name")
        if not isinstance(name, str):
            raise InputError("complete event without a string 'name'", path=path,
                             field=f"{where}.name")
        values = []
        for key in ("ts", "dur"):
            value = ev.get(key)
            if isinstance(value, str):
                try:
                    value = float(value)
                except ValueError:
                    value = None
            if isinstance(value, bool) or not isinstance(value, int | float) \
                    or not np.isfinite(value):
                raise InputError(f"complete event {name!r} has no numeric '{key}' "
                                 f"(got {ev.get(key)!r})", path=path, field=f"{where}.{key}")
            values.append(float(value))
        if values[1] < 0:
            raise InputError(f"event {name!r} has a negative duration {values[1]:g} us",
                             path=path, field=f"{where}.dur")
        args = ev.get("args", {})
        if args is None:
            args = {}
        if not isinstance(args, dict):
            raise InputError(f"event {name!r}: 'args' must be an object", path=path,
                             field=f"{where}.args")
        out.append(_Event(i, name, str(ev.get("cat", "")), ev.get("tid"), ev.get("pid"),
                          values[0], values[1], args))
    return out, header


# ----------------------------------------------------------------------------- intervals
def union(intervals: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    """Merge intervals into disjoint sorted ones."""
    merged: list[tuple[float, float]] = []
    for start, end in sorted(intervals):
        if end <= start:
            continue
        if merged and start <= merged[-1][1]:
            if end > merged[-1][1]:
                merged[-1] = (merged[-1][0], end)
        else:
            merged.append((start, end))
    return merged


def subtract(a: Sequence[tuple[float, float]],
             b: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """Disjoint sorted ``a`` minus disjoint sorted ``b``."""
    out: list[tuple[float, float]] = []
    j = 0
    for start, end in a:
        cur = start
        while j < len(b) and b[j][1] <= cur:
            j += 1
        k = j
        while k < len(b) and b[k][0] < end:
            if b[k][0] > cur:
                out.append((cur, b[k][0]))
            cur = max(cur, b[k][1])
            k += 1
        if cur < end:
            out.append((cur, end))
    return out


def intersection_length(a: Sequence[tuple[float, float]],
                        b: Sequence[tuple[float, float]]) -> float:
    """Total length of the intersection of two disjoint sorted interval lists."""
    i = j = 0
    total = 0.0
    while i < len(a) and j < len(b):
        lo = max(a[i][0], b[j][0])
        hi = min(a[i][1], b[j][1])
        if hi > lo:
            total += hi - lo
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def length(a: Sequence[tuple[float, float]]) -> float:
    """Total length of disjoint intervals."""
    return float(sum(e - s for s, e in a))


# ----------------------------------------------------------------------------- parsing
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


def _int_arg(ev: _Event, key: str, path: str) -> int | None:
    if key not in ev.args:
        return None
    value = ev.args[key]
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise InputError(f"{key!r} must be a number, got {value!r}", path=path,
                         field=f"traceEvents[{ev.index}].args.{key}")
    try:
        number = int(value)
    except ValueError:
        raise InputError(f"{key!r} must be a number, got {value!r}", path=path,
                         field=f"traceEvents[{ev.index}].args.{key}") from None
    if number < 0:
        raise InputError(f"{key!r} is negative ({number})", path=path,
                         field=f"traceEvents[{ev.index}].args.{key}")
    return number


def _meta_from_args(ev: _Event, path: str) -> dict[str, Any] | None:
    """The collective metadata PyTorch attaches (record_param_comms / NCCL kernels)."""
    if "Collective name" not in ev.args:
        return None
    return {
        "collective": normalise_collective(str(ev.args["Collective name"])),
        "in": _int_arg(ev, "In msg nelems", path),
        "out": _int_arg(ev, "Out msg nelems", path),
        "group": _int_arg(ev, "Group size", path),
        "dtype": ev.args.get("dtype"),
    }


def _shape_bytes(ev: _Event) -> tuple[int | None, int | None, str | None]:
    """(elements, bytes, dtype) of the tensor inputs recorded with record_shapes."""
    dims = ev.args.get("Input Dims")
    types = ev.args.get("Input type")
    if not isinstance(dims, list) or not isinstance(types, list):
        return None, None, None
    nelems = 0
    nbytes = 0
    dtype = None
    found = False
    for shape, typ in zip(dims, types, strict=False):
        shapes = shape if shape and isinstance(shape[0], list) else [shape]  # TensorList
        size = DTYPE_BYTES.get(str(typ))
        if size is None:
            continue
        for sh in shapes:
            if not isinstance(sh, list) or not all(isinstance(d, int) for d in sh):
                continue
            count = int(np.prod(sh)) if sh else 1
            nelems += count
            nbytes += count * size
            dtype = dtype or str(typ)
            found = True
    return (nelems, nbytes, dtype) if found else (None, None, None)


def _collective_rows(events: list[_Event], path: str, world: int | None,
                     warnings: list[str]) -> tuple[str | None, list[dict[str, Any]],
                                                   set[Any]]:
    """Pick the collective source of a file; return (source, rows, comm threads/streams)."""
    by_extid: dict[Any, dict[str, Any]] = {}
    rpc: list[_Event] = []
    kernels: list[_Event] = []
    gloo: list[_Event] = []
    c10d: list[_Event] = []
    for ev in events:
        if ev.name == "record_param_comms":
            rpc.append(ev)
            meta = _meta_from_args(ev, path)
            ext = ev.args.get("External id")
            if meta is not None and ext is not None:
                by_extid[ext] = meta
        elif ev.cat == "kernel" and _NCCL_KERNEL_RE.match(ev.name):
            kernels.append(ev)
        elif _GLOO_RE.match(ev.name):
            gloo.append(ev)
        elif _C10D_RE.match(ev.name):
            c10d.append(ev)
    rows: list[dict[str, Any]] = []
    lanes: set[Any] = set()
    unknown_dtype: set[str] = set()

    def size_of(meta: dict[str, Any]) -> tuple[int | None, int | None]:
        counts = [c for c in (meta["in"], meta["out"]) if c is not None]
        if not counts:
            return None, None
        nelems = max(counts)
        size = DTYPE_BYTES.get(str(meta["dtype"]))
        if size is None:
            unknown_dtype.add(str(meta["dtype"]))
            return nelems, None
        return nelems, nelems * size

    if kernels:
        source = "nccl-kernel"
        for ev in kernels:
            meta = _meta_from_args(ev, path) or by_extid.get(ev.args.get("External id"))
            if meta is None:
                op = _NCCL_KERNEL_RE.match(ev.name)
                meta = {"collective": _KERNEL_OP.get(op.group(1), op.group(1).lower())
                        if op else "unknown", "in": None, "out": None, "group": None,
                        "dtype": None}
            nelems, nbytes = size_of(meta)
            stream = ev.args.get("stream", ev.tid)
            lanes.add(("stream", stream))
            rows.append({"collective": meta["collective"], "nelems": nelems, "bytes": nbytes,
                         "dtype": meta["dtype"], "world_size": meta["group"] or world,
                         "ts": ev.ts, "dur": ev.dur, "stream": f"stream {stream}"})
        if any(r["bytes"] is None for r in rows):
            warnings.append("some NCCL kernels carry no collective metadata (no 'Collective "
                            "name' in their args nor a matching record_param_comms): their "
                            "bytes are empty")
    elif gloo:
        source = "gloo"
        for ev in gloo:
            match = _GLOO_RE.match(ev.name)
            assert match is not None
            coll = normalise_collective(match.group(1))
            meta = _meta_from_args(ev, path)
            if meta is not None:
                nelems, nbytes = size_of(meta)
                dtype = meta["dtype"]
            else:
                nelems, nbytes, dtype = _shape_bytes(ev)
                if nbytes is not None and coll == "all_gather" and world:
                    nelems, nbytes = nelems * world, nbytes * world  # type: ignore[operator]
            lanes.add(("thread", ev.tid))
            rows.append({"collective": coll, "nelems": nelems, "bytes": nbytes,
                         "dtype": dtype, "world_size": world, "ts": ev.ts, "dur": ev.dur,
                         "stream": f"thread {ev.tid}"})
        if any(r["bytes"] is None for r in rows):
            warnings.append("some gloo spans have no input shapes (profile with "
                            "record_shapes=True): their bytes are empty")
    elif any(_meta_from_args(ev, path) for ev in rpc):
        source = "record_param_comms"
        for ev in rpc:
            meta = _meta_from_args(ev, path)
            if meta is None:
                continue
            nelems, nbytes = size_of(meta)
            lanes.add(("thread", ev.tid))
            rows.append({"collective": meta["collective"], "nelems": nelems, "bytes": nbytes,
                         "dtype": meta["dtype"], "world_size": meta["group"] or world,
                         "ts": ev.ts, "dur": ev.dur, "stream": f"thread {ev.tid}"})
    elif c10d:
        source = "c10d"
        warnings.append("only c10d::* calls found (no gloo spans, NCCL kernels or "
                        "record_param_comms): for asynchronous backends their durations "
                        "are the time to enqueue the collective, not to run it")
        for ev in c10d:
            match = _C10D_RE.match(ev.name)
            assert match is not None
            nelems, nbytes, dtype = _shape_bytes(ev)
            rows.append({"collective": normalise_collective(match.group(1)),
                         "nelems": nelems, "bytes": nbytes, "dtype": dtype,
                         "world_size": world, "ts": ev.ts, "dur": ev.dur,
                         "stream": f"thread {ev.tid}"})
    else:
        source = None
    if unknown_dtype:
        warnings.append(f"unknown dtype(s) {sorted(unknown_dtype)}: bytes left empty")
    return source, rows, lanes


def _compute_intervals(events: list[_Event], source: str | None,
                       lanes: set[Any]) -> list[tuple[float, float]]:
    gpu = [ev for ev in events if ev.cat in ("kernel", "gpu_memcpy", "gpu_memset")]
    if gpu:
        spans = [(ev.ts, ev.end) for ev in gpu
                 if not (ev.cat == "kernel" and _NCCL_KERNEL_RE.match(ev.name))]
        return union(spans)
    comm_threads = {lane[1] for lane in lanes if lane[0] == "thread"} if source == "gloo" \
        else set()
    ops = [ev for ev in events if ev.cat == "cpu_op" and ev.tid not in comm_threads]
    busy = union((ev.ts, ev.end) for ev in ops if not _COMM_NAME_RE.match(ev.name))
    comm_ops = union((ev.ts, ev.end) for ev in ops
                     if _COMM_NAME_RE.match(ev.name) or "wait" in ev.name.lower())
    return subtract(busy, comm_ops)


def _clip_cpu_spans(rows: list[dict[str, Any]], step_end: dict[int, float]) -> int:
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


def parse_kineto(doc: Any, path: str | Path, *, fallback_rank: int | None = None,
                 clip_cpu_spans: bool = True) -> KinetoFile:
    """Parse one loaded trace document (see the module docstring).

    ``clip_cpu_spans``: clip CPU-thread collective spans (gloo, record_param_comms, c10d)
    at the end of their step and at the start of the next span on the same thread (see
    :func:`_clip_cpu_spans`); GPU kernels are never clipped.
    """
    path = str(path)
    events, header = _events(doc, path)
    warnings: list[str] = []
    info = header.get("distributedInfo") if isinstance(header.get("distributedInfo"), dict) \
        else {}
    rank = info.get("rank", fallback_rank)
    world = info.get("world_size")
    backend = info.get("backend")
    steps: list[tuple[int, _Event]] = []
    for ev in events:
        match = _STEP_RE.match(ev.name)
        if match:
            steps.append((int(match.group(1)), ev))
    steps.sort(key=lambda s: s[1].ts)
    if not steps:
        if not events:
            raise InputError("no complete ('X') events: nothing was profiled", path=path,
                             field="traceEvents")
        warnings.append("no ProfilerStep#N spans (profile with a schedule and call "
                        "prof.step() each iteration): the whole trace is one iteration 0")
        start = min(ev.ts for ev in events)
        end = max(ev.end for ev in events)
        steps = [(0, _Event(-1, "ProfilerStep#0", "", None, None, start, end - start, {}))]
    source, rows, lanes = _collective_rows(events, path, world, warnings)
    if world is None:
        groups = {r["world_size"] for r in rows if r["world_size"]}
        world = max(groups) if groups else None
    compute = _compute_intervals(events, source, lanes)
    t_ref = steps[0][1].ts

    # Assign each collective to the step whose span holds its start.
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
    if clip_cpu_spans and source not in (None, "nccl-kernel"):
        clipped = _clip_cpu_spans(kept, {n: ev.end for n, ev in steps})
        if clipped:
            warnings.append(f"{clipped} CPU collective spans ended after their step (or "
                            "after the next span on the same thread) and were clipped there; "
                            "recorded_duration_s keeps the recorded length")
    it_rows = []
    for number, ev in steps:
        mine = [r for r in kept if r["iteration"] == number]
        comm = union((r["ts"], r["ts"] + r["dur"]) for r in mine)
        comm_us = length(comm)
        overlap_us = intersection_length(comm, compute)
        byte_values = [r["bytes"] for r in mine if r["bytes"] is not None]
        it_rows.append({
            "file": Path(path).name, "rank": rank, "iteration": number,
            "start_s": (ev.ts - t_ref) * 1e-6, "end_s": (ev.end - t_ref) * 1e-6,
            "iteration_s": ev.dur * 1e-6, "comm_s": comm_us * 1e-6,
            "overlap_s": overlap_us * 1e-6, "exposed_comm_s": (comm_us - overlap_us) * 1e-6,
            "n_collectives": len(mine),
            "comm_bytes": int(sum(byte_values)) if len(byte_values) == len(mine) else None,
        })
    iterations = pd.DataFrame(it_rows, columns=ITERATION_COLUMNS)
    iterations["comm_bytes"] = iterations["comm_bytes"].astype("Int64")
    coll = pd.DataFrame([{
        "file": Path(path).name, "rank": rank, "iteration": r["iteration"],
        "collective": r["collective"], "bytes": r["bytes"], "world_size": r["world_size"],
        "start_s": (r["ts"] - t_ref) * 1e-6, "duration_s": r["dur"] * 1e-6,
        "recorded_duration_s": r.get("recorded_dur", r["dur"]) * 1e-6,
        "stream": r["stream"], "source": source, "dtype": r["dtype"], "nelems": r["nelems"],
    } for r in sorted(kept, key=lambda r: r["ts"])], columns=COLLECTIVE_COLUMNS)
    for name in ("bytes", "world_size", "nelems", "iteration"):
        coll[name] = coll[name].astype("Int64")
    if source is None:
        warnings.append("no collectives found (no NCCL kernels, gloo spans, "
                        "record_param_comms or c10d calls)")
    return KinetoFile(path=path, rank=rank, world_size=world, backend=backend, source=source,
                      iterations=iterations, collectives=coll, warnings=warnings)


def import_kineto(paths: Sequence[str | Path], *, clip_cpu_spans: bool = True) -> KinetoImport:
    """Parse every file; concatenate their tables (rank from the trace, else file order)."""
    if not paths:
        raise InputError("no trace files given")
    files = []
    for i, path in enumerate(paths):
        files.append(parse_kineto(read_trace_json(path), path, fallback_rank=i,
                                  clip_cpu_spans=clip_cpu_spans))
    iterations = pd.concat([f.iterations for f in files], ignore_index=True)
    collectives = pd.concat([f.collectives for f in files], ignore_index=True) \
        if any(len(f.collectives) for f in files) else files[0].collectives
    warnings = [f"{Path(f.path).name}: {w}" for f in files for w in f.warnings]
    return KinetoImport(files=files, iterations=iterations, collectives=collectives,
                        warnings=warnings)


__all__ = [
    "COLLECTIVE_COLUMNS",
    "DTYPE_BYTES",
    "ITERATION_COLUMNS",
    "KinetoFile",
    "KinetoImport",
    "decode_trace_bytes",
    "import_kineto",
    "normalise_collective",
    "parse_kineto",
    "read_trace_json",
]
