"""A lower bound on the iteration time that no plan in the replay's model can beat.

Two facts hold for every plan (all-reduce or reduce-scatter + all-gather, any bucketing,
chunking, priorities or channels, global or per-layer update):

1. Compute is serial: period >= forward + backward + update (``compute_s``), and the
   gradient that becomes ready last (the input-side layer's) must be communicated after
   backward ends and before that layer's next forward: period >= compute_s + tail_s.
2. The communication of one iteration cannot start before the first gradient is ready
   and must move every byte: period >= first_ready_s + bandwidth_s.

Bandwidth-only times use the model's peak all-reduce bandwidth without start-up,
``max_m m / (T(m) - T_startup)`` over message sizes up to the total (a fine grid plus every
tensor size), so ``m / peak`` never exceeds the bandwidth part of any collective the plan
may use, even when several channels overlap their start-ups (reduce-scatter + all-gather
of m bytes is costed as one all-reduce of m bytes by the models' derivation). This is the
bound: max(compute-only iteration + unavoidable tail, bandwidth-only time of all bytes
after the first gradient is ready).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gradsched.costmodel.base import CommModel
from gradsched.replay.prep import trace_arrays
from gradsched.traces.bundle import ComputeTrace


@dataclass(frozen=True)
class LowerBound:
    """The parts of the bound (seconds) and the peak bandwidth used (bytes/s)."""

    compute_s: float
    first_ready_s: float
    bandwidth_s: float
    tail_s: float
    peak_algbw_Bps: float

    @property
    def lower_bound_s(self) -> float:
        return max(self.compute_s + self.tail_s, self.first_ready_s + self.bandwidth_s)


def peak_algbw(model: CommModel, world_size: int, sizes: np.ndarray) -> float:
    """Largest bytes/second the bandwidth part of an all-reduce reaches on ``sizes``
    (and a geometric grid up to their largest); ``inf`` for a model without a
    bandwidth term."""
    top = max(float(np.max(sizes)), 1.0)
    grid = np.unique(np.concatenate([np.geomspace(1.0, top, 1024), sizes, [top]]))
    work = model.times("all_reduce", grid, world_size) - model.startup_s("all_reduce",
                                                                        world_size)
    with np.errstate(divide="ignore"):
        rates = np.where(work > 0, grid / np.maximum(work, 1e-300), np.inf)
    return float(np.max(rates))


def lower_bound(trace: ComputeTrace, model: CommModel, world_size: int) -> LowerBound:
    """The lower bound of ``trace`` on ``world_size`` ranks under ``model``."""
    a = trace_arrays(trace)
    compute = a.forward_s + a.backward_s + a.update_s
    total = float(a.nbytes.sum())
    if world_size == 1 or total == 0:
        return LowerBound(compute, 0.0, 0.0, 0.0, float("inf"))
    peak = peak_algbw(model, world_size, np.concatenate([a.nbytes, [total]]))
    last = int(np.argmax(a.ready_s))
    return LowerBound(
        compute_s=compute,
        first_ready_s=float(a.ready_s.min()),
        bandwidth_s=total / peak,
        tail_s=float(a.nbytes[last]) / peak,
        peak_algbw_Bps=peak,
    )
