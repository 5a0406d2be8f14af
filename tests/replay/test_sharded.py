"""The sharded replay: hand-computed iterations, the lower bound against random plans, the
memory peak, and the exact optimum under a memory cap.

All traces here are SYNTHETIC (random or hand-made); nothing is a measurement.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gradsched.costmodel.base import AlphaBetaModel
from gradsched.errors import ConfigError, InputError
from gradsched.experiments.sharded.common import ShardedProblem
from gradsched.experiments.sharded.optimum import OPTIMUM, compare, exhaustive_optimum, optimum
from gradsched.plan_sharded import ShardedPlan, Unit
from gradsched.planners.sharded import make_sharded_plan, saturation_cap_bytes
from gradsched.replay.sharded import replay_sharded
from gradsched.replay.sharded_bounds import sharded_lower_bound_s
from gradsched.traces import ComputeTrace
from tests.replay.test_bounds import MODELS, P

META = {"kind": "compute", "model": "synthetic-sharded", "batch_size": 1, "device": "none",
        "dtype": "fp32", "world_size": 1, "software": {}, "capture_method": "synthetic",
        "iterations": None, "date": "2026-11-26",
        "source": "SYNTHETIC test fixture, not measured"}


def block_trace(blocks: list[list[int]], stem: int = 0, head: int = 0, *, forward_s: float = 1.0,
                backward_s: float = 2.0, update_s: float = 0.0) -> ComputeTrace:
    """SYNTHETIC: an optional root stem layer, blocks of layers (bytes per layer), an
    optional root head layer; every layer one tensor with the given times."""
    rows = []
    if stem:
        rows.append(("stem.weight", stem))
    for b, layers in enumerate(blocks):
        rows += [(f"blocks.{b}.l{i}.weight", size) for i, size in enumerate(layers)]
    if head:
        rows.append(("head.weight", head))
    n = len(rows)
    frame = pd.DataFrame({"name": [r[0] for r in rows], "layer": range(n),
                          "numel": [r[1] for r in rows], "bytes": [r[1] for r in rows],
                          "forward_s": forward_s, "backward_s": backward_s,
                          "update_s": update_s, "ready_order": list(range(n))[::-1]})
    return ComputeTrace.from_frame(frame, META)


def test_blocking_iteration_adds_every_collective() -> None:
    """Blocking (CPU/gloo FSDP2): nothing overlaps. Two blocks of 100 and 300 bytes, a root
    of 50: alpha-beta a=1 s, b=0.01 s/B; an all-gather or reduce-scatter costs half an
    all-reduce (AlphaBetaModel's default shares)."""
    trace = block_trace([[100], [300]], stem=50, update_s=4.0)
    model = AlphaBetaModel(1.0, 0.01)
    plan = make_sharded_plan("fsdp2", trace, model, 2)
    result = replay_sharded(trace, plan, model, 2, semantics="blocking")
    t = {n: 0.5 * (1.0 + 0.01 * n) for n in (50, 100, 300)}
    comm = (t[50] + t[100] + t[300]  # forward all-gathers
            + t[100] + t[300]  # backward all-gathers (resharded after forward)
            + t[50] + t[100] + t[300])  # reduce-scatters
    compute = 3 * 1.0 + 3 * 2.0 + 3 * 4.0 / 2  # the update runs on shards: 1/P of it
    assert result.iteration_s == pytest.approx(compute + comm)
    assert result.n_collectives == 8


def test_streams_overlap_a_prefetched_all_gather() -> None:
    """Streams, no root: unit 1's all-gather (prefetched at unit 0's pre-forward) overlaps
    unit 0's forward."""
    trace = block_trace([[100], [100]], forward_s=5.0, backward_s=5.0)
    model = AlphaBetaModel(1.0, 0.0)
    plan = ShardedPlan("x", units=(Unit(("blocks.0.l0.weight",), False),
                                   Unit(("blocks.1.l0.weight",), False)),
                       forward_prefetch=1, backward_prefetch=1)
    result = replay_sharded(trace, plan, model, 2, semantics="streams")
    # each collective 0.5 s: AG0 [0, 0.5], AG1 [0.5, 1]; forward [0.5, 5.5], [5.5, 10.5];
    # backward [10.5, 15.5] -> RS1 [15.5, 16], [15.5, 20.5] -> RS0 [20.5, 21]
    assert result.forward_end_s == pytest.approx(10.5)
    assert result.iteration_s == pytest.approx(21.0)


def random_block_trace(seed: int) -> ComputeTrace:
    """SYNTHETIC: 1-6 blocks of 1-3 layers, optional root stem/head, random times."""
    rng = np.random.default_rng(seed)
    blocks = [list(rng.integers(4, 2**16, size=rng.integers(1, 4)) * 4)
              for _ in range(rng.integers(1, 7))]
    trace = block_trace(blocks, stem=int(rng.integers(0, 2)) * 4096,
                        head=int(rng.integers(0, 2)) * 8192)
    frame = trace.frame.assign(forward_s=rng.uniform(0, 2e-3, len(trace.frame)),
                               backward_s=rng.uniform(0, 4e-3, len(trace.frame)),
                               update_s=rng.uniform(0, 2e-4, len(trace.frame)))
    return ComputeTrace.from_frame(frame, META)


def random_sharded_plan(trace: ComputeTrace, seed: int) -> ShardedPlan:
    rng = np.random.default_rng(seed + 7)
    plan = make_sharded_plan("fsdp2", trace, MODELS[0], P)
    units = list(plan.units)
    merged: list[Unit] = []
    for unit in units:
        if merged and rng.random() < 0.4:
            merged[-1] = Unit(merged[-1].tensors + unit.tensors, bool(rng.random() < 0.5))
        else:
            merged.append(Unit(unit.tensors, bool(rng.random() < 0.5)))
    return ShardedPlan("random", tuple(merged), forward_prefetch=int(rng.integers(0, 4)),
                       backward_prefetch=int(rng.integers(0, 4)))


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 100_000), which=st.integers(0, len(MODELS) - 1))
def test_no_sharded_plan_beats_the_bound(seed: int, which: int) -> None:
    trace = random_block_trace(seed)
    plan = random_sharded_plan(trace, seed)
    model = MODELS[which]
    bound = sharded_lower_bound_s(trace, model, P)
    streams = replay_sharded(trace, plan, model, P, semantics="streams")
    blocking = replay_sharded(trace, plan, model, P, semantics="blocking")
    assert streams.iteration_s >= bound * (1 - 1e-9)
    assert blocking.iteration_s >= streams.iteration_s * (1 - 1e-9)
    largest_unit = max(sum(trace.frame.set_index("name").loc[list(u.tensors), "bytes"])
                       for u in plan.units)
    assert streams.gathered_peak_bytes >= largest_unit


