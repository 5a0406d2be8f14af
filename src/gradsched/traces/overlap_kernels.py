"""The same compute kernel with and without an NCCL kernel running beside it, from Kineto
(PyTorch profiler) traces of multi-GPU runs: the measurement behind the overlap slowdown
(:mod:`gradsched.costmodel.overlap_slowdown`).

Reading reuses the Kineto importer
(:func:`~gradsched.traces.importers.kineto.events.read_documents`,
:func:`~gradsched.traces.importers.kineto.events.complete_events`, NCCL kernels by
:data:`~gradsched.traces.importers.kineto.comm_meta.NCCL_KERNEL_RE`, interval algebra of
:mod:`gradsched.traces.importers.kineto.intervals`).

Method, per trace document (one rank):

* **Kernels.** GPU kernels (``cat`` ``kernel``); NCCL kernels are the communication, every
  other kernel is compute. The union of the NCCL kernels' intervals is "communication on".
* **Groups: the same kernel.** Compute kernels are grouped by (name, grid, block, the input
  shapes of the CPU op that launched them where the trace recorded shapes, joined by
  ``External id``). Identical bottleneck blocks of a CNN, or one layer in several steps,
  fall in one group.
* **Overlap fraction** ``f`` of an instance: the share of its duration during which an NCCL
  kernel runs. ``f = 0``: a reference (not overlapped); ``f >= MIN_OVERLAP_FRACTION``:
  overlapped; instances in between are partial and left out of both sides.
* **A group is kept** when it has at least :data:`MIN_REFERENCES` references whose median
  lasts at least :data:`MIN_REFERENCE_S` (Kineto's timestamps are integer microseconds) and
  whose longest is at most :data:`MAX_REFERENCE_SPREAD` times the shortest (a stable
  reference, not several shapes under one name), and at least one overlapped instance.
* **Slowdown of a partially overlapped instance** (the replay's model, exactly). If
  compute progresses at ``1/s`` while communication is on, an instance of reference
  duration ``d0`` that lasts ``d`` with communication on for a fraction ``f`` of ``d`` did
  ``d (1 - f) + d f / s = d0`` of work, so ``d = d0 / (1 - f + f / s)`` and
  ``s_i = f / (d0 / d - 1 + f)`` (infinite where ``d0 / d <= 1 - f``: the instance is
  longer than its unoverlapped part alone explains). The group's ``slowdown`` is the
  median of ``s_i``, its weight ``weight_s`` the overlapped reference time
  ``sum(d0 f)``.
* **The NCCL kernel's SMs.** ``nccl_blocks``: the median over the group's overlapped
  instances of the largest grid (blocks = channels: ``ncclLaunchKernel`` launches
  ``grid = {nChannels, 1, 1}``, NVIDIA/nccl ``src/enqueue/enqueue.cc`` L1889-1893 at
  12df1a11afad322be5a204a2db890161cbf8131d; ``src/enqueue.cc`` in 2.17, the version of the
  A100 trace) among the NCCL kernels overlapping it. ``sm_count``: the ``numSms`` of the
  kernel's device in the trace's ``deviceProperties``.

``part`` keeps apart the two halves of a trace's kernel time span (an instance belongs to
the half its start lies in): a trace too small to be split by rank or file can still be
fitted on one half and validated on the other.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from gradsched.errors import InputError
from gradsched.traces.importers.kineto.comm_meta import NCCL_KERNEL_RE
from gradsched.traces.importers.kineto.events import Event, complete_events, read_documents
from gradsched.traces.importers.kineto.intervals import intersection_length, union

MIN_REFERENCE_S = 10e-6
"""Shortest median reference kept: Kineto's integer-microsecond timestamps quantise a
duration by up to 1 us, at most 10 % here."""

MIN_REFERENCES = 3
"""Non-overlapped instances a group needs for its median reference."""

MAX_REFERENCE_SPREAD = 1.5
"""Longest / shortest reference allowed in a group (beyond: mixed shapes under one name)."""

MIN_OVERLAP_FRACTION = 0.5
"""Overlap fraction from which an instance counts as overlapped."""

PARTS = ("all", "first-half", "second-half")

COLUMNS = ["trace", "part", "device", "sm_count", "kernel", "grid_blocks", "block_threads",
           "n_reference", "n_overlapped", "reference_s", "overlapped_s", "overlap_fraction",
           "nccl_blocks", "slowdown", "weight_s"]


@dataclass(frozen=True)
class Instance:
    """One compute kernel run: duration (s), overlap fraction, largest NCCL grid beside it."""

    duration_s: float
    fraction: float
    nccl_blocks: int


def _blocks(ev: Event, key: str) -> int:
    dims = ev.args.get(key)
    if not isinstance(dims, list) or not dims or not all(isinstance(d, int) for d in dims):
        return 0
    out = 1
    for d in dims:
        out *= d
    return out


def _devices(header: dict[str, Any]) -> dict[int, tuple[str, int]]:
    """Device index -> (name, SM count) from ``deviceProperties``."""
    out: dict[int, tuple[str, int]] = {}
    for prop in header.get("deviceProperties") or []:
        if isinstance(prop, dict) and isinstance(prop.get("id"), int):
            out[prop["id"]] = (str(prop.get("name", "")), int(prop.get("numSms") or 0))
    return out


def _shapes(events: list[Event]) -> dict[Any, str]:
    """``External id`` -> the launching CPU op's recorded input shapes (where recorded)."""
    return {ev.args["External id"]: str(ev.args["Input Dims"]) for ev in events
            if ev.cat == "cpu_op" and "External id" in ev.args and "Input Dims" in ev.args}


