"""The list schedules of one iteration's collectives, the kernels of the replay's
:func:`gradsched.replay.engine.comm_schedule` (its module docstring states the model): one
channel first come first served (vectorised), one channel with priorities and
all-gathers, and the general event loop with several channels sharing bandwidth,
interference, a fixed issue sequence and ByteScheduler's credit (Peng et al., SOSP 2019).
All times are relative to the start of backward."""

from __future__ import annotations

import heapq
import operator
from heapq import heappop as _heappop
from heapq import heappush as _heappush
from typing import NamedTuple

import numpy as np

from gradsched.errors import ConfigError
from gradsched.replay.prep import AG, RS, PlanItems, TraceArrays

_EPS = 1e-15
_INF = float("inf")
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


def release_sequence(items: PlanItems) -> tuple[list[int], list[int]]:
    """The items released by backward (all but all-gathers) as two lists, by the backward
    position of their bucket's last gradient (ascending; one stable sort) and in item order
    within one: the positions and the items. The event loop walks them with a cursor as
    backward passes the positions in turn (no dictionary of groups built per replay: on
    DeepSeek-V3's 45,000 per-tensor buckets that was most of a replay's set-up)."""
    released = np.flatnonzero(items.kind != AG)
    if released.size == 0:
        return [], []
    position = items.bucket_last_pos[items.bucket[released]]
    order = np.argsort(position, kind="stable")
    return position[order].tolist(), released[order].tolist()