def test_optimum_is_no_slower_than_fsdp2_and_meets_the_cap() -> None:
    trace = block_trace([[4000, 4000], [40000], [400], [4000, 40]], stem=4096, head=8192)
    model = AlphaBetaModel(2e-3, 1e-6)
    default = replay_sharded(trace, make_sharded_plan("fsdp2", trace, model, P), model, P)
    best = optimum(ShardedProblem(trace, model, P))
    assert best.replay.iteration_s <= default.iteration_s
    capped = optimum(ShardedProblem(trace, model, P,
                                    memory_cap_bytes=default.gathered_peak_bytes))
    assert capped.replay.gathered_peak_bytes <= default.gathered_peak_bytes
    assert capped.replay.iteration_s >= best.replay.iteration_s


def test_a_memory_cap_no_plan_meets_is_a_clear_error() -> None:
    trace = block_trace([[4000], [4000]])
    with pytest.raises(ConfigError, match="no sharded plan fits the memory cap"):
        optimum(ShardedProblem(trace, AlphaBetaModel(1e-3, 1e-6), P, memory_cap_bytes=100))


def test_compare_lists_every_planner_above_the_bound() -> None:
    trace = block_trace([[4000], [40000], [400]], stem=4096)
    rows = compare(ShardedProblem(trace, AlphaBetaModel(2e-3, 1e-6), P, semantics="blocking"))
    assert [r["algorithm"] for r in rows][-1] == OPTIMUM
    assert all(r["iteration_s"] >= r["lower_bound_s"] for r in rows)


def test_saturation_cap_is_clipped_to_the_compilers_range() -> None:
    assert saturation_cap_bytes(AlphaBetaModel(1e-9, 1e-9), P) == 10 * 2**20
    assert saturation_cap_bytes(AlphaBetaModel(10.0, 1e-12), P) == 500 * 2**20


