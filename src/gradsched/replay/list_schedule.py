"""The list schedules of one iteration's collectives, the kernels of the replay's
:func:`gradsched.replay.engine.comm_schedule` (its module docstring states the model): one
channel first come first served (vectorised), one channel with priorities and
all-gathers, and the general event loop with several channels sharing bandwidth,
interference, a fixed issue sequence and ByteScheduler's credit (Peng et al., SOSP 2019).
All times are relative to the start of backward."""

from __future__ import annotations

import heapq

import numpy as np

from gradsched.errors import ConfigError
from gradsched.replay.prep import AG, RS, PlanItems, TraceArrays

_EPS = 1e-15


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


def _items_by_release_position(items: PlanItems) -> dict[int, list[int]]:
    """Backward position -> the items (all but all-gathers) whose bucket's last gradient
    is produced there, in item order."""
    by_pos: dict[int, list[int]] = {}
    first_items = [i for i in range(items.n_per_iteration) if items.kind[i] != AG]
    for i in first_items:
        by_pos.setdefault(int(items.bucket_last_pos[items.bucket[i]]), []).append(i)
    return by_pos


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

    This is the replay's hot path (an event loop run for every plan the searches try),
    so it stays one function: the loop's state (clock, backward work left, the pending,
    ready and active sets, bytes in flight) lives in local variables, which Python reads
    much faster than attributes of a state object, and splitting the loop's phases into
    functions would add a call per phase per event. Only the setup is a function
    (:func:`_items_by_release_position`). Hence its McCabe complexity (21) is above the
    project's limit (``# noqa: C901``)."""
    n = items.n_per_iteration
    start, end = np.zeros(n), np.zeros(n)
    segments = arrays.backward_seq_s.tolist()
    n_seg = len(segments)
    by_pos = _items_by_release_position(items)
    pending: list[tuple[float, int]] = []
    ready: list[tuple[tuple[int, float, float, int], int]] = []
    active: dict[int, list[float]] = {}
    waiting_gathers: list[int] = []
    pos, left, now = 0, (segments[0] if n_seg else 0.0), 0.0
    next_seq, started = 0, 0
    expected = int(np.sum(items.kind != AG) + np.sum(items.ag_of >= 0))
    credit = np.inf if credit_bytes is None else float(credit_bytes)
    in_flight = 0.0
    backward_end = 0.0 if n_seg == 0 else np.inf

    def release_position(p: int) -> None:
        for i in by_pos.get(p, ()):
            b = items.bucket[i]
            elig = max(now + items.bucket_unpack_s[b], items.bucket_release_s[b])
            heapq.heappush(pending, (elig, i))

    while True:
        while pos < n_seg and left <= _EPS:  # finished (or empty) backward segments
            release_position(pos)
            pos += 1
            left = segments[pos] if pos < n_seg else 0.0
            if pos == n_seg:
                backward_end = now
                for j in waiting_gathers:
                    heapq.heappush(pending, (now, j))
                waiting_gathers.clear()
        while pending and pending[0][0] <= now + _EPS:
            elig, i = heapq.heappop(pending)
            if sequence is not None:
                heapq.heappush(ready, ((0, float(sequence[i]), elig, i), i))
            else:
                cls = 1 if items.kind[i] == AG else 0
                heapq.heappush(ready, ((cls, float(items.key_priority[i]), elig, i), i))
        while ready and len(active) < channels and in_flight < credit and (
                sequence is None or sequence[ready[0][1]] == next_seq):
            _, i = heapq.heappop(ready)
            next_seq += 1
            started += 1
            in_flight += float(items.nbytes[i])
            lat = float(items.latency_s[i])
            active[i] = [lat, float(items.duration_s[i]) - lat]
            start[i] = now
            if pos < n_seg:
                left += collective_cpu_s
        computing = pos < n_seg
        if not computing and not active and not pending:
            if started < expected:
                raise ConfigError(f"replay: {expected - started} collective(s) never started "
                                  "(the issue sequence waits for an item that never "
                                  "becomes eligible)")
            break
        comm_mult = comm_slowdown if computing else 1.0
        in_bw = sum(1 for st in active.values() if st[0] <= _EPS)
        compute_rate = 1.0 / compute_slowdown if in_bw else 1.0
        steps = [st[0] * comm_mult if st[0] > _EPS else st[1] * in_bw * comm_mult
                 for st in active.values()]
        if computing:
            steps.append(left / compute_rate)
        if pending and len(active) < channels:
            steps.append(pending[0][0] - now)
        step = max(min(steps), 0.0)
        if computing:
            left -= step * compute_rate
        for st in active.values():
            if st[0] > _EPS:
                st[0] -= step / comm_mult
            else:
                st[1] -= step / (in_bw * comm_mult)
        now += step
        for i in [i for i, st in active.items() if st[0] <= _EPS and st[1] <= 1e-12]:
            del active[i]
            in_flight = in_flight - float(items.nbytes[i]) if active else 0.0
            end[i] = now
            if items.kind[i] == RS and items.ag_of[i] >= 0:
                if pos < n_seg:
                    waiting_gathers.append(int(items.ag_of[i]))
                else:
                    heapq.heappush(pending, (now, int(items.ag_of[i])))
    return start, end, float(backward_end)
