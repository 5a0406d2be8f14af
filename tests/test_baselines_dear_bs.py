"""DeAR and ByteScheduler as their reference code runs them (issue 14, item 3).

Each test names the source line it follows. DeAR: lzhangbv/dear_pytorch (commit 43138d8)
``dear/dear_dopt.py``; ByteScheduler: bytedance/byteps (commit 2749848)
``bytescheduler/bytescheduler/{common/bytecore.py, common/bytetask.py, common/tuner.py,
common/search.py, pytorch/horovod.py, pytorch/horovod_task.py}``.

Every trace here is SYNTHETIC (built in the test with known numbers), labelled so in its
metadata.
"""

from __future__ import annotations

import copy
import json

import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gradsched.costmodel import AlphaBetaModel
from gradsched.errors import ConfigError, InputError
from gradsched.experiments import make_plan
from gradsched.plan import Bucket, Plan
from gradsched.planners import bytescheduler
from gradsched.replay import ReplayOptions, replay
from gradsched.traces import ComputeTrace
from tests.test_planner_properties import SETTINGS, alpha_beta, traces
from tests.test_planners import MB, bucket_names, engine_s, tiny_trace

MS = 1e-3
META = {
    "kind": "compute", "model": "hand-3", "batch_size": 1, "device": "none", "dtype": "fp32",
    "world_size": 1, "software": {}, "capture_method": "synthetic", "iterations": None,
    "date": "2026-11-23", "source": "SYNTHETIC hand-computed test case, not measured",
}
# T(m bytes) = 0.5 + 0.01 m ms for an all-reduce; reduce-scatter = all-gather = half.
MODEL = AlphaBetaModel(alpha=0.5 * MS, beta=0.01 * MS)


def three_layers(forward_ms: tuple[float, float, float]) -> ComputeTrace:
    """SYNTHETIC: layers L0-L2 (100, 200, 300 bytes), gradients ready (from backward
    start) at L2 1 ms, L1 3 ms, L0 4 ms; forward times as given."""
    frame = pd.DataFrame({
        "name": ["L0", "L1", "L2"], "layer": [0, 1, 2], "numel": [25, 50, 75],
        "bytes": [100, 200, 300], "forward_s": [f * MS for f in forward_ms],
        "backward_s": [1 * MS, 2 * MS, 1 * MS], "ready_order": [2, 1, 0],
    })
    return ComputeTrace.from_frame(frame, META)


def rs_ag_plan(ag_issue: str, update: str = "per_layer") -> Plan:
    """One rs_ag bucket per layer, in ready order (DeAR with a tiny threshold)."""
    buckets = tuple(Bucket((n,), "rs_ag") for n in ("L2", "L1", "L0"))
    return Plan("dear", buckets, update=update, ag_issue=ag_issue)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------
# DeAR's all-gather schedule.
# RS = AG = 0.25 + 0.005 m ms: RS L2 1 -> 2.75, RS L1 3 -> 4.25, RS L0 4.25 -> 5.0.
# Forward 3, 0.5, 3 ms, starting at the end of backward (4 ms).
# eager: AG L0 5.0 -> 5.75, AG L1 -> 7.0, AG L2 -> 8.75 back to back; forward L0
#   5.75 -> 8.75, L1 max(8.75, 7.0) -> 9.25, L2 max(9.25, 8.75) -> 12.25: period 12.25 ms.
# lookahead (dear_dopt.py L352-353: AG of group 0 once every RS is done, at 5.0 -> 5.75;
#   L283-287: group g's pre-hook waits for g's AG and issues g+1's): hook L0 at
#   max(4, 5.75) = 5.75 issues AG L1 5.75 -> 7.0; L0 runs 5.75 -> 8.75; hook L1 at
#   max(8.75, 7.0) = 8.75 issues AG L2 8.75 -> 10.5; L1 runs 8.75 -> 9.25; L2 waits for
#   its AG: 10.5 -> 13.5: period 13.5 ms.
# ---------------------------------------------------------------------------------------
def test_lookahead_all_gathers_hand_computed() -> None:
    trace = three_layers((3.0, 0.5, 3.0))
    eager = replay(trace, rs_ag_plan("eager"), MODEL, 4, timeline=True)
    ahead = replay(trace, rs_ag_plan("lookahead"), MODEL, 4, timeline=True)
    assert eager.iteration_s == pytest.approx(12.25 * MS)
    assert ahead.iteration_s == pytest.approx(13.5 * MS)
    # iteration 0's backward starts after its forward (6.5 ms); times relative to it
    gathers = sorted(t - 6.5 * MS for e in ahead.events
                     if e.iteration == 0 and e.kind == "all_gather" for t in (e.start_s, e.end_s))
    assert gathers == pytest.approx([x * MS for x in (5.0, 5.75, 5.75, 7.0, 8.75, 10.5)])


