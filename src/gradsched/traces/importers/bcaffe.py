"""Import the MG-WFBP authors' B-Caffe per-blob dumps into a compute and a comm trace.

Each line ``... distributed.cpp:112] [param_id, size, compute_us, comm_us(, merged_us)]``
describes one learnable parameter blob (B-Caffe ``DistManager::print_overheads``).
Rules (see ``traces/README.md``):

* Dumps: ``param_id`` restarts at 0 for each dump. A dump is complete when its ids are
  0..n-1 with n equal to the longest dump. The LAST complete dump whose ``compute_us`` is
  not all zero is used; skipped dumps are counted in the notes (all-zero ones also warn).
* Every line must match the pattern and carry 4 or 5 numbers (one count for the whole
  file); otherwise it is an error naming the line and field.
* Layers: blobs come in (weight, bias) pairs ``2k, 2k+1`` that share the layer's backward
  time. The importer verifies that both blobs of each pair carry the same ``compute_us``
  (error naming the line otherwise) and that the blob count is even.
* Compute trace: one row per blob in param order (= forward order); ``layer`` = k;
  ``numel`` = size; ``bytes`` = 4 x size (fp32; sizes are B-Caffe's aligned counts, so
  some biases look padded). Gradients become ready in reverse param order
  (``ready_order = n - 1 - param_id``); ``backward_s`` is incremental, so the layer's
  time sits on its first-ready blob (the bias, id 2k+1) and the weight gets 0.
  ``forward_s`` is not in the source: written as 0, with ``forward_measured: false``.
* Comm trace (optional): the per-blob ``comm_us`` (B-Caffe times D2H copy + host
  ``MPI_Allreduce`` (separate send/recv buffers, so ``in_place`` 0) + H2D copies) grouped by
  blob bytes: median -> ``time_s``, min/max -> ``time_min_s``/``time_max_s``. Rows with
  ``comm_us`` = 0 are skipped and counted in a warning. ``merged_us`` is not imported.
* World size / nodes are not in the file: flags (the manifest passes the node count of the
  file name, one MPI rank per node as in B-Caffe's ``DistManager``).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from gradsched.errors import InputError
from gradsched.traces.bundle import ComputeTrace
from gradsched.traces.importers import (
    IMPORTER_VERSION,
    CommFacts,
    ImportResult,
    WarningSink,
    build_comm_trace,
    comm_meta,
    read_lines,
)
from gradsched.traces.validate import strict_float

NAME = "bcaffe"
_LINE_RE = re.compile(
    r"^[IWEF](?P<date>\d{4}) (?P<time>\d\d:\d\d:\d\d)\.\d+\s+\d+\s+distributed\.cpp:\d+\]\s*"
    r"\[(?P<body>[^\]]*)\]\s*$"
)
_FIELDS = ("param_id", "size", "compute_us", "comm_us", "merged_us")
DEFAULT_SOURCE = ("github.com/hclhkbu/B-Caffe, logdata/{name} (the MG-WFBP authors' Caffe "
                  "fork, INFOCOM 2019)")
DEFAULT_HARDWARE = ("Tesla K80 GPU nodes on 10 Gb Ethernet; gradients all-reduced with MPI on "
                    "the host (B-Caffe)")


@dataclass
class Options:
    """Command-line knobs of the B-Caffe importer."""

    world_size: int | None = None
    nodes: int | None = None
    model: str = "googlenet"
    batch_size: int = 64
    device: str = "NVIDIA Tesla K80"
    source: str | None = None
    hardware: str | None = None
    interconnect: str | None = "10 Gb Ethernet"
    with_comm: bool = True
    note: str | None = None  # appended to the metadata notes


@dataclass(frozen=True)
class Blob:
    """One dump line."""

    param_id: int
    size: int
    compute_us: float
    comm_us: float
    merged_us: float | None
    line: int
    stamp: str


def _parse_line(raw: str, number: int, path: Path, width: list[int]) -> Blob:
    """Parse one glog line; ``width`` holds the field count fixed by the first line."""
    match = _LINE_RE.match(raw.strip())
    if not match:
        raise InputError("not a B-Caffe 'distributed.cpp] [id, size, compute_us, comm_us"
                         "(, merged_us)]' line", path=path, line=number, field="line")
    parts = [p.strip() for p in match.group("body").split(",")]
    if len(parts) not in (4, 5):
        raise InputError(f"expected 4 or 5 numbers, found {len(parts)}", path=path,
                         line=number, field=_FIELDS[min(len(parts), 4)])
    if not width:
        width.append(len(parts))
    elif len(parts) != width[0]:
        raise InputError(f"expected {width[0]} numbers like the first line, found "
                         f"{len(parts)}", path=path, line=number,
                         field=_FIELDS[min(len(parts), width[0]) - 1])
    values: list[float] = []
    for name, text in zip(_FIELDS, parts, strict=False):
        where = {"path": path, "line": number, "field": name}
        try:
            value = strict_float(text)
        except ValueError:
            raise InputError(f"{text!r} is not a number", **where) from None
        if not math.isfinite(value) or value < 0:
            raise InputError(f"{text!r} must be a finite number >= 0", **where)
        if name in ("param_id", "size") and value != int(value):
            raise InputError(f"{text!r} is not an integer", **where)
        values.append(value)
    if values[1] == 0:
        raise InputError("size must be greater than zero", path=path, line=number,
                         field="size")
    stamp = f"{match.group('date')} {match.group('time')}"
    return Blob(int(values[0]), int(values[1]), values[2], values[3],
                values[4] if len(values) == 5 else None, number, stamp)


def _split_dumps(blobs: list[Blob], path: Path) -> list[list[Blob]]:
    dumps: list[list[Blob]] = []
    for blob in blobs:
        if blob.param_id == 0:
            dumps.append([])
        elif not dumps:
            raise InputError(f"the first line has param_id {blob.param_id}, not 0", path=path,
                             line=blob.line, field="param_id")
        expected = len(dumps[-1])
        if blob.param_id != expected:
            raise InputError(f"param_id {blob.param_id} follows {expected - 1}; expected "
                             f"{expected}", path=path, line=blob.line, field="param_id")
        dumps[-1].append(blob)
    return dumps


def _pick_dump(dumps: list[list[Blob]], path: Path, sink: WarningSink) -> int:
    """Index of the dump to use (the last complete, non-zero one)."""
    full = max(len(d) for d in dumps)
    chosen = None
    for index in range(len(dumps) - 1, -1, -1):
        dump = dumps[index]
        if len(dump) != full:
            sink.warn(f"dump {index + 1} is incomplete ({len(dump)} of {full} blobs); "
                      "skipped", line=dump[0].line)
            continue
        if all(b.compute_us == 0 for b in dump):
            sink.warn(f"dump {index + 1} has compute_us = 0 on every blob; skipped",
                      line=dump[0].line)
            continue
        chosen = index
        break
    if chosen is None:
        raise InputError("no complete dump with non-zero compute times", path=path)
    return chosen


def _check_pairs(dump: list[Blob], path: Path) -> None:
    if len(dump) % 2:
        raise InputError(f"{len(dump)} blobs: expected (weight, bias) pairs, an even count",
                         path=path, line=dump[-1].line, field="param_id")
    for k in range(0, len(dump), 2):
        weight, bias = dump[k], dump[k + 1]
        if weight.compute_us != bias.compute_us:
            raise InputError(
                f"blobs {weight.param_id} and {bias.param_id} should be the weight and bias "
                f"of one layer but their compute_us differ ({weight.compute_us:g} on line "
                f"{weight.line}, {bias.compute_us:g})", path=path, line=bias.line,
                field="compute_us")


def _compute_frame(dump: list[Blob]) -> pd.DataFrame:
    n = len(dump)
    rows = []
    for blob in dump:
        layer, is_bias = divmod(blob.param_id, 2)
        rows.append({
            "name": f"layer{layer:02d}.{'bias' if is_bias else 'weight'}",
            "layer": layer,
            "numel": blob.size,
            "bytes": blob.size * 4,
            "forward_s": 0.0,
            "backward_s": blob.compute_us * 1e-6 if is_bias else 0.0,
            "ready_order": n - 1 - blob.param_id,
        })
    frame = pd.DataFrame(rows)
    frame["forward_s"] = frame["forward_s"].astype(np.float64)
    frame["backward_s"] = frame["backward_s"].astype(np.float64)
    return frame


def _dump_summary(dumps: list[list[Blob]], chosen: int) -> str:
    """Which dump was used and what the others were (all-zero, identical, other)."""
    def key(dump: list[Blob]) -> list[tuple[Any, ...]]:
        return [(b.size, b.compute_us, b.comm_us) for b in dump]

    used = dumps[chosen]
    others = [d for i, d in enumerate(dumps) if i != chosen]
    zero = sum(1 for d in others if all(b.compute_us == 0 for b in d))
    same = sum(1 for d in others if key(d) == key(used))
    text = (f"Dump {chosen + 1} of {len(dumps)} (lines {used[0].line}-{used[-1].line}) is "
            "used (the last complete one with non-zero compute_us)")
    if others:
        text += (f"; ignored: {len(others)} other dump(s), of which {zero} all-zero and "
                 f"{same} with the same size/compute_us/comm_us as the one used")
    return text + "."


def _compute_meta(path: Path, options: Options, dumps: list[list[Blob]], chosen: int,
                  sink: WarningSink, world: int) -> dict[str, Any]:
    dump = dumps[chosen]
    notes = (
        _dump_summary(dumps, chosen) + " "
        "Rows are parameter blobs in param order (forward order); blobs 2k and 2k+1 are "
        "the weight and bias of layer k (verified: equal compute_us). backward_s = the "
        "layer's compute_us / 1e6 on its first-ready blob (the bias) and 0 on the "
        "weight; ready_order = n-1-param_id. forward_s is NOT measured by the source "
        "and is written as 0. numel = B-Caffe's aligned count (some biases padded); "
        "bytes = 4 x numel (fp32). Blob names are synthetic (layerKK.weight/bias); "
        "the source gives no layer names. world_size = the --world-size flag (B-Caffe runs "
        "one MPI rank per node)."
    )
    if options.note:
        notes += " " + options.note
    return {
        "kind": "compute",
        "model": options.model,
        "batch_size": options.batch_size,
        "device": options.device,
        "dtype": "fp32",
        "world_size": world,
        "software": {"framework": "B-Caffe (Caffe fork with MG-WFBP)"},
        "capture_method": "B-Caffe DistManager::print_overheads glog dump "
                          "(distributed.cpp:112), per-blob compute/comm timers",
        "iterations": None,
        "date": f"glog timestamp {dump[0].stamp} (MMDD hh:mm:ss; the year is not logged)",
        "source": options.source or DEFAULT_SOURCE.format(name=path.name),
        "forward_measured": False,
        "original_file": path.name,
        "importer": NAME,
        "importer_version": IMPORTER_VERSION,
        "warnings": sink.for_meta(),
        "notes": notes,
    }


def _comm_rows(dump: list[Blob], world: int, nodes: int, sink: WarningSink) -> list[dict]:
    measured = [b for b in dump if b.comm_us > 0]
    zero = [b for b in dump if b.comm_us == 0]
    if zero:
        sink.warn(f"{len(zero)} of {len(dump)} blobs have comm_us = 0 (not timed "
                  "separately); skipped in the comm trace", line=zero[0].line)
    if not measured:
        raise InputError("no blob has a non-zero comm_us", field="comm_us")
    by_bytes: dict[int, list[float]] = {}
    for blob in measured:
        by_bytes.setdefault(blob.size * 4, []).append(blob.comm_us * 1e-6)
    rows = []
    for size in sorted(by_bytes):
        times = np.array(by_bytes[size], dtype=np.float64)
        rows.append({
            "collective": "all_reduce", "backend": "mpi", "algorithm": "default",
            "world_size": world, "nodes": nodes, "in_place": False, "bytes": size,
            "time_s": float(np.median(times)), "time_min_s": float(times.min()),
            "time_max_s": float(times.max()),
        })
    return rows


def _comm_meta(path: Path, options: Options, dumps: list[list[Blob]], chosen: int,
               n_blobs: int, n_rows: int, sink: WarningSink) -> dict[str, Any]:
    notes = (
        _dump_summary(dumps, chosen) + " "
        "Per-blob comm_us of that dump, grouped by blob bytes "
        f"({n_blobs} timed blobs -> {n_rows} sizes): time_s = median, time_min_s/time_max_s "
        "= min/max over the blobs of that size. B-Caffe's timer covers the GPU->host copy, "
        "the host MPI_Allreduce (MPI_FLOAT, separate send/recv buffers) and the host->GPU "
        "copies, so these are end-to-end gradient-exchange times, not bare MPI times. Where "
        "bias blobs show comm_us = 0 (5-field dumps) the weight's time may include its bias."
    )
    if options.note:
        notes += " " + options.note
    return comm_meta(importer=NAME, path=path, warnings=sink, facts=CommFacts(
        source=options.source or DEFAULT_SOURCE.format(name=path.name),
        hardware=options.hardware or DEFAULT_HARDWARE, statistic="median",
        software={"framework": "B-Caffe (Caffe fork with MG-WFBP)", "library": "MPI"},
        notes=notes, interconnect=options.interconnect))


def _require_counts(options: Options, path: Path) -> tuple[int, int | None]:
    """The world size, and the node count when a comm trace is asked for (only its rows
    and metadata record it)."""
    counts = [("world-size", options.world_size)]
    if options.with_comm:
        counts.append(("nodes", options.nodes))
    for label, value in counts:
        if value is None or value <= 0:
            raise InputError(f"the B-Caffe dump does not record the {label.replace('-', ' ')}"
                             f": pass --{label} (a positive integer)", path=path, field=label)
    assert options.world_size is not None
    if options.nodes is not None and options.nodes > options.world_size:
        raise InputError("--nodes is larger than --world-size", path=path, field="nodes")
    return options.world_size, options.nodes


def import_bcaffe(path: str | Path, options: Options | None = None) -> ImportResult:
    """Parse a B-Caffe dump into a :class:`ComputeTrace` (+ a :class:`CommTrace`)."""
    options = options or Options()
    path = Path(path)
    world, nodes = _require_counts(options, path)
    width: list[int] = []
    blobs = [_parse_line(raw, i + 1, path, width)
             for i, raw in enumerate(read_lines(path)) if raw.strip()]
    if not blobs:
        raise InputError("no B-Caffe dump lines", path=path)
    dumps = _split_dumps(blobs, path)
    sink = WarningSink(path)
    chosen = _pick_dump(dumps, path, sink)
    dump = dumps[chosen]
    _check_pairs(dump, path)
    comm = None
    if options.with_comm:
        assert nodes is not None  # required with a comm trace
        try:
            rows = _comm_rows(dump, world, nodes, sink)
        except InputError as exc:
            raise InputError(exc.reason, path=path, field=exc.field) from None
        n_timed = sum(1 for b in dump if b.comm_us > 0)
        meta = _comm_meta(path, options, dumps, chosen, n_timed, len(rows), sink)
        comm = build_comm_trace(rows, meta)
    compute_meta = _compute_meta(path, options, dumps, chosen, sink, world)
    compute = ComputeTrace.from_frame(_compute_frame(dump), compute_meta)
    return ImportResult(comm=comm, compute=compute,
                        warnings=list(sink.items))
