"""Sharded data parallelism: the exact optimum of unit grouping, resharding and prefetch
depth under a memory cap, and the comparison of every sharded planner on one case.

**The optimum.** Candidates: every grouping of consecutive blocks into units
(``2^(n-1)`` for ``n`` blocks; the root stays the root), ``reshard_after_forward`` for all
units or none, a forward prefetch depth ``0..max_prefetch`` and a backward one
``1..max_prefetch`` (FSDP2 always prefetches one unit in backward; see
:mod:`gradsched.runtime.fsdp2`). Each is replayed
(:func:`gradsched.replay.sharded.replay_sharded`, the plan's own model); the fastest whose
``gathered_peak_bytes`` fits ``memory_cap_bytes`` wins (ties, within
:data:`gradsched.ties.RTOL`: fewer units, then smaller peak, then the enumeration order).
Exact within that space, by exhaustion, up to :data:`MAX_GROUPINGS` groupings; beyond,
streams semantics get :func:`gradsched.experiments.sharded.streams.streams_optimum`:
dynamic programs, exact, for forward prefetch depth 0 or 1 with units resharded (backward
depth 1) or kept gathered (any depth, with a cap that fits every grouping or none), and a
search for the other settings; the plan's ``info`` says which method covered which
setting, and the gap to the lower bound. A cap that no candidate meets is an error that
names the smallest peak found.

**Gradient accumulation** (``grad_accum`` = ``k``): every candidate is replayed for one
optimizer step of ``k`` micro-batches (:mod:`gradsched.replay.sharded`: ``k`` rounds of
all-gathers, one of reduce-scatters, the unsharded gradients held across micro-batches),
the lower bound likewise (``keep_unsharded``: every candidate keeps the parameters
unsharded between micro-batches, FSDP2's ``set_reshard_after_backward(False)``, so only the
first micro-batch all-gathers in forward); with ``k > 1`` the programs (whose time and
memory formulas are for one micro-batch: blocking, and the streams programs) give way to
exhaustion, or beyond :data:`MAX_GROUPINGS` to the search, and the plan says so. Row and
plan carry ``grad_accum`` only when ``k != 1``.

**Mixed precision** (the problem's ``mixed_precision``): every plan carries the policy and
is replayed with it; every method above prices each all-gather on its gather bytes and each
reduce-scatter on its reduce bytes, and checks the cap with the gathered parameters and the
unsharded gradients in their own bytes (:mod:`gradsched.experiments.sharded.dtypes`), so
what is exact without a policy is exact with one, and "no layout fits" is a proof there
too.

**Blocking semantics** (FSDP2 on gloo), with or without a memory cap: the host waits for
every collective, so the iteration is the compute plus the sum of every collective's time,
whatever the prefetch depths; the optimum is found exactly, with any number of blocks, by
the dynamic program of :mod:`gradsched.experiments.sharded.blocking` (its memory peak
follows the replay's and is checked by it). :func:`exhaustive_optimum` enumerates in any
semantics.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from gradsched.errors import ConfigError, InputError
from gradsched.experiments.sharded.blocking import blocking_optimum
from gradsched.experiments.sharded.candidates import (
    Key,
    LayoutScorer,
    Setting,
    accum_knob,
    every_grouping,
    settings,
)
from gradsched.experiments.sharded.common import ShardedProblem, no_fit
from gradsched.experiments.sharded.streams import streams_optimum
from gradsched.plan_sharded import ShardedPlan
from gradsched.planners.sharded import (
    SHARDED_PLANNERS,
    make_sharded_plan,
    merge_blocks,
    units_from_ranges,
)
from gradsched.replay.sharded import ShardedReplay
from gradsched.ties import better

MAX_GROUPINGS = 32768
"""Largest number of block groupings the exhaustive optimum enumerates (16 blocks)."""
OPTIMUM = "sharded-optimum"


@dataclass(frozen=True)
class Scored:
    """A candidate plan and its replay."""

    plan: ShardedPlan
    replay: ShardedReplay


def optimum(problem: ShardedProblem) -> Scored:
    """The optimum (module docstring): exact by exhaustion up to :data:`MAX_GROUPINGS`
    groupings, in blocking semantics, and beyond for the settings the streams programs
    solve; the plan's ``info`` says where a search stood in. ``keep_unsharded``: every
    candidate keeps the parameters unsharded between micro-batches
    (``ShardedPlan.keep_unsharded_between_microbatches``; nothing changes at one).
    ``compute_slowdown``: compute at ``1/s`` while a collective runs
    (:mod:`gradsched.replay.sharded`); no effect in blocking semantics, where nothing
    overlaps, so the blocking program stays exact. The problem's settings were checked when
    it was made."""
    if not problem.blocks:
        raise InputError("no blocks to group: every tensor belongs to the root (names without "
                         "a numeric path component)", path=problem.trace.path, field="name")
    if problem.semantics == "blocking" and problem.grad_accum == 1:
        plan, result = blocking_optimum(problem, algorithm=OPTIMUM)
        return Scored(replace(plan, keep_unsharded_between_microbatches=problem.keep_unsharded),
                      result)
    if 2 ** (len(problem.blocks) - 1) > MAX_GROUPINGS:
        return Scored(*streams_optimum(problem, algorithm=OPTIMUM,
                                       enumerate_up_to=MAX_GROUPINGS))
    return exhaustive_optimum(problem)


def exhaustive_optimum(problem: ShardedProblem) -> Scored:
    """The optimum by exhaustion of every candidate (module docstring), any semantics."""
    p = problem
    seq, blocks, max_prefetch = p.seq, p.blocks, p.max_prefetch
    count = 2 ** (len(blocks) - 1)
    if count > MAX_GROUPINGS:
        raise ConfigError(f"{len(blocks)} blocks give {count} groupings; the exhaustive optimum "
                          f"enumerates at most {MAX_GROUPINGS}")
    if max_prefetch < 0:
        raise ConfigError(f"max_prefetch must be >= 0, got {max_prefetch}")
    scorer = LayoutScorer(p, seq, blocks, p.sizes)
    best: tuple[Key, tuple[np.ndarray, Setting]] | None = None
    for ends in every_grouping(len(blocks)):
        for setting in settings(max_prefetch):
            scored = scorer.score(ends, setting)
            if scored is not None and (best is None or better(scored[0], best[0])):
                best = (scored[0], (ends, setting))
    if best is None:
        raise no_fit(p.memory_cap_bytes, scorer.smallest_peak)
    ends, (reshard, fwd, bwd) = best[1]
    plan = ShardedPlan(algorithm=OPTIMUM,
                       units=units_from_ranges(seq, merge_blocks(blocks, ends), reshard),
                       forward_prefetch=fwd, backward_prefetch=bwd,
                       knobs={"memory_cap_bytes": p.memory_cap_bytes,
                              "max_prefetch": max_prefetch,
                              "semantics": p.semantics} | accum_knob(p.grad_accum),
                       keep_unsharded_between_microbatches=p.keep_unsharded,
                       mixed_precision=p.mixed_precision)
    return Scored(plan, p.replay(plan))


CASE_COLUMNS = ("algorithm", "n_units", "forward_prefetch", "backward_prefetch",
                "reshard_after_forward", "iteration_s", "compute_s", "exposed_comm_s",
                "gathered_peak_bytes", "resident_bytes", "n_collectives", "lower_bound_s")


def compare(problem: ShardedProblem, *,
            algorithms: Sequence[str] = (*SHARDED_PLANNERS, OPTIMUM),
            plans: dict[str, ShardedPlan] | None = None) -> list[dict[str, object]]:
    """One row per algorithm (``CASE_COLUMNS``, ``grad_accum`` when it is not 1 and
    ``keep_unsharded_between_microbatches`` when ``keep_unsharded``): its plan (keeping the
    parameters unsharded between micro-batches when ``keep_unsharded``) replayed for one
    step of ``grad_accum`` micro-batches (compute at ``1/compute_slowdown`` while a collective
    runs), and the lower bound (without the slowdown: still a bound, as the slowdown only
    lengthens the replay). ``plans``, when given, is filled with each algorithm's plan (for
    the domain notes of ``shard compare``). The optimum's search uses the problem's
    ``max_prefetch``. With a memory cap, ``fits_memory_cap`` says whether the layout's
    gathered peak stays under it (the cap counts the resident shards and the trace's
    activations, :mod:`gradsched.experiments.sharded.memory`)."""
    p = problem
    grad_accum, keep_unsharded = p.grad_accum, p.keep_unsharded
    bound = p.lower_bound_s()
    rows = []
    for name in algorithms:
        if name == OPTIMUM:
            scored = optimum(p)
            plan, result = scored.plan, scored.replay
        else:
            plan = replace(make_sharded_plan(name, p.trace, p.model, p.world_size),
                           keep_unsharded_between_microbatches=keep_unsharded,
                           mixed_precision=p.mixed_precision)
            result = p.replay(plan)
        if plans is not None:
            plans[name] = plan
        flags = {u.reshard_after_forward for u in plan.units}
        rows.append({"algorithm": name, "n_units": plan.n_units,
                     "forward_prefetch": plan.forward_prefetch,
                     "backward_prefetch": plan.backward_prefetch,
                     "reshard_after_forward": flags.pop() if len(flags) == 1 else "mixed",
                     **{k: v for k, v in result.to_dict().items() if k in CASE_COLUMNS},
                     "lower_bound_s": bound, **accum_knob(grad_accum),
                     **({"keep_unsharded_between_microbatches": True}
                        if keep_unsharded else {}),
                     **({"fits_memory_cap": bool(result.gathered_peak_bytes
                                                 <= p.memory_cap_bytes * (1 + 1e-12))}
                        if p.memory_cap_bytes is not None else {})})
    return rows
