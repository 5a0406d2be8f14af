"""The exact sharded optimum in streams semantics for units kept gathered after forward
(``reshard_after_forward=False``), forward prefetch depth 0 or 1, any backward depth, by a
dynamic program over blocks with Pareto labels.

It follows the replay of :func:`gradsched.replay.sharded.replay_layout` (FSDP2's hooks, as
in :mod:`gradsched.experiments.sharded.program`, whose notation and tables it shares). The
forward is the same sum over pairs of units as there. In backward no unit is gathered
again, so no compute waits and the backward prefetch depth changes nothing; each unit's
reduce-scatter is issued when its backward ends and queues on the channel. With units
``0..m-1`` in forward order the channel's lag behind the compute after unit ``j``'s backward
follows ``L_j = max(L_{j+1} - b_j, 0) + r_j`` (Lindley's recursion), and the iteration ends
at ``forward + B1 + sum(b) + max(B0, L_0) + rR``, then the update. Written from the last
unit to the first, ``L_0 = r_0 + H_1`` with ``H_j = max(0, r_j - b_{j-1} + H_{j+1})``.

The lag carries over any number of units, so no window of units fixes it. The program walks
from the last unit to the first with state the suffix's first unit and keeps, per state,
every label ``(F, H)`` (forward seconds of the suffix, its ``H``) that no other dominates:
the end is ``F + max(B0, r_0 + H)`` after maps that are monotone and 1-Lipschitz in ``H``,
so ``F1 <= F2`` and ``F1 + H1 <= F2 + H2`` dominates. Exact; the label sets are small in
practice but not bounded by a polynomial in general.

**Memory** (``G``, ``D``: gathered and unsharded-gradient bytes, as in
:mod:`gradsched.experiments.sharded.program`). Every unit stays gathered until its
backward, so at unit ``k``'s pre-backward the root's parameters and gradients, units
``0..k``'s parameters, unit ``k``'s gradients and those of later units still being
reduce-scattered are live: the peak lies between ``G_R + D_R + G_S + D_{m-1}`` (the last
unit's pre-backward: every unit gathered; ``G_S`` all units' gathered bytes) and
``G_R + D_R + G_S + D_S`` (every gradient too, which the grouping of one unit reaches).
The program is exact when the cap is below the first for every grouping (at least the
last block's gradients: nothing fits) or above the second (nothing binds);
:func:`kept_cap_decided` says whether.
"""

from __future__ import annotations

import math

import numpy as np

from gradsched.experiments.sharded.program import PAD, Tables


def kept_cap_decided(t: Tables, cap: float) -> bool:
    """Whether ``cap`` fits every grouping or none, for units kept gathered."""
    n_pad = t.ag.shape[0]
    last = n_pad - 1 - PAD
    base = t.root_bytes + t.root_grad + float(t.size[PAD, last])
    return cap >= base + float(t.grad[PAD, last]) or cap < base + float(t.grad[last - 1, last])


def kept_program(t: Tables, forward_depth: int, cap: float, units_weight: float
                 ) -> tuple[float, list[int]] | None:
    """The least ``F + max(B0, L_0)`` (plus ``units_weight`` per unit) over groupings and
    the grouping's exclusive block ends; None when the cap fits no grouping. Requires
    :func:`kept_cap_decided`."""
    n_pad = t.ag.shape[0]
    last = n_pad - 1 - PAD
    if cap < t.root_bytes + t.root_grad + float(t.size[PAD, last]) \
            + float(t.grad[last - 1, last]):
        return None
    labels: dict[tuple[int, int], tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = {}
    for b in range(last, PAD, -1):
        for a in range(PAD, b):
            labels[a, b] = _labels(t, labels, a, b, last, forward_depth, units_weight)
    best = (math.inf, 0, 0)
    for b in range(PAD + 1, last + 1):
        f, h, _, _ = labels[PAD, b]
        first = t.ag[PAD, b] if forward_depth == 1 else 0.0
        end = f + first + np.maximum(t.pre[1], t.rs[PAD, b] + h)
        i = int(np.argmin(end))
        if end[i] < best[0]:
            best = (float(end[i]), b, i)
    value, b, i = best
    ends, a = [], PAD
    while True:
        ends.append(b - PAD)
        _, _, nxt, at = labels[a, b]
        if nxt[i] < 0:
            break
        a, b, i = b, int(nxt[i]), int(at[i])
    return value, ends


def lag_step(t: Tables, a: int, b: int, c: int, h: np.ndarray) -> np.ndarray:
    """``H`` before unit ``[b, c)`` seen from unit ``[a, b)``: ``max(0, r_{j+1} - b_j + H)``
    with ``j = [a, b)``."""
    return np.maximum(0.0, t.rs[b, c] - t.bwd[a, b] + h)


def _labels(t: Tables, labels: dict, a: int, b: int, last: int, forward_depth: int,
            units_weight: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The undominated labels of the suffix whose first unit is ``[a, b)``: forward seconds,
    ``H`` after the unit, the next unit's end and the label there (-1: none)."""
    own = units_weight + (t.ag[a, b] + t.fwd[a, b] if forward_depth == 0 else 0.0)
    if b == last:
        f_last = t.fwd[a, b] if forward_depth == 1 else 0.0
        return (np.asarray([own + f_last]), np.zeros(1), np.full(1, -1), np.zeros(1, int))
    parts = []
    for c in range(b + 1, last + 1):
        f, h, _, _ = labels[b, c]
        pair = max(t.fwd[a, b], t.ag[b, c]) if forward_depth == 1 else 0.0
        parts.append((f + own + pair, lag_step(t, a, b, c, h),
                      np.full(f.size, c), np.arange(f.size)))
    f, h, nxt, at = (np.concatenate(x) for x in zip(*parts, strict=True))
    order = np.lexsort((f + h, f))
    f, h, nxt, at = f[order], h[order], nxt[order], at[order]
    reach = f + h
    keep = reach < np.minimum.accumulate(np.concatenate([[math.inf], reach[:-1]]))
    return f[keep], h[keep], nxt[keep], at[keep]
