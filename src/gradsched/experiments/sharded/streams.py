"""The sharded optimum in streams semantics without enumerating groupings: which method
covers which setting of :func:`gradsched.experiments.sharded.exhaustive_optimum`'s space.

* the window program (:mod:`gradsched.experiments.sharded_program`, exact, ``O(n^4)``):
  units resharded after forward, forward prefetch depth 0 or 1, backward depth 1;
* the kept program (:mod:`gradsched.experiments.sharded_kept`, exact): units kept gathered,
  forward depth 0 or 1, any backward depth, when the memory cap fits every grouping or
  none;
* the others (prefetch depth 2, a resharded backward depth 2, a cap that binds kept units,
  root layers between blocks, which both programs assume away, and every setting under
  gradient accumulation, ``k > 1``, whose step both programs' formulas do not describe):
  exhaustion when the groupings are few enough, else the search of
  :mod:`gradsched.experiments.sharded_search`, seeded also with the programs' groupings.

Blocking semantics reach this module only with ``k > 1`` (with one micro-batch the
blocking program of :mod:`gradsched.experiments.sharded_blocking` is exact): every setting
is then enumerated or searched.

Every grouping a program returns is replayed and the candidates compared on the replays
(:func:`gradsched.experiments.sharded_blocking.better`). The plan's ``info`` names the
method of each setting, whether the whole answer is exact, the lower bound and the gap.
"""

from __future__ import annotations

import math

import numpy as np

from gradsched.costmodel.base import CommModel
from gradsched.experiments.grid import gap_to_bound_pct
from gradsched.experiments.sharded_blocking import better, no_fit
from gradsched.experiments.sharded_candidates import (
    LayoutScorer,
    Setting,
    accum_knob,
    block_level,
    every_grouping,
    settings,
)
from gradsched.experiments.sharded_kept import kept_cap_decided, kept_program
from gradsched.experiments.sharded_program import Tables, program, tables, window_applies
from gradsched.experiments.sharded_search import (
    Best,
    consider,
    search,
    seed_groupings,
    uniform_groupings,
)
from gradsched.plan_sharded import ShardedPlan
from gradsched.planners.sharded import merge_blocks, units_from_ranges
from gradsched.replay.sharded import Semantics, ShardedReplay, replay_sharded
from gradsched.replay.sharded_bounds import sharded_lower_bound_s
from gradsched.ties import RTOL
from gradsched.traces.bundle import ComputeTrace
from gradsched.traces.layers import block_ranges, layer_seq

EXACT = "dynamic program (exact)"
ENUMERATED = "exhaustion (exact)"
SEARCHED = "search (not exact)"


def exact_settings(t: Tables | None, max_prefetch: int, cap: float) -> list[Setting]:
    """The settings the programs solve exactly here (``t`` None: root layers between
    blocks, neither applies)."""
    if t is None:
        return []
    depths = [d for d in (0, 1) if d <= max_prefetch]
    found: list[Setting] = [(True, d, 1) for d in depths]
    if kept_cap_decided(t, cap):
        found += [(False, d, back) for d in depths for back in range(1, max(max_prefetch, 1) + 1)]
    return found


def solve(t: Tables, setting: Setting, cap: float, units_weight: float) -> list[int] | None:
    """The grouping (exclusive block ends) a program finds for an exact setting."""
    reshard, forward, _ = setting
    found = (program if reshard else kept_program)(t, forward, cap, units_weight)
    return None if found is None else found[1]


