"""The list schedules of one iteration's collectives, the kernels of the replay's
:func:`gradsched.replay.engine.comm_schedule` (its module docstring states the model): one
channel first come first served (vectorised), one channel with priorities and
all-gathers, and the general event loop with several channels sharing bandwidth,
interference, a fixed issue sequence and ByteScheduler's credit (Peng et al., SOSP 2019).
All times are relative to the start of backward."""

from __future__ import annotations

import heapq
import operator

import numpy as np

from gradsched.errors import ConfigError
from gradsched.replay.prep import AG, RS, PlanItems, TraceArrays

_EPS = 1e-15
_DONE = 1e-12  # a bandwidth phase with this little work left has ended
_start_number = operator.itemgetter(1)  # of a (clock, start number, item) entry


def fifo_one_channel(eligible: np.ndarray, duration: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One channel, first come first served (ties by plan position), vectorised:
    finish_k = C_k + max_{j<=k}(e_j - C_{j-1}) with C the running sum of durations."""
    order = np.argsort(eligible, kind="stable")
    e, d = eligible[order], duration[order]
    c = np.cumsum(d)
    c_before = c - d
    finish = c + np.maximum.accumulate(e - c_before)
    start = finish - d
    out_start, out_end = np.empty_like(start), np.empty_like(finish)
    out_start[order], out_end[order] = start, finish
    return out_start, out_end


def priority_one_channel(items: PlanItems, backward_s: float) -> tuple[np.ndarray, np.ndarray]:
    """One channel with priorities and all-gathers: the list schedule without sharing
    (the same schedule as :func:`joint_schedule` without interference, faster)."""
    n = items.n_per_iteration
    start = np.zeros(n)
    end = np.zeros(n)
    kind = items.kind.tolist()
    prio = items.key_priority.tolist()
    dur = items.duration_s.tolist()
    ag_of = items.ag_of.tolist()
    pending = sorted((e, i) for i, e in enumerate(items.ready_offset_s.tolist())
                     if kind[i] != AG)
    pending.reverse()  # pop from the end = earliest first
    gathers: list[tuple[float, int]] = []  # heap of (eligible, item) all-gathers
    ready: list[tuple[int, float, float, int]] = []
    now = 0.0
    while pending or gathers or ready:
        while pending and pending[-1][0] <= now + _EPS:
            e, i = pending.pop()
            heapq.heappush(ready, (0, prio[i], e, i))
        while gathers and gathers[0][0] <= now + _EPS:
            e, i = heapq.heappop(gathers)
            heapq.heappush(ready, (1, prio[i], e, i))
        if not ready:
            now = min(pending[-1][0] if pending else np.inf,
                      gathers[0][0] if gathers else np.inf)
            continue
        i = heapq.heappop(ready)[3]
        start[i] = now
        now += dur[i]
        end[i] = now
        if kind[i] == RS and ag_of[i] >= 0:
            heapq.heappush(gathers, (max(now, backward_s), ag_of[i]))
    return start, end


def items_by_release_position(items: PlanItems) -> dict[int, list[int]]:
    """Backward position -> the items (all but all-gathers) whose bucket's last gradient
    is produced there, in item order (one stable sort)."""
    released = np.flatnonzero(items.kind != AG)
    if released.size == 0:
        return {}
    position = items.bucket_last_pos[items.bucket[released]]
    order = np.argsort(position, kind="stable")
    out: dict[int, list[int]] = {}
    for pos, item in zip(position[order].tolist(), released[order].tolist(), strict=True):
        out.setdefault(pos, []).append(item)  # plain ints: a split per position was slow
    return out


def joint_schedule(items: PlanItems, arrays: TraceArrays, channels: int,  # noqa: C901
                   compute_slowdown: float, comm_slowdown: float,
                   collective_cpu_s: float = 0.0, sequence: np.ndarray | None = None,
                   credit_bytes: float | None = None
                   ) -> tuple[np.ndarray, np.ndarray, float]:
    """The general list schedule: priorities, all-gathers, several channels sharing
    bandwidth, and backward compute simulated together with communication, with
    interference (factors of 1 and 0 s = none): a collective starting while backward
    computes adds ``collective_cpu_s`` to the backward work left; while any collective is
    in its bandwidth phase, backward compute progresses at 1/compute_slowdown of its
    speed; while backward computes, collectives progress at 1/comm_slowdown (gloo threads
    compete with compute for cores; NCCL kernels take SMs). With ``sequence`` (item ->
    position), items start strictly in that order. With ``credit_bytes``, the most urgent
    ready item starts only while fewer bytes are in flight. Returns item starts and ends
    and the (stretched) end of backward, all relative to the start of backward. Forward
    passes are not slowed (a documented simplification).

    **Cost per event, whatever the number of collectives in flight.** A collective's
    latency phase runs at ``1/comm_mult`` of real time and every collective in its
    bandwidth phase at ``1/(in_bw x comm_mult)`` (processor sharing), so each phase keeps one
    clock of its own (virtual time, as in fair-queueing schedulers: Demers, Keshav and
    Shenker, SIGCOMM 1989) and a heap of the clock readings at which its collectives end:
    an event advances two clocks and pops what ended, ``O(log n)``, instead of updating
    every active collective. Collectives ending at one instant complete in the order they
    started.

    This is the replay's hot path (an event loop run for every plan the searches try),
    so it stays one function with its state in local variables (Python reads them much
    faster than attributes) and the items' arrays as Python lists (no numpy scalar per
    access); hence its McCabe complexity above the project's limit (``# noqa: C901``)."""
    n = items.n_per_iteration
    start, end = [0.0] * n, [0.0] * n
    kind = items.kind.tolist()
    bucket_of = items.bucket.tolist()
    nbytes = items.nbytes.tolist()
    latency = items.latency_s.tolist()
    duration = items.duration_s.tolist()
    prio = items.key_priority.tolist()
    ag_of = items.ag_of.tolist()
    unpack = items.bucket_unpack_s.tolist()
    release = items.bucket_release_s.tolist()
    order_key = sequence.tolist() if sequence is not None else None
    segments = arrays.backward_seq_s.tolist()
    n_seg = len(segments)
    by_pos = items_by_release_position(items)
    pending: list[tuple[float, int]] = []
    ready: list[tuple[int, float, float, int]] = []  # (class, priority, eligible, item)
    # latency phase: (latency clock at its end, start number, item); the clock runs at
    # 1/comm_mult of real time, the same for every item in this phase
    in_latency: list[tuple[float, int, int]] = []
    # bandwidth phase: (bandwidth clock at its end, start number, item); the clock runs at
    # 1/(in_bw * comm_mult): every item in this phase shares the bandwidth equally
    in_bandwidth: list[tuple[float, int, int]] = []
    lat_clock = bw_clock = 0.0
    n_active = 0
    waiting_gathers: list[int] = []
    pos, left, now = 0, (segments[0] if n_seg else 0.0), 0.0
    next_seq, started = 0, 0
    expected = sum(1 for k in kind if k != AG) + sum(1 for j in ag_of if j >= 0)
    credit = np.inf if credit_bytes is None else float(credit_bytes)
    in_flight = 0.0
    backward_end = 0.0 if n_seg == 0 else np.inf
    inf, heappush, heappop = np.inf, heapq.heappush, heapq.heappop

    while True:
        while pos < n_seg and left <= _EPS:
            for i in by_pos.get(pos, ()):
                b = bucket_of[i]
                heappush(pending, (max(now + unpack[b], release[b]), i))
            pos += 1
            left = segments[pos] if pos < n_seg else 0.0
            if pos == n_seg:
                backward_end = now
                for j in waiting_gathers:
                    heappush(pending, (now, j))
                waiting_gathers.clear()
        while pending and pending[0][0] <= now + _EPS:
            elig, i = heappop(pending)
            if order_key is not None:
                heappush(ready, (0, float(order_key[i]), elig, i))
            else:
                heappush(ready, (1 if kind[i] == AG else 0, prio[i], elig, i))
        while ready and n_active < channels and in_flight < credit and (
                order_key is None or order_key[ready[0][3]] == next_seq):
            i = heappop(ready)[3]
            next_seq += 1
            number = started
            started += 1
            n_active += 1
            in_flight += nbytes[i]
            lat = latency[i]
            if lat > _EPS:
                heappush(in_latency, (lat_clock + lat, number, i))
            else:
                heappush(in_bandwidth, (bw_clock + (duration[i] - lat), number, i))
            start[i] = now
            if pos < n_seg:
                left += collective_cpu_s
        computing = pos < n_seg
        if not computing and not n_active and not pending:
            if started < expected:
                raise ConfigError(f"replay: {expected - started} collective(s) never started "
                                  "(the issue sequence waits for an item that never "
                                  "becomes eligible)")
            break
        comm_mult = comm_slowdown if computing else 1.0
        in_bw = len(in_bandwidth)
        compute_rate = 1.0 / compute_slowdown if in_bw else 1.0
        # the next event (comparisons, not min(): the same values, no call per event)
        step = inf
        if in_latency:
            step = (in_latency[0][0] - lat_clock) * comm_mult
        if in_bw:
            until = (in_bandwidth[0][0] - bw_clock) * in_bw * comm_mult
            if until < step:
                step = until
        if computing:
            until = left / compute_rate
            if until < step:
                step = until
        if pending and n_active < channels:
            until = pending[0][0] - now
            if until < step:
                step = until
        if step < 0.0:
            step = 0.0
        if computing:
            left -= step * compute_rate
        lat_clock += step / comm_mult
        if in_bw:
            bw_clock += step / (in_bw * comm_mult)
        now += step
        done = []
        while in_bandwidth and in_bandwidth[0][0] - bw_clock <= _DONE:
            done.append(heappop(in_bandwidth))
        while in_latency and in_latency[0][0] - lat_clock <= _EPS:
            _, number, i = heappop(in_latency)
            work = duration[i] - latency[i]
            if work <= _DONE:
                done.append((0.0, number, i))
            else:
                heappush(in_bandwidth, (bw_clock + work, number, i))
        if len(done) > 1:
            done.sort(key=_start_number)
        for _, _, i in done:
            n_active -= 1
            in_flight = in_flight - nbytes[i] if n_active else 0.0
            end[i] = now
            if kind[i] == RS and ag_of[i] >= 0:
                if pos < n_seg:
                    waiting_gathers.append(ag_of[i])
                else:
                    heappush(pending, (now, ag_of[i]))
    return np.asarray(start), np.asarray(end), float(backward_end)
