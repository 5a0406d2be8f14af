"""Replay engine: hand-computed cases, invariants, the lower bound of every replayed plan.

Every trace here is SYNTHETIC (built in the test), labelled so in its metadata.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gradsched.costmodel import AlphaBetaModel
from gradsched.errors import ConfigError
from gradsched.plan import Bucket, Plan
from gradsched.replay import ReplayOptions, lower_bound, replay
from gradsched.replay.timeline import timeline_frame
from gradsched.traces import ComputeTrace
from tests.conftest import synthetic_compute_trace

MS = 1e-3
META = {
    "kind": "compute", "model": "hand-3", "batch_size": 1, "device": "none", "dtype": "fp32",
    "world_size": 1, "software": {}, "capture_method": "synthetic", "iterations": None,
    "date": "2026-11-23", "source": "SYNTHETIC hand-computed test case, not measured",
}


def hand_trace(second_backward_ms: float = 2.0) -> ComputeTrace:
    """3 layers; forward 1, 2, 3 ms; gradients ready (from backward start) at
    L2: 1 ms, L1: 1 + second_backward_ms, L0: that + 1 ms; sizes 100, 200, 300 bytes."""
    frame = pd.DataFrame({
        "name": ["L0", "L1", "L2"], "layer": [0, 1, 2], "numel": [25, 50, 75],
        "bytes": [100, 200, 300], "forward_s": [1 * MS, 2 * MS, 3 * MS],
        "backward_s": [1 * MS, second_backward_ms * MS, 1 * MS], "ready_order": [2, 1, 0],
    })
    return ComputeTrace.from_frame(frame, META)


MODEL = AlphaBetaModel(alpha=0.5 * MS, beta=0.01 * MS)  # T(m bytes) = 0.5 + 0.01 m ms


def wfbp(trace: ComputeTrace, **kw) -> Plan:
    order = trace.ready_sequence()["name"]
    return Plan("wfbp", tuple(Bucket((n,), **kw) for n in order))


def test_wfbp_hand_computed():
    # comm: L2 1 -> 4.5, L1 max(3, 4.5) -> 7.0, L0 max(4, 7) -> 8.5 ms after backward start;
    # iteration = forward 6 + max(backward 4, 8.5) = 14.5 ms.
    res = replay(hand_trace(), wfbp(hand_trace()), MODEL, world_size=4)
    assert res.iteration_s == pytest.approx(14.5 * MS)
    assert res.compute_s == pytest.approx(10 * MS)
    assert res.exposed_comm_s == pytest.approx(4.5 * MS)
    assert res.n_collectives == 3


def test_syncsgd_hand_computed():
    # one all-reduce of 600 bytes after backward: 4 + 6.5 = 10.5; + forward 6 = 16.5 ms.
    plan = Plan("syncsgd", (Bucket(("L0", "L1", "L2")),))
    assert replay(hand_trace(), plan, MODEL, 4).iteration_s == pytest.approx(16.5 * MS)


def test_update_time_is_serial_after_communication():
    trace = hand_trace()
    frame = trace.frame.assign(update_s=[0.1 * MS, 0.2 * MS, 0.3 * MS])
    trace = ComputeTrace.from_frame(frame, META)
    assert replay(trace, wfbp(trace), MODEL, 4).iteration_s == pytest.approx(15.1 * MS)


def test_decoupled_rs_ag_hand_computed():
    # RS = AG = half an all-reduce: 0.25 + 0.005 m ms. RS L2 1 -> 2.75, RS L1 3 -> 4.25,
    # RS L0 4.25 -> 5.0; all-gathers in forward order: L0 5.0 -> 5.75, L1 -> 7.0,
    # L2 -> 8.75. Next forward (from backward end, 4): L0 at 5.75 -> 6.75, L1 at 7.0 -> 9.0,
    # L2 at 9.0 -> 12.0 = the next backward start, so the period is 12 ms.
    trace = hand_trace()
    plan = Plan("dear", wfbp(trace, collective="rs_ag").buckets, update="per_layer")
    res = replay(trace, plan, MODEL, 4, timeline=True)
    assert res.iteration_s == pytest.approx(12.0 * MS)
    assert res.n_collectives == 6
    comm = timeline_frame(res).query("lane == 'comm' and iteration == 1")
    assert list(comm["kind"]) == ["reduce_scatter"] * 3 + ["all_gather"] * 3


def test_priority_reorders_and_per_layer_update_overlaps_forward():
    # With L0 most urgent, a per-layer plan lets the next forward start on L0 early.
    trace = hand_trace()
    names = trace.ready_sequence()["name"]
    prio = {"L0": 0, "L1": 1, "L2": 2}
    plan = Plan("prio", tuple(Bucket((n,), priority=prio[n]) for n in names), update="per_layer")
    glob = replay(trace, wfbp(trace), MODEL, 4).iteration_s
    assert replay(trace, plan, MODEL, 4).iteration_s <= glob + 1e-12


def test_world_size_one_is_pure_compute():
    trace = hand_trace()
    for plan in (wfbp(trace), Plan("s", (Bucket(("L0", "L1", "L2")),))):
        res = replay(trace, plan, MODEL, 1)
        assert res.iteration_s == pytest.approx(10 * MS)
        assert res.exposed_comm_s == pytest.approx(0.0, abs=1e-15)


def test_channels_share_bandwidth():
    # L1 and L0 become ready at the same time (second backward 0). Two channels: both
    # start-ups overlap, the bandwidth parts share the link, so both end together.
    trace = hand_trace(second_backward_ms=0.0)
    plan = Plan("two", (Bucket(("L2",)), Bucket(("L1",)), Bucket(("L0",))))
    one = replay(trace, plan, MODEL, 4, ReplayOptions(channels=1), timeline=True)
    two = replay(trace, plan, MODEL, 4, ReplayOptions(channels=2), timeline=True)
    assert two.iteration_s <= one.iteration_s + 1e-12
    ends = timeline_frame(two).query("lane == 'comm' and iteration == 1")["end_s"].to_numpy()
    # total bandwidth work is conserved: the last end is never earlier than
    # first start + sum of bandwidth parts
    assert ends.max() > ends.min()


def test_chunks_pay_startup_each():
    trace = hand_trace()
    plain = Plan("s", (Bucket(("L0", "L1", "L2")),))
    chunked = Plan("s", (Bucket(("L0", "L1", "L2"), chunks=4),))
    delta = (replay(trace, chunked, MODEL, 4).iteration_s
             - replay(trace, plain, MODEL, 4).iteration_s)
    assert delta == pytest.approx(3 * 0.5 * MS)


def test_release_delays_launch():
    trace = hand_trace()
    plan = Plan("s", (Bucket(("L0", "L1", "L2"), release_s=5 * MS),))
    assert replay(trace, plan, MODEL, 4).iteration_s == pytest.approx((6 + 5 + 6.5) * MS)


def test_pack_cost_applies_to_multi_tensor_buckets_only():
    trace = hand_trace()
    opts = ReplayOptions(pack_s_per_byte=0.001 * MS)
    base = replay(trace, wfbp(trace), MODEL, 4).iteration_s
    assert replay(trace, wfbp(trace), MODEL, 4, opts).iteration_s == pytest.approx(base)
    plan = Plan("s", (Bucket(("L0", "L1", "L2")),))
    # pack 0.6 ms before launch and unpack 0.6 ms after completion
    assert replay(trace, plan, MODEL, 4, opts).iteration_s == pytest.approx((16.5 + 1.2) * MS)


def test_bad_options_and_plans():
    with pytest.raises(ConfigError):
        ReplayOptions(iterations=1)
    with pytest.raises(ConfigError):
        ReplayOptions(channels=0)
    trace = hand_trace()
    with pytest.raises(ConfigError, match="nope"):
        replay(trace, Plan("x", (Bucket(("nope",)),)), MODEL, 4)


def _random_plan(trace: ComputeTrace, seed: int) -> Plan:
    rng = np.random.default_rng(seed)
    names = list(trace.ready_sequence()["name"])
    cuts = sorted(rng.choice(np.arange(1, len(names)), size=rng.integers(0, len(names)),
                             replace=False)) if len(names) > 1 else []
    groups = np.split(np.array(names), cuts)
    collective = "rs_ag" if rng.random() < 0.3 else "all_reduce"
    buckets = tuple(Bucket(tuple(g), collective=collective, chunks=int(rng.integers(1, 4)),
                           priority=int(rng.integers(0, 3)) if rng.random() < 0.5 else None)
                    for g in groups)
    update = "per_layer" if collective == "rs_ag" or rng.random() < 0.5 else "global"
    return Plan("random", buckets, update=update, channels=int(rng.integers(1, 3)))


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 12), seed=st.integers(0, 10_000),
       alpha=st.floats(0, 2e-3), beta=st.floats(0, 1e-7))
def test_lower_bound_holds_for_every_plan(n, seed, alpha, beta):
    trace = synthetic_compute_trace(n, seed)
    model = AlphaBetaModel(alpha, beta)
    plan = _random_plan(trace, seed)
    res = replay(trace, plan, model, 8)
    assert res.iteration_s >= lower_bound(trace, model, 8).lower_bound_s * (1 - 1e-9)
    assert res.iteration_s >= res.compute_s * (1 - 1e-12)


@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 12), seed=st.integers(0, 10_000))
def test_replay_is_deterministic(n, seed):
    trace = synthetic_compute_trace(n, seed)
    plan = _random_plan(trace, seed)
    a = replay(trace, plan, AlphaBetaModel(1e-4, 1e-9), 4, timeline=True)
    b = replay(synthetic_compute_trace(n, seed), plan, AlphaBetaModel(1e-4, 1e-9), 4,
               timeline=True)
    assert a == b


def test_lower_bound_parts():
    # b = 100 bytes/ms, s_min = 0.25 ms (a derived reduce-scatter's start-up). L0 (100 B,
    # forward first) is ready when backward ends at 4 ms: delivered at 4 + 0.25 + 1 ms at the
    # earliest, then the whole forward (6 ms) follows: 11.25 ms (compute 10 + tail 1.25).
    lb = lower_bound(hand_trace(), MODEL, 4)
    assert lb.compute_s == pytest.approx(10 * MS)
    assert lb.first_ready_s == pytest.approx(1 * MS)
    assert lb.sustained_algbw_Bps == pytest.approx(100 / MS)
    assert lb.startup_s == pytest.approx(0.25 * MS)
    assert lb.tail_s == pytest.approx(1.25 * MS)
    assert lb.lower_bound_s == pytest.approx(11.25 * MS)
    assert lower_bound(hand_trace(), MODEL, 1).lower_bound_s == pytest.approx(10 * MS)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 12), seed=st.integers(0, 10_000))
def test_fast_paths_equal_the_general_list_schedule(n, seed):
    from gradsched.replay.list_schedule import (
        fifo_one_channel,
        joint_schedule,
        priority_one_channel,
    )
    from gradsched.replay.prep import plan_items, trace_arrays

    trace = synthetic_compute_trace(n, seed)
    arrays = trace_arrays(trace)
    plan = _random_plan(trace, seed)
    items = plan_items(arrays, plan, AlphaBetaModel(1e-4, 1e-9), 4, 0.0)
    general = joint_schedule(items, arrays, 1, 1.0, 1.0)
    fast = priority_one_channel(items, arrays.backward_s)
    np.testing.assert_allclose(fast[1], general[1], rtol=1e-12, atol=1e-15)
    assert general[2] == pytest.approx(arrays.backward_s)  # no interference: no stretch
    if plan.buckets[0].collective == "all_reduce" and all(
            b.priority is None for b in plan.buckets):
        fifo = fifo_one_channel(items.ready_offset_s, items.duration_s)
        np.testing.assert_allclose(fifo[1], general[1], rtol=1e-12, atol=1e-15)


def test_interference_hand_computed():
    # Compute-bound variant: L1 has 6 ms of backward; no interference: L2 1 -> 4.5, L1
    # ready 7 -> 9.5, L0 ready 8, all-reduce 9.5 -> 11: 6 + 11 = 17 ms.
    trace = hand_trace(6.0)
    assert replay(trace, wfbp(trace), MODEL, 4).iteration_s == pytest.approx(17.0 * MS)
    # compute slowdown 2 (only while a collective is in its bandwidth phase; the start-up
    # phase is the model's alpha, 0.5 ms): all-reduce L2 1 -> 4.5, bandwidth phase from
    # 1.5. L1 (6 ms): 0.5 done by 1.5, 1.5 more at half speed by 4.5, the rest (4) at full
    # speed: ready 8.5; all-reduce L1 8.5 -> 11 (bandwidth from 9). L0 (1 ms): 0.5 by 9,
    # then half speed: ready 10; all-reduce L0 11 -> 12.5: 6 + 12.5 = 18.5 ms.
    slow_compute = ReplayOptions(compute_slowdown=2.0)
    assert replay(trace, wfbp(trace), MODEL, 4, slow_compute).iteration_s == pytest.approx(
        18.5 * MS)
    # collective_cpu_s 1 ms: all-reduce L2 starts at 1 during backward: L1 needs 7 ms,
    # ready 8; all-reduce L1 8 -> 10.5 also during backward: L0 needs 2 ms, ready 10;
    # all-reduce L0 starts at 10.5, after backward: no charge; ends 12: 6 + 12 = 18 ms.
    per_collective = ReplayOptions(collective_cpu_s=1.0 * MS)
    assert replay(trace, wfbp(trace), MODEL, 4, per_collective).iteration_s == pytest.approx(
        18.0 * MS)
    with pytest.raises(ConfigError):
        ReplayOptions(collective_cpu_s=-1e-3)
    trace = hand_trace()
    # comm slowdown 2: all-reduce L2 from 1 runs at half speed while backward computes
    # (to 4: 1.5 ms of its 3.5 done), ends at 6; then L1 6 -> 8.5, L0 8.5 -> 10: 16 ms.
    slow_comm = ReplayOptions(comm_slowdown=2.0)
    assert replay(trace, wfbp(trace), MODEL, 4, slow_comm).iteration_s == pytest.approx(
        16.0 * MS)


@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 10), seed=st.integers(0, 10_000), kc=st.floats(1, 3),
       km=st.floats(1, 3), cpu=st.floats(0, 1e-3))
def test_interference_never_speeds_up(n, seed, kc, km, cpu):
    # FIFO on one channel (the WFBP family): no list-scheduling anomalies are possible.
    trace = synthetic_compute_trace(n, seed)
    plan = Plan("fifo", tuple(Bucket(b.tensors) for b in _random_plan(trace, seed).buckets))
    model = AlphaBetaModel(1e-4, 1e-9)
    base = replay(trace, plan, model, 4).iteration_s
    slowed = replay(trace, plan, model, 4,
                    ReplayOptions(compute_slowdown=kc, comm_slowdown=km,
                                  collective_cpu_s=cpu)).iteration_s
    assert slowed >= base * (1 - 1e-9)


def test_replay_cli_with_interference_json(tmp_path):
    """``gradsched replay --interference`` takes the three parameters from the JSON, and
    the best planner scores with them (SYNTHETIC trace and hand-made JSON)."""
    from gradsched.cli import main

    trace = synthetic_compute_trace(12, 3)
    compute = tmp_path / "c.csv"
    trace.save(compute)
    inter = tmp_path / "inter.json"
    inter.write_text(json.dumps({"compute_slowdown": 1.0, "comm_slowdown": 1.0,
                                 "collective_cpu_s": 0.02}))
    comm = "alpha-beta:alpha=1e-4,beta=1e-9"
    out_plain, out_int = tmp_path / "plain.csv", tmp_path / "int.csv"
    args = ["replay", "--compute", str(compute), "--comm", comm, "--world-size", "4",
            "--algorithms", "wfbp,syncsgd,best"]
    assert main([*args, "-o", str(out_plain)]) == 0
    assert main([*args, "--interference", str(inter), "--plans", str(tmp_path / "p"),
                 "-o", str(out_int)]) == 0
    plain = pd.read_csv(out_plain).set_index("algorithm")["iteration_s"]
    slowed = pd.read_csv(out_int).set_index("algorithm")["iteration_s"]
    assert slowed["wfbp"] > plain["wfbp"]  # 12 collectives, each costs backward 20 ms
    assert slowed["best"] <= min(slowed["wfbp"], slowed["syncsgd"]) + 1e-12
    best = json.loads((tmp_path / "p" / "best.plan.json").read_text())
    assert best["knobs"]["collective_cpu_s"] == 0.02


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 12), seed=st.integers(0, 10_000), cpu=st.sampled_from([0.0, 2e-4]))
def test_executor_issue_order_is_one_fixed_sequence(n, seed, cpu):
    """``issue="executor"``: one channel; items start in the executor's sequence
    (:func:`gradsched.plan.launch_order`, then the all-gathers), each after it is eligible
    and after the previous one ended; without priorities and all-gathers it equals the
    dynamic FIFO schedule (SYNTHETIC traces and random plans)."""
    from gradsched.replay.engine import comm_schedule, executor_sequence
    from gradsched.replay.prep import AG, plan_items, trace_arrays

    trace = synthetic_compute_trace(n, seed)
    plan = _random_plan(trace, seed)
    model = AlphaBetaModel(1e-4, 1e-9)
    arrays = trace_arrays(trace)
    items = plan_items(arrays, plan, model, 4, 0.0)
    seq = executor_sequence(plan, items)
    assert sorted(seq.tolist()) == list(range(items.n_per_iteration))
    first = items.kind != AG
    assert (seq[first] < first.sum()).all()  # all-gathers come last
    options = ReplayOptions(issue="executor", collective_cpu_s=cpu)
    sched = comm_schedule(items, arrays, 1, options, seq)
    order = np.argsort(seq)
    starts, ends = sched.start_s[order], sched.end_s[order]
    assert (np.diff(starts) >= -1e-12).all()
    assert (starts[1:] >= ends[:-1] - 1e-12).all()  # one channel, in sequence
    assert (sched.start_s[first] >= items.ready_offset_s[first] - 1e-12).all()
    fifo = Plan("fifo", tuple(Bucket(b.tensors, chunks=b.chunks) for b in plan.buckets))
    assert replay(trace, fifo, model, 4, ReplayOptions(issue="executor")).iteration_s == \
        pytest.approx(replay(trace, fifo, model, 4).iteration_s, rel=1e-12)


def test_executor_issue_order_blocks_behind_a_late_priority():
    # SYNTHETIC: L2 (1000 B) ready at 1 ms, L1 (100 B) at 3 ms, L0 (100 B) at 23 ms;
    # forward 6 ms. Plan: L2 in 4 chunks (priority 5), L1 (9), L0 (0). The executor's
    # sequence, decided without timings (bucket k ready at step k, a chunk lasts its size
    # over the mean bucket size, 400 B): L2's chunks take 0.625 steps each, so L0 (step 2)
    # is ready before L2's last chunk ends at 2.5 and, with priority 0, goes before L1:
    # L2 x4, L0, L1. Real: L2's chunks (3 ms each) 1 -> 13 ms. Dynamic: L1 13 -> 14.5, L0
    # 23 -> 24.5: 6 + 24.5 = 30.5 ms. Executor: L0 23 -> 24.5, then L1 -> 26: 32 ms.
    frame = pd.DataFrame({
        "name": ["L0", "L1", "L2"], "layer": [0, 1, 2], "numel": [25, 25, 250],
        "bytes": [100, 100, 1000], "forward_s": [1 * MS, 2 * MS, 3 * MS],
        "backward_s": [20 * MS, 2 * MS, 1 * MS], "ready_order": [2, 1, 0],
    })
    trace = ComputeTrace.from_frame(frame, META)
    plan = Plan("p", (Bucket(("L2",), priority=5, chunks=4), Bucket(("L1",), priority=9),
                      Bucket(("L0",), priority=0)))
    from gradsched.plan import launch_order

    assert launch_order(plan, [1000, 100, 100]) == [(0, 0), (0, 1), (0, 2), (0, 3), (2, 0),
                                                    (1, 0)]
    assert replay(trace, plan, MODEL, 4).iteration_s == pytest.approx(30.5 * MS)
    assert replay(trace, plan, MODEL, 4, ReplayOptions(issue="executor")).iteration_s == \
        pytest.approx(32.0 * MS)
    with pytest.raises(ConfigError):
        ReplayOptions(issue="later")