def test_lookahead_equals_eager_when_forward_is_free() -> None:
    # No forward and no update: each pre-hook is reached as soon as the all-gather it
    # waits for ends, so group g+1's all-gather starts when it would eagerly.
    trace = three_layers((0.0, 0.0, 0.0))
    assert (replay(trace, rs_ag_plan("lookahead"), MODEL, 4).iteration_s
            == pytest.approx(replay(trace, rs_ag_plan("eager"), MODEL, 4).iteration_s))


def test_lookahead_needs_a_per_layer_update() -> None:
    with pytest.raises(ConfigError, match="per_layer"):
        replay(three_layers((1, 1, 1)), rs_ag_plan("lookahead", "global"), MODEL, 4)


def test_replay_rejects_bad_timing_fields() -> None:
    trace = three_layers((1, 1, 1))
    with pytest.raises(ConfigError, match="ag_issue"):
        replay(trace, rs_ag_plan("early"), MODEL, 4)
    plan = Plan("x", (Bucket(("L0", "L1", "L2")),), credit_bytes=0.0)
    with pytest.raises(ConfigError, match="credit_bytes"):
        replay(trace, plan, MODEL, 4)


def test_executor_issue_keeps_eager_all_gathers() -> None:
    # gradsched's executor issues every all-gather after backward (no lookahead).
    trace = three_layers((3.0, 0.5, 3.0))
    opts = ReplayOptions(iterations=5, issue="executor")
    assert (replay(trace, rs_ag_plan("lookahead"), MODEL, 4, opts).iteration_s
            == pytest.approx(replay(trace, rs_ag_plan("eager"), MODEL, 4, opts).iteration_s))


@SETTINGS
@given(trace=traces(), model=alpha_beta, threshold=st.floats(0.001, 2.0))
def test_lookahead_is_never_faster_than_eager(trace: ComputeTrace, model: AlphaBetaModel,
                                              threshold: float) -> None:
    # Each lookahead all-gather starts no earlier than its eager twin (by induction over
    # groups: max(pre-hook, previous end) >= previous end), so the forward cannot finish
    # earlier.
    knobs = {"search": "none", "threshold_mb": threshold}
    ahead = make_plan("dear", trace, model, 8, knobs | {"ag_issue": "lookahead"})
    eager = make_plan("dear", trace, model, 8, knobs | {"ag_issue": "eager"})
    assert ahead.buckets == eager.buckets
    assert engine_s(trace, ahead, model, 8) >= engine_s(trace, eager, model, 8) * (1 - 1e-9)