def joint_schedule(items: PlanItems, arrays: TraceArrays, channels: int,
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

    One event of the loop is four steps of :class:`_JointSchedule`, each a method:
    :meth:`~_JointSchedule.release_gradients` (backward reaches a bucket's last gradient),
    :meth:`~_JointSchedule.admit_eligible` (eligible items queue by class and priority),
    :meth:`~_JointSchedule.start_ready` (free channels, credit and the issue sequence
    start them), :meth:`~_JointSchedule.advance` (every clock to the next event) and
    :meth:`~_JointSchedule.complete` (ended phases; a reduce-scatter's all-gather queues)."""
    state = _JointSchedule(items, arrays, channels, _Interference(
        compute_slowdown, comm_slowdown, collective_cpu_s), sequence, credit_bytes)
    release, admit, start, finished, advance, complete = (  # bound once: the hot path
        state.release_gradients, state.admit_eligible, state.start_ready, state.finished,
        state.advance, state.complete)
    if state.item_at is not None:  # a sequence of distinct positions: the heap holds them
        admit, start = state.admit_in_sequence, state.start_in_sequence
    # Most events only end a phase: a step is called only where its own first test lets it
    # act (the same tests, so the same schedule; the queues are the state's lists, read in
    # place). On GPT-3's advise at 1,024 ranks (1.31 million events), release and admit had
    # nothing to do at 1.26 and 1.27 million of them, start at 0.69 million.
    pending, ready, n_seg = state.pending, state.ready, state.n_seg
    while True:
        if state.pos < n_seg and state.left <= _EPS:
            release()
        if pending and pending[0][0] <= state.now + _EPS:
            admit()
        if ready and state.n_active < channels:
            start()
        if not pending and finished():
            break
        advance()
        complete()
    return np.asarray(state.start), np.asarray(state.end), float(state.backward_end)


class _Interference(NamedTuple):
    """The replay's interference factors (the engine's module docstring; 1, 1 and 0 s:
    none): backward's speed while a collective is in its bandwidth phase
    (1/compute_slowdown), the collectives' while backward computes (1/comm_slowdown), and
    the backward work each collective started during backward adds."""

    compute_slowdown: float
    comm_slowdown: float
    collective_cpu_s: float


class _JointSchedule:
    """The state of :func:`joint_schedule`'s event loop: the items' arrays as Python lists
    (the replay's hot path: no numpy scalar per access), backward's progress, the queues,
    and the two phase clocks with their heaps of end readings. Its methods are the loop's
    steps; each reads the attributes it uses into locals first (faster in CPython)."""

    __slots__ = ("ag_of", "backward_end", "bucket_of", "bw_clock", "channels",
                 "comm_slowdown", "credit", "done", "duration", "end", "expected",
                 "in_bandwidth", "in_flight", "in_latency", "inter", "item_at", "kind",
                 "lat_clock",
                 "latency", "left", "n_active", "n_seg", "nbytes", "next_seq", "now",
                 "order_key", "pending", "pos", "prio", "ready", "rel_item", "rel_next",
                 "rel_pos", "release", "segments",
                 "slowed_rate", "start", "started", "unpack", "waiting_gathers")

    def __init__(self, items: PlanItems, arrays: TraceArrays, channels: int,
                 inter: _Interference, sequence: np.ndarray | None,
                 credit_bytes: float | None) -> None:
        n = items.n_per_iteration
        self.start, self.end = [0.0] * n, [0.0] * n
        self.kind = items.kind.tolist()
        self.bucket_of = items.bucket.tolist()
        self.nbytes = items.nbytes.tolist()
        self.latency = items.latency_s.tolist()
        self.duration = items.duration_s.tolist()
        self.prio = items.key_priority.tolist()
        self.ag_of = items.ag_of.tolist()
        self.unpack = items.bucket_unpack_s.tolist()
        self.release = items.bucket_release_s.tolist()
        self.order_key = sequence.tolist() if sequence is not None else None
        # A sequence that numbers the items 0..n-1 (the executor's) orders the ready queue
        # by position alone (positions are distinct: the class, priority, eligibility and
        # item of the general key never break a tie), so the queue holds the positions,
        # plain ints compared in C, and item_at maps them back.
        self.item_at: list[int] | None = None
        if (sequence is not None and sequence.dtype.kind in "iu"
                and np.array_equal(np.sort(sequence), np.arange(n))):
            item_at = [0] * n
            for i, position in enumerate(self.order_key):
                item_at[position] = i
            self.item_at = item_at
        self.segments = arrays.backward_seq_s.tolist()
        self.n_seg = len(self.segments)
        self.rel_pos, self.rel_item = release_sequence(items)
        self.rel_next = 0  # the first entry of rel_pos/rel_item not yet released
        self.channels, self.inter = channels, inter
        self.slowed_rate = 1.0 / inter.compute_slowdown  # backward's, while one transfers
        self.comm_slowdown = inter.comm_slowdown  # read at every event: one attribute
        self.pending: list[tuple[float, int]] = []
        self.ready: list[tuple[int, float, float, int]] = []  # (class, priority, eligible, i)
        # latency phase: (latency clock at its end, start number, item); the clock runs at
        # 1/comm_mult of real time, the same for every item in this phase
        self.in_latency: list[tuple[float, int, int]] = []
        # bandwidth phase: (bandwidth clock at its end, start number, item); the clock runs
        # at 1/(in_bw * comm_mult): every item in this phase shares the bandwidth equally
        self.in_bandwidth: list[tuple[float, int, int]] = []
        self.done: list[tuple[float, int, int]] = []  # ended at the last event
        self.lat_clock = self.bw_clock = 0.0
        self.n_active = 0
        self.waiting_gathers: list[int] = []
        self.pos, self.now = 0, 0.0
        self.left = self.segments[0] if self.n_seg else 0.0
        self.next_seq, self.started = 0, 0
        self.expected = (sum(1 for k in self.kind if k != AG)
                         + sum(1 for j in self.ag_of if j >= 0))
        self.credit = np.inf if credit_bytes is None else float(credit_bytes)
        self.in_flight = 0.0
        self.backward_end = 0.0 if self.n_seg == 0 else np.inf

    def release_gradients(self) -> None:
        """Backward passes the segments it has finished: the items of every bucket whose
        last gradient was produced there become eligible after the bucket's unpack time
        and not before its release time (DDP's bucket ready); when backward ends, the
        all-gathers held back until then (FSDP re-gathers after backward) become
        eligible."""
        pos, n_seg, left, now = self.pos, self.n_seg, self.left, self.now
        if pos >= n_seg or left > _EPS:
            return
        rel_pos, rel_item, k = self.rel_pos, self.rel_item, self.rel_next
        n_rel = len(rel_pos)
        bucket_of, pending = self.bucket_of, self.pending
        unpack, release, segments = self.unpack, self.release, self.segments
        while pos < n_seg and left <= _EPS:
            while k < n_rel and rel_pos[k] == pos:  # positions ascend; none is skipped
                i = rel_item[k]
                b = bucket_of[i]
                _heappush(pending, (max(now + unpack[b], release[b]), i))
                k += 1
            pos += 1
            left = segments[pos] if pos < n_seg else 0.0
            if pos == n_seg:
                self.backward_end = now
                for j in self.waiting_gathers:
                    _heappush(pending, (now, j))
                self.waiting_gathers.clear()
        self.pos, self.left, self.rel_next = pos, left, k

    def admit_eligible(self) -> None:
        """Eligible items join the ready queue: by issue position with a sequence, else
        all-reduces and reduce-scatters before all-gathers, then by priority."""
        pending, limit = self.pending, self.now + _EPS
        if not pending or pending[0][0] > limit:
            return
        ready, order_key, kind, prio = self.ready, self.order_key, self.kind, self.prio
        while pending and pending[0][0] <= limit:
            elig, i = _heappop(pending)
            if order_key is not None:
                _heappush(ready, (0, float(order_key[i]), elig, i))
            else:
                _heappush(ready, (1 if kind[i] == AG else 0, prio[i], elig, i))

    def admit_in_sequence(self) -> None:
        """:meth:`admit_eligible` with the item's position as its whole key (the sequence
        numbers the items 0..n-1)."""
        pending, limit = self.pending, self.now + _EPS
        if not pending or pending[0][0] > limit:
            return
        ready, order_key = self.ready, self.order_key
        while pending and pending[0][0] <= limit:
            _heappush(ready, order_key[_heappop(pending)[1]])

    def start_ready(self) -> None:
        """Start the most urgent ready items while a channel is free, fewer than the
        credit's bytes are in flight (ByteScheduler, Peng et al., SOSP 2019) and, with a
        sequence, the item is the next in it; each starts in its latency phase (or its
        bandwidth phase, without latency) and, during backward, adds the collective's CPU
        cost to the backward work left."""
        ready, order_key = self.ready, self.order_key
        channels, credit = self.channels, self.credit
        n_active, in_flight = self.n_active, self.in_flight
        if not ready or n_active >= channels or in_flight >= credit:
            return
        nbytes, latency, duration, start = self.nbytes, self.latency, self.duration, self.start
        in_latency, in_bandwidth = self.in_latency, self.in_bandwidth
        lat_clock, bw_clock, now = self.lat_clock, self.bw_clock, self.now
        next_seq, started = self.next_seq, self.started
        while ready and n_active < channels and in_flight < credit and (
                order_key is None or order_key[ready[0][3]] == next_seq):
            i = _heappop(ready)[3]
            next_seq += 1
            number = started
            started += 1
            n_active += 1
            in_flight += nbytes[i]
            lat = latency[i]
            if lat > _EPS:
                _heappush(in_latency, (lat_clock + lat, number, i))
            else:
                _heappush(in_bandwidth, (bw_clock + (duration[i] - lat), number, i))
            start[i] = now
        self._record_starts(started, n_active, in_flight, next_seq)

    def _record_starts(self, started: int, n_active: int, in_flight: float,
                       next_seq: int) -> None:
        """Store what a start loop changed; during backward, each new start's CPU cost is
        added in start order (the interference model's ``collective_cpu_s``)."""
        if self.pos < self.n_seg:
            cpu_s, left = self.inter.collective_cpu_s, self.left
            for _ in range(started - self.started):
                left += cpu_s
            self.left = left
        self.n_active, self.in_flight = n_active, in_flight
        self.next_seq, self.started = next_seq, started

    def start_in_sequence(self) -> None:
        """:meth:`start_ready` where the ready queue holds positions
        (:meth:`admit_in_sequence`): the next position starts while it is ready, a channel
        free and the credit not reached."""
        ready, item_at = self.ready, self.item_at
        channels, credit = self.channels, self.credit
        n_active, in_flight = self.n_active, self.in_flight
        next_seq = self.next_seq
        if not ready or n_active >= channels or in_flight >= credit or ready[0] != next_seq:
            return
        nbytes, latency, duration, start = self.nbytes, self.latency, self.duration, self.start
        in_latency, in_bandwidth = self.in_latency, self.in_bandwidth
        lat_clock, bw_clock, now = self.lat_clock, self.bw_clock, self.now
        started = self.started
        while ready and n_active < channels and in_flight < credit and ready[0] == next_seq:
            i = item_at[_heappop(ready)]
            next_seq += 1
            number = started
            started += 1
            n_active += 1
            in_flight += nbytes[i]
            lat = latency[i]
            if lat > _EPS:
                _heappush(in_latency, (lat_clock + lat, number, i))
            else:
                _heappush(in_bandwidth, (bw_clock + (duration[i] - lat), number, i))
            start[i] = now
        self._record_starts(started, n_active, in_flight, next_seq)

    def finished(self) -> bool:
        """Backward is over and no collective is active or pending; refused when an item
        never started (a sequence waiting for an item that never becomes eligible)."""
        if self.pos < self.n_seg or self.n_active or self.pending:
            return False
        if self.started < self.expected:
            raise ConfigError(f"replay: {self.expected - self.started} collective(s) never "
                              "started (the issue sequence waits for an item that never "
                              "becomes eligible)")
        return True

    def advance(self) -> None:
        """Move time, backward's work left and both phase clocks to the next event: the
        first latency or bandwidth phase to end, backward's end, or the next pending item's
        eligibility while a channel is free (comparisons, not min(): the same values, no
        call per event)."""
        computing = self.pos < self.n_seg
        comm_mult = self.comm_slowdown if computing else 1.0
        in_latency, in_bandwidth = self.in_latency, self.in_bandwidth
        lat_clock, bw_clock, left = self.lat_clock, self.bw_clock, self.left
        in_bw = len(in_bandwidth)
        compute_rate = self.slowed_rate if in_bw else 1.0
        step = _INF
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
        pending = self.pending
        if pending and self.n_active < self.channels:
            until = pending[0][0] - self.now
            if until < step:
                step = until
        if step < 0.0:
            step = 0.0
        if computing:
            self.left = left - step * compute_rate
        self.lat_clock = lat_clock + step / comm_mult
        if in_bw:
            self.bw_clock = bw_clock + step / (in_bw * comm_mult)
        self.now += step

    def complete(self) -> None:
        """End the phases that ended at this event: a latency phase moves its collective
        to the bandwidth phase (or ends it, without bandwidth work); a finished collective
        frees its channel and credit (in start order) and, for a reduce-scatter, queues
        its all-gather (held back until backward ends)."""
        in_bandwidth, in_latency = self.in_bandwidth, self.in_latency
        bw_clock, lat_clock = self.bw_clock, self.lat_clock
        done = self.done
        done.clear()
        while in_bandwidth and in_bandwidth[0][0] - bw_clock <= _DONE:
            done.append(_heappop(in_bandwidth))
        duration, latency = self.duration, self.latency
        while in_latency and in_latency[0][0] - lat_clock <= _EPS:
            _, number, i = _heappop(in_latency)
            work = duration[i] - latency[i]
            if work <= _DONE:
                done.append((0.0, number, i))
            else:
                _heappush(in_bandwidth, (bw_clock + work, number, i))
        if not done:
            return
        if len(done) > 1:
            done.sort(key=_start_number)
        nbytes, kind, ag_of, now, end = self.nbytes, self.kind, self.ag_of, self.now, self.end
        backward = self.pos < self.n_seg
        n_active, in_flight = self.n_active, self.in_flight
        for _, _, i in done:
            n_active -= 1
            in_flight = in_flight - nbytes[i] if n_active else 0.0
            end[i] = now
            if kind[i] == RS and ag_of[i] >= 0:
                if backward:
                    self.waiting_gathers.append(ag_of[i])
                else:
                    _heappush(self.pending, (now, ag_of[i]))
        self.n_active, self.in_flight = n_active, in_flight
