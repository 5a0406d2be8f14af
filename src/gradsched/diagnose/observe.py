"""One rank's Kineto trace of a training step -> what each collective did on that rank
(a CPU run over gloo is read by :mod:`.observe_cpu` into the same frame).

The step and the CPU/GPU links are read as the Kineto GPU importer reads them
(:mod:`gradsched.traces.importers.kineto_gpu`: :func:`~.steps.choose_step`,
:func:`~.nesting.nest` and :func:`~.nesting.link_kernels`, the metadata of
:func:`~.collectives.to_collective`); no parameter table is needed. Per NCCL kernel
launched inside the step (times in seconds from the rank's ``ProfilerStep`` start):

* ``launch_s``: start of the runtime call that launched it (``cudaLaunchKernel`` or the
  driver call; linked by ``args.correlation``);
* ``ready_s``: end of the last non-NCCL GPU activity (kernel, memcpy, memset) on the main
  compute stream (the one with the most compute kernel time) whose launch call precedes the
  collective's, and no later than the collective's start. ProcessGroupNCCL makes the NCCL
  stream wait on an event recorded on the current stream when the collective is called
  (``syncStream`` in ``torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp``), so this is the
  earliest moment the device may start it: the last gradient of a DDP bucket has been
  produced, or the input of an all-gather written. (A collective fed from a side stream,
  such as TorchRec's input distribution, starts before that; its ready is then its start.)
* ``drained_s``: end of the last main-stream activity that started before the collective:
  a collective starting within
  :data:`~gradsched.diagnose.rank_step.HOLD_TOL_S` of it waited for the compute stream to
  drain (gated on all the compute before it);
* ``start_s``, ``end_s``, ``duration_s``: the NCCL kernel on the device (its duration
  includes the wait for the peers);
* ``exposed_s``: :func:`gradsched.diagnose.exposure.exposed_length` against the union of
  the trace's compute kernels (HTA's definition);
* ``held_kernels``: compute kernels launched before the collective ended that started
  within :data:`~gradsched.diagnose.rank_step.HOLD_TOL_S` after its end, on a stream
  that had gone idle before its end: work the device had and did not run beside the
  collective;
* ``hideable_s``: compute on the device from ``ready_s`` to the end of the step's GPU work,
  the most the collective could have hidden behind had it started when ready;
* ``phase``: ``forward`` when launched before the step's first backward op, else
  ``backward`` (the optimizer's collectives, after the last gradient, count as backward).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from gradsched.diagnose.events import complete_events
from gradsched.diagnose.exposure import exposed_length, is_compute_kernel_name
from gradsched.diagnose.observe_cpu import has_gloo, observe_cpu_document
from gradsched.diagnose.rank_step import COLUMNS, HOLD_TOL_S, RankStep
from gradsched.errors import InputError
from gradsched.traces.importers.kineto.comm_meta import meta_from_args
from gradsched.traces.importers.kineto.events import Event
from gradsched.traces.importers.kineto.intervals import intersection_length, union
from gradsched.traces.importers.kineto_gpu.collectives import to_collective
from gradsched.traces.importers.kineto_gpu.nesting import (
    GPU_CATS,
    correlation,
    is_nccl,
    link_kernels,
    nest,
)
from gradsched.traces.importers.kineto_gpu.steps import choose_step


def _device(header: dict[str, Any]) -> str | None:
    props = header.get("deviceProperties")
    if isinstance(props, list) and props and isinstance(props[0], dict):
        return str(props[0].get("name")) if props[0].get("name") else None
    return None


def _rank_facts(header: dict[str, Any], label: str) -> tuple[int, int | None]:
    info = header.get("distributedInfo")
    info = info if isinstance(info, dict) else {}
    rank, world = info.get("rank"), info.get("world_size")
    if rank is not None and (isinstance(rank, bool) or not isinstance(rank, int)):
        raise InputError(f"distributedInfo.rank must be an integer, got {rank!r}", path=label,
                         field="distributedInfo.rank")
    return int(rank or 0), world if isinstance(world, int) else None


def observe_document(doc: Any, label: str, step: int | None = None) -> RankStep:
    """Read one rank's trace document (module docstring)."""
    events, header = complete_events(doc, label)
    number, span, _ = choose_step(events, label, step)
    _, launches = nest(events, span.ts, span.end, label)
    gpu = [ev for ev in events if ev.cat in GPU_CATS]
    link_kernels(gpu, launches, label)
    first_bw = min((ev.ts for ev in events if span.ts <= ev.ts < span.end and (
        ev.name.startswith("autograd::engine::evaluate_function:")
        or bool(ev.args.get("Fwd thread id")))), default=span.end)
    by_extid = {ev.args.get("External id"): meta for ev in events
                if ev.name == "record_param_comms" and (meta := meta_from_args(ev, label))}
    launched: list[tuple[Event, Event]] = []  # (GPU activity, its launch call) in the step
    for ev in gpu:
        corr = correlation(ev, label)
        if corr is not None and corr in launches:
            launched.append((ev, launches[corr].event))
    nccl = [(k, call) for k, call in launched if is_nccl(k)]
    if not nccl and has_gloo(events):
        return observe_cpu_document(doc, label, step)
    if not nccl:
        raise InputError(f"ProfilerStep#{number} launched no NCCL kernel: nothing to "
                         "diagnose (a single-GPU trace, a CPU run over gloo, or one "
                         "profiled without CUDA activities)", path=label, field="traceEvents")
    others = sorted(((k, call) for k, call in launched if not is_nccl(k)),
                    key=lambda kc: kc[1].ts)
    main = _main_stream(others)
    compute_all = union((k.ts, k.end) for k in gpu
                        if k.cat.lower() == "kernel" and not is_nccl(k)
                        and is_compute_kernel_name(k.name))
    gpu_end = max(k.end for k, _ in launched)
    rank, world = _rank_facts(header, label)
    rows = _rows(nccl, others, main, compute_all, (launches, by_extid),
                 _Window(span, first_bw, gpu_end, label))
    frame = pd.DataFrame(rows, columns=COLUMNS)
    frame["rank"] = rank
    step_compute = intersection_length(compute_all, [(span.ts, gpu_end)]) * 1e-6
    contenders, beside = _pending(nccl, others)
    horizon = gpu_end + (gpu_end - span.ts)
    compute = tuple((round((s - span.ts) * 1e-6, 9), round((e - span.ts) * 1e-6, 9))
                    for s, e in compute_all if e > span.ts and s < horizon)
    return RankStep(label=label, rank=rank, world_size=world, device=_device(header),
                    step=number, step_s=span.dur * 1e-6,
                    gpu_end_s=(gpu_end - span.ts) * 1e-6, compute_s=step_compute,
                    contenders=contenders, beside=beside, compute=compute,
                    frame=frame)


