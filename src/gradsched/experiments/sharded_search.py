"""The sharded layout for models with more blocks than the exhaustive optimum enumerates
(:data:`gradsched.experiments.sharded.MAX_GROUPINGS`): the best of a search, said to be one,
with the sharded lower bound beside it.

No polynomial algorithm is known here for the streams semantics: a unit's all-gather can
overlap the compute of units before it and its reduce-scatter queues behind later
all-gathers on the one channel, so a grouping's time is not a sum over its units (blocking
semantics is, and :mod:`gradsched.experiments.sharded_blocking` solves it exactly). So:

1. **Seeds**, each under every setting (resharding, forward and backward prefetch depth):
   one unit per block (FSDP2's default), ``k`` blocks per unit for every ``k``, and the
   blocking program's optimal groupings (resharded and kept), which minimise the
   collectives' total time.
2. **Local search** from the best seed with its setting fixed: move one unit boundary by a
   block, merge two neighbouring units, or split a unit in two; take the best move of a
   pass while one improves (:func:`gradsched.experiments.sharded_blocking.better`), within
   :data:`EVALUATIONS` replays.
3. The best grouping again under every setting.

Every candidate respects the memory cap. The plan's ``info`` records the method, the number
of replays, the lower bound (:func:`gradsched.replay.sharded_bounds.sharded_lower_bound_s`)
and the gap to it: the distance to the true optimum is at most that gap.
"""

from __future__ import annotations

import numpy as np

from gradsched.costmodel.base import CommModel
from gradsched.errors import ConfigError
from gradsched.experiments.grid import gap_to_bound_pct
from gradsched.experiments.sharded_blocking import better, blocking_optimum, no_fit
from gradsched.experiments.sharded_candidates import (
    Key,
    LayoutScorer,
    Setting,
    accum_knob,
    block_level,
    settings,
)
from gradsched.plan_sharded import ShardedPlan
from gradsched.planners.sharded import merge_blocks, units_from_ranges
from gradsched.replay.sharded import Semantics, ShardedReplay, replay_sharded
from gradsched.replay.sharded_bounds import sharded_lower_bound_s
from gradsched.traces.bundle import ComputeTrace
from gradsched.traces.layers import LayerSeq, block_ranges, layer_seq

EVALUATIONS = 4000
"""Replays the local search may spend (the seeds and the final settings come on top)."""

Best = tuple[Key, np.ndarray, Setting]


def uniform_groupings(n_blocks: int) -> list[np.ndarray]:
    """``k`` consecutive blocks per unit (the last unit takes the rest), every ``k``."""
    return [np.asarray([*range(k, n_blocks, k), n_blocks], dtype=np.int64)
            for k in range(1, n_blocks + 1)]


def plan_ends(plan: ShardedPlan, seq: LayerSeq, blocks: list[tuple[int, int]]) -> np.ndarray:
    """The block grouping (exclusive end indices) of a plan whose units are runs of blocks."""
    layer_of = {t: j for j, group in enumerate(seq.tensors) for t in group}
    block_after = {last: k + 1 for k, (_, last) in enumerate(blocks)}
    return np.asarray([block_after[max(layer_of[t] for t in unit.tensors)]
                       for unit in plan.units], dtype=np.int64)


def blocking_seeds(trace: ComputeTrace, model: CommModel, world_size: int,
                   memory_cap_bytes: float | None, seq: LayerSeq,
                   blocks: list[tuple[int, int]]) -> list[np.ndarray]:
    """The blocking program's optimal grouping (none when nothing fits the cap there)."""
    try:
        plan, _ = blocking_optimum(trace, model, world_size, memory_cap_bytes=memory_cap_bytes,
                                   max_prefetch=1, algorithm="seed")
    except ConfigError:
        return []
    return [plan_ends(plan, seq, blocks)]


