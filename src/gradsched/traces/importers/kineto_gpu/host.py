"""Host (CPU) time per layer: what the launching thread spends on each op (package
docstring, item 11).

A top-level op's *host time* is the time from its start to the start of the next top-level
op on the same thread (for the thread's last op, its own span), i.e. the dispatch and launch
work the host spends on it, gaps between ops included. Less the time the thread *waited for
the GPU* inside that window, which is device time, not host work:

* a runtime call that synchronizes (``cudaStreamSynchronize``, ``cudaDeviceSynchronize``,
  ``cudaEventSynchronize``, a synchronous ``cudaMemcpy``) waits for its whole span;
* a launch (``cudaLaunchKernel``, ``cuLaunchKernelEx``, ``cudaMemsetAsync``, ...) longer than
  :data:`WAIT_THRESHOLD_US` blocked on a full launch queue: its excess over the median span
  of calls with its name in the step is the wait. In the H200 traces these waits begin when
  about 1020 launches are pending (:func:`pending_at_waits`): CUDA's launch queue is about
  1024 entries deep.

``launches`` counts the op's GPU activities that are not NCCL kernels (its entries in the
launch queue).

The rows then take host time by the same rules as kernel time: backward, everything launched
after one AccumulateGrad up to and including the next (the backward thread); forward, every
forward-thread op of the forward window (from the first autograd-recorded forward op to the
first backward node, so the loss and the call into ``backward()`` are in it) since the
previous parameter-owning op, the rest after the last owning op on that op. The host
time of a profiled step includes the profiler's own per-event cost (``record_shapes`` makes
it larger), so a host-bound trace overstates the unprofiled host time.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from statistics import median
from typing import Any

from gradsched.traces.importers.kineto.events import Event
from gradsched.traces.importers.kineto_gpu.nesting import GPU_CATS, RUNTIME_CATS, Op, is_nccl

WAIT_THRESHOLD_US = 50.0
"""A launch call longer than this (us) waited for the queue: launches take 3-8 us on the
H200 traces (median per call name)."""
HOST_METHOD = ("host_s of a top-level CPU op = from its start to the next top-level op's start "
               "on its thread (its own span for the thread's last), less the time spent in "
               "synchronizing runtime calls and the excess over their name's median of "
               f"launch calls longer than {WAIT_THRESHOLD_US:g} us (waits on a full launch "
               "queue); rows take it by the kernel-time rules ('since the previous "
               "parameter-owning op' in forward, AccumulateGrad to AccumulateGrad in "
               "backward); launches = non-NCCL GPU activities; profiled host time includes "
               "the profiler's own per-event cost")
SYNC_CALLS = frozenset({"cudaStreamSynchronize", "cudaDeviceSynchronize",
                        "cudaEventSynchronize", "cudaMemcpy", "cuStreamSynchronize",
                        "cuCtxSynchronize", "cuEventSynchronize"})


@dataclass(frozen=True)
class HostCost:
    """One top-level op's host time (s), the part of its window spent waiting for the
    GPU (s, already taken out of ``host_s``) and its launches."""

    host_s: float
    waited_s: float
    launches: int


def _runtime_by_thread(events: list[Event], lo: float, hi: float
                       ) -> dict[tuple[Any, Any], list[Event]]:
    out: dict[tuple[Any, Any], list[Event]] = defaultdict(list)
    for ev in events:
        if ev.cat in RUNTIME_CATS and lo <= ev.ts < hi:
            out[(ev.pid, ev.tid)].append(ev)
    for calls in out.values():
        calls.sort(key=lambda e: e.ts)
    return out


def _wait_us(call: Event, medians: dict[str, float]) -> float:
    if call.name in SYNC_CALLS:
        return call.dur
    if call.dur > WAIT_THRESHOLD_US:
        return max(0.0, call.dur - medians.get(call.name, 0.0))
    return 0.0


def host_costs(ops: list[Op], events: list[Event], lo: float, hi: float,
               cut: tuple[tuple[Any, Any], float] | None = None) -> dict[int, HostCost]:
    """``id(op)`` -> :class:`HostCost` for every top-level op of the step in ``[lo, hi)``.
    ``cut`` = (thread, t): on that thread an op that starts before ``t`` ends its window by
    ``t`` (the forward thread, whose next op after the forward may follow the backward)."""
    runtime = _runtime_by_thread(events, lo, hi)
    names: dict[str, list[float]] = defaultdict(list)
    for calls in runtime.values():
        for call in calls:
            names[call.name].append(call.dur)
    medians = {name: median(durs) for name, durs in names.items()}
    threads: dict[tuple[Any, Any], list[Op]] = defaultdict(list)
    for op in ops:
        threads[(op.span.pid, op.span.tid)].append(op)
    out: dict[int, HostCost] = {}
    for key, thread_ops in threads.items():
        thread_ops.sort(key=lambda o: (o.span.ts, o.span.index))
        calls = runtime.get(key, [])
        starts = [c.ts for c in calls]
        j = 0
        for i, op in enumerate(thread_ops):
            end = thread_ops[i + 1].span.ts if i + 1 < len(thread_ops) else op.span.end
            if cut is not None and key == cut[0] and op.span.ts < cut[1]:
                end = min(end, cut[1])
            while j < len(calls) and starts[j] < op.span.ts:
                j += 1
            waited = 0.0
            k = j
            while k < len(calls) and starts[k] < end:
                waited += min(_wait_us(calls[k], medians), end - starts[k])
                k += 1
            window = max(end - op.span.ts, 0.0)
            out[id(op)] = HostCost(host_s=max(window - waited, 0.0) * 1e-6,
                                   waited_s=min(waited, window) * 1e-6,
                                   launches=sum(1 for g in op.kernels if not is_nccl(g)))
    return out


def pending_at_waits(events: list[Event]) -> int | None:
    """Most GPU activities launched before a launch call that waited (longer than
    :data:`WAIT_THRESHOLD_US`) and not yet finished when it returned, over the whole trace:
    the launch queue's depth as the trace shows it (None without such a call)."""
    gpu = {ev.args.get("correlation"): ev for ev in events if ev.cat in GPU_CATS}
    calls = sorted((ev for ev in events if ev.cat in RUNTIME_CATS
                    and ev.args.get("correlation") in gpu and ev.name not in SYNC_CALLS),
                   key=lambda e: e.ts)
    best = None
    for i, call in enumerate(calls):
        if call.dur <= WAIT_THRESHOLD_US:
            continue
        pending = sum(1 for prev in calls[max(0, i - 4096):i]
                      if gpu[prev.args["correlation"]].end > call.end)
        best = pending if best is None else max(best, pending)
    return best
