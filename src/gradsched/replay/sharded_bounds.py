"""A lower bound on a sharded iteration that no :class:`~gradsched.plan_sharded.ShardedPlan`
beats in the replay of :mod:`gradsched.replay.sharded`, in either semantics.

It rests on the wire floor every comm model obeys (:mod:`gradsched.costmodel.wire`: an
all-gather or reduce-scatter of ``m`` bytes lasts at least ``s_c + m / (2 b)``, with ``b``
the model's sustained all-reduce bandwidth and ``s_c`` its start-up) and on three facts of
the replay:

1. **Compute.** Forward, backward and the sharded update (``U / P``) run one after another.
2. **First layer.** Whatever unit holds the first layer (forward order) must be
   all-gathered before any forward compute starts and reduce-scattered after the last
   backward compute (that layer's), before the update: at least
   ``s_ag + b_0 / (2 b)`` before and ``s_rs + b_0 / (2 b)`` after the compute, ``b_0``
   the first layer's bytes (any unit holding it has at least those).
3. **Wire.** Every byte is all-gathered at least once and reduce-scattered once on one
   channel: ``total / b`` plus one start-up of each, before the update.

The bound is ``max(C + first-layer terms, s_ag + s_rs + total / b + U / P)``.

With gradient accumulation (``k`` micro-batches per step, only the last reduce-scattering;
:mod:`gradsched.replay.sharded`) the compute is ``k (F + B) + U / P`` and, every unit
being resharded after each backward, every byte is all-gathered at least ``k`` times:
the wire term is ``k s_ag + s_rs + (k + 1) total / (2 b) + U / P``. A plan that keeps the
parameters unsharded between micro-batches (``keep_unsharded_between_microbatches``) may
all-gather every byte only once per step: its wire term is the one-micro-batch term,
``s_ag + s_rs + total / b + U / P``.

Under a mixed-precision policy (:mod:`gradsched.replay.sharded_dtypes`) the bytes each
collective moves replace ``total`` and ``b_0``: ``k`` times the all-gather bytes plus the
reduce-scatter bytes on the wire, the first layer's of each before and after the compute.
"""

from __future__ import annotations

import numpy as np

from gradsched.collective_dtypes import CollectiveDtypes
from gradsched.costmodel.base import CommModel
from gradsched.replay.sharded_dtypes import layer_bytes
from gradsched.traces.bundle import ComputeTrace
from gradsched.traces.layers import layer_seq


def sharded_lower_bound_s(trace: ComputeTrace, model: CommModel, world_size: int,
                          grad_accum: int = 1, keep_unsharded: bool = False,
                          mixed_precision: CollectiveDtypes | None = None) -> float:
    """The lower bound (seconds) of ``trace`` on ``world_size`` ranks under ``model``, per
    optimizer step of ``grad_accum`` micro-batches (module docstring; with one micro-batch
    the wire term is ``2 x total / (2 b)``, the same double as ``total / b``), for plans
    that keep the parameters unsharded between micro-batches when ``keep_unsharded``."""
    seq = layer_seq(trace)
    k = grad_accum
    gathers = 1 if keep_unsharded else k  # all-gathers of every byte per step, at least
    update = float(seq.update_s.sum()) / max(world_size, 1)
    compute = float(seq.forward_s.sum() + seq.backward_s.sum()) * k + update
    if world_size <= 1 or seq.n == 0:
        return compute
    rate = model.sustained_algbw_Bps(world_size)
    s_ag = model.startup_s("all_gather", world_size)
    s_rs = model.startup_s("reduce_scatter", world_size)
    if mixed_precision is not None and np.isfinite(rate):
        per_layer = layer_bytes(trace, seq, mixed_precision)
        first = float(per_layer.gather[0] + per_layer.reduce[0]) / (2.0 * rate)
        wire = (gathers * float(per_layer.gather.sum()) + float(per_layer.reduce.sum())) \
            / (2.0 * rate)
        return max(compute + s_ag + s_rs + first, gathers * s_ag + s_rs + wire + update)
    half = 0.0 if not np.isfinite(rate) else float(seq.nbytes[0]) / (2.0 * rate)
    wire = 0.0 if not np.isfinite(rate) else \
        (gathers + 1) * float(seq.nbytes.sum()) / (2.0 * rate)
    return max(compute + s_ag + s_rs + 2.0 * half, gathers * s_ag + s_rs + wire + update)
