"""Per-collective dtypes in the sharded replay, plan and bound, and torchtitan's layouts.

All traces here are SYNTHETIC (hand-made); nothing is a measurement.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from gradsched.collective_dtypes import CollectiveDtypes
from gradsched.costmodel.base import AlphaBetaModel
from gradsched.errors import ConfigError, InputError
from gradsched.experiments.sharded.common import ShardedProblem
from gradsched.experiments.sharded.optimum import OPTIMUM, compare, optimum
from gradsched.plan_sharded import ShardedPlan, fully_shard_code
from gradsched.planners.sharded import make_sharded_plan
from gradsched.replay.sharded import replay_sharded
from gradsched.replay.sharded_dtypes import is_float8_weight
from gradsched.traces import ComputeTrace
from tests.replay.test_sharded import block_trace

MODEL = AlphaBetaModel(1.0, 0.01)
BF16_FP32 = CollectiveDtypes("bf16", "fp32")


def fp32_trace(**kw: float) -> ComputeTrace:
    """SYNTHETIC: :func:`block_trace` with four bytes per element (a float32 trace)."""
    trace = block_trace([[100], [300]], stem=50, **kw)
    frame = trace.frame.assign(bytes=trace.frame["numel"] * 4)
    return ComputeTrace.from_frame(frame, trace.meta)


def test_blocking_iteration_prices_each_collective_in_its_dtype() -> None:
    """Blocking: every collective adds. fp32 trace of 50 + 100 + 300 elements; bf16
    all-gathers (2 bytes), fp32 reduce-scatters (4 bytes); an all-gather or reduce-scatter
    of m bytes lasts 0.5 (1 + 0.01 m) under alpha-beta (1 s, 0.01 s/B)."""
    trace = fp32_trace(update_s=4.0)
    plan = replace(make_sharded_plan("fsdp2", trace, MODEL, 2), mixed_precision=BF16_FP32)
    result = replay_sharded(trace, plan, MODEL, 2, semantics="blocking")

    def t(m: float) -> float:
        return 0.5 * (1.0 + 0.01 * m)

    comm = (t(100) + t(200) + t(600)  # forward all-gathers, bf16: root, block 0, block 1
            + t(600) + t(200)  # backward all-gathers of both blocks
            + t(1200) + t(400) + t(200))  # reduce-scatters in fp32: block 1, block 0, root
    assert result.iteration_s == pytest.approx(3 * 1.0 + 3 * 2.0 + 3 * 4.0 / 2 + comm)
    plain = replay_sharded(trace, replace(plan, mixed_precision=None), MODEL, 2,
                           semantics="blocking")
    assert plain.iteration_s > result.iteration_s  # fp32 all-gathers take longer


def test_the_gradient_memory_is_the_larger_of_the_two_dtypes() -> None:
    """The gathered parameters in bf16 and the unsharded gradients in fp32 (the reduce
    dtype); with bf16 reduction, gradients in bf16 too: the peak drops."""
    trace = fp32_trace()
    peaks = {}
    for reduce in ("fp32", "bf16"):
        plan = replace(make_sharded_plan("fsdp2-noreshard", trace, MODEL, 2),
                       mixed_precision=CollectiveDtypes("bf16", reduce))
        peaks[reduce] = replay_sharded(trace, plan, MODEL, 2,
                                       semantics="blocking").gathered_peak_bytes
    # all gathered (bf16: 900 bytes) plus root and block 1 gradients at backward's start
    # (blocking: block 1's reduce-scatter ends before block 0's backward allocates)
    assert peaks["fp32"] == 900 + 4 * (50 + 300)
    assert peaks["bf16"] == 900 + 2 * (50 + 300)


def test_the_bound_holds_under_every_policy() -> None:
    trace = fp32_trace(update_s=1.0)
    for dtypes in (None, BF16_FP32, CollectiveDtypes("bf16"), CollectiveDtypes(None, "bf16")):
        problem = ShardedProblem(trace, MODEL, 2, semantics="streams", mixed_precision=dtypes)
        rows = compare(problem)
        assert all(r["iteration_s"] >= r["lower_bound_s"] * (1 - 1e-12) for r in rows)
    plain = ShardedProblem(trace, MODEL, 2).lower_bound_s()
    assert ShardedProblem(trace, MODEL, 2, mixed_precision=CollectiveDtypes("bf16", "bf16")
                          ).lower_bound_s() < plain  # half the bytes on the wire


def test_the_optimum_under_a_policy_is_the_best_replayed_with_it() -> None:
    """The optimum prices each collective in its own dtype and is replayed exactly with the
    policy; no planner's layout, replayed with the same policy, beats it."""
    trace = fp32_trace(update_s=1.0)
    problem = ShardedProblem(trace, MODEL, 2, semantics="blocking", mixed_precision=BF16_FP32)
    best = optimum(problem)
    assert best.plan.mixed_precision == BF16_FP32
    assert best.replay.iteration_s == replay_sharded(trace, best.plan, MODEL, 2,
                                                     semantics="blocking").iteration_s
    rows = {r["algorithm"]: r["iteration_s"] for r in compare(problem)}
    assert rows[OPTIMUM] <= min(rows.values()) * (1 + 1e-12)


