"""``search`` (ours): the best plan over the searched families, scored by replay.

It was called ``optimal``; it is the best of what it searches, not a proven optimum
outside the contiguous family: only the WFBP family's dynamic program is exact.

Part 1, exact: among plans whose buckets are contiguous runs of tensors in ready order,
one all-reduce each on one stream, global update (WFBP, SyncSGD, DDP, MG-WFBP, OASR, ...),
the dynamic program of :func:`gradsched.planners._family.optimal_ends` (shared with
``oasr``) minimises the finish of the last all-reduce under the full fitted cost model,
hence the iteration time ``forward + max(backward, finish) + update``.

Part 2, ``families=all`` (default): the knobbed families outside the WFBP family are
searched too and every candidate is scored by the replay engine: DDP over a cap sweep,
Horovod (both default sets), ByteScheduler (per tensor) over a partition x credit sweep
in parameters, with its credit tuning and partition search, and P3 (each ByteScheduler
candidate within :data:`gradsched.planners.bytescheduler.SCORED_COLLECTIVES` collectives
per iteration: a finer partition is coarsened, and its plan says so), DeAR with its
Bayesian optimisation. The fastest candidate wins; candidates whose times tie within
:data:`gradsched.ties.RTOL` go to the one with the fewest collectives per iteration, then
to the earlier one in the order above (the WFBP optimum first); never to floating-point
noise. ``Plan.info`` records the winning family and its knobs, every
candidate's iteration time, and the WFBP-family optimum's finish and iteration time.
``families=wfbp`` returns the DP plan only (no replay).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

from gradsched.costmodel.base import CommModel
from gradsched.errors import ConfigError
from gradsched.plan import Plan
from gradsched.planners import bytescheduler, ddp, dear, horovod
from gradsched.planners._family import (
    Knob,
    ScorerFactory,
    base_info,
    bounded_optimal_ends,
    check_choice,
    iteration_from_finish,
    need_scorer,
    plan_from_ends,
    ready_seq,
)
from gradsched.ties import fastest_label_by
from gradsched.traces.bundle import ComputeTrace

NAME = "search"
SUMMARY = ("contiguous optimum (DP), then the best of the knobbed families by replay "
           "(ours)")
FAMILIES = ("all", "wfbp")
DDP_CAPS_MB = (1.0, 2.0, 4.0, 8.0, 16.0, 25.0, 32.0, 64.0, 128.0, 256.0)
# ByteScheduler sweep, in parameters (credit 1: one part in flight at a time).
BS_PARTITIONS = (62_500, 125_000, 250_000, 500_000, 1_000_000, 2_000_000, 4_000_000,
                 16_000_000)
BS_CREDITS = (1, 4_000_000, 16_000_000)
SCORED = True  # searches by scoring candidate plans (takes a ``scorer``)
KNOBS: tuple[Knob, ...] = (
    Knob("families", str, "all", "wfbp: the exact WFBP-family optimum only; all: also "
         "search DDP, Horovod, ByteScheduler/P3 and DeAR by replay", FAMILIES),
    Knob("bo_iters", int, 12, "replays of DeAR's Bayesian optimisation"),
    Knob("replay_iterations", int, 5, "iterations of each scoring replay"),
)


def family_candidates(trace: ComputeTrace, model: CommModel, world_size: int, *,
                      bo_iters: int, replay_iterations: int,
                      scorer: ScorerFactory | None) -> Iterator[tuple[str, Plan]]:
    """The knobbed families' candidate plans, labelled."""
    for cap in DDP_CAPS_MB:
        yield f"ddp(bucket_cap_mb={cap:g})", ddp.plan(trace, model, world_size,
                                                      bucket_cap_mb=cap)
    for name in horovod.DEFAULTS:
        yield f"horovod(defaults={name})", horovod.plan(trace, model, world_size,
                                                        defaults=name)
    tasks = bytescheduler.make_tasks(trace, "tensor")  # every candidate's tasks
    for credit in BS_CREDITS:
        for parts in BS_PARTITIONS:
            yield (f"bytescheduler(partition_params={parts},credit_params={credit})",
                   bytescheduler.plan(trace, model, world_size, bytescheduler.Knobs(
                       partition_params=parts, credit_params=credit, search="none"),
                       budget=bytescheduler.SCORED_COLLECTIVES, tasks=tasks))
    yield "bytescheduler(p3=true)", bytescheduler.plan(
        trace, model, world_size, bytescheduler.Knobs(p3=True, search="none"),
        budget=bytescheduler.SCORED_COLLECTIVES, tasks=tasks)
    for search in ("credit", "partition"):
        yield f"bytescheduler(search={search})", bytescheduler.plan(
            trace, model, world_size, bytescheduler.Knobs(
                search=search, replay_iterations=replay_iterations),
            scorer=scorer, tasks=tasks)
    yield "dear(search=bo)", dear.plan(trace, model, world_size, dear.Knobs(
        search="bo", bo_iters=bo_iters, replay_iterations=replay_iterations), scorer=scorer)


def plan(trace: ComputeTrace, model: CommModel, world_size: int, *, families: str = "all",
         bo_iters: int = 12, replay_iterations: int = 5,
         scorer: ScorerFactory | None = None) -> Plan:
    """The WFBP-family optimum, or the fastest family scored by ``scorer`` (the replay)."""
    check_choice("families", families, FAMILIES)
    if bo_iters < 1:
        raise ConfigError(f"knob bo_iters must be >= 1, got {bo_iters}")
    seq = ready_seq(trace)
    ends, finish, bounded = bounded_optimal_ends(seq, model, world_size)
    knobs = {"families": families, "bo_iters": bo_iters, "replay_iterations": replay_iterations}
    info = base_info(trace, world_size) | bounded | {
        "wfbp_optimum_finish_s": finish,
        "wfbp_optimum_iteration_s": iteration_from_finish(seq, finish),
    }
    dp_plan = plan_from_ends(NAME, seq, ends, knobs=knobs, info=info | {"family": "wfbp-dp"})
    if families == "wfbp":
        return dp_plan
    score = need_scorer(NAME, scorer)(trace, model, world_size, replay_iterations)
    plans = {"wfbp-dp": dp_plan}
    plans.update(family_candidates(trace, model, world_size, bo_iters=bo_iters,
                                   replay_iterations=replay_iterations, scorer=scorer))
    scores = {label: score(cand) for label, cand in plans.items()}
    best_label = fastest_label_by(scores, {k: p.n_collectives for k, p in plans.items()})
    best_plan = plans[best_label]
    info |= {"family": best_label, "family_knobs": dict(best_plan.knobs),
             "iteration_s": scores[best_label], "candidates": scores}
    return replace(best_plan, algorithm=NAME, knobs=knobs, info=info)