def test_plan_json_round_trip_and_refusals(tmp_path) -> None:
    trace = block_trace([[4000], [4000, 8]], stem=64)
    plan = make_sharded_plan("fsdp2", trace, AlphaBetaModel(1e-3, 1e-6), P)
    plan.save(tmp_path / "p.json")
    assert ShardedPlan.load(tmp_path / "p.json") == plan
    split = ShardedPlan("x", (Unit(("blocks.1.l0.weight",)),))
    with pytest.raises(InputError, match=r"splits a layer|contiguous"):
        replay_sharded(trace, ShardedPlan("x", (Unit(("blocks.0.l0.weight",
                                                      "blocks.1.l1.weight")),)),
                       AlphaBetaModel(1e-3, 1e-6), P)
    assert replay_sharded(trace, split, AlphaBetaModel(1e-3, 1e-6), P).n_collectives > 0
    with pytest.raises(InputError, match="does not have"):
        replay_sharded(trace, ShardedPlan("x", (Unit(("nope",)),)), AlphaBetaModel(1, 1), P)
    data = plan.to_dict() | {"format_version": 9}
    with pytest.raises(InputError, match="format_version"):
        ShardedPlan.from_dict(data)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 100_000), which=st.integers(0, len(MODELS) - 1))
def test_blocking_dynamic_program_equals_the_exhaustive_optimum(seed: int, which: int) -> None:
    """Without a memory cap, blocking semantics: the DP's time is the exhaustive search's."""
    trace = random_block_trace(seed)
    model = MODELS[which]
    dp = optimum(ShardedProblem(trace, model, P, semantics="blocking"))
    full = exhaustive_optimum(ShardedProblem(trace, model, P, semantics="blocking"))
    assert dp.replay.iteration_s == pytest.approx(full.replay.iteration_s, rel=1e-12)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 100_000), which=st.integers(0, len(MODELS) - 1),
       fraction=st.floats(0.3, 1.6))
def test_capped_blocking_dynamic_program_equals_the_exhaustive_optimum(
        seed: int, which: int, fraction: float) -> None:
    """Under a memory cap (a fraction of FSDP2's default peak), blocking semantics: the DP
    finds the exhaustive search's time within the cap, or both find no plan."""
    trace = random_block_trace(seed)
    model = MODELS[which]
    default = replay_sharded(trace, make_sharded_plan("fsdp2", trace, model, P), model, P,
                             semantics="blocking")
    cap = fraction * default.gathered_peak_bytes
    try:
        full = exhaustive_optimum(ShardedProblem(trace, model, P, semantics="blocking",
                                                 memory_cap_bytes=cap))
    except ConfigError:
        with pytest.raises(ConfigError, match="no sharded plan fits the memory cap"):
            optimum(ShardedProblem(trace, model, P, semantics="blocking", memory_cap_bytes=cap))
        return
    dp = optimum(ShardedProblem(trace, model, P, semantics="blocking", memory_cap_bytes=cap))
    assert dp.replay.gathered_peak_bytes <= cap
    assert dp.replay.iteration_s == pytest.approx(full.replay.iteration_s, rel=1e-12)
    assert dp.plan.knobs["memory_cap_bytes"] == cap


def test_capped_blocking_optimum_keeps_fsdp2s_peak_and_is_no_slower() -> None:
    """At FSDP2's default peak the optimum reshards (keeping every unit gathered needs more)
    and is no slower than FSDP2's default; without the cap it keeps them gathered."""
    trace = block_trace([[4000], [4000], [4000], [4000]], stem=4096, head=8192)
    model = AlphaBetaModel(2e-3, 1e-6)
    default = replay_sharded(trace, make_sharded_plan("fsdp2", trace, model, P), model, P,
                             semantics="blocking")
    free = optimum(ShardedProblem(trace, model, P, semantics="blocking"))
    capped = optimum(ShardedProblem(trace, model, P, semantics="blocking",
                                    memory_cap_bytes=default.gathered_peak_bytes))
    assert not free.plan.units[0].reshard_after_forward
    assert free.replay.gathered_peak_bytes > default.gathered_peak_bytes
    assert all(u.reshard_after_forward for u in capped.plan.units)
    assert capped.replay.gathered_peak_bytes <= default.gathered_peak_bytes
    assert default.iteration_s >= capped.replay.iteration_s >= free.replay.iteration_s


def test_zero3_units_and_prefetch_follow_deepspeeds_element_budgets() -> None:
    """SYNTHETIC sizes: blocks of 4000 bytes = 1000 fp32 elements... here 1-byte elements."""
    from gradsched.planners.sharded import zero_prefetch_depth

    trace = block_trace([[400], [400], [400], [400]])  # 1-byte elements: 400 each
    plan = make_sharded_plan("zero3", trace, AlphaBetaModel(1e-3, 1e-6), P,
                             {"reduce_bucket_size": "800", "prefetch_bucket_size": "900"})
    assert [len(u.tensors) for u in plan.units] == [2, 2]  # 400 + 400 <= 800, not 1200
    assert plan.forward_prefetch == 1  # one following unit (800) fits in 900, two do not
    assert zero_prefetch_depth([10, 10, 10, 10], 25) == 2
    assert zero_prefetch_depth([10, 30], 25) == 0
