"""The event loop with a sequence that numbers the items 0..n-1 (the executor's) keeps the
ready queue as positions alone; any other sequence (here the same positions as floats)
takes the general (class, priority, eligibility, item) key. Both must give bit-identical
schedules: on DDP, ByteScheduler and DeAR plans of a SYNTHETIC trace, with interference."""

from __future__ import annotations

import numpy as np
import pytest

from gradsched.costmodel import AlphaBetaModel
from gradsched.planners import bytescheduler, ddp, dear
from gradsched.replay.engine import executor_sequence
from gradsched.replay.list_schedule import joint_schedule
from gradsched.replay.prep import plan_items, trace_arrays
from tests.conftest import synthetic_compute_trace

MODEL = AlphaBetaModel(1e-4, 1e-9)


@pytest.mark.parametrize("make", [
    lambda t: ddp.plan(t, MODEL, 8, bucket_cap_mb=0.05),
    lambda t: bytescheduler.plan(
        t, MODEL, 8, bytescheduler.Knobs(search="none", partition_params=3000)),
    lambda t: dear.plan(t, MODEL, 8, dear.Knobs(search="none", threshold_mb=0.01)),
])
@pytest.mark.parametrize("channels,inter", [(1, (1.0, 1.0, 0.0)), (1, (1.3, 1.2, 1e-4)),
                                            (2, (1.1, 1.0, 2e-5))])
def test_positions_queue_like_the_general_key(make, channels, inter) -> None:
    trace = synthetic_compute_trace(40, seed=9)
    plan = make(trace)
    arrays = trace_arrays(trace)
    items = plan_items(arrays, plan, MODEL, 8, 0.0)
    sequence = executor_sequence(plan, items)
    fast = joint_schedule(items, arrays, channels, *inter, sequence)
    general = joint_schedule(items, arrays, channels, *inter, sequence.astype(float))
    assert np.array_equal(fast[0], general[0]) and np.array_equal(fast[1], general[1])
    assert fast[2] == general[2]
    assert np.all(np.isfinite(fast[1][:len(items.kind)]))
