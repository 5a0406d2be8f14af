"""The exact sharded optimum in blocking semantics (FSDP2 on gloo), with or without a cap
on the gathered parameters and gradients in flight, by dynamic programming over blocks.

**Time.** The host waits for every collective, so the replay's iteration
(:func:`gradsched.replay.sharded.replay_layout`, ``blocking=True``) is the compute plus the
sum of every collective's time, whatever the prefetch depths: a unit of blocks ``a..b``
costs ``c(a, b)`` = its all-gather (twice if resharded after forward) and its
reduce-scatter. The grouping minimising the sum is ``f(i) = min_j f(j) + c(j, i - 1)``.
Prefetch depths are the smallest FSDP2 runs (forward 0, backward 1): no cost in time, the
smallest memory peak.

**Memory** (the replay's model, module docstring of :mod:`gradsched.replay.sharded`),
reached in the backward pass. Under a mixed-precision policy a unit's gathered parameters
and its unsharded gradients have different sizes (:mod:`gradsched.experiments.sharded.dtypes`):
``G_k`` unit ``k``'s gathered bytes (its all-gather's), ``D_k`` its gradients', ``G_R``,
``D_R`` the root's, ``G_{<=k}`` units ``0..k``'s gathered bytes; without a policy
``G = D = U``, the trace's bytes. Depths 0/1:

* resharded after forward: at unit ``k``'s pre-backward the root's parameters and
  gradients, unit ``k``'s parameters and gradients and unit ``k-1``'s prefetched
  parameters are live (the later units' gradients were reduce-scattered, and waited for):
  ``peak = G_R + D_R + max_k (G_k + D_k + G_{k-1})`` (``G_{-1} = 0``; the forward's
  ``G_R + G_k`` is smaller). A constraint on adjacent units: the program's state is the
  last unit (``a``, ``b``), ``O(n^3)``.
* kept after forward: every unit's parameters stay gathered until its own backward ends,
  so at unit ``k``'s pre-backward ``G_R + D_R + G_{<=k} + D_k`` (``peak`` the largest over
  ``k``; the forward's ``G_R + G_{<=m-1}`` is smaller). A constraint on each unit alone,
  given where it ends.

Times: every all-gather priced on its gather bytes, every reduce-scatter on its reduce
bytes (:func:`gradsched.experiments.sharded.common.range_times`).

Ties: fewer units, then the smaller peak. The chosen plan is replayed and its replayed peak
checked against the cap, so a disagreement between these formulas and the replay is an
error, never a plan over the cap.
"""

from __future__ import annotations

import math

import numpy as np

from gradsched.experiments.sharded.common import (
    ShardedProblem,
    no_fit,
    range_bytes,
    range_times,
)
from gradsched.plan_sharded import ShardedPlan
from gradsched.planners.sharded import merge_blocks, units_from_ranges
from gradsched.replay.sharded import ShardedReplay, replay_sharded
from gradsched.replay.sharded_dtypes import LayerBytes
from gradsched.ties import better

Value = tuple[float, int, float]  # (seconds, units, peak bytes) of a prefix
INF: Value = (math.inf, 0, math.inf)


class Sizes:
    """Per run of blocks ``a..b``: gathered bytes ``gather[a, b]`` and gradient bytes
    ``grad[a, b]`` (one array without a policy); the root's ``root`` (gathered plus
    gradients)."""

    def __init__(self, per_layer: LayerBytes, blocks: list[tuple[int, int]]) -> None:
        self.gather = range_bytes(per_layer.gather, blocks)
        self.grad = self.gather if per_layer.grad is per_layer.gather else \
            range_bytes(per_layer.grad, blocks)
        root_gather = float(per_layer.gather.sum()) - float(self.gather[0, -1])
        root_grad = root_gather if per_layer.grad is per_layer.gather else \
            float(per_layer.grad.sum()) - float(self.grad[0, -1])
        self.root = root_gather + root_grad


