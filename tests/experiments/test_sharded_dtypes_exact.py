"""The sharded optimum under a mixed-precision policy and a memory cap against exhaustion:
every layout of whole blocks (grouping, resharding, forward and backward prefetch depth)
replayed exactly with the policy (:meth:`ShardedProblem.replay`, the judge). The optimum
must find a layout whenever one fits, fit the cap, and be no slower than the fastest
fitting layout within :data:`gradsched.ties.RTOL`; when none fits it must say so.

Every trace here is SYNTHETIC (random blocks of linear weights and norms, random compute,
bytes, element sizes and alpha-beta networks, labelled ``flops-model`` only so that the
float8 all-gather applies to its linear weights); nothing is a measurement.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from gradsched.collective_dtypes import CollectiveDtypes
from gradsched.costmodel.base import AlphaBetaModel, CommModel
from gradsched.experiments.sharded.candidates import every_grouping, settings
from gradsched.experiments.sharded.common import NoLayoutFits, ShardedProblem
from gradsched.experiments.sharded.optimum import optimum
from gradsched.experiments.sharded.streams import streams_optimum
from gradsched.plan_sharded import ShardedPlan
from gradsched.planners.sharded import merge_blocks, units_from_ranges
from gradsched.ties import same_time
from gradsched.traces import ComputeTrace
from tests.replay.test_sharded import META

DTYPES = (None, "bf16", "fp32")


def synthetic_case(seed: int) -> tuple[ComputeTrace, CommModel, CollectiveDtypes, int]:
    """SYNTHETIC: 1-5 blocks of a linear weight and (half the time) a norm, an optional stem
    and head in the root, 2- or 4-byte elements, random compute and network, a random
    policy (float8 all-gather one case in three) and largest prefetch depth."""
    rng = np.random.default_rng(seed)
    element = int(rng.choice([2, 4]))
    rows: list[tuple[str, int]] = []
    if rng.random() < 0.6:
        rows.append(("embed.weight", int(rng.integers(1, 40)) * 64))
    for b in range(int(rng.integers(1, 6))):
        rows.append((f"layers.{b}.mlp.weight", int(rng.integers(1, 80)) * 64))
        if rng.random() < 0.5:
            rows.append((f"layers.{b}.norm.weight", int(rng.integers(1, 40)) * 64))
    if rng.random() < 0.6:
        rows.append(("head.weight", int(rng.integers(1, 40)) * 64))
    n = len(rows)
    numel = np.asarray([r[1] for r in rows])
    frame = pd.DataFrame({"name": [r[0] for r in rows], "layer": range(n), "numel": numel,
                          "bytes": numel * element, "forward_s": rng.uniform(0, 2e-3, n),
                          "backward_s": rng.uniform(0, 4e-3, n),
                          "update_s": rng.uniform(0, 1e-3, n),
                          "ready_order": list(range(n))[::-1]})
    meta = META | {"capture_method": "flops-model", "dtype": "fp32" if element == 4 else "bf16"}
    trace = ComputeTrace.from_frame(frame, meta)
    # a byte costs about as much as the compute per byte: groupings trade off
    per_byte = float(frame["backward_s"].sum()) / float(frame["bytes"].sum())
    model = AlphaBetaModel(10 ** rng.uniform(-4.5, -3), per_byte * 10 ** rng.uniform(-0.5, 1))
    policy = CollectiveDtypes(DTYPES[int(rng.integers(3))], DTYPES[int(rng.integers(3))],
                              bool(rng.random() < 1 / 3))
    return trace, model, policy, int(rng.choice([1, 2]))


def every_layout(problem: ShardedProblem) -> list[tuple[float, float, ShardedPlan]]:
    """(iteration seconds, peak bytes, plan) of every layout, replayed exactly."""
    out = []
    for ends, (reshard, fwd, bwd) in itertools.product(every_grouping(len(problem.blocks)),
                                                       settings(problem.max_prefetch)):
        ranges = merge_blocks(problem.blocks, ends)
        plan = ShardedPlan(algorithm="exhaustion",
                           units=units_from_ranges(problem.seq, ranges, reshard),
                           forward_prefetch=fwd, backward_prefetch=bwd,
                           mixed_precision=problem.mixed_precision)
        result = problem.replay(plan)
        out.append((result.iteration_s, result.gathered_peak_bytes, plan))
    return out


def caps(peaks: list[float], rng: np.random.Generator) -> list[float]:
    """Below the smallest peak (nothing fits), each of three random peaks exactly (a cap
    that binds), and one between two peaks."""
    ordered = sorted(set(peaks))
    chosen = [ordered[0] * 0.999, *rng.choice(ordered, size=3)]
    if len(ordered) > 1:
        i = int(rng.integers(len(ordered) - 1))
        chosen.append(0.5 * (ordered[i] + ordered[i + 1]))
    return [float(c) for c in chosen]


def wrong(problem: ShardedProblem, layouts: list[tuple[float, float, ShardedPlan]],
          solve) -> str | None:
    """What ``solve(problem)`` gets wrong against exhaustion, or None."""
    cap = problem.memory_cap_bytes
    fits = [t for t, peak, _ in layouts if peak <= cap]
    try:
        found = solve(problem)
    except NoLayoutFits:
        return f"said no layout fits under {cap!r}, fastest fitting {min(fits)!r} s" \
            if fits else None
    if not fits:
        return f"found a layout under {cap!r}, exhaustion none"
    if found.gathered_peak_bytes > cap * (1 + 1e-12):
        return f"peak {found.gathered_peak_bytes!r} over the cap {cap!r}"
    best = min(fits)
    if found.iteration_s > best and not same_time(found.iteration_s, best):
        return f"{found.iteration_s!r} s, exhaustion {best!r} s under {cap!r}"
    return None


def check(seed: int, semantics: str) -> list[str]:
    trace, model, policy, max_prefetch = synthetic_case(seed)
    base = ShardedProblem(trace, model, 4, semantics=semantics, max_prefetch=max_prefetch,
                          mixed_precision=policy)
    layouts = every_layout(base)
    problems = []
    for cap in caps([peak for _, peak, _ in layouts], np.random.default_rng(seed + 1000)):
        problem = ShardedProblem(trace, model, 4, semantics=semantics, memory_cap_bytes=cap,
                                 max_prefetch=max_prefetch, mixed_precision=policy)
        why = wrong(problem, layouts, lambda p: optimum(p).replay)
        if why:
            problems.append(f"seed {seed} {semantics} {policy.label}: optimum {why}")
    return problems


SEEDS = range(24)


@pytest.mark.parametrize("semantics", ["streams", "blocking"])
def test_the_optimum_under_a_policy_and_a_cap_is_exhaustions(semantics: str) -> None:
    """Streams: the exhaustive optimum's scorer; blocking: the blocking program."""
    problems = [p for seed in SEEDS for p in check(seed, semantics)]
    assert problems == []


