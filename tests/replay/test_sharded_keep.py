"""FSDP2 parameters kept unsharded between micro-batches
(``ShardedPlan.keep_unsharded_between_microbatches``: ``set_reshard_after_backward(False)``
on the silent micro-batches) in the sharded replay, the lower bound, the optimum and the
plan JSON.

Every trace here is SYNTHETIC (built in the test) except where a committed trace is named.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from gradsched.costmodel import AlphaBetaModel
from gradsched.costmodel.base import load_comm_spec
from gradsched.errors import InputError
from gradsched.experiments.sharded.common import ShardedProblem
from gradsched.experiments.sharded.optimum import compare, exhaustive_optimum
from gradsched.plan_sharded import ShardedPlan, Unit, fully_shard_code
from gradsched.planners.sharded import make_sharded_plan
from gradsched.replay.sharded import replay_sharded
from gradsched.replay.sharded_bounds import sharded_lower_bound_s
from gradsched.traces import ComputeTrace
from tests.replay.test_sharded import block_trace

MODEL = AlphaBetaModel(1.0, 0.01)
T = {n: 0.5 * (1.0 + 0.01 * n) for n in (50, 100, 300)}  # all-gather = reduce-scatter
K = 3


def _kept(plan: ShardedPlan) -> ShardedPlan:
    return replace(plan, keep_unsharded_between_microbatches=True)


def test_resharded_units_gather_in_forward_once_per_step_hand_computed() -> None:
    """test_sharded's hand case (blocks of 100 and 300 B resharded after forward, a root of
    50 B; blocking) at k = 3, parameters kept: the root and both units all-gather in the
    first micro-batch's forward only; the units (resharded after forward) all-gather in
    every backward; one round of reduce-scatters."""
    trace = block_trace([[100], [300]], stem=50, update_s=4.0)
    plan = make_sharded_plan("fsdp2", trace, MODEL, 2)
    assert all(u.reshard_after_forward for u in plan.units)
    kept = replay_sharded(trace, _kept(plan), MODEL, 2, semantics="blocking", grad_accum=K)
    plain = replay_sharded(trace, plan, MODEL, 2, semantics="blocking", grad_accum=K)
    forward, backward = T[50] + T[100] + T[300], T[100] + T[300]
    scatters = T[50] + T[100] + T[300]
    compute = K * (3 * 1.0 + 3 * 2.0) + 3 * 4.0 / 2
    assert kept.iteration_s == pytest.approx(compute + forward + K * backward + scatters)
    assert plain.iteration_s == pytest.approx(compute + K * (forward + backward) + scatters)
    assert (kept.n_collectives, plain.n_collectives) == (3 + 2 * K + 3, 5 * K + 3)
    assert kept.compute_s == pytest.approx(plain.compute_s)


def test_units_kept_after_forward_gather_once_per_step() -> None:
    """Not resharded after forward (ZeRO-2-like), parameters kept: one all-gather per unit
    and the root per step, whatever k."""
    trace = block_trace([[100], [300]], stem=50, update_s=4.0)
    plan = _kept(make_sharded_plan("fsdp2-noreshard", trace, MODEL, 2))
    for k in (1, 2, 5):
        result = replay_sharded(trace, plan, MODEL, 2, semantics="blocking", grad_accum=k)
        compute = k * (3 * 1.0 + 3 * 2.0) + 3 * 4.0 / 2
        assert result.iteration_s == pytest.approx(compute + 2 * (T[50] + T[100] + T[300]))
        assert result.n_collectives == 6


def test_one_micro_batch_is_unchanged() -> None:
    trace = block_trace([[100], [300, 20]], stem=50, update_s=4.0)
    plan = make_sharded_plan("fsdp2", trace, MODEL, 2)
    for semantics in ("streams", "blocking"):
        assert replay_sharded(trace, _kept(plan), MODEL, 2, semantics=semantics) \
            == replay_sharded(trace, plan, MODEL, 2, semantics=semantics)


def test_kept_parameters_raise_the_memory_peak() -> None:
    """Three units of 100 B resharded after forward, free comm, k = 2. Resharded after every
    backward: the peak is the second backward's (the held gradients, 300 B, and two units
    gathered by the one-unit backward prefetch: 500 B). Kept: after the first backward every
    unit's parameters and gradients are live at once (600 B)."""
    trace = block_trace([[100], [100], [100]], forward_s=1.0, backward_s=1.0)
    model = AlphaBetaModel(0.0, 0.0)
    plan = make_sharded_plan("fsdp2", trace, model, 2)
    plain = replay_sharded(trace, plan, model, 2, semantics="blocking", grad_accum=2)
    kept = replay_sharded(trace, _kept(plan), model, 2, semantics="blocking", grad_accum=2)
    assert (plain.gathered_peak_bytes, kept.gathered_peak_bytes) == pytest.approx((500, 600))


