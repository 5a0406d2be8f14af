"""The overlap slowdown in the sharded replay (``compute_slowdown``): compute at ``1/s`` while
a collective is on the channel, forward and backward. SYNTHETIC traces and models only."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gradsched.costmodel.base import AlphaBetaModel
from gradsched.errors import ConfigError
from gradsched.plan_sharded import ShardedPlan, Unit
from gradsched.replay.sharded import replay_sharded
from tests.replay.test_bounds import MODELS, P
from tests.replay.test_sharded import block_trace, random_block_trace, random_sharded_plan

TWO_UNITS = ShardedPlan("x", units=(Unit(("blocks.0.l0.weight",), False),
                                    Unit(("blocks.1.l0.weight",), False)),
                        forward_prefetch=1, backward_prefetch=1)


def test_partial_overlap_stretches_only_the_overlapped_part() -> None:
    """Streams, two units of 5 s forward / 5 s backward, every collective 0.5 s. s = 2: unit
    0's forward starts at 0.5 beside AG1 [0.5, 1] (0.25 s of work there), ends at 5.75;
    unit 1's [5.75, 10.75]; backward unit 1 [10.75, 15.75] -> RS1 [15.75, 16.25], unit 0's
    backward beside it ends at 16.25 + 4.75 = 21 -> RS0 [21, 21.5]."""
    trace = block_trace([[100], [100]], forward_s=5.0, backward_s=5.0)
    model = AlphaBetaModel(1.0, 0.0)
    nominal = replay_sharded(trace, TWO_UNITS, model, 2)
    slowed = replay_sharded(trace, TWO_UNITS, model, 2, compute_slowdown=2.0)
    assert (nominal.forward_end_s, nominal.iteration_s) == pytest.approx((10.5, 21.0))
    assert (slowed.forward_end_s, slowed.iteration_s) == pytest.approx((10.75, 21.5))
    assert slowed.compute_s == pytest.approx(nominal.compute_s + 2 * 0.25)


@pytest.mark.parametrize("s", [1.5, 2.0, 4.0])
def test_full_overlap_stretches_compute_by_s(s: float) -> None:
    """Unit 0's forward (1 s of work) runs entirely beside unit 1's long all-gather
    (1000 s), its backward entirely beside unit 1's reduce-scatter (1000 s): each lasts
    exactly s seconds, hidden under the collectives."""
    trace = block_trace([[100], [10**6]], forward_s=1.0, backward_s=1.0)
    model = AlphaBetaModel(0.0, 2e-3)  # AG of n bytes: 1e-3 n s
    plan = ShardedPlan("x", units=(Unit(("blocks.0.l0.weight",), False),
                                   Unit(("blocks.1.l0.weight",), False)),
                       forward_prefetch=1, backward_prefetch=1)
    nominal = replay_sharded(trace, plan, model, 2)
    slowed = replay_sharded(trace, plan, model, 2, compute_slowdown=s)
    ag0, ag1 = 0.1, 1000.0
    # unit 1's forward waits for AG1 either way: the stretch hides under the collective
    assert nominal.forward_end_s == pytest.approx(ag0 + ag1 + 1.0)
    assert slowed.forward_end_s == pytest.approx(nominal.forward_end_s)
    assert slowed.iteration_s == pytest.approx(nominal.iteration_s)
    assert slowed.compute_s - nominal.compute_s == pytest.approx(2 * (s - 1.0))


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 100_000), which=st.integers(0, len(MODELS) - 1))
def test_slowdown_one_is_unchanged_and_larger_s_is_never_faster(seed: int, which: int) -> None:
    trace = random_block_trace(seed)
    plan = random_sharded_plan(trace, seed)
    model = MODELS[which]
    base = replay_sharded(trace, plan, model, P)
    assert replay_sharded(trace, plan, model, P, compute_slowdown=1.0).to_dict() \
        == base.to_dict()  # bit for bit
    previous = base.iteration_s
    for s in (1.05, 1.5, 3.0):
        result = replay_sharded(trace, plan, model, P, compute_slowdown=s)
        assert result.iteration_s >= previous * (1 - 1e-12)
        assert result.iteration_s <= base.iteration_s + (s - 1) * base.compute_s * (1 + 1e-9)
        previous = result.iteration_s
    blocking = replay_sharded(trace, plan, model, P, semantics="blocking")
    assert replay_sharded(trace, plan, model, P, semantics="blocking",
                          compute_slowdown=3.0).to_dict() == blocking.to_dict()


@pytest.mark.parametrize("bad", [0.5, math.nan, math.inf, -1.0])
def test_bad_slowdown_is_refused(bad: float) -> None:
    trace = block_trace([[100], [100]])
    with pytest.raises(ConfigError, match="compute_slowdown"):
        replay_sharded(trace, TWO_UNITS, AlphaBetaModel(1.0, 0.0), 2, compute_slowdown=bad)