def _main_stream(others: list[tuple[Event, Event]]) -> Any:
    """The stream with the most compute kernel time."""
    time: dict[Any, float] = {}
    for k, _ in others:
        if k.cat.lower() == "kernel" and is_compute_kernel_name(k.name):
            key = k.args.get("stream", k.tid)
            time[key] = time.get(key, 0.0) + k.dur
    return max(sorted(time, key=str), key=lambda s: time[s]) if time else None


@dataclass(frozen=True)
class _Window:
    """The step's span, where its backward starts, where its GPU work ends, and the
    trace's label (for errors)."""

    span: Event
    first_bw: float
    gpu_end: float
    label: str


def _rows(nccl: list[tuple[Event, Event]], others: list[tuple[Event, Event]], main: Any,
          compute: list[tuple[float, float]],
          links: tuple[dict[int, Any], dict[Any, dict[str, Any]]],
          window: _Window) -> list[dict[str, Any]]:
    launches, by_extid = links
    span, first_bw, gpu_end, label = window.span, window.first_bw, window.gpu_end, window.label
    on_main = [(k, call) for k, call in others if k.args.get("stream", k.tid) == main]
    calls = [call.ts for _, call in on_main]
    ends = (np.maximum.accumulate([k.end for k, _ in on_main]) if on_main
            else np.array([]))
    streams = _streams(others)
    compute_streams = {s for s, _ in streams.items()}
    main_items = sorted((k for k, _ in on_main), key=lambda k: k.ts)
    main_starts = [k.ts for k in main_items]
    main_ends = (np.maximum.accumulate([k.end for k in main_items]) if main_items
                 else np.array([]))
    rows = []
    for index, (kernel, call) in enumerate(sorted(nccl, key=lambda kc: (kc[1].ts,
                                                                         kc[0].ts))):
        meta = to_collective(kernel, launches[correlation(kernel, label)], by_extid, label)
        before = bisect.bisect_left(calls, call.ts)
        ready = min(float(ends[before - 1]) if before else span.ts, kernel.ts)
        below = bisect.bisect_left(main_starts, kernel.ts)
        drained = float(main_ends[below - 1]) if below else span.ts
        stream = kernel.args.get("stream", kernel.tid)
        rows.append({
            "rank": 0, "index": index, "collective": meta.collective, "bytes": meta.nbytes,
            "world_size": meta.group, "stream": str(stream),
            "phase": "forward" if call.ts < first_bw else "backward",
            "ready_s": _rel(ready, span), "drained_s": _rel(drained, span),
            "launch_s": _rel(call.ts, span),
            "start_s": _rel(kernel.ts, span), "end_s": _rel(kernel.end, span),
            "duration_s": round(kernel.dur * 1e-6, 9),
            "exposed_s": round(exposed_length((kernel.ts, kernel.end), compute) * 1e-6, 9),
            "hideable_s": round(intersection_length(compute, [(max(ready, span.ts),
                                                                gpu_end)]) * 1e-6, 9),
            "held_kernels": _held(kernel, others, streams),
            "same_stream_as_compute": stream in compute_streams,
        })
    return rows