def test_the_bound_lets_kept_plans_gather_once() -> None:
    """The lower bound for kept plans counts one all-gather round per step: below every
    kept plan's replay, and below the bound of plans that reshard after every backward.
    On a slow network the wire term binds: one micro-batch's, whatever k."""
    trace = block_trace([[100], [300]], stem=50, update_s=4.0)
    slow = AlphaBetaModel(1.0, 1.0)
    kept_bound = sharded_lower_bound_s(trace, slow, 2, K, keep_unsharded=True)
    assert kept_bound < sharded_lower_bound_s(trace, slow, 2, K)
    assert kept_bound == pytest.approx(sharded_lower_bound_s(trace, slow, 2, 1))
    for name in ("fsdp2", "fsdp2-noreshard"):
        plan = _kept(make_sharded_plan(name, trace, slow, 2))
        for semantics in ("streams", "blocking"):
            assert replay_sharded(trace, plan, slow, 2, semantics=semantics,
                                  grad_accum=K).iteration_s >= kept_bound - 1e-9


def test_the_optimum_and_compare_keep_parameters_when_asked() -> None:
    """Committed ResNet-18 (batch 4, CPU) trace, gloo 1 Gbit/s sweep, P = 2, k = 4,
    blocking: the optimum over kept plans is a kept plan, at least as fast as the optimum
    that reshards after every backward (keeping only removes all-gathers), and above its
    bound; compare's rows say so and count fewer collectives."""
    trace = ComputeTrace.load("traces/compute/cpu/resnet18-b4-cpu-fp32.csv")
    model = load_comm_spec("traces/comm/cpu/gloo-tbf1gbit-p2.csv")
    plain = exhaustive_optimum(ShardedProblem(trace, model, 2, semantics="blocking",
                                              grad_accum=4))
    kept = exhaustive_optimum(ShardedProblem(trace, model, 2, semantics="blocking",
                                             grad_accum=4, keep_unsharded=True))
    assert kept.plan.keep_unsharded_between_microbatches
    assert not plain.plan.keep_unsharded_between_microbatches
    assert kept.replay.iteration_s < plain.replay.iteration_s
    bound = sharded_lower_bound_s(trace, model, 2, 4, keep_unsharded=True)
    assert bound <= kept.replay.iteration_s
    rows = {keep: compare(ShardedProblem(trace, model, 2, semantics="blocking", grad_accum=4,
                                         keep_unsharded=keep), algorithms=("fsdp2",))[0]
            for keep in (False, True)}
    assert rows[True]["keep_unsharded_between_microbatches"] is True
    assert "keep_unsharded_between_microbatches" not in rows[False]
    assert rows[True]["n_collectives"] < rows[False]["n_collectives"]


def test_the_plan_json_records_the_choice_only_when_made() -> None:
    plan = ShardedPlan("x", (Unit(("a.weight",)),))
    assert "keep_unsharded_between_microbatches" not in plan.to_dict()  # plans as before
    data = _kept(plan).to_dict()
    assert data["keep_unsharded_between_microbatches"] is True
    assert ShardedPlan.from_dict(data) == _kept(plan)
    assert ShardedPlan.from_dict(plan.to_dict()) == plan
    with pytest.raises(InputError, match="true or false") as info:
        ShardedPlan.from_dict({**data, "keep_unsharded_between_microbatches": "yes"})
    assert info.value.field == "keep_unsharded_between_microbatches"
    code = fully_shard_code(_kept(plan), ["a.weight"])
    assert "model.set_reshard_after_backward(False)" in code
    assert "set_reshard_after_backward" not in fully_shard_code(plan, ["a.weight"])