def test_a_plan_carries_its_policy_through_json_and_the_fully_shard_code() -> None:
    trace = fp32_trace()
    plan = replace(make_sharded_plan("fsdp2", trace, MODEL, 2), mixed_precision=BF16_FP32)
    again = ShardedPlan.from_dict(plan.to_dict())
    assert again == plan and "mixed_precision" not in \
        replace(plan, mixed_precision=None).to_dict()
    code = fully_shard_code(plan, trace.names)
    assert "mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)" \
        in code
    assert "fully_shard(model, mp_policy=mp)" in code
    bad = plan.to_dict() | {"mixed_precision": {"param_dtype": "fp8"}}
    with pytest.raises(InputError, match="param_dtype"):
        ShardedPlan.from_dict(bad)
    with pytest.raises(ConfigError, match="reduce_dtype"):
        CollectiveDtypes("bf16", "int8")


def test_float8_all_gathers_move_a_byte_per_linear_weight() -> None:
    assert is_float8_weight("model.layers.3.self_attn.q_proj.weight")
    assert not is_float8_weight("model.layers.3.input_layernorm.weight")
    assert not is_float8_weight("model.embed_tokens.weight")
    assert not is_float8_weight("lm_head.weight")
    assert not is_float8_weight("transformer.h.0.attn.c_attn.bias")
    trace = fp32_trace()
    plan = replace(make_sharded_plan("fsdp2", trace, MODEL, 2),
                   mixed_precision=CollectiveDtypes("bf16", "fp32", True))
    with pytest.raises(ConfigError, match="float8 all-gather"):  # names say nothing here
        replay_sharded(trace, plan, MODEL, 2)


def test_torchtitans_layouts() -> None:
    """torchtitan: embeddings (the stem) and head units of their own, the head kept
    gathered; the 2024 layout: the last block kept gathered, stem and head in the root."""
    trace = block_trace([[100], [300], [200]], stem=50, head=70)
    now = make_sharded_plan("torchtitan", trace, MODEL, 2)
    assert now.units[0].tensors == ("stem.weight",)
    assert now.units[-1].tensors == ("head.weight",)
    assert [u.reshard_after_forward for u in now.units] == [True, True, True, True, False]
    old = make_sharded_plan("torchtitan-2024", trace, MODEL, 2)
    assert [u.reshard_after_forward for u in old.units] == [True, True, False]
    assert all("stem.weight" not in u.tensors for u in old.units)
    # blocking: the 2024 layout saves the last block's backward all-gather (0.5 (1 + 0.01 x
    # 200) s) at the same peak (that block is gathered at the start of backward anyway:
    # root 2 x 120, block 2 and its gradients 2 x 200, block 1 prefetched 300);
    # torchtitan frees the stem after forward and has freed the head and its gradients
    # (reduce-scattered) when block 2's backward holds its parameters, its gradients and
    # block 1 prefetched
    runs = {name: replay_sharded(trace, make_sharded_plan(name, trace, MODEL, 2), MODEL, 2,
                                 semantics="blocking")
            for name in ("fsdp2", "torchtitan", "torchtitan-2024")}
    assert runs["fsdp2"].iteration_s - runs["torchtitan-2024"].iteration_s == \
        pytest.approx(0.5 * (1 + 0.01 * 200))
    assert runs["fsdp2"].gathered_peak_bytes == runs["torchtitan-2024"].gathered_peak_bytes \
        == 2 * 120 + 2 * 200 + 300
    assert runs["torchtitan"].gathered_peak_bytes == 2 * 200 + 300


def test_the_optimum_under_a_policy_and_a_cap_fits_the_cap_exactly() -> None:
    """Gradients in fp32 are wider than bf16 parameters; the optimum counts each in its own
    bytes, so what it returns fits the cap in the exact replay and is as fast as the fastest
    layout that fits (every layout replayed), and when it says no layout fits, none does
    (many random cases: tests/experiments/test_sharded_dtypes_exact.py). Searching one width
    per tensor (the parameters' or the gradients') said that none fit under 3000 bytes
    (blocking) and 4300 (streams), and under 4300 (blocking) chose a 57.1 s layout."""
    from gradsched.experiments.sharded.common import NoLayoutFits
    from tests.experiments.test_sharded_dtypes_exact import every_layout

    trace = block_trace([[100], [300], [200], [150]], stem=50, head=70)
    trace = ComputeTrace.from_frame(trace.frame.assign(bytes=trace.frame["numel"] * 4),
                                    trace.meta)
    fitted = 0
    for semantics in ("streams", "blocking"):
        layouts = every_layout(ShardedProblem(trace, MODEL, 2, semantics=semantics,
                                              mixed_precision=BF16_FP32))
        for cap in (2000.0, 3000.0, 4300.0, 5000.0):
            problem = ShardedProblem(trace, MODEL, 2, semantics=semantics,
                                     memory_cap_bytes=cap, mixed_precision=BF16_FP32)
            fits = [t for t, peak, _ in layouts if peak <= cap]
            try:
                best = optimum(problem)
            except NoLayoutFits:
                assert not fits, (semantics, cap)
                continue
            fitted += 1
            assert best.replay.gathered_peak_bytes <= cap
            assert best.replay == problem.replay(best.plan)
            assert best.replay.iteration_s == pytest.approx(min(fits), rel=1e-9)
    assert fitted == 5
