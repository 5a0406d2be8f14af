"""Gradient accumulation in the replays: a step of k micro-batches, only the last one
communicating (DDP family) or reduce-scattering (sharded).

Every trace here is SYNTHETIC (built in the test) except where a committed trace is named.
"""

from __future__ import annotations

import pytest

from gradsched.costmodel import AlphaBetaModel
from gradsched.costmodel.base import load_comm_spec
from gradsched.errors import ConfigError
from gradsched.experiments.sharded.common import ShardedProblem
from gradsched.experiments.sharded.optimum import exhaustive_optimum
from gradsched.plan import Bucket, Plan
from gradsched.plan_sharded import ShardedPlan, Unit
from gradsched.planners.sharded import make_sharded_plan
from gradsched.replay import ReplayOptions, lower_bound, replay
from gradsched.replay.sharded import replay_sharded
from gradsched.replay.sharded_bounds import sharded_lower_bound_s
from gradsched.replay.timeline import timeline_frame
from gradsched.traces import ComputeTrace
from tests.replay.test_engine import MODEL, MS, hand_trace, wfbp
from tests.replay.test_sharded import block_trace


@pytest.mark.parametrize("bad", [0, -1, 1.5, "2", True, 10**6])
def test_grad_accum_must_be_a_count(bad) -> None:
    with pytest.raises(ConfigError, match="grad_accum"):
        ReplayOptions(grad_accum=bad)
    trace = block_trace([[100]])
    plan = make_sharded_plan("fsdp2", trace, AlphaBetaModel(1.0, 0.0), 2)
    with pytest.raises(ConfigError, match="grad_accum"):
        replay_sharded(trace, plan, AlphaBetaModel(1.0, 0.0), 2, grad_accum=bad)


def test_ddp_step_adds_the_silent_micro_batches_hand_computed() -> None:
    # test_engine's hand case: WFBP iteration 14.5 ms = forward 6 + comm ending 8.5 ms
    # after backward start; forward + backward = 10 ms. k = 3: two silent micro-batches
    # (20 ms) before the communicating one.
    trace = hand_trace()
    one = replay(trace, wfbp(trace), MODEL, 4)
    three = replay(trace, wfbp(trace), MODEL, 4, ReplayOptions(grad_accum=3))
    assert three.iteration_s == pytest.approx(14.5 * MS + 20 * MS)
    assert three.compute_s == pytest.approx(30 * MS)
    assert three.exposed_comm_s == pytest.approx(one.exposed_comm_s)  # same absolute exposure
    assert three.n_collectives == one.n_collectives  # per step: only the last micro-batch


def test_per_layer_update_waits_in_the_first_micro_batch_only() -> None:
    """ByteScheduler/DeAR-style per-layer update: the first forward of a step waits for the
    previous step's communication; the later ones do not; so the step is the k=1 iteration
    plus (k - 1) x (forward + backward)."""
    trace = hand_trace()
    order = trace.ready_sequence()["name"]
    plan = Plan("per-layer", tuple(Bucket((n,)) for n in order), update="per_layer")
    one = replay(trace, plan, MODEL, 4).iteration_s
    for k in (2, 5):
        got = replay(trace, plan, MODEL, 4, ReplayOptions(grad_accum=k)).iteration_s
        assert got == pytest.approx(one + (k - 1) * 10 * MS)


def test_lower_bound_holds_per_step() -> None:
    trace = hand_trace()
    for k in (1, 2, 7):
        bound = lower_bound(trace, MODEL, 4, grad_accum=k).lower_bound_s
        got = replay(trace, wfbp(trace), MODEL, 4, ReplayOptions(grad_accum=k)).iteration_s
        assert bound <= got + 1e-12
    assert lower_bound(trace, MODEL, 4, grad_accum=3).lower_bound_s == pytest.approx(
        lower_bound(trace, MODEL, 4).lower_bound_s + 20 * MS)