def test_the_streams_programs_under_a_policy_are_exact() -> None:
    """The window and kept programs (the streams optimum with nothing left to enumerate),
    where they cover every setting (largest prefetch depth 1, root layers only around the
    blocks, a cap the kept program decides): exhaustion's answer."""
    covered, problems = 0, []
    for seed in SEEDS:
        trace, model, policy, _ = synthetic_case(seed)
        base = ShardedProblem(trace, model, 4, max_prefetch=1, mixed_precision=policy)
        layouts = every_layout(base)
        for cap in [math.inf, *caps([peak for _, peak, _ in layouts],
                                    np.random.default_rng(seed))]:
            problem = ShardedProblem(trace, model, 4, max_prefetch=1, mixed_precision=policy,
                                     memory_cap_bytes=cap)
            try:
                plan, _ = streams_optimum(problem, algorithm="t", enumerate_up_to=0)
            except NoLayoutFits:
                plan = None
            if plan is not None and plan.info.get("exact") is not True:
                continue  # a search stood in for a setting
            covered += 1
            why = wrong(problem, layouts,
                        lambda p: streams_optimum(p, algorithm="t", enumerate_up_to=0)[1])
            if why:
                problems.append(f"seed {seed} {policy.label}: programs {why}")
    assert problems == []
    assert covered >= 60


def test_a_policy_of_the_traces_own_dtype_changes_nothing() -> None:
    """A policy whose parameter and reduce dtypes are the trace's own moves the trace's
    bytes: the optimum's plan and replay are those without a policy, to the bit, under
    every cap (the three sizes are then one)."""
    for seed in range(8):
        trace, model, _, max_prefetch = synthetic_case(seed)
        own = "fp32" if trace.meta["dtype"] == "fp32" else "bf16"
        for semantics, cap in itertools.product(("streams", "blocking"), (None, 0.0)):
            found = []
            for policy in (None, CollectiveDtypes(own, own)):
                problem = ShardedProblem(trace, model, 4, semantics=semantics,
                                         max_prefetch=max_prefetch, mixed_precision=policy)
                if cap is not None:  # the median peak of the unconstrained optimum's space
                    peaks = sorted(peak for _, peak, _ in every_layout(problem))
                    problem = replace(problem, memory_cap_bytes=peaks[len(peaks) // 2])
                try:
                    scored = optimum(problem)
                except NoLayoutFits as exc:
                    found.append(exc.smallest_peak_bytes)
                    continue
                found.append((replace(scored.plan, mixed_precision=None), scored.replay))
            assert found[0] == found[1], (seed, semantics, cap)
