"""The sharded-optimizer frameworks' planners (megatron, deepspeed_zero, zero1_torch):
hand-computed schedules through the replay, their knobs, and planted changes of bucket
order or issue point that the hand values catch.

Every trace here is SYNTHETIC (built in the test with known numbers).

The trace (ready order t0, t1, t2; registration/forward order t2, t1, t0): bytes 1024, 512,
2048 (numel 256, 128, 512); 1 s of backward each (ready at 1, 2, 3 s); forward 3 x 0.5 s;
update 0.4, 0.2, 0.6 s (1.2 s). AlphaBetaModel(0.25, 1/1024): all-reduce of x bytes
0.25 + x/1024 s; reduce-scatter, all-gather and broadcast half of that.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from gradsched.costmodel import AlphaBetaModel
from gradsched.errors import ConfigError
from gradsched.planners import make_plan
from gradsched.planners.deepspeed_zero import gather_sizes
from gradsched.planners.zero1_torch import partition
from gradsched.replay import ReplayOptions, replay
from gradsched.traces import ComputeTrace

META = {
    "kind": "compute", "model": "hand", "batch_size": 1, "device": "none", "dtype": "fp32",
    "world_size": 1, "software": {}, "capture_method": "synthetic", "iterations": None,
    "date": "2026-11-23", "source": "SYNTHETIC hand-computed planner test case, not measured",
}
MODEL = AlphaBetaModel(0.25, 1 / 1024)


def trace(nbytes=(1024, 512, 2048), update=(0.4, 0.2, 0.6)) -> ComputeTrace:
    """SYNTHETIC; arguments in ready order (t0 first)."""
    n = len(nbytes)
    ready = pd.DataFrame({
        "name": [f"t{i}" for i in range(n)], "layer": np.arange(n)[::-1],
        "numel": np.asarray(nbytes, dtype=np.int64) // 4,
        "bytes": np.asarray(nbytes, dtype=np.int64), "forward_s": [0.5] * n,
        "backward_s": [1.0] * n, "update_s": list(update), "ready_order": np.arange(n),
    })
    return ComputeTrace.from_frame(ready.iloc[::-1].reset_index(drop=True), META)


def it_s(plan, world_size: int = 4, model=MODEL, tr=None) -> float:
    return replay(tr or trace(), plan, model, world_size,
                  ReplayOptions(iterations=4)).iteration_s


def names(plan) -> list[list[str]]:
    return [list(b.tensors) for b in plan.buckets]


# -- megatron -------------------------------------------------------------------------------
def test_megatron_default_is_one_all_reduce_after_backward():
    # one bucket (bucket_size None): 3584 B, 3.75 s from 3 -> 6.75; + update 1.2; + fwd 1.5
    p = make_plan("megatron", trace(), MODEL, 4)
    assert names(p) == [["t0", "t1", "t2"]]
    assert p.buckets[0].release_s == 3.0 and p.optimizer == "replicated"
    assert it_s(p) == pytest.approx(9.45, abs=1e-12)


def test_megatron_distributed_optimizer_shards_the_step_and_gathers_after_it():
    # RS 1.875 -> 4.875; step 1.2/4 -> 5.175; AG 1.875 -> 7.05; + fwd 1.5
    p = make_plan("megatron", trace(), MODEL, 4, {"distributed_optimizer": "true"})
    assert [b.collective for b in p.buckets] == ["reduce_scatter"]
    assert [(s.collective, s.nbytes) for s in p.param_sync] == [("all_gather", 3584.0)]
    assert it_s(p) == pytest.approx(8.55, abs=1e-12)
    r = replay(trace(), p, MODEL, 4)
    assert r.compute_s == pytest.approx(1.5 + 3 + 0.3) and r.n_collectives == 2


def test_megatron_overlap_buckets_reverse_registration_order():
    # reversed registration order t0(256) t1(128 -> 384 >= 300: close) t2(512): [t0,t1] [t2]
    # AR 1536 B ready 2 -> 3.75; AR 2048 B from 3.75 -> 6.0; + 1.2 + 1.5
    knobs = {"overlap_grad_reduce": "true", "bucket_size": "300"}
    p = make_plan("megatron", trace(), MODEL, 4, knobs)
    assert names(p) == [["t0", "t1"], ["t2"]]
    assert all(b.release_s is None for b in p.buckets)
    assert it_s(p) == pytest.approx(8.7, abs=1e-12)
    # with the distributed optimizer: RS 0.875 -> 2.875, RS 1.125 from 3 -> 4.125, step
    # 0.3 -> 4.425, AG 0.875 -> 5.3, AG 1.125 -> 6.425
    d = make_plan("megatron", trace(), MODEL, 4, {**knobs, "distributed_optimizer": "1"})
    assert [s.nbytes for s in d.param_sync] == [1536.0, 2048.0]
    assert it_s(d) == pytest.approx(7.925, abs=1e-12)


def test_megatron_planted_forward_order_changes_the_schedule():
    """bucket_size 200. Megatron's reversed registration order: t0 (256 >= 200) | t1, t2
    -> [t0] [t1, t2]: AR 1.25 from 1 -> 2.25, AR 2560 B 2.75 from 3 -> 5.75; + 1.2 + 1.5.
    Filled in forward order instead (a planted change): [t2] [t1, t0], 8.7 s."""
    from gradsched.planners import megatron

    good = make_plan("megatron", trace(), MODEL, 4,
                     {"overlap_grad_reduce": "true", "bucket_size": "200"})
    assert names(good) == [["t0"], ["t1", "t2"]]
    assert it_s(good) == pytest.approx(8.45, abs=1e-12)
    planted = megatron.bucket_groups(["t0", "t1", "t2"], np.array([256, 128, 512]), 200)
    assert planted == [["t2"], ["t1", "t0"]]
    bad = replace(good, buckets=tuple(replace(good.buckets[0], tensors=tuple(g))
                                      for g in planted))
    assert it_s(bad) == pytest.approx(8.7, abs=1e-12)


def test_megatron_default_bucket_size_follows_the_world_size():
    from gradsched.planners.megatron import default_bucket_size

    assert default_bucket_size(8) == 40_000_000 and default_bucket_size(64) == 64_000_000
    p = make_plan("megatron", trace(), MODEL, 64, {"overlap_grad_reduce": "1"})
    assert p.info["bucket_size_elements"] == 64_000_000 and len(p.buckets) == 1


@pytest.mark.parametrize(("knobs", "message"), [
    ({"bucket_size": "1000"}, "bucket_size needs overlap_grad_reduce"),
    ({"overlap_grad_reduce": "1", "bucket_size": "0"}, "bucket_size must be >= 1"),
    ({"distributed_optimizer": "maybe"}, "not a valid bool"),
    ({"bucket_size_mb": "1"}, "valid knobs: overlap_grad_reduce"),
])
def test_megatron_knobs(knobs, message):
    with pytest.raises(ConfigError, match=message):
        make_plan("megatron", trace(), MODEL, 4, knobs)


# -- deepspeed_zero -------------------------------------------------------------------------
def test_deepspeed_stage1_reduces_in_registration_order_after_backward():
    # row order t2(512) | t1(128): 640 > 300 close | t0(256): 384 > 300 close -> [t2][t1][t0]
    # all at 3: RS 1.125 + 0.375 + 0.625 -> 5.125; step 0.3; AG 1.875 -> 7.3; + 1.5
    p = make_plan("deepspeed_zero", trace(), MODEL, 4, {"reduce_bucket_size": "300"})
    assert names(p) == [["t2"], ["t1"], ["t0"]]
    assert {b.release_s for b in p.buckets} == {3.0}
    assert {b.collective for b in p.buckets} == {"reduce_scatter"}
    assert it_s(p) == pytest.approx(8.8, abs=1e-12)


def test_deepspeed_overlap_issues_a_bucket_at_the_next_gradient():
    # ready order t0(256) | t1: 384 > 300 -> [t0] issued at t1's ready (2) | t2: 640 > 300
    # -> [t1] issued at 3 | [t2] by the epilogue at 3. RS [t0] 2 -> 2.625, [t1] 3 -> 3.375,
    # [t2] 3.375 -> 4.5; step 0.3 -> 4.8; AG 1.875 -> 6.675; + 1.5
    knobs = {"stage": "2", "overlap_comm": "true", "reduce_bucket_size": "300"}
    p = make_plan("deepspeed_zero", trace(), MODEL, 4, knobs)
    assert names(p) == [["t0"], ["t1"], ["t2"]]
    assert [b.release_s for b in p.buckets] == [2.0, 3.0, 3.0]
    assert it_s(p) == pytest.approx(8.175, abs=1e-12)
    # planted: issuing each bucket when its own gradients are in (not at the next hook)
    planted = replace(p, buckets=tuple(replace(b, release_s=None) for b in p.buckets))
    assert it_s(planted) == pytest.approx(7.8, abs=1e-12)
    # stage 2 without overlap_comm: reductions serial with backward -> released at its end
    serial = make_plan("deepspeed_zero", trace(), MODEL, 4,
                       {"stage": "2", "reduce_bucket_size": "300"})
    assert {b.release_s for b in serial.buckets} == {3.0}
    assert it_s(serial) == pytest.approx(8.8, abs=1e-12)


def test_deepspeed_defaults_and_the_allgather_fallback():
    p = make_plan("deepspeed_zero", trace(), MODEL, 4)
    assert p.knobs["reduce_bucket_size"] == 500_000_000 and len(p.buckets) == 1
    assert [s.nbytes for s in p.param_sync] == [3584.0]
    # fallback: partition 224 elements, 224 * 4 // 200 = 4 shards of 56 -> 4 x 224 elements
    assert gather_sizes(896, 4, 200, into_tensor=False) == [224] * 4
    assert gather_sizes(900, 4, 500_000_000, into_tensor=False) == [900]
    assert gather_sizes(10, 3, 4, into_tensor=False) == [3, 3, 6]  # 3 shards of 1, last 2
    q = make_plan("deepspeed_zero", trace(), MODEL, 4,
                  {"allgather_into_tensor": "false", "allgather_bucket_size": "200"})
    assert [s.nbytes for s in q.param_sync] == [896.0] * 4
    # 4 AGs of 0.5625 s instead of one of 1.875
    assert it_s(q) - it_s(p) == pytest.approx(4 * 0.5625 - 1.875, abs=1e-12)


@pytest.mark.parametrize(("knobs", "message"), [
    ({"stage": "3"}, "stage must be 1 or 2"),
    ({"reduce_bucket_size": "0"}, "reduce_bucket_size must be >= 1"),
    ({"allgather_bucket_size": "-5"}, "allgather_bucket_size must be >= 1"),
    ({"overlap_comm": "sometimes"}, "not a valid bool"),
])
def test_deepspeed_knobs(knobs, message):
    with pytest.raises(ConfigError, match=message):
        make_plan("deepspeed_zero", trace(), MODEL, 4, knobs)


# -- zero1_torch ----------------------------------------------------------------------------
def test_zero1_torch_broadcasts_every_parameter_from_its_owner():
    # DDP: one bucket, AR 3.75 from 3 -> 6.75; step 0.3 -> 7.05; broadcasts of t2 (rank 0),
    # t0 (rank 1), t1 (rank 2): 1.125 + 0.625 + 0.375 -> 9.175; + 1.5
    p = make_plan("zero1_torch", trace(), MODEL, 4)
    assert [(s.collective, s.nbytes) for s in p.param_sync] == [
        ("broadcast", 2048.0), ("broadcast", 1024.0), ("broadcast", 512.0)]
    assert it_s(p) == pytest.approx(10.675, abs=1e-12)
    assert partition(["a", "b", "c", "d"], np.array([5, 5, 3, 1]), 2) == [["a", "c"],
                                                                         ["b", "d"]]
    view = make_plan("zero1_torch", trace(), MODEL, 2, {"parameters_as_bucket_view": "1"})
    assert [s.nbytes for s in view.param_sync] == [2048.0, 1536.0]


def test_zero1_torch_overlap_steps_each_bucket_on_its_owner():
    """hook_with_zero_step on 2 ranks. t0 = 1 MiB fills DDP's 1 MiB first bucket; [t1, t2]
    is the second. Model alpha 0.25 s, 1 s per MiB: AR b0 ready 1 -> 2.25; AR b1 from 3 ->
    3.25244140625. After backward (3): rank 0 steps b0 3 -> 3.4 (update 0.4), broadcast
    b0 (0.625) 3.4 -> 4.025; rank 1 waits b1's AR, steps 3.25244140625 -> 4.05244140625
    (update 0.8), broadcast b1 (0.126220703125) -> 4.178662109375; + forward 1.5."""
    tr = trace(nbytes=(2**20, 512, 2048))
    model = AlphaBetaModel(0.25, 1 / 2**20)
    p = make_plan("zero1_torch", tr, model, 2, {"overlap_with_ddp": "true"})
    assert names(p) == [["t0"], ["t1", "t2"]] and p.optimizer == "bucket_owner"
    assert it_s(p, 2, model, tr) == pytest.approx(5.678662109375, abs=1e-12)
    r = replay(tr, p, model, 2)
    assert r.compute_s == pytest.approx(4.5 + 0.8) and r.n_collectives == 4
    # planted: the buckets in the other order (owners swap, b0's step waits for the
    # late all-reduce) -> another time
    swapped = replace(p, buckets=p.buckets[::-1])
    assert it_s(swapped, 2, model, tr) != pytest.approx(5.678662109375, abs=1e-9)


def test_zero1_torch_knobs():
    with pytest.raises(ConfigError, match="not a valid bool"):
        make_plan("zero1_torch", trace(), MODEL, 4, {"overlap_with_ddp": "2"})
    with pytest.raises(ConfigError, match="valid knobs: overlap_with_ddp"):
        make_plan("zero1_torch", trace(), MODEL, 4, {"shard_buckets": "1"})
