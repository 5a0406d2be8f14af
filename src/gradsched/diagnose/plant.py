"""Traces with one fault planted, derived from a real trace: SYNTHETIC, for the tests and
the paper's planted-fault table (never committed as data, never quoted as a measurement).

Each function returns a new trace document (the input is not modified) in which the chosen
step's events are moved as the fault would move them:

* :func:`serialise`: every GPU activity of the trace runs in one hardware queue, in the
  order of its launch calls (``CUDA_DEVICE_MAX_CONNECTIONS=1``): an activity starts at the
  later of its recorded start and the previous activity's end. Stream ids are kept, as
  Kineto keeps them under that setting.
* :func:`delay_launch`: the launching thread stalls for ``delay`` just before the
  collective's launch call: that thread's later host events, the GPU activities they
  launch start no earlier than that call plus the trace's shortest launch latency
  (:func:`launch_latency_us`), whatever then queues behind them moves later, and the spans
  around the stall on that thread (the step's own) last longer by the stall.
* :func:`remove_prefetch`: a forward collective that ran beside compute starts only when
  the compute stream has drained (all compute started before its recorded end is done),
  and the compute stream then waits for its end (the consumer's stream wait); what queues
  behind moves later.
* :func:`slow_rank`: one rank reaches the collective ``delay`` late (its last compute
  kernel before the collective runs that much longer: a slower GPU, throttled clocks);
  on the other ranks that collective's kernel
  waits the extra time and everything after it moves later (on every rank, the spans
  around that moment, the step's own, last longer by the delay).

* :func:`serialise_cpu`: on a CPU (gloo) trace, every collective runs on the training
  thread that launched it (a one-thread, blocking communication).

Which collective is chosen (:func:`prefetch_target`, :func:`backward_target`) and by how
much it is delayed (:func:`plant_delay_s`) is stated, not tuned per trace.
"""

from __future__ import annotations

import copy
from typing import Any

from gradsched.diagnose.events import complete_events
from gradsched.diagnose.observe_cpu import gloo_pairs
from gradsched.diagnose.rank_step import RankStep
from gradsched.errors import InputError
from gradsched.traces.importers.kineto.events import Event
from gradsched.traces.importers.kineto_gpu.nesting import (
    GPU_CATS,
    RUNTIME_CATS,
    correlation,
    is_nccl,
)
from gradsched.traces.importers.kineto_gpu.steps import choose_step

MIN_DELAY_S = 1e-3
"""The smallest planted delay: twenty times the causes' materiality floor."""

PREFETCH_MIN_S = 100e-6
"""A forward collective chosen for :func:`remove_prefetch` lasts at least this long and was
at most half exposed (it ran beside compute)."""


def plant_delay_s(duration_s: float) -> float:
    """The planted delay: twice the collective's duration, at least :data:`MIN_DELAY_S`."""
    return max(MIN_DELAY_S, 2 * duration_s)


def _calls(events: list[Event], label: str) -> dict[int, Event]:
    return {c: ev for ev in events if ev.cat in RUNTIME_CATS
            and (c := correlation(ev, label)) is not None}


def _step_span(events: list[Event], label: str, step: int | None) -> Event:
    return choose_step(events, label, step)[1]


def _step_collectives(events: list[Event], label: str, step: int | None
                      ) -> list[tuple[Event, Event]]:
    """The step's NCCL kernels with their launch calls, in launch order (as observed)."""
    span = _step_span(events, label, step)
    calls = _calls(events, label)
    out = []
    for ev in events:
        if is_nccl(ev) and (c := correlation(ev, label)) in calls \
                and span.ts <= calls[c].ts < span.end:
            out.append((ev, calls[c]))
    return sorted(out, key=lambda kc: (kc[1].ts, kc[0].ts))


def launch_latency_us(gpu: list[Event], calls: dict[int, Event], label: str) -> float:
    """The shortest launch-call-to-start time of the trace's GPU activities (us): how soon
    this device starts an activity launched to an idle stream."""
    gaps = [ev.ts - calls[c].ts for ev in gpu
            if (c := correlation(ev, label)) in calls and ev.ts > calls[c].ts]
    return min(gaps) if gaps else 0.0