def _in_part(ts: float, part: str, middle: float) -> bool:
    return part == "all" or (ts < middle) == (part == "first-half")


def _nccl_beside(ev: Event, nccl: list[Event]) -> int:
    return max((_blocks(n, "grid") for n in nccl if n.ts < ev.end and n.end > ev.ts),
               default=0)


def instances(events: list[Event], part: str = "all"
              ) -> dict[tuple[Any, ...], list[Instance]]:
    """Compute kernel instances by group key (module docstring), of one trace document."""
    if part not in PARTS:
        raise InputError(f"part must be one of {', '.join(PARTS)}, got {part!r}")
    kernels = [ev for ev in events if ev.cat.lower() == "kernel" and ev.dur > 0]
    nccl = sorted((ev for ev in kernels if NCCL_KERNEL_RE.match(ev.name)), key=lambda e: e.ts)
    on = union((ev.ts, ev.end) for ev in nccl)
    shapes = _shapes(events)
    middle = (min((k.ts for k in kernels), default=0.0)
              + max((k.end for k in kernels), default=0.0)) / 2
    groups: dict[tuple[Any, ...], list[Instance]] = defaultdict(list)
    for ev in kernels:
        if NCCL_KERNEL_RE.match(ev.name) or not _in_part(ev.ts, part, middle):
            continue
        fraction = intersection_length([(ev.ts, ev.end)], on) / ev.dur
        key = (ev.name, tuple(ev.args.get("grid") or ()), tuple(ev.args.get("block") or ()),
               shapes.get(ev.args.get("External id")), ev.args.get("device"))
        groups[key].append(Instance(ev.dur * 1e-6, fraction,
                                    _nccl_beside(ev, nccl) if fraction > 0 else 0))
    return groups


def instance_slowdown(reference_s: float, inst: Instance) -> float:
    """``s`` of one overlapped instance: ``f / (d0 / d - 1 + f)`` (module docstring)."""
    denominator = reference_s / inst.duration_s - 1 + inst.fraction
    return inst.fraction / denominator if denominator > 0 else float("inf")


def predicted_duration(reference_s: float, fraction: float, slowdown: float) -> float:
    """``d = d0 / (1 - f + f / s)``: a kernel of reference ``d0`` with communication on for
    a fraction ``f`` of its duration, computing at ``1/s`` meanwhile."""
    return reference_s / (1 - fraction + fraction / slowdown)


def group_row(instances_: list[Instance]) -> dict[str, Any] | None:
    """The measured slowdown of one group, or None where it is not kept (module docstring)."""
    refs = sorted(i.duration_s for i in instances_ if i.fraction == 0)
    over = [i for i in instances_ if i.fraction >= MIN_OVERLAP_FRACTION]
    if len(refs) < MIN_REFERENCES or not over:
        return None
    ref = statistics.median(refs)
    if ref < MIN_REFERENCE_S or refs[-1] > MAX_REFERENCE_SPREAD * refs[0]:
        return None
    return {"n_reference": len(refs), "n_overlapped": len(over), "reference_s": ref,
            "overlapped_s": statistics.median(i.duration_s for i in over),
            "overlap_fraction": statistics.median(i.fraction for i in over),
            "nccl_blocks": int(statistics.median(i.nccl_blocks for i in over)),
            "slowdown": statistics.median(instance_slowdown(ref, i) for i in over),
            "weight_s": sum(ref * i.fraction for i in over)}


def measure_document(doc: Any, label: str, part: str = "all") -> pd.DataFrame:
    """One row per kept group of one trace document (columns :data:`COLUMNS`)."""
    events, header = complete_events(doc, label)
    devices = _devices(header)
    rows = []
    for key, group in sorted(instances(events, part).items(), key=lambda kv: repr(kv[0])):
        row = group_row(group)
        if row is None:
            continue
        name, grid, block, _, device = key
        dev_name, sms = devices.get(device, ("", 0)) if isinstance(device, int) else ("", 0)
        rows.append({"trace": label, "part": part, "device": dev_name, "sm_count": sms,
                     "kernel": name, "grid_blocks": _prod(grid), "block_threads": _prod(block),
                     **row})
    return pd.DataFrame(rows, columns=COLUMNS)


def _prod(dims: tuple[Any, ...]) -> int:
    out = 1
    for d in dims:
        out *= int(d)
    return out if dims else 0


def measure_trace(path: str | Path, part: str = "all") -> pd.DataFrame:
    """:func:`measure_document` over every document of a trace file or rank archive."""
    frames = [measure_document(doc, label, part) for label, doc in read_documents(path)]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=COLUMNS)