def _pending(nccl: list[tuple[Event, Event]], others: list[tuple[Event, Event]]
             ) -> tuple[int, int]:
    """(collectives with compute pending, those with pending compute run beside them)."""
    kernels = [(k.ts, call.ts) for k, call in others
               if k.cat.lower() == "kernel" and is_compute_kernel_name(k.name)]
    if not kernels:
        return 0, 0
    start, call = np.array(kernels).T
    contenders = beside = 0
    for c, _ in nccl:
        pending = (call < c.end) & (start >= c.ts)
        if pending.any():
            contenders += 1
            beside += bool((pending & (start < c.end)).any())
    return contenders, beside


def _rel(ts: float, span: Event) -> float:
    return round((ts - span.ts) * 1e-6, 9)


def _streams(others: list[tuple[Event, Event]]
             ) -> dict[Any, tuple[list[Event], list[float]]]:
    """Compute kernels per stream, by device start, with their starts."""
    out: dict[Any, list[Event]] = {}
    for k, _ in others:
        if k.cat.lower() == "kernel" and is_compute_kernel_name(k.name):
            out.setdefault(k.args.get("stream", k.tid), []).append(k)
    return {s: (sorted(items, key=lambda k: k.ts), sorted(k.ts for k in items))
            for s, items in out.items()}


def _held(coll: Event, others: list[tuple[Event, Event]],
          streams: dict[Any, tuple[list[Event], list[float]]]) -> int:
    """Compute kernels held until ``coll`` ended (module docstring)."""
    tol = HOLD_TOL_S * 1e6
    held = 0
    for k, call in others:
        if not (call.ts < coll.end and coll.end - tol <= k.ts <= coll.end + tol):
            continue
        if not (k.cat.lower() == "kernel" and is_compute_kernel_name(k.name)):
            continue
        items, starts = streams.get(k.args.get("stream", k.tid), ([], []))
        pos = bisect.bisect_left(starts, k.ts)
        prev_end = items[pos - 1].end if pos > 0 else float("-inf")
        if prev_end < coll.end - tol:
            held += 1
    return held


__all__ = ["COLUMNS", "HOLD_TOL_S", "RankStep", "observe_document"]