def blocking_optimum(problem: ShardedProblem, algorithm: str
                     ) -> tuple[ShardedPlan, ShardedReplay]:
    """The optimum of the module docstring and its replay (which checks the peak), for
    ``problem``'s blocks, model, world size and cap (one micro-batch, blocking semantics,
    whatever the problem's); ``ConfigError`` naming the smallest peak when no grouping fits
    the cap."""
    seq, blocks, world_size = problem.seq, problem.blocks, problem.world_size
    memory_cap_bytes, max_prefetch = problem.memory_cap_bytes, problem.max_prefetch
    ag, rs = range_times(blocks, problem.sizes, problem.model, world_size)
    size = Sizes(problem.sizes, blocks)
    cap = math.inf if memory_cap_bytes is None else float(memory_cap_bytes)
    best: tuple[Value, list[tuple[int, int]], bool] | None = None
    for reshard in (True, False):
        cost = ag * (2 if reshard else 1) + rs
        program = _resharded if reshard else _kept
        value, ends = program(cost, size, cap)
        if ends and (best is None or better(value, best[0])):
            best = (value, merge_blocks(blocks, np.asarray(ends, dtype=np.int64)), reshard)
    if best is None:
        smallest = min(_resharded(ag, size, math.inf, peak_only=True)[0][0],
                       _kept(ag, size, math.inf, peak_only=True)[0][0])
        raise no_fit(cap, smallest)
    (_, _, peak), ranges, reshard = best
    plan = ShardedPlan(algorithm=algorithm, units=units_from_ranges(seq, ranges, reshard),
                       forward_prefetch=0, backward_prefetch=1,
                       knobs={"memory_cap_bytes": memory_cap_bytes,
                              "max_prefetch": max_prefetch, "semantics": "blocking"},
                       info={"method": "dynamic program (blocking semantics)"},
                       mixed_precision=problem.mixed_precision)
    replayed = replay_sharded(problem.trace, plan, problem.model, world_size,
                              semantics="blocking")
    if not np.isclose(replayed.gathered_peak_bytes, peak) or replayed.gathered_peak_bytes > cap:
        raise RuntimeError(f"internal: the blocking optimum's peak {peak:.6g} bytes disagrees "
                          f"with its replay ({replayed.gathered_peak_bytes:.6g} bytes)")
    return plan, replayed


def _resharded(cost: np.ndarray, size: Sizes, cap: float, *,
               peak_only: bool = False) -> tuple[Value, list[int]]:
    """Units resharded after forward: state (a, b) = the last unit is blocks a..b.
    ``peak_only``: minimise the peak alone (for the error message), as (peak, 0, peak)."""
    n = size.gather.shape[0]
    value: dict[tuple[int, int], Value] = {}
    back: dict[tuple[int, int], tuple[int, int] | None] = {}
    for b in range(n):
        for a in range(b + 1):
            here = size.gather[a, b] + size.grad[a, b]
            if a == 0:
                cands = [(None, 0.0, 0.0, 0)]
            else:
                cands = [((h, a - 1), *value[h, a - 1][::2], value[h, a - 1][1])
                         for h in range(a) if value[h, a - 1] != INF]
            best, link = INF, None
            for prev, sec, peak, units in cands:
                term = size.root + here + (size.gather[prev] if prev is not None else 0.0)
                if term > cap:
                    continue
                total = max(peak, term)
                cand = (total, 0, total) if peak_only else \
                    (sec + float(cost[a, b]), units + 1, total)
                if better(cand, best):
                    best, link = cand, prev
            value[a, b], back[a, b] = best, link
    last = (INF, 0)
    for a in range(n):
        if better(value[a, n - 1], last[0]):
            last = (value[a, n - 1], a)
    if last[0] == INF:
        return INF, []
    ends, state = [], (last[1], n - 1)
    while state is not None:
        ends.append(state[1] + 1)
        state = back[state]
    return last[0], ends[::-1]


def _kept(cost: np.ndarray, size: Sizes, cap: float, *,
          peak_only: bool = False) -> tuple[Value, list[int]]:
    """Units kept gathered after forward: state i = the first i blocks grouped."""
    n = size.gather.shape[0]
    total_units = float(size.gather[0, -1])
    value: list[Value] = [(0.0, 0, 0.0)] + [INF] * n
    back = [0] * (n + 1)
    for i in range(1, n + 1):
        after = total_units - float(size.gather[0, i - 1])  # the blocks after this unit
        for j in range(i):
            if value[j] == INF:
                continue
            term = size.root + total_units - after + float(size.grad[j, i - 1])
            if term > cap:
                continue
            total = max(value[j][2], term)
            cand = (total, 0, total) if peak_only else \
                (value[j][0] + float(cost[j, i - 1]), value[j][1] + 1, total)
            if better(cand, value[i]):
                value[i], back[i] = cand, j
    if value[n] == INF:
        return INF, []
    ends, i = [], n
    while i > 0:
        ends.append(i)
        i = back[i]
    return value[n], ends[::-1]