def neighbours(ends: np.ndarray, n_blocks: int) -> list[np.ndarray]:
    """Groupings one move away: a boundary moved by one block, two units merged, a unit
    split in two."""
    cuts = ends[:-1].tolist()
    out: set[tuple[int, ...]] = set()
    for i, cut in enumerate(cuts):
        for moved in (cut - 1, cut + 1):
            low = cuts[i - 1] if i else 0
            high = cuts[i + 1] if i + 1 < len(cuts) else n_blocks
            if low < moved < high:
                out.add(tuple(sorted({*cuts[:i], moved, *cuts[i + 1:]})))
        out.add(tuple(cuts[:i] + cuts[i + 1:]))  # merge the units on both sides of it
    starts = [0, *cuts]
    for start, end in zip(starts, ends.tolist(), strict=True):
        if end - start > 1:
            out.add(tuple(sorted({*cuts, (start + end) // 2})))
    return [np.asarray([*c, n_blocks], dtype=np.int64) for c in sorted(out)]


def _consider(scorer: LayoutScorer, ends: np.ndarray, setting: Setting,
              best: Best | None) -> Best | None:
    scored = scorer.score(ends, setting)
    if scored is not None and (best is None or better(scored[0], best[0])):
        return scored[0], ends, setting
    return best


def local_search(scorer: LayoutScorer, start: Best, n_blocks: int) -> Best:
    """Best-improvement moves with the setting fixed, within :data:`EVALUATIONS`."""
    best = start
    limit = scorer.evaluated + EVALUATIONS
    while scorer.evaluated < limit:
        incumbent = best
        for ends in neighbours(incumbent[1], n_blocks):
            if scorer.evaluated >= limit:
                break
            best = _consider(scorer, ends, incumbent[2], best)  # type: ignore[assignment]
        if best is incumbent:
            break
    return best


def searched_optimum(trace: ComputeTrace, model: CommModel, world_size: int, *,
                     semantics: Semantics, memory_cap_bytes: float | None,
                     max_prefetch: int, algorithm: str,
                     grad_accum: int = 1) -> tuple[ShardedPlan, ShardedReplay]:
    """The search of the module docstring; ``ConfigError`` naming the smallest peak when
    no candidate fits the cap. ``grad_accum``: micro-batches per step, scored so (the
    blocking program's seed is a one-micro-batch optimum, a seed only)."""
    seq = layer_seq(trace)
    blocks = block_ranges(seq)
    scorer = LayoutScorer(*block_level(seq, blocks), model, world_size,
                          semantics == "blocking", memory_cap_bytes, grad_accum)
    seeds = uniform_groupings(len(blocks)) + blocking_seeds(trace, model, world_size,
                                                            memory_cap_bytes, seq, blocks)
    best: Best | None = None
    for ends in {tuple(e.tolist()): e for e in seeds}.values():
        for setting in settings(max_prefetch):
            best = _consider(scorer, ends, setting, best)
    if best is None:
        raise no_fit(memory_cap_bytes, scorer.smallest_peak)
    best = local_search(scorer, best, len(blocks))
    for setting in settings(max_prefetch):
        best = _consider(scorer, best[1], setting, best)  # type: ignore[assignment]
    _, ends, (reshard, fwd, bwd) = best
    bound = sharded_lower_bound_s(trace, model, world_size, grad_accum)
    plan = ShardedPlan(algorithm=algorithm,
                       units=units_from_ranges(seq, merge_blocks(blocks, ends), reshard),
                       forward_prefetch=fwd, backward_prefetch=bwd,
                       knobs={"memory_cap_bytes": memory_cap_bytes, "max_prefetch": max_prefetch,
                              "semantics": semantics} | accum_knob(grad_accum))
    replayed = replay_sharded(trace, plan, model, world_size, semantics=semantics,
                              grad_accum=grad_accum)
    plan.info.update({"method": f"search (not exhaustive: {len(blocks)} blocks give "
                                f"2^{len(blocks) - 1} groupings)",
                      "replays": scorer.evaluated, "lower_bound_s": bound,
                      "gap_to_bound_pct": gap_to_bound_pct(replayed.iteration_s, bound)})
    return plan, replayed