def _apply(doc: Any, ts: dict[int, float], dur: dict[int, float] | None = None,
           tid: dict[int, Any] | None = None) -> Any:
    """A copy of ``doc`` with the raw events at these indices given new ``ts``/``dur``/
    ``tid``."""
    new = copy.copy(doc)
    raw = list(doc["traceEvents"])
    for i in set(ts) | set(dur or {}) | set(tid or {}):
        ev = dict(raw[i])
        if i in ts:
            ev["ts"] = ts[i]
        if dur and i in dur:
            ev["dur"] = dur[i]
        if tid and i in tid:
            ev["tid"] = tid[i]
        raw[i] = ev
    new["traceEvents"] = raw
    return new


def _no_overlap(gpu: list[Event], ts: dict[int, float]) -> None:
    """Per stream, push each activity past the previous one's end (in new start order)."""
    streams: dict[Any, list[Event]] = {}
    for ev in gpu:
        streams.setdefault(ev.args.get("stream", ev.tid), []).append(ev)
    for items in streams.values():
        items.sort(key=lambda e: (ts.get(e.index, e.ts), e.ts))
        end = float("-inf")
        for ev in items:
            start = max(ts.get(ev.index, ev.ts), end)
            if start != ev.ts:
                ts[ev.index] = start
            end = start + ev.dur


def serialise(doc: Any, label: str) -> Any:
    """One hardware queue for every GPU activity (module docstring)."""
    events, _ = complete_events(doc, label)
    calls = _calls(events, label)
    gpu = [ev for ev in events if ev.cat in GPU_CATS]

    def key(ev: Event) -> tuple[float, float]:
        call = calls.get(correlation(ev, label))  # type: ignore[arg-type]
        return (call.ts if call is not None else ev.ts, ev.ts)

    ts: dict[int, float] = {}
    end = float("-inf")
    for ev in sorted(gpu, key=key):
        start = max(ev.ts, end)
        if start != ev.ts:
            ts[ev.index] = start
        end = max(end, start + ev.dur)
    return _apply(doc, ts)


def delay_launch(doc: Any, label: str, index: int, delay_s: float,
                 step: int | None = None) -> Any:
    """Stall the launching thread before collective ``index`` (module docstring)."""
    events, _ = complete_events(doc, label)
    coll = _step_collectives(events, label, step)
    if not 0 <= index < len(coll):
        raise InputError(f"no collective {index} in the step ({len(coll)})", path=label)
    call = coll[index][1]
    d = delay_s * 1e6
    ts: dict[int, float] = {}
    dur: dict[int, float] = {}
    moved: set[int] = set()
    for ev in events:
        if (ev.pid, ev.tid) != (call.pid, call.tid) or ev.cat in GPU_CATS:
            continue
        if ev.ts >= call.ts:
            ts[ev.index] = ev.ts + d
            if ev.cat in RUNTIME_CATS and (c := correlation(ev, label)) is not None:
                moved.add(c)
        elif ev.end > call.ts:  # a span around the stall lasts longer
            dur[ev.index] = ev.dur + d
    span = _step_span(events, label, step)  # the step waits for its backward thread
    dur[span.index] = span.dur + d
    gpu = [ev for ev in events if ev.cat in GPU_CATS]
    calls = _calls(events, label)
    latency = launch_latency_us(gpu, calls, label)
    for ev in gpu:
        c = correlation(ev, label)
        if c in moved:
            ts[ev.index] = max(ev.ts, calls[c].ts + d + latency)  # type: ignore[index]
    _no_overlap(gpu, ts)
    return _apply(doc, ts, dur)


def remove_prefetch(doc: Any, label: str, index: int, step: int | None = None) -> Any:
    """Make forward collective ``index`` wait for the compute stream (module docstring)."""
    events, _ = complete_events(doc, label)
    coll = _step_collectives(events, label, step)
    if not 0 <= index < len(coll):
        raise InputError(f"no collective {index} in the step ({len(coll)})", path=label)
    kernel = coll[index][0]
    gpu = [ev for ev in events if ev.cat in GPU_CATS]
    compute = [ev for ev in gpu if not is_nccl(ev)]
    time: dict[Any, float] = {}
    for ev in compute:
        time[ev.args.get("stream", ev.tid)] = time.get(ev.args.get("stream", ev.tid), 0) \
            + ev.dur
    main = max(sorted(time, key=str), key=lambda s: time[s])
    drained = max((ev.end for ev in compute if ev.args.get("stream", ev.tid) == main
                   and ev.ts < kernel.end), default=kernel.ts)
    start = max(drained, kernel.ts)
    ts: dict[int, float] = {kernel.index: start}
    for ev in compute:
        if ev.args.get("stream", ev.tid) == main and ev.ts >= start:
            ts[ev.index] = max(ev.ts, start + kernel.dur)
    _no_overlap(gpu, ts)
    return _apply(doc, ts)


