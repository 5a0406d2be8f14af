"""The host-aware replay (gradsched.replay.host) on hand-made traces, host-bound and
device-bound, with a bounded launch queue and collectives issued at the hook."""

from __future__ import annotations

import pandas as pd
import pytest

from gradsched.costmodel.base import AlphaBetaModel
from gradsched.errors import ConfigError
from gradsched.plan import Bucket, Plan
from gradsched.replay import ReplayOptions, replay
from gradsched.replay.host import host_iteration
from gradsched.replay.prep import plan_items, trace_arrays
from gradsched.traces import ComputeTrace

MS = 1e-3


def trace(host_ms: float, device_ms: float, launches: int | None = None,
          host: bool = True) -> ComputeTrace:
    """Two layers of one tensor each; every pass of every layer takes ``device_ms`` on the
    device and ``host_ms`` on the host; layer 1's gradient is ready first."""
    frame = pd.DataFrame({"name": ["a", "b"], "layer": [0, 1], "numel": [10, 10],
                          "bytes": [40, 40], "forward_s": [device_ms * MS] * 2,
                          "backward_s": [device_ms * MS] * 2, "ready_order": [1, 0]})
    if host:
        frame["host_forward_s"] = host_ms * MS
        frame["host_backward_s"] = host_ms * MS
    if launches is not None:
        frame["forward_launches"] = launches
        frame["backward_launches"] = launches
    return ComputeTrace.from_frame(frame, {
        "kind": "compute", "model": "hand-made", "batch_size": 1, "device": "test",
        "dtype": "fp32", "world_size": 1, "software": {"framework": "none"},
        "capture_method": "hand-made (synthetic)", "iterations": 1, "date": "none",
        "source": "synthetic", "forward_measured": True})


ONE = Plan(algorithm="syncsgd", buckets=(Bucket(("a", "b")),))
PER_TENSOR = Plan(algorithm="wfbp", buckets=(Bucket(("b",)), Bucket(("a",))))
FREE = AlphaBetaModel(0.0, 0.0)


def run(t: ComputeTrace, plan: Plan = ONE, model=FREE, world: int = 1, **kw):
    return replay(t, plan, model, world, ReplayOptions(host=True, **kw))


def test_host_bound_iteration_is_the_host_plus_the_last_kernel():
    # host issues at 3, 6, 9, 12 ms; each item's 1 ms runs right after: ends at 13
    t = trace(3, 1)
    assert run(t).iteration_s == pytest.approx(13 * MS)
    assert replay(t, ONE, FREE, 1).iteration_s == pytest.approx(4 * MS)  # single stream
    arrays = trace_arrays(t)
    it = host_iteration(t, arrays, ONE, plan_items(arrays, ONE, FREE, 1, 0.0))
    assert it.forward_end_s == pytest.approx(7 * MS)
    assert it.device_wait_s == pytest.approx(9 * MS)


def test_device_bound_iteration_is_the_first_issue_plus_the_kernels():
    t = trace(0.1, 5)
    assert run(t).iteration_s == pytest.approx(20.1 * MS)


def test_a_full_launch_queue_holds_the_host_back():
    # 10 launches per item, a queue of 10: each item waits for the previous one's end
    t = trace(0.1, 5, launches=10)
    arrays = trace_arrays(t)
    items = plan_items(arrays, ONE, FREE, 1, 0.0)
    deep = host_iteration(t, arrays, ONE, items, launch_queue=1024)
    shallow = host_iteration(t, arrays, ONE, items, launch_queue=10)
    assert deep.host_end_s == pytest.approx(0.4 * MS)
    assert shallow.host_end_s == pytest.approx(15.1 * MS)
    assert shallow.iteration_s == pytest.approx(deep.iteration_s)  # device-bound either way


def test_collectives_are_issued_by_the_host_at_the_hook():
    # host-bound: gradient b (ready first) is issued at 9 ms, its kernel ends at 10; the
    # hook's launch costs the host 0.5 ms; each all-reduce takes 2 ms on its own stream:
    # b's runs 10-12; a's host issue 12.5, kernel 12.5-13.5, launch to 13, comm 13.5-15.5
    model = AlphaBetaModel(2 * MS, 0.0)
    out = run(trace(3, 1), PER_TENSOR, model, 2, collective_launch_s=0.5 * MS)
    assert out.iteration_s == pytest.approx(15.5 * MS)
    assert out.exposed_comm_s == pytest.approx(2.0 * MS)
    assert run(trace(3, 1), PER_TENSOR, model, 2).iteration_s == pytest.approx(15.0 * MS)


def test_without_host_columns_or_for_other_plans_it_refuses():
    with pytest.raises(ConfigError, match="no host columns"):
        run(trace(3, 1, host=False))
    per_layer = Plan(algorithm="bytescheduler", buckets=ONE.buckets, update="per_layer")
    with pytest.raises(ConfigError, match="DDP's family only"):
        run(trace(3, 1), per_layer)
    with pytest.raises(ConfigError, match="one communication channel"):
        ReplayOptions(host=True, channels=2)


def test_host_columns_leave_the_default_replay_unchanged():
    model = AlphaBetaModel(2 * MS, 1e-9)
    with_host = replay(trace(3, 1), PER_TENSOR, model, 4)
    without = replay(trace(3, 1, host=False), PER_TENSOR, model, 4)
    assert with_host == without


def test_one_of_the_two_host_columns_is_refused():
    frame = trace(3, 1).frame.drop(columns=["host_backward_s"])
    with pytest.raises(Exception, match="host columns come together"):
        ComputeTrace.from_frame(frame, trace(3, 1).meta)
