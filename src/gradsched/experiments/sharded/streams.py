"""The sharded optimum in streams semantics without enumerating groupings: which method
covers which setting of :func:`gradsched.experiments.sharded.optimum.exhaustive_optimum`'s space.

* the window program (:mod:`gradsched.experiments.sharded.program`, exact, ``O(n^4)``):
  units resharded after forward, forward prefetch depth 0 or 1, backward depth 1;
* the kept program (:mod:`gradsched.experiments.sharded.kept`, exact): units kept gathered,
  forward depth 0 or 1, any backward depth, when the memory cap fits every grouping or
  none;
* the others (prefetch depth 2, a resharded backward depth 2, a cap that binds kept units,
  root layers between blocks, which both programs assume away, and every setting under
  gradient accumulation, ``k > 1``, whose step both programs' formulas do not describe):
  exhaustion when the groupings are few enough, else the search of
  :mod:`gradsched.experiments.sharded.search`, seeded also with the programs' groupings.

Blocking semantics reach this module only with ``k > 1`` (with one micro-batch the
blocking program of :mod:`gradsched.experiments.sharded.blocking` is exact): every setting
is then enumerated or searched.

Every grouping a program returns is replayed and the candidates compared on the replays
(:func:`gradsched.ties.better`). Under a mixed-precision policy the programs and the
replays carry each run's gather, reduce and gradient bytes apart
(:mod:`gradsched.experiments.sharded.dtypes`), so exact stays exact. The plan's ``info`` names the
method of each setting, whether the whole answer is exact, the lower bound and the gap.
"""

from __future__ import annotations

import math

import numpy as np

from gradsched.experiments.grid import gap_to_bound_pct
from gradsched.experiments.sharded.candidates import (
    LayoutScorer,
    Setting,
    accum_knob,
    block_level,
    every_grouping,
    settings,
)
from gradsched.experiments.sharded.common import ShardedProblem, no_fit
from gradsched.experiments.sharded.kept import kept_cap_decided, kept_program
from gradsched.experiments.sharded.program import Tables, program, tables, window_applies
from gradsched.experiments.sharded.search import (
    Best,
    consider,
    search,
    seed_groupings,
    uniform_groupings,
)
from gradsched.plan_sharded import ShardedPlan
from gradsched.planners.sharded import merge_blocks, units_from_ranges
from gradsched.replay.sharded import ShardedReplay
from gradsched.ties import RTOL, better

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


def streams_optimum(problem: ShardedProblem, *, algorithm: str, enumerate_up_to: int
                    ) -> tuple[ShardedPlan, ShardedReplay]:
    """The fastest candidate of the exhaustive optimum's space by the methods of the module
    docstring (exhaustion of the other settings when ``2^(n-1) <= enumerate_up_to``);
    ``NoLayoutFits`` when nothing fits the cap. With ``compute_slowdown != 1`` the programs
    (whose times assume compute at full speed) give way to exhaustion or the search, as with
    ``grad_accum > 1``."""
    p = problem
    seq, blocks = p.seq, p.blocks
    level = block_level(seq, blocks, p.sizes)
    scorer = LayoutScorer(p, *level)
    cap = math.inf if p.memory_cap_bytes is None else float(p.memory_cap_bytes)
    programs_apply = (p.semantics == "streams" and p.grad_accum == 1
                      and p.compute_slowdown == 1.0 and window_applies(seq, blocks))
    t = tables(*level, p.model, p.world_size) if programs_apply else None
    exact = exact_settings(t, p.max_prefetch, cap)
    rest = [s for s in settings(p.max_prefetch) if s not in exact]
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
        seeds = seed_groupings(p)
        found = search(scorer, seeds + ([best[1]] if best else []), rest, len(blocks))
        if found is not None and (best is None or better(found[0], best[0])):
            best = found
    if best is None:
        for ends in uniform_groupings(len(blocks)):  # the smallest peak, for the error
            for setting in exact:
                scorer.score(ends, setting)
        raise no_fit(cap, scorer.smallest_peak)
    return _plan(p, best, methods, algorithm)


def _plan(problem: ShardedProblem, best: Best, methods: dict[Setting, str],
          algorithm: str) -> tuple[ShardedPlan, ShardedReplay]:
    _, ends, (reshard, fwd, bwd) = best
    p = problem
    plan = ShardedPlan(algorithm=algorithm,
                       units=units_from_ranges(p.seq, merge_blocks(p.blocks, ends), reshard),
                       forward_prefetch=fwd, backward_prefetch=bwd,
                       knobs={"memory_cap_bytes": p.memory_cap_bytes,
                              "max_prefetch": p.max_prefetch,
                              "semantics": p.semantics} | accum_knob(p.grad_accum),
                       keep_unsharded_between_microbatches=p.keep_unsharded,
                       mixed_precision=p.mixed_precision)
    replayed = p.replay(plan)
    bound = p.lower_bound_s()
    labels = {f"reshard={s[0]} forward={s[1]} backward={s[2]}": how for s, how in methods.items()}
    exact = all(how != SEARCHED for how in methods.values())
    summary = "; ".join(f"{how}: {', '.join(k for k, v in labels.items() if v == how)}"
                        for how in (EXACT, ENUMERATED, SEARCHED) if how in labels.values())
    plan.info.update({"method": ("exact: " if exact else "not exact: ") + summary,
                      "methods": labels, "exact": exact, "lower_bound_s": bound,
                      "gap_to_bound_pct": gap_to_bound_pct(replayed.iteration_s, bound)})
    return plan, replayed