def test_dear_planner_defaults_follow_the_reference_code() -> None:
    trace = tiny_trace([30 * MB, 10 * MB, 10 * MB, 10 * MB], [1e-3] * 4)
    model = AlphaBetaModel(1e-4, 1e-9)
    plan = make_plan("dear", trace, model, 8, {"search": "none"})
    assert plan.ag_issue == "lookahead" and plan.update == "per_layer"
    assert make_plan("dear", trace, model, 8, {"search": "none", "ag_issue": "eager"}
                     ).ag_issue == "eager"
    # dear/tuner.py L9 num_trials = 10, bound (1, 256) MiB (dopt_rsag_bo.py L101), first
    # point the configured threshold, then EI suggestions (no random points, L8).
    tuned = make_plan("dear", trace, model, 8)
    evaluated = [e["threshold_mb"] for e in tuned.info["evaluated"]]
    assert len(evaluated) == 10 and evaluated[0] == pytest.approx(25.0)
    assert all(1.0 <= x <= 256.0 for x in evaluated)
    with pytest.raises(ConfigError, match="ag_issue"):
        make_plan("dear", trace, model, 8, {"ag_issue": "early"})


# ---------------------------------------------------------------------------------------
# Plan JSON: version 2 carries ag_issue and credit_bytes; version 1 still reads.
# ---------------------------------------------------------------------------------------
def test_plan_json_round_trip_and_version_1() -> None:
    plan = Plan("x", (Bucket(("a",), "rs_ag"),), update="per_layer", ag_issue="lookahead",
                credit_bytes=16e6)
    data = json.loads(json.dumps(plan.to_dict()))
    assert data["format_version"] == 2
    assert Plan.from_dict(data) == plan
    old = {k: v for k, v in data.items() if k not in ("ag_issue", "credit_bytes")}
    old["format_version"] = 1
    back = Plan.from_dict(old)
    assert back.ag_issue == "eager" and back.credit_bytes is None
    with pytest.raises(InputError, match="version 2"):
        Plan.from_dict(old | {"ag_issue": "lookahead"})
    for field, value in (("ag_issue", "later"), ("credit_bytes", 0), ("credit_bytes", True),
                         ("credit_bytes", float("inf"))):
        bad = copy.deepcopy(data)
        bad[field] = value
        with pytest.raises(InputError, match=field):
            Plan.from_dict(bad)


# ---------------------------------------------------------------------------------------
# The engine's credit (bytecore.py L238-251: start the most urgent ready task while the
# credit is positive, then subtract its size; L221: a finished task gives it back).
# Three 1000-byte all-reduces ready together at 1 ms; T = 1 ms each alone (beta only),
# in-flight collectives share bandwidth.
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(("credit", "starts_ms"), [
    (500.0, [1.0, 2.0, 3.0]),  # 0 < 500 starts one; 1000 in flight blocks the next
    (1500.0, [1.0, 1.0, 3.0]),  # two start (0, then 1000 < 1500), share: both end at 3
    (2500.0, [1.0, 1.0, 1.0]),  # all three start and share: all end at 4
])
def test_credit_limits_bytes_in_flight(credit: float, starts_ms: list[float]) -> None:
    trace = tiny_trace([1000, 1000, 1000], [1 * MS, 0.0, 0.0], forward_s=0.0)
    plan = Plan("credit", tuple(Bucket((n,), priority=k) for k, n in
                                enumerate(("t0", "t1", "t2"))),
                update="per_layer", credit_bytes=credit)
    res = replay(trace, plan, AlphaBetaModel(0.0, 1e-6), 4, timeline=True)
    starts = sorted(e.start_s for e in res.events if e.iteration == 0 and e.lane == "comm")
    assert starts == pytest.approx([s * MS for s in starts_ms])
    assert res.iteration_s == pytest.approx(4 * MS)  # the link is busy 3 ms either way


# ---------------------------------------------------------------------------------------
# ByteScheduler's plan.
# Ready order: t0 (layer 1, 3 MiB = 786,432 params), t1 (layer 1, 6 MiB = 1,572,864),
# t2 (layer 0, 1 MiB = 262,144). Forward order (trace rows): t2, t1, t0.
# ---------------------------------------------------------------------------------------
def bs_trace() -> ComputeTrace:
    return tiny_trace([3 * MB, 6 * MB, MB], [1e-3, 0.0, 1e-3], layers=[1, 1, 0])