def test_timeline_shows_the_silent_backwards_without_collectives() -> None:
    trace = hand_trace()
    result = replay(trace, wfbp(trace), MODEL, 4, ReplayOptions(iterations=2, grad_accum=3),
                    timeline=True)
    frame = timeline_frame(result)
    step0 = frame[frame["iteration"] == 0]
    assert (step0["kind"] == "forward").sum() == 3
    assert (step0["kind"] == "backward").sum() == 3
    comm = step0[step0["lane"] == "comm"]
    last_backward = step0[step0["kind"] == "backward"]["start_s"].max()
    assert len(comm) == 3 and (comm["start_s"] >= last_backward - 1e-12).all()


def test_sharded_blocking_counts_k_rounds_of_all_gathers_one_of_reduce_scatters() -> None:
    """test_sharded's hand case at k = 3: every micro-batch all-gathers (forward, and
    backward for the resharded units), only the last reduce-scatters."""
    trace = block_trace([[100], [300]], stem=50, update_s=4.0)
    model = AlphaBetaModel(1.0, 0.01)
    plan = make_sharded_plan("fsdp2", trace, model, 2)
    result = replay_sharded(trace, plan, model, 2, semantics="blocking", grad_accum=3)
    t = {n: 0.5 * (1.0 + 0.01 * n) for n in (50, 100, 300)}
    gathers = t[50] + t[100] + t[300] + t[100] + t[300]
    scatters = t[50] + t[100] + t[300]
    compute = 3 * (3 * 1.0 + 3 * 2.0) + 3 * 4.0 / 2
    assert result.iteration_s == pytest.approx(compute + 3 * gathers + scatters)
    assert result.n_collectives == 3 * 5 + 3
    assert result.compute_s == pytest.approx(compute)
    assert result.iteration_s >= sharded_lower_bound_s(trace, model, 2, grad_accum=3)


def test_sharded_unsharded_gradients_are_held_across_micro_batches() -> None:
    """Two units of 100 B kept gathered after forward, no root, free comm: at k = 1 the
    peak is at unit 1's backward, both units' parameters and unit 1's gradients (300 B);
    with k = 2 the first micro-batch's gradients are kept, so the second backward has both
    units' parameters and both units' gradients live (400 B)."""
    trace = block_trace([[100], [100]], forward_s=1.0, backward_s=1.0)
    model = AlphaBetaModel(0.0, 0.0)
    plan = ShardedPlan("x", units=(Unit(("blocks.0.l0.weight",), False),
                                   Unit(("blocks.1.l0.weight",), False)),
                       forward_prefetch=0, backward_prefetch=1)
    one = replay_sharded(trace, plan, model, 2, semantics="blocking")
    two = replay_sharded(trace, plan, model, 2, semantics="blocking", grad_accum=2)
    assert one.gathered_peak_bytes == pytest.approx(300.0)
    assert two.gathered_peak_bytes == pytest.approx(400.0)


def test_k1_is_the_default_exactly() -> None:
    trace = block_trace([[100], [300, 20]], stem=50, update_s=4.0)
    model = AlphaBetaModel(1.0, 0.01)
    plan = make_sharded_plan("fsdp2", trace, model, 2)
    for semantics in ("streams", "blocking"):
        assert replay_sharded(trace, plan, model, 2, semantics=semantics, grad_accum=1) \
            == replay_sharded(trace, plan, model, 2, semantics=semantics)
    ddp = hand_trace()
    assert replay(ddp, wfbp(ddp), MODEL, 4, ReplayOptions(grad_accum=1)) \
        == replay(ddp, wfbp(ddp), MODEL, 4)


RESNET18 = "traces/compute/cpu/resnet18-b4-cpu-fp32.csv"
GLOO_1GBIT = "traces/comm/cpu/gloo-tbf1gbit-p2.csv"


def _exhaustive(semantics: str, k: int, cap: float | None) -> tuple[ShardedPlan, float]:
    trace, model = ComputeTrace.load(RESNET18), load_comm_spec(GLOO_1GBIT)
    scored = exhaustive_optimum(ShardedProblem(trace, model, 2, semantics=semantics,
                                               grad_accum=k, memory_cap_bytes=cap))
    return scored.plan, scored.replay.iteration_s


