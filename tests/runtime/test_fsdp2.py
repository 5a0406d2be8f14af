"""Sharded plans run by stock FSDP2 on gloo: the units FSDP2 forms are the plan's, every
plan trains, and what FSDP2 cannot express is refused before any rank starts."""

from __future__ import annotations

import pytest

from gradsched.errors import ConfigError, InputError
from gradsched.plan_sharded import ShardedPlan, Unit, covering_modules
from gradsched.reexec.sharded import run_plans
from gradsched.run_order import round_order, run_order
from gradsched.runtime.rounds import Launch, Timing

MLP = ("0.weight", "0.bias", "2.weight", "2.bias", "4.weight", "4.bias")  # tiny-mlp


def test_covering_modules_names_parents_and_refuses_split_modules() -> None:
    names = ["a.x.w", "a.x.b", "a.y.w", "b.w"]
    assert covering_modules(["a.x.w", "a.x.b", "a.y.w"], names) == ["a"]
    assert covering_modules(["a.y.w", "b.w"], names) == ["a.y", "b"]
    with pytest.raises(InputError, match="FSDP2 shards whole modules"):
        covering_modules(["a.x.w"], names)


def test_run_order_is_every_plan_once_per_round() -> None:
    order = run_order(3, 4, seed=1)
    assert len(order) == 12
    assert all(sorted(order[i:i + 3]) == [0, 1, 2] for i in range(0, 12, 3))
    assert order == run_order(3, 4, seed=1)
    assert order[3:6] == round_order(3, 1, seed=1)  # the all-reduce re-execution's order


@pytest.mark.slow
def test_fsdp2_groups_the_plans_units_on_two_ranks() -> None:
    plans = [
        ShardedPlan("per-layer", (Unit(MLP[0:2]), Unit(MLP[2:4])), backward_prefetch=1),
        ShardedPlan("merged", (Unit(MLP[0:4], reshard_after_forward=False),),
                    forward_prefetch=1, backward_prefetch=1),
    ]
    times, groups = run_plans(plans, Timing(model="tiny-mlp", batch_size=4, rounds=2, iters=2,
                                            warmup=1, timeout_s=60), Launch(world_size=2))
    assert [len(t) for t in times] == [4, 4]
    assert all(t > 0 for ts in times for t in ts)
    assert groups == [[sorted(u.tensors) for u in p.units] for p in plans]


def test_a_backward_prefetch_of_zero_is_refused() -> None:
    from torch import nn

    from gradsched.runtime.fsdp2 import apply_plan

    model = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2))
    plan = ShardedPlan("x", (Unit(("0.weight", "0.bias")), Unit(("1.weight", "1.bias"))),
                       backward_prefetch=0)
    with pytest.raises(ConfigError, match="backward"):
        apply_plan(model, plan)