def slow_rank(docs: list[tuple[str, Any]], rank_pos: int, index: int, delay_s: float,
              step: int | None = None) -> list[tuple[str, Any]]:
    """Rank ``docs[rank_pos]`` reaches collective ``index`` late (module docstring): on that
    rank the last compute kernel before the collective's launch lasts ``delay_s`` longer
    and the device work after it moves later; on the others the collective's kernel waits
    that long and everything after it moves later."""
    d = delay_s * 1e6
    out = []
    for pos, (label, doc) in enumerate(docs):
        events, _ = complete_events(doc, label)
        coll = _step_collectives(events, label, step)
        if not 0 <= index < len(coll):
            raise InputError(f"no collective {index} in the step ({len(coll)})", path=label)
        kernel, call = coll[index]
        gpu = [ev for ev in events if ev.cat in GPU_CATS]
        if pos == rank_pos:
            calls = _calls(events, label)
            before = [ev for ev in gpu if not is_nccl(ev) and ev.cat.lower() == "kernel"
                      and (c := correlation(ev, label)) in calls and calls[c].ts < call.ts]
            slow = max(before, key=lambda ev: ev.end)
            ts = {ev.index: ev.ts + d for ev in gpu if ev.ts >= slow.end}
            _no_overlap(gpu, ts)
            out.append((label, _apply(doc, ts, {slow.index: slow.dur + d})))
        else:
            ts = {ev.index: ev.ts + d for ev in events if ev.ts >= kernel.end}
            dur = {ev.index: ev.dur + d for ev in events if ev.ts < kernel.end < ev.end}
            dur[kernel.index] = kernel.dur + d
            out.append((label, _apply(doc, ts, dur)))
    return out


def serialise_cpu(doc: Any, label: str) -> Any:
    """A CPU (gloo) trace with every collective run on the training thread that launches it
    (a blocking collective, a communication hook that waits): each ``gloo:`` span moves to
    right after its ``c10d::`` launch on that thread, and that thread's later events move
    later by the collectives' durations (spans around a launch last that much longer)."""
    events, _ = complete_events(doc, label)
    pairs = gloo_pairs(events, float("-inf"), float("inf"))
    if not pairs:
        raise InputError("no gloo collective to serialise", path=label)
    marks = [(call.end, gloo.dur) for call, gloo in pairs]
    main = {(call.pid, call.tid) for call, _ in pairs}

    def shift(t: float) -> float:
        return sum(d for at, d in marks if at <= t)

    ts: dict[int, float] = {}
    dur: dict[int, float] = {}
    tid: dict[int, Any] = {}
    for ev in events:
        if (ev.pid, ev.tid) in main and not ev.name.startswith("gloo:"):
            start, end = ev.ts + shift(ev.ts), ev.end + shift(ev.end)
            if start != ev.ts:
                ts[ev.index] = start
            if end - start != ev.dur:
                dur[ev.index] = end - start
    for call, gloo in pairs:
        ts[gloo.index] = call.end + shift(call.end) - gloo.dur
        tid[gloo.index] = call.tid
    return _apply(doc, ts, dur, tid)


def prefetch_target(step: RankStep) -> int | None:
    """The first forward collective of at least :data:`PREFETCH_MIN_S` that was at most half
    exposed, else None."""
    f = step.frame
    hit = f[(f["phase"] == "forward") & (f["duration_s"] >= PREFETCH_MIN_S)
            & (f["exposed_s"] <= 0.5 * f["duration_s"])]
    return int(hit["index"].iloc[0]) if not hit.empty else None


def launch_delay_s(step: RankStep, index: int) -> float:
    """The stall planted before collective ``index``'s launch: the host's lead over the
    device at that launch (a shorter stall changes nothing on the device) plus
    :func:`plant_delay_s` of its duration."""
    row = step.frame[step.frame["index"] == index].iloc[0]
    lead = max(float(row["start_s"]) - float(row["launch_s"]), 0.0)
    return lead + plant_delay_s(float(row["duration_s"]))


def backward_target(step: RankStep) -> int | None:
    """The first backward collective that was launched no later than it was ready, else
    None."""
    f = step.frame
    hit = f[(f["phase"] == "backward") & (f["launch_s"] <= f["ready_s"] + 50e-6)]
    return int(hit["index"].iloc[0]) if not hit.empty else None
