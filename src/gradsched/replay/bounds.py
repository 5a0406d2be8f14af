"""A lower bound on the iteration time that no plan in the replay's model can beat.

It holds for every plan the replay runs (all-reduce or reduce-scatter + all-gather, any
bucketing, chunking, priorities, channels or release times, global or per-layer update)
and for any ready order of the gradients, because it rests on three facts of the replay's
model only:

1. **Wire.** Every model obeys the wire floor of :mod:`gradsched.costmodel.wire`: the
   bandwidth phase of a collective ``c`` of ``m`` bytes lasts at least ``f_c * m / b``
   (``b``: the model's sustained all-reduce bandwidth, ``f_c``: 1 for all-reduce, 1/2 for
   reduce-scatter and all-gather), concurrent collectives share that bandwidth, and a
   collective's bandwidth phase starts a start-up ``s >= s_min`` after it is launched. So
   each gradient byte costs ``1 / b`` seconds of wire time, whatever the plan.
2. **Readiness.** A byte cannot move before its gradient is ready (``r_i``, measured from
   the start of backward) and a start-up later, so the bytes of any set of gradients ready
   at or after ``t`` are all delivered no earlier than ``t + s_min + bytes / b``, in any
   ready order.
3. **Deadlines.** A layer's gradient must arrive before that layer's next forward, and the
   forward runs layer after layer: the forward of layer ``j`` (forward order) starts only
   once every gradient of layers ``0..j`` is delivered, at
   ``D_j = max_t [t + s_min + (bytes of layers <= j ready at or after t) / b]`` or later,
   and not before backward ends (``B``); layers ``j..L-1`` (forward and update) follow.
   A global update waits for every byte, which is never earlier, so the per-layer case
   covers both update modes.

With gradient accumulation (``k`` micro-batches per step, :mod:`gradsched.replay.engine`)
the ``k - 1`` micro-batches without communication come before the last one's forward in
every plan and nothing can overlap them (no gradient is final), so the bound of a step is
the bound above plus ``(k - 1) x (F + B)`` (``accumulation_s``).

The bound is ``max(F + B + U, max_j [max(D_j, B) + F_j.. + U_j..])`` (``F``, ``U``:
forward and update times; ``F_j..``: from layer ``j`` on); its ``j = L - 1``, ``t = r_first``
term contains the pure bandwidth bound ``r_first + s_min + total / b``. The part above
the compute time is reported as ``tail_s``.

Property tests (``tests/replay/test_bounds.py``) replay random plans of every shape on random
traces with random ready orders under every model kind and find no plan below it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from gradsched.costmodel.base import PLAN_COLLECTIVES, CommModel
from gradsched.replay.prefix_tree import PrefixAddMaxTree, SuffixSums
from gradsched.replay.prep import TraceArrays, trace_arrays
from gradsched.traces.bundle import ComputeTrace


@dataclass(frozen=True)
class LowerBound:
    """The parts of the bound (seconds) and the sustained bandwidth used (bytes/s)."""

    compute_s: float
    first_ready_s: float
    bandwidth_s: float
    tail_s: float
    sustained_algbw_Bps: float
    startup_s: float = 0.0
    accumulation_s: float = 0.0
    """The communication-free micro-batches of gradient accumulation (0 without)."""

    @property
    def lower_bound_s(self) -> float:
        one = max(self.compute_s + self.tail_s,
                  self.first_ready_s + self.startup_s + self.bandwidth_s)
        return one + self.accumulation_s if self.accumulation_s else one


def delivery_s(a: TraceArrays, rate_Bps: float, startup_s: float) -> np.ndarray:
    """Per layer ``j`` (forward order): the earliest time, from the start of backward, by
    which every gradient byte of layers ``0..j`` can have been communicated (facts 1-2):
    ``D_j = max_t [t + s_min + bytes of layers <= j ready at or after t / b]``; ``-inf`` for
    a prefix without bytes.

    The maximum is over the ready times ``t`` of the bytes taken so far (between two of
    them the bytes are constant and a later ``t`` is larger). Layers are taken in forward
    order, each layer's gradients latest-ready first; a gradient ready at ``r`` adds its
    bytes to the candidates ``t <= r``. When every gradient is ready no later than those
    taken before it (backprop's usual order), the candidates it adds to hold every byte
    taken and the best of them is ``t = r``: a running maximum, in ``O(N)``
    (:func:`_delivery_in_ready_order`). Otherwise a segment tree of prefix additions and
    maxima gives every ``D_j`` in ``O(N log N)`` (:func:`_delivery_any_order`). Both price
    the winning candidate from exact byte sums, as the definition does."""
    times, slot_of = np.unique(a.ready_s, return_inverse=True)
    order = np.lexsort((-slot_of, a.layer_of))  # by layer, latest-ready first
    order = order[a.nbytes[order] > 0]
    slots = slot_of[order]
    if np.all(np.diff(slots) <= 0):
        return _delivery_in_ready_order(a, order, times[slots], rate_Bps, startup_s)
    return _delivery_any_order(a, order, times, slots, rate_Bps, startup_s)


def _layer_ends(a: TraceArrays, order: np.ndarray) -> np.ndarray:
    """Per layer, the position in ``order`` of its last gradient (``-1``: none yet)."""
    ends = np.full(a.layer_forward_s.size, -1)
    ends[a.layer_of[order]] = np.arange(order.size)
    return np.maximum.accumulate(ends)


def _delivery_in_ready_order(a: TraceArrays, order: np.ndarray, ready: np.ndarray,
                             rate_Bps: float, startup_s: float) -> np.ndarray:
    """:func:`delivery_s` when ``order`` never takes a gradient ready after one taken
    before it: ``D`` after each gradient is the running maximum of ``r + s + bytes / b``."""
    running = np.maximum.accumulate(ready + startup_s + np.cumsum(a.nbytes[order]) / rate_Bps)
    ends = _layer_ends(a, order)
    return np.where(ends >= 0, running[np.maximum(ends, 0)] if running.size else 0, -np.inf)


def _delivery_any_order(a: TraceArrays, order: np.ndarray, times: np.ndarray,
                        slots: np.ndarray, rate_Bps: float, startup_s: float) -> np.ndarray:
    """:func:`delivery_s` for any order, by a segment tree over the sorted ready times."""
    tree, taken = PrefixAddMaxTree(times.size), SuffixSums(times.size)
    after = np.full(order.size, -np.inf)
    filled = -1
    for n, (i, slot) in enumerate(zip(order.tolist(), slots.tolist(), strict=True)):
        w = float(a.nbytes[i])
        while filled < slot:  # candidates t <= r now hold bytes: they count
            filled += 1
            tree.fill(filled, float(times[filled]) + startup_s)
        tree.add_prefix(slot, w / rate_Bps)
        taken.add(slot, w)
        k = tree.argmax()
        after[n] = times[k] + startup_s + taken.from_slot(k) / rate_Bps
    ends = _layer_ends(a, order)
    return np.where(ends >= 0, after[np.maximum(ends, 0)] if after.size else 0, -np.inf)


def lower_bound(trace: ComputeTrace, model: CommModel, world_size: int,
                grad_accum: int = 1) -> LowerBound:
    """The lower bound of ``trace`` on ``world_size`` ranks under ``model``, per optimizer
    step of ``grad_accum`` micro-batches (module docstring)."""
    bound = _one_micro_batch(trace, model, world_size)
    if grad_accum == 1:
        return bound
    a = trace_arrays(trace)
    return replace(bound, accumulation_s=(grad_accum - 1) * (a.forward_s + a.backward_s))


def _one_micro_batch(trace: ComputeTrace, model: CommModel, world_size: int) -> LowerBound:
    a = trace_arrays(trace)
    compute = a.forward_s + a.backward_s + a.update_s
    total = float(a.nbytes.sum())
    if world_size == 1 or total == 0:
        return LowerBound(compute, 0.0, 0.0, 0.0, float("inf"))
    rate = model.sustained_algbw_Bps(world_size)
    startup = min(model.startup_s(c, world_size) for c in PLAN_COLLECTIVES)
    first = float(a.ready_s.min())
    if not np.isfinite(rate):  # a model without a bandwidth term: start-ups only
        return LowerBound(compute, first, 0.0, 0.0, rate, startup)
    suffix = np.cumsum((a.layer_forward_s + a.layer_update_s)[::-1])[::-1]  # F_j.. + U_j..
    forward_ends = np.maximum(delivery_s(a, rate, startup), a.backward_s) + suffix
    period = max(compute, float(np.max(forward_ends)))
    return LowerBound(
        compute_s=compute,
        first_ready_s=first,
        bandwidth_s=total / rate,
        tail_s=period - compute,
        sustained_algbw_Bps=rate,
        startup_s=startup,
    )
