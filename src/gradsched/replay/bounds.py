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

The bound is ``max(F + B + U, max_j [max(D_j, B) + F_j.. + U_j..])`` (``F``, ``U``:
forward and update times; ``F_j..``: from layer ``j`` on); its ``j = L - 1``, ``t = r_first``
term contains the pure bandwidth bound ``r_first + s_min + total / b``. The part above
the compute time is reported as ``tail_s``.

Property tests (``tests/replay/test_bounds.py``) replay random plans of every shape on random
traces with random ready orders under every model kind and find no plan below it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gradsched.costmodel.base import PLAN_COLLECTIVES, CommModel
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

    @property
    def lower_bound_s(self) -> float:
        return max(self.compute_s + self.tail_s,
                   self.first_ready_s + self.startup_s + self.bandwidth_s)


MAX_CELLS = 4_000_000
"""Largest (ready times x layers) table evaluated; beyond it both axes are thinned, which
keeps the bound valid (a maximum over fewer valid terms) and only looser."""


def _thin(n: int, keep: int) -> np.ndarray:
    """Indices of at most ``keep`` of ``range(n)``, the last always included."""
    if n <= keep:
        return np.arange(n)
    return np.unique(np.concatenate([np.linspace(0, n - 1, keep).astype(np.int64), [n - 1]]))


def delivery_s(a: TraceArrays, rate_Bps: float, startup_s: float) -> np.ndarray:
    """Per layer ``j`` (forward order): the earliest time, from the start of backward, by
    which every gradient byte of layers ``0..j`` can have been communicated (facts 1-2):
    ``max_t [t + s_min + bytes of layers <= j ready at or after t / b]`` over the ready
    times ``t``; ``-inf`` for a prefix without bytes."""
    n_layers = a.layer_forward_s.size
    times = np.unique(a.ready_s)
    times = times[_thin(times.size, max(1, MAX_CELLS // max(n_layers, 1)))]
    row = np.searchsorted(times, a.ready_s, side="right") - 1  # last kept t <= r_i
    table = np.zeros((times.size, n_layers))
    np.add.at(table, (row, a.layer_of), a.nbytes)
    ready_at_or_after = np.cumsum(table[::-1], axis=0)[::-1]
    prefix = np.cumsum(ready_at_or_after, axis=1)  # [t, j]: layers <= j, ready >= t
    finish = times[:, None] + startup_s + prefix / rate_Bps
    return np.max(np.where(prefix > 0, finish, -np.inf), axis=0)


def lower_bound(trace: ComputeTrace, model: CommModel, world_size: int) -> LowerBound:
    """The lower bound of ``trace`` on ``world_size`` ranks under ``model``."""
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
