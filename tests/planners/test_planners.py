"""Planners: hand-computed examples through the replay engine, knobs and the registry.

Every trace here is SYNTHETIC (built in the test with known numbers), labelled so in its
metadata.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import pytest

from gradsched.costmodel import AlphaBetaModel
from gradsched.errors import ConfigError
from gradsched.experiments import make_plan
from gradsched.planners import (
    ALGORITHMS_ALL,
    EXTRA_ALGORITHMS,
    PLANNERS,
    PS_ALGORITHMS,
    WFBP_FAMILY,
    get_planner,
    planner_module,
    planner_names,
)
from gradsched.planners._family import (
    MB,
    finish_times,
    optimal_ends,
    ready_seq,
    wfbp_iteration_s,
)
from gradsched.replay import ReplayOptions, replay
from gradsched.ties import same_time
from gradsched.traces import ComputeTrace

META = {
    "kind": "compute", "model": "hand", "batch_size": 1, "device": "none", "dtype": "fp32",
    "world_size": 1, "software": {}, "capture_method": "synthetic", "iterations": None,
    "date": "2026-11-23", "source": "SYNTHETIC hand-computed planner test case, not measured",
}


def tiny_trace(
    nbytes: Sequence[int],
    backward_s: Sequence[float],
    forward_s: float | Sequence[float] = 0.5,
    layers: Sequence[int] | None = None,
) -> ComputeTrace:
    """SYNTHETIC trace given in READY order (index 0 = first ready = last layer).

    ``backward_s[i]`` is the backward time between tensor i-1 and tensor i becoming
    ready; ``layers`` (ready order) defaults to one layer per tensor.
    """
    n = len(nbytes)
    fwd = np.broadcast_to(np.asarray(forward_s, dtype=float), (n,))
    lay = np.arange(n)[::-1] if layers is None else np.asarray(layers)
    ready = pd.DataFrame({
        "name": [f"t{i}" for i in range(n)],  # t0 is ready first
        "layer": lay,
        "numel": np.asarray(nbytes, dtype=np.int64) // 4,
        "bytes": np.asarray(nbytes, dtype=np.int64),
        "forward_s": fwd,
        "backward_s": np.asarray(backward_s, dtype=float),
        "ready_order": np.arange(n),
    })
    frame = ready.iloc[::-1].reset_index(drop=True)  # rows in forward order
    return ComputeTrace.from_frame(frame, META)


def engine_s(trace: ComputeTrace, plan: Any, model: Any, world_size: int = 4) -> float:
    return replay(trace, plan, model, world_size, ReplayOptions(iterations=4)).iteration_s


def bucket_names(plan: Any) -> list[list[str]]:
    return [list(b.tensors) for b in plan.buckets]


# ---------------------------------------------------------------------------------------
# Example A (3 tensors). alpha = 0.25 s, beta = 1/1024 s per byte.
# ready order: r = [1, 2, 3] s, bytes = [1024, 512, 2048], T = [1.25, 0.75, 2.25] s.
# forward 3 x 0.5 = 1.5 s, backward 3 s, update 0.
# WFBP:    f = [1 + 1.25, max(2, 2.25) + 0.75, max(3, 3) + 2.25] = [2.25, 3.0, 5.25]
#          iteration = 1.5 + max(3, 5.25) = 6.75
# SyncSGD: one bucket of 3584 B, T = 0.25 + 3.5 = 3.75, starts at 3 -> 6.75;
#          iteration = 1.5 + 6.75 = 8.25
# Groupings: {0,1}{2}: 3.75 then 6.0; {0}{1,2}: 2.25 then 3 + 2.75 = 5.75; all: 6.75.
#          the optimum is WFBP's 5.25.
# ---------------------------------------------------------------------------------------
ALPHA_A, BETA_A = 0.25, 1 / 1024


@pytest.fixture
def example_a() -> ComputeTrace:
    return tiny_trace([1024, 512, 2048], [1.0, 1.0, 1.0])


def test_wfbp_closed_form(example_a: ComputeTrace) -> None:
    model = AlphaBetaModel(ALPHA_A, BETA_A)
    plan = make_plan("wfbp", example_a, model, 4)
    assert bucket_names(plan) == [["t0"], ["t1"], ["t2"]]
    assert engine_s(example_a, plan, model) == pytest.approx(6.75)
    seq = ready_seq(example_a)
    assert wfbp_iteration_s(seq, np.array([1, 2, 3]), model, 4) == pytest.approx(6.75)


def test_syncsgd_closed_form(example_a: ComputeTrace) -> None:
    model = AlphaBetaModel(ALPHA_A, BETA_A)
    plan = make_plan("syncsgd", example_a, model, 4)
    assert bucket_names(plan) == [["t0", "t1", "t2"]]
    assert engine_s(example_a, plan, model) == pytest.approx(8.25)


def test_optimum_of_example_a(example_a: ComputeTrace) -> None:
    model = AlphaBetaModel(ALPHA_A, BETA_A)
    ends, finish = optimal_ends(ready_seq(example_a), model, 4)
    assert ends.tolist() == [1, 2, 3]
    assert finish == pytest.approx(5.25)
    plan = make_plan("search", example_a, model, 4, {"families": "wfbp"})
    assert engine_s(example_a, plan, model) == pytest.approx(6.75)


def test_one_rank_communicates_nothing(example_a: ComputeTrace) -> None:
    model = AlphaBetaModel(ALPHA_A, BETA_A)
    plan = make_plan("oasr", example_a, model, 1)
    assert plan.info["finish_s"] == pytest.approx(3.0)  # ready time of the last tensor
    assert engine_s(example_a, plan, model, 1) == pytest.approx(4.5)


# ---------------------------------------------------------------------------------------
# Example B (4 tensors), MG-WFBP's merge decisions. alpha = 1 s, beta = 1/1024 s per byte,
# so the start-up a saved by a merge is exactly alpha = 1.
# ready r = [1, 1.5, 4, 4.25], bytes = [2048, 1024, 1024, 512], T single = [3, 2, 2, 1.5].
# k=0: G={0}, start(G) = 1; r1 = 1.5 < 1 + 1            -> merge, G = {0,1} (3072 B)
# k=1: start(G) = max(r1, -inf) = 1.5; r2 = 4 >= 2.5   -> close G: finish 1.5 + 4 = 5.5
# k=2: G={2}, start = max(4, 5.5) = 5.5; r3 = 4.25 < 6.5 -> merge, G = {2,3} (1536 B)
# groups {0,1}{2,3}; finish = 5.5 + 2.5 = 8.0; iteration = 4 x 0.5 + 8.0 = 10.0
# WFBP: f = [4, 6, 8, 9.5] -> 11.5.
# The exact optimum is {0}{1,2,3}: f0 = 4, then max(4.25, 4) + (1 + 2.5) = 7.75 -> 9.75
# (all 8 groupings: 9.5, 9.0, 8.5, 10.5, 8.0, 8.5, 7.75, 9.75).
# ---------------------------------------------------------------------------------------
@pytest.fixture
def example_b() -> ComputeTrace:
    return tiny_trace([2048, 1024, 1024, 512], [1.0, 0.5, 2.5, 0.25])


def test_mgwfbp_merge_decisions(example_b: ComputeTrace) -> None:
    model = AlphaBetaModel(1.0, 1 / 1024)
    plan = make_plan("mgwfbp", example_b, model, 4)
    assert bucket_names(plan) == [["t0", "t1"], ["t2", "t3"]]
    assert plan.info["groups"] == [2, 2]
    assert plan.info["finish_s"] == pytest.approx(8.0)
    assert engine_s(example_b, plan, model) == pytest.approx(10.0)
    assert engine_s(example_b, make_plan("wfbp", example_b, model, 4), model) == \
        pytest.approx(11.5)


def test_optimal_beats_mgwfbp_on_example_b(example_b: ComputeTrace) -> None:
    model = AlphaBetaModel(1.0, 1 / 1024)
    for name in ("oasr", "search"):
        plan = make_plan(name, example_b, model, 4, {"families": "wfbp"} if name == "search"
                         else {})
        assert bucket_names(plan) == [["t0"], ["t1", "t2", "t3"]]
        assert engine_s(example_b, plan, model) == pytest.approx(9.75)


def test_mgwfbp_without_startup_never_merges(example_b: ComputeTrace) -> None:
    plan = make_plan("mgwfbp", example_b, AlphaBetaModel(0.0, 1e-3), 4)
    assert plan.n_buckets == 4


# ---------------------------------------------------------------------------------------
# DDP bucket boundaries. Sizes in ready order (MiB): [0.5, 0.75, 10, 10, 10, 30, 1].
# default (reducer.cpp rebuild_buckets): first cap 1 MiB: 0.5, 1.25 >= 1 -> close {0,1};
#   cap 25: 10, 20, 30 >= 25 -> close {2,3,4}; 30 >= 25 -> {5}; {6} left over.
# (torch's real buckets and the explicit-cap rule: tests/planners/test_ddp.py)
# ---------------------------------------------------------------------------------------
DDP_MB = [0.5, 0.75, 10, 10, 10, 30, 1]


@pytest.fixture
def ddp_trace() -> ComputeTrace:
    return tiny_trace([int(m * MB) for m in DDP_MB], [1e-3] * len(DDP_MB))


def test_ddp_pytorch_rule(ddp_trace: ComputeTrace) -> None:
    plan = make_plan("ddp", ddp_trace, AlphaBetaModel(1e-5, 1e-10), 8)
    assert [len(b) for b in bucket_names(plan)] == [2, 3, 1, 1]
    assert plan.knobs == {"bucket_cap_mb": None, "first_bucket_mb": None,
                          "find_unused_parameters": False, "set_last_bucket_cap": False}


def test_ddp_cap_knob_from_string(ddp_trace: ComputeTrace) -> None:
    # explicit cap 100 MiB is also the first bucket's cap (torch 2.14 distributed.py
    # L108-110): 0.5 + 0.75 + 10 + 10 + 10 + 30 + 1 = 62.25 < 100 -> one bucket.
    plan = make_plan("ddp", ddp_trace, AlphaBetaModel(1e-5, 1e-10), 8, {"bucket_cap_mb": "100"})
    assert [len(b) for b in bucket_names(plan)] == [7]
    # with a 1 MiB first bucket (dist._DEFAULT_FIRST_BUCKET_BYTES set): {0,1}, then 61 MiB.
    plan = make_plan("ddp", ddp_trace, AlphaBetaModel(1e-5, 1e-10), 8,
                     {"bucket_cap_mb": "100", "first_bucket_mb": "1"})
    assert [len(b) for b in bucket_names(plan)] == [2, 5]


def test_ddp_replay_matches_recurrence(ddp_trace: ComputeTrace) -> None:
    model = AlphaBetaModel(1e-4, 1e-9)
    plan = make_plan("ddp", ddp_trace, model, 8)
    seq = ready_seq(ddp_trace)
    assert engine_s(ddp_trace, plan, model, 8) == pytest.approx(
        wfbp_iteration_s(seq, np.array([2, 5, 6, 7]), model, 8), rel=1e-12)


# ---------------------------------------------------------------------------------------
# Horovod cycles: cycle 1 ms, threshold 2 MiB, beta = 0 and alpha = 0.5 ms per bucket.
# ready (ms) = [0.4, 0.9, 1.0, 2.3, 2.5, 2.6]; sizes (MiB) = [1, 0.5, 1, 1, 1.5, 0.25].
# cycle index = ceil(ready / 1 ms) = [1, 1, 1, 3, 3, 3].
# cycle 1: 1 + 0.5 = 1.5, + 1 > 2 -> {0,1}, {2}; cycle 3: 1 + 1.5 > 2 -> {3}; {4,5}.
# releases (ms) = [1, 1, 3, 3]; comm: [1, 1.5], [1.5, 2], [3, 3.5], [3.5, 4].
# iteration = forward 6 x 0.1 ms + max(backward 2.6, 4.0) ms = 4.6 ms.
# ---------------------------------------------------------------------------------------
def test_horovod_cycle_releases() -> None:
    ms = 1e-3
    trace = tiny_trace([int(m * MB) for m in [1, 0.5, 1, 1, 1.5, 0.25]],
                       [0.4 * ms, 0.5 * ms, 0.1 * ms, 1.3 * ms, 0.2 * ms, 0.1 * ms],
                       forward_s=0.1 * ms)
    model = AlphaBetaModel(0.5 * ms, 0.0)
    plan = make_plan("horovod", trace, model, 4,
                     {"cycle_time_ms": "1", "fusion_threshold_mb": "2"})
    assert bucket_names(plan) == [["t0", "t1"], ["t2"], ["t3"], ["t4", "t5"]]
    assert [b.release_s for b in plan.buckets] == pytest.approx([ms, ms, 3 * ms, 3 * ms])
    assert engine_s(trace, plan, model) == pytest.approx(4.6 * ms)


@pytest.mark.parametrize(("defaults", "threshold", "cycle"),
                         [("pre021", 64.0, 5.0), ("post021", 128.0, 1.0)])
def test_horovod_defaults(example_a: ComputeTrace, defaults: str, threshold: float,
                          cycle: float) -> None:
    plan = make_plan("horovod", example_a, AlphaBetaModel(1e-4, 1e-9), 4, {"defaults": defaults})
    assert plan.knobs == {"defaults": defaults, "fusion_threshold_mb": threshold,
                          "cycle_time_ms": cycle, "backend": "nccl"}  # no backend: default
    # ready at 1, 2, 3 s: each in its own cycle, released at its (exact) ready time.
    assert [b.release_s for b in plan.buckets] == pytest.approx([1.0, 2.0, 3.0])


# ---------------------------------------------------------------------------------------
# DeAR grouping (authors' rule over layers in forward order: add while the sum stays
# strictly below the threshold). Layer sizes forward order (MiB): [10, 10, 10, 30],
# threshold 25: {L0, L1} (20), {L2} (20 + 10 is not < 25), {L3}. Buckets in ready order.
# ---------------------------------------------------------------------------------------
def test_dear_grouping_without_search() -> None:
    trace = tiny_trace([30 * MB, 10 * MB, 10 * MB, 10 * MB], [1e-3] * 4)  # t0 = layer 3
    plan = make_plan("dear", trace, AlphaBetaModel(1e-4, 1e-9), 8, {"search": "none"})
    assert bucket_names(plan) == [["t0"], ["t1"], ["t2", "t3"]]
    assert {b.collective for b in plan.buckets} == {"rs_ag"}
    assert plan.update == "per_layer"


def test_dear_bo_records_thresholds(example_b: ComputeTrace) -> None:
    model = AlphaBetaModel(1e-3, 1e-6)
    plan = make_plan("dear", example_b, model, 8, {"bo_iters": "6"})
    evaluated = plan.info["evaluated"]
    assert len(evaluated) == 6
    assert evaluated[0]["threshold_mb"] == pytest.approx(25.0)
    assert all(1.0 <= e["threshold_mb"] <= 256.0 for e in evaluated)
    best = min(e["iteration_s"] for e in evaluated)
    assert plan.info["best_iteration_s"] == best
    assert engine_s(example_b, plan, model, 8) == pytest.approx(best)


# ---------------------------------------------------------------------------------------
# ByteScheduler / P3: per-tensor tasks, partition and credit in parameters; the detailed
# tests against the original's source lines are in tests/planners/test_bytescheduler.py.
# ---------------------------------------------------------------------------------------
def test_bytescheduler_partitions_and_priorities() -> None:
    # ready order: layer 1 (two tensors, 3 + 6 MiB), then layer 0 (1 MiB).
    trace = tiny_trace([3 * MB, 6 * MB, MB], [1e-3, 0.0, 1e-3], layers=[1, 1, 0])
    plan = make_plan("bytescheduler", trace, AlphaBetaModel(1e-4, 1e-9), 8,
                     {"partition_params": "1000000", "credit_params": "2000000",
                      "search": "none"})
    assert bucket_names(plan) == [["t0"], ["t1"], ["t2"]]
    assert [b.chunks for b in plan.buckets] == [1, 2, 1]  # ceil(numel / 1e6)
    assert [b.priority for b in plan.buckets] == [2, 1, 0]  # forward index
    assert plan.credit_bytes == pytest.approx(8e6) and plan.update == "per_layer"
    p3 = make_plan("bytescheduler", trace, AlphaBetaModel(1e-4, 1e-9), 8,
                   {"p3": "true", "search": "none"})
    # 3, 6, 1 MiB = 786,432, 1,572,864, 262,144 params -> ceil(/50,000) = 16, 32, 6 slices
    assert [b.chunks for b in p3.buckets] == [16, 32, 6]
    assert p3.channels == 1


def test_bytescheduler_search_never_worse_than_its_start() -> None:
    trace = tiny_trace([3 * MB, 6 * MB, MB], [1e-3, 0.0, 1e-3], layers=[1, 1, 0])
    model = AlphaBetaModel(1e-4, 1e-9)
    plan = make_plan("bytescheduler", trace, model, 8, {"search": "partition",
                                                        "tune_iters": 5})
    first = plan.info["evaluated"][0]
    assert first["partition_params"] == 1_000_000
    assert plan.info["best_iteration_s"] <= first["iteration_s"]


# ---------------------------------------------------------------------------------------
# search (all families) and best.
# ---------------------------------------------------------------------------------------
def test_optimal_all_families_records_candidates(example_b: ComputeTrace) -> None:
    model = AlphaBetaModel(1e-3, 1e-6)
    plan = make_plan("search", example_b, model, 8, {"bo_iters": 4})
    info = plan.info
    assert info["candidates"]["wfbp-dp"] >= info["iteration_s"]
    assert info["iteration_s"] == min(info["candidates"].values())
    assert info["family"] in info["candidates"]
    assert engine_s(example_b, plan, model, 8) == pytest.approx(info["iteration_s"])


def test_best_is_min_over_candidates(example_b: ComputeTrace) -> None:
    model = AlphaBetaModel(1e-3, 1e-6)
    plan = make_plan("best", example_b, model, 8)
    cands = plan.info["candidates"]
    assert set(ALGORITHMS_ALL) - {"best"} <= set(cands)
    assert same_time(plan.info["iteration_s"], min(cands.values()))  # ties: gradsched.ties
    assert plan.info["iteration_s"] <= cands["search"]


def test_best_scores_with_interference(example_b: ComputeTrace) -> None:
    # A collective that costs backward 5 ms of compute (on a SYNTHETIC trace) makes plans
    # of many collectives lose: best, scoring with it, never picks more collectives, and
    # its pick is at least as good as the bare-model pick when both are replayed with it.
    model = AlphaBetaModel(1e-4, 1e-9)
    bare = make_plan("best", example_b, model, 8)
    cpu = make_plan("best", example_b, model, 8, {"collective_cpu_s": "5e-3"})
    options = ReplayOptions(collective_cpu_s=5e-3)
    assert cpu.knobs["collective_cpu_s"] == 5e-3
    assert cpu.info["iteration_s"] == pytest.approx(
        replay(example_b, cpu, model, 8, options).iteration_s)
    assert cpu.info["iteration_s"] <= replay(example_b, bare, model, 8, options).iteration_s
    assert len(cpu.buckets) <= len(bare.buckets)
    with pytest.raises(ConfigError):
        make_plan("best", example_b, model, 8, {"collective_cpu_s": "-1"})


# ---------------------------------------------------------------------------------------
# Registry and knobs.
# ---------------------------------------------------------------------------------------
def test_registry_lists_every_planner() -> None:
    assert planner_names() == [*ALGORITHMS_ALL, *PS_ALGORITHMS, *EXTRA_ALGORITHMS] \
        == list(PLANNERS)
    assert set(WFBP_FAMILY) <= set(PLANNERS)
    for name in PLANNERS:
        spec = get_planner(name)
        assert spec.help().startswith(name)
        # a module docstring that says where the algorithm comes from (README, "Extending")
        mod_doc = __import__(planner_module(name), fromlist=["x"]).__doc__
        assert mod_doc and mod_doc.strip(), planner_module(name)


def test_unknown_planner_and_knob(example_a: ComputeTrace) -> None:
    model = AlphaBetaModel(1e-4, 1e-9)
    with pytest.raises(ConfigError, match="known: wfbp"):
        make_plan("nope", example_a, model, 4)
    with pytest.raises(ConfigError, match="valid knobs: bucket_cap_mb, first_bucket_mb, find_"):
        make_plan("ddp", example_a, model, 4, {"cap": 3})
    with pytest.raises(ConfigError, match=r"valid knobs: \(none\)"):
        make_plan("wfbp", example_a, model, 4, {"x": 1})


@pytest.mark.parametrize(("name", "knobs", "message"), [
    ("ddp", {"bucket_cap_mb": "-1"}, "bucket_cap_mb"),
    ("ddp", {"bucket_cap_mb": "big"}, "not a valid float"),
    ("ddp", {"find_unused_parameters": "other"}, "not a valid bool"),
    ("horovod", {"defaults": "v1"}, "not one of"),
    ("horovod", {"cycle_time_ms": "0"}, "cycle_time_ms"),
    ("dear", {"bo_iters": "2.5"}, "not a valid int"),
    ("dear", {"bo_iters": "0"}, "bo_iters"),
    ("bytescheduler", {"credit_params": "0"}, "credit_params"),
    ("bytescheduler", {"p3": "maybe"}, "not a valid bool"),
    ("bytescheduler", {"p3": "true", "search": "credit"}, "p3"),
    ("search", {"families": "some"}, "not one of"),
])
def test_bad_knobs(example_a: ComputeTrace, name: str, knobs: dict[str, str],
                   message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        make_plan(name, example_a, AlphaBetaModel(1e-4, 1e-9), 4, knobs)


def test_world_size_must_be_positive(example_a: ComputeTrace) -> None:
    with pytest.raises(ConfigError, match="world_size"):
        make_plan("wfbp", example_a, AlphaBetaModel(1e-4, 1e-9), 0)


def test_finish_times_unrolled_matches_loop() -> None:
    rng = np.random.default_rng(3)
    ready = np.sort(rng.uniform(0, 1, 50))
    dur = rng.uniform(0, 0.1, 50)
    expected, prev = [], -np.inf
    for r, d in zip(ready, dur, strict=True):
        prev = max(r, prev) + d
        expected.append(prev)
    np.testing.assert_allclose(finish_times(ready, dur), expected, rtol=1e-12)


@pytest.mark.parametrize("alpha, beta", [(1e-3, 1e-9), (5e-5, 1e-8)])
def test_optimal_is_no_slower_than_any_planner(alpha, beta):
    """`search` searches every family's knobs, so no planner at its defaults beats it and
    the `best` oracle finds nothing faster. (SYNTHETIC trace and model.)"""
    from gradsched.costmodel import AlphaBetaModel
    from gradsched.experiments import make_plan
    from gradsched.planners import ALGORITHMS_ALL
    from gradsched.replay import replay
    from tests.conftest import synthetic_compute_trace

    trace = synthetic_compute_trace(12, seed=3)
    model = AlphaBetaModel(alpha, beta)
    times = {name: replay(trace, make_plan(name, trace, model, 8, {}), model, 8).iteration_s
             for name in ALGORITHMS_ALL}
    for name, value in times.items():
        assert times["search"] <= value * (1 + 1e-9), (name, times)


def test_best_is_never_slower_than_tuned_ddp(example_b: ComputeTrace) -> None:
    """``best`` holds DDP at every swept cap among its candidates, so it is never slower than
    the tuned DDP."""
    from gradsched.planners.search import DDP_CAPS_MB

    model = AlphaBetaModel(1e-3, 1e-6)
    plan = make_plan("best", example_b, model, 8, {"issue": "executor"})
    cands = plan.info["candidates"]
    ddp_labels = [k for k in cands if k.startswith("ddp(bucket_cap_mb=")]
    assert len(ddp_labels) == len(DDP_CAPS_MB)
    assert plan.info["iteration_s"] <= min(cands[k] for k in ddp_labels)