def test_the_best_sharded_plan_changes_with_k_on_a_committed_case() -> None:
    """Committed ResNet-18 (batch 4, CPU) trace and the gloo 1 Gbit/s sweep, P = 2.

    Blocking semantics (FSDP2 on gloo), no cap: at k = 1 the optimum is 8 units (one per
    block), at k = 4 it merges blocks 1 and 2 into 7 units (every all-gather now counts
    four times, the one reduce-scatter once); each is faster than the other at its own k.
    Streams semantics, a cap of 85 MiB: at k = 1 the optimum keeps parameters gathered
    after forward (peak 64.6 MiB); at k = 4 the unsharded gradients held across
    micro-batches take that plan to 89.2 MiB, over the cap, and the optimum reshards after
    forward (and prefetches two units in backward)."""
    trace, model = ComputeTrace.load(RESNET18), load_comm_spec(GLOO_1GBIT)
    plan1, _ = _exhaustive("blocking", 1, None)
    plan4, _ = _exhaustive("blocking", 4, None)
    assert (plan1.n_units, plan4.n_units) == (8, 7)
    at = {k: [replay_sharded(trace, p, model, 2, semantics="blocking", grad_accum=k)
              .iteration_s for p in (plan1, plan4)] for k in (1, 4)}
    assert at[1][0] < at[1][1] and at[4][1] < at[4][0]

    cap = 85 * 2**20
    plan1, _ = _exhaustive("streams", 1, cap)
    plan4, _ = _exhaustive("streams", 4, cap)
    assert not plan1.units[0].reshard_after_forward
    assert all(u.reshard_after_forward for u in plan4.units)
    assert replay_sharded(trace, plan1, model, 2, grad_accum=4).gathered_peak_bytes > cap


@pytest.mark.parametrize("overlap", [False, True])
def test_zero1_torch_syncs_parameters_once_per_step(overlap) -> None:
    """torch's ZeroRedundancyOptimizer behind DDP (zero1_torch; committed ResNet-18 trace
    and gloo sweep): under accumulation the all-reduces run in the last micro-batch only,
    the shard step and the parameter broadcasts once per step after it (step() or, with
    overlap_with_ddp, the last bucket's hook), so the step is the k = 1 iteration plus
    (k - 1) x (forward + backward) with the same collectives."""
    from gradsched.planners import make_plan

    trace = ComputeTrace.load("traces/compute/cpu/resnet18-b4-cpu-fp32.csv")
    model = load_comm_spec("traces/comm/cpu/gloo-tbf1gbit-p2.csv")
    plan = make_plan("zero1_torch", trace, model, 2, {"overlap_with_ddp": overlap})
    assert plan.optimizer == ("bucket_owner" if overlap else "sharded")
    one = replay(trace, plan, model, 2, ReplayOptions(iterations=3))
    four = replay(trace, plan, model, 2, ReplayOptions(iterations=3, grad_accum=4),
                  timeline=True)
    silent = 3 * (trace.forward_total_s + trace.backward_total_s)
    assert four.iteration_s == pytest.approx(one.iteration_s + silent)
    assert four.compute_s == pytest.approx(one.compute_s + silent)
    assert four.n_collectives == one.n_collectives
    assert four.comm_busy_s == pytest.approx(one.comm_busy_s)
    frame = timeline_frame(four)
    step = frame[frame["iteration"] == 1]
    last_backward = step[step["kind"] == "backward"]["start_s"].max()
    syncs = step[step["label"].str.startswith("param sync")]
    shard_steps = step[step["label"] == "optimizer step (shard)"]
    n_syncs = len(plan.buckets) if overlap else len(plan.param_sync)
    assert len(syncs) == n_syncs and (syncs["kind"] == "broadcast").all()
    assert (syncs["start_s"] >= last_backward - 1e-12).all()
    assert len(shard_steps) == (len(plan.buckets) if overlap else 1)
    assert (shard_steps["start_s"] >= last_backward - 1e-12).all()
