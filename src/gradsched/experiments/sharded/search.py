"""A search over block groupings for the streams settings the window program of
:mod:`gradsched.experiments.sharded.program` does not solve exactly (units kept gathered,
prefetch depth 2, root layers between blocks) when there are too many blocks to enumerate.

There a grouping's time is not a sum over bounded windows of units: a reduce-scatter queue
or an all-gather queue can carry a lag over any number of units. So:

1. **Seeds**, each under every setting (resharding, forward and backward prefetch depth):
   one unit per block (FSDP2's default), ``k`` blocks per unit for every ``k``, and the
   blocking program's optimal groupings (resharded and kept), which minimise the
   collectives' total time.
2. **Local search** from the best seed with its setting fixed: move one unit boundary by a
   block, merge two neighbouring units, or split a unit in two; take the best move of a
   pass while one improves (:func:`gradsched.ties.better`), within
   :data:`EVALUATIONS` replays.
3. The best grouping again under every setting.

Every candidate respects the memory cap. The caller's plan ``info`` records the method, the
lower bound (:func:`gradsched.replay.sharded_bounds.sharded_lower_bound_s`) and the gap to
it: the distance to the true optimum is at most that gap.
"""

from __future__ import annotations

import numpy as np

from gradsched.errors import ConfigError
from gradsched.experiments.sharded.blocking import blocking_optimum
from gradsched.experiments.sharded.candidates import (
    Key,
    LayoutScorer,
    Setting,
)
from gradsched.experiments.sharded.common import ShardedProblem
from gradsched.plan_sharded import ShardedPlan
from gradsched.ties import better
from gradsched.traces.layers import LayerSeq

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


def blocking_seeds(problem: ShardedProblem) -> list[np.ndarray]:
    """The blocking program's optimal grouping (none when nothing fits the cap there)."""
    try:
        plan, _ = blocking_optimum(problem, algorithm="seed")
    except ConfigError:
        return []
    return [plan_ends(plan, problem.seq, problem.blocks)]


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


def consider(scorer: LayoutScorer, ends: np.ndarray, setting: Setting,
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
            best = consider(scorer, ends, incumbent[2], best)  # type: ignore[assignment]
        if best is incumbent:
            break
    return best


def search(scorer: LayoutScorer, seeds: list[np.ndarray], candidates: list[Setting],
           n_blocks: int) -> Best | None:
    """Steps 1-3 of the module docstring over the settings ``candidates``; None when no
    seed fits the memory cap."""
    best: Best | None = None
    for ends in {tuple(e.tolist()): e for e in seeds}.values():
        for setting in candidates:
            best = consider(scorer, ends, setting, best)
    if best is None:
        return None
    best = local_search(scorer, best, n_blocks)
    for setting in candidates:
        best = consider(scorer, best[1], setting, best)  # type: ignore[assignment]
    return best


def seed_groupings(problem: ShardedProblem) -> list[np.ndarray]:
    """The seeds of step 1: uniform groupings and the blocking program's."""
    return uniform_groupings(len(problem.blocks)) + blocking_seeds(problem)