def test_bytescheduler_per_tensor_partition_priority_credit() -> None:
    plan = make_plan("bytescheduler", bs_trace(), AlphaBetaModel(1e-4, 1e-9), 8,
                     {"search": "none"})
    # one task per tensor (horovod.py L250-255), in ready order
    assert bucket_names(plan) == [["t0"], ["t1"], ["t2"]]
    # priority = index in model.parameters() (horovod.py L55-60): rows t2, t1, t0
    assert [b.priority for b in plan.buckets] == [2, 1, 0]
    # ceil(numel / 1e6) parts (bytecore.py L62, L174-175; horovod_task.py L101)
    assert [b.chunks for b in plan.buckets] == [1, 2, 1]
    # credit 4e6 parameters (bytecore.py L65) x 4 bytes each; the credit alone limits
    assert plan.credit_bytes == pytest.approx(16e6) and plan.channels is None
    assert plan.update == "per_layer"
    small = make_plan("bytescheduler", bs_trace(), AlphaBetaModel(1e-4, 1e-9), 8,
                      {"search": "none", "partition_params": "300000",
                       "credit_params": "1"})
    assert [b.chunks for b in small.buckets] == [3, 6, 1]
    assert small.credit_bytes == pytest.approx(4.0)


def test_bytescheduler_layer_variant_and_p3() -> None:
    model = AlphaBetaModel(1e-4, 1e-9)
    layer = make_plan("bytescheduler", bs_trace(), model, 8,
                      {"search": "none", "granularity": "layer"})
    assert bucket_names(layer) == [["t0", "t1"], ["t2"]]
    assert [b.chunks for b in layer.buckets] == [3, 1]  # ceil(2,359,296 / 1e6)
    assert [b.priority for b in layer.buckets] == [1, 0]
    p3 = make_plan("bytescheduler", bs_trace(), model, 8, {"p3": "true", "search": "none"})
    # 50,000-parameter slices per tensor, one at a time
    assert [b.chunks for b in p3.buckets] == [16, 32, 6]
    assert p3.channels == 1 and p3.credit_bytes is None


def test_bytescheduler_credit_tuning_as_the_original() -> None:
    trace, model = bs_trace(), AlphaBetaModel(1e-4, 1e-9)
    plan = make_plan("bytescheduler", trace, model, 8)
    evaluated = plan.info["evaluated"]
    # tuner.py L53, L58 and search.py L124: 14 points in [4e6, 64e6], the first 10 random;
    # the configured credit (the dropped first point, search.py L73-75) is not among them
    assert len(evaluated) == 14
    credits = [e["credit_params"] for e in evaluated]
    assert all(4_000_000 <= c <= 64_000_000 for c in credits)
    assert bytescheduler.CREDIT_PARAMS not in credits[:10]
    best = min(evaluated, key=lambda e: e["iteration_s"])
    assert plan.info["credit_params"] == best["credit_params"]
    assert plan.credit_bytes == pytest.approx(4 * best["credit_params"])
    assert engine_s(trace, plan, model, 8) == pytest.approx(best["iteration_s"], rel=1e-12)


def test_bytescheduler_partition_search_starts_at_the_configured_partition() -> None:
    trace, model = bs_trace(), AlphaBetaModel(1e-4, 1e-9)
    plan = make_plan("bytescheduler", trace, model, 8,
                     {"search": "partition", "tune_iters": 5})
    first = plan.info["evaluated"][0]
    assert first["partition_params"] == 1_000_000
    assert plan.info["best_iteration_s"] <= first["iteration_s"]


@pytest.mark.parametrize(("knobs", "message"), [
    ({"credit_params": "0"}, "credit_params"),
    ({"partition_params": "0"}, "partition_params"),
    ({"tune_iters": "0"}, "tune_iters"),
    ({"p3": "true"}, "p3"),
    ({"granularity": "bucket"}, "granularity"),
    ({"partition_mb": "4"}, "partition_mb"),
])
def test_bytescheduler_bad_knobs(knobs: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        make_plan("bytescheduler", bs_trace(), AlphaBetaModel(1e-4, 1e-9), 8, knobs)