def streams_optimum(trace: ComputeTrace, model: CommModel, world_size: int, *,
                    memory_cap_bytes: float | None, max_prefetch: int, algorithm: str,
                    enumerate_up_to: int, semantics: Semantics = "streams",
                    grad_accum: int = 1, keep_unsharded: bool = False,
                    compute_slowdown: float = 1.0) -> tuple[ShardedPlan, ShardedReplay]:
    """The fastest candidate of the exhaustive optimum's space by the methods of the module
    docstring (exhaustion of the other settings when ``2^(n-1) <= enumerate_up_to``);
    ``NoLayoutFits`` when nothing fits the cap. With ``compute_slowdown != 1`` the programs
    (whose times assume compute at full speed) give way to exhaustion or the search, as with
    ``grad_accum > 1``."""
    seq = layer_seq(trace)
    blocks = block_ranges(seq)
    level = block_level(seq, blocks)
    scorer = LayoutScorer(*level, model, world_size, semantics == "blocking",
                          memory_cap_bytes, grad_accum, keep_unsharded, compute_slowdown)
    cap = math.inf if memory_cap_bytes is None else float(memory_cap_bytes)
    programs_apply = (semantics == "streams" and grad_accum == 1 and compute_slowdown == 1.0
                      and window_applies(seq, blocks))
    t = tables(*level, model, world_size) if programs_apply else None
    exact = exact_settings(t, max_prefetch, cap)
    rest = [s for s in settings(max_prefetch) if s not in exact]
    methods = dict.fromkeys(exact, EXACT)
    best: Best | None = None
    weight = RTOL * float(seq.forward_s.sum() + seq.backward_s.sum()) / (8.0 * (len(blocks) + 1))
    for setting in exact:
        ends = solve(t, setting, cap, weight)  # type: ignore[arg-type]
        if ends is not None:
            best = consider(scorer, np.asarray(ends, dtype=np.int64), setting, best)
    if rest and 2 ** (len(blocks) - 1) <= enumerate_up_to:
        methods.update(dict.fromkeys(rest, ENUMERATED))
        for ends in every_grouping(len(blocks)):
            for setting in rest:
                best = consider(scorer, ends, setting, best)
    elif rest:
        methods.update(dict.fromkeys(rest, SEARCHED))
        seeds = seed_groupings(trace, model, world_size, memory_cap_bytes)
        found = search(scorer, seeds + ([best[1]] if best else []), rest, len(blocks))
        if found is not None and (best is None or better(found[0], best[0])):
            best = found
    if best is None:
        for ends in uniform_groupings(len(blocks)):  # the smallest peak, for the error
            for setting in exact:
                scorer.score(ends, setting)
        raise no_fit(cap, scorer.smallest_peak)
    return _plan(trace, model, world_size, best, methods, memory_cap_bytes, max_prefetch,
                 algorithm, semantics, grad_accum, keep_unsharded, compute_slowdown)


def _plan(trace: ComputeTrace, model: CommModel, world_size: int, best: Best,
          methods: dict[Setting, str], memory_cap_bytes: float | None, max_prefetch: int,
          algorithm: str, semantics: Semantics, grad_accum: int, keep_unsharded: bool,
          compute_slowdown: float) -> tuple[ShardedPlan, ShardedReplay]:
    _, ends, (reshard, fwd, bwd) = best
    seq = layer_seq(trace)
    plan = ShardedPlan(algorithm=algorithm,
                       units=units_from_ranges(seq, merge_blocks(block_ranges(seq), ends),
                                               reshard),
                       forward_prefetch=fwd, backward_prefetch=bwd,
                       knobs={"memory_cap_bytes": memory_cap_bytes, "max_prefetch": max_prefetch,
                              "semantics": semantics} | accum_knob(grad_accum),
                       keep_unsharded_between_microbatches=keep_unsharded)
    replayed = replay_sharded(trace, plan, model, world_size, semantics=semantics,
                              grad_accum=grad_accum, compute_slowdown=compute_slowdown)
    bound = sharded_lower_bound_s(trace, model, world_size, grad_accum, keep_unsharded)
    labels = {f"reshard={s[0]} forward={s[1]} backward={s[2]}": how for s, how in methods.items()}
    exact = all(how != SEARCHED for how in methods.values())
    summary = "; ".join(f"{how}: {', '.join(k for k, v in labels.items() if v == how)}"
                        for how in (EXACT, ENUMERATED, SEARCHED) if how in labels.values())
    plan.info.update({"method": ("exact: " if exact else "not exact: ") + summary,
                      "methods": labels, "exact": exact, "lower_bound_s": bound,
                      "gap_to_bound_pct": gap_to_bound_pct(replayed.iteration_s, bound)})
    return plan, replayed
