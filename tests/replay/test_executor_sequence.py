"""The executor's issue sequence (:func:`gradsched.replay.engine.executor_sequence`) built
with plain ints: the same positions as the per-item numpy loop it replaced (written out
here), on plans with chunks, priorities and all-gathers. Plans are planted on a SYNTHETIC
trace."""

from __future__ import annotations

import numpy as np
import pytest

from gradsched.costmodel import AlphaBetaModel
from gradsched.plan import launch_order
from gradsched.planners import bytescheduler, ddp, dear
from gradsched.replay.engine import executor_sequence
from gradsched.replay.prep import AG, plan_items, trace_arrays
from tests.conftest import synthetic_compute_trace

MODEL = AlphaBetaModel(1e-4, 1e-9)


def loop_sequence(plan, items) -> np.ndarray:
    """The sequence item by item, with numpy scalars."""
    first = np.flatnonzero(items.kind != AG)
    bucket_bytes = np.zeros(len(plan.buckets))
    np.add.at(bucket_bytes, items.bucket[first], items.nbytes[first])
    slot, seen = {}, np.zeros(len(plan.buckets), dtype=np.int64)
    for i in first:
        b = int(items.bucket[i])
        slot[(b, int(seen[b]))] = int(i)
        seen[b] += 1
    pos = np.zeros(len(items.bucket), dtype=np.int64)
    for q, key in enumerate(launch_order(plan, [round(float(x)) for x in bucket_bytes])):
        pos[slot[key]] = q
    gathers = sorted(np.flatnonzero(items.kind == AG), key=lambda i: (
        float(items.key_priority[i]), int(items.bucket[i]), int(i)))
    for q, i in enumerate(gathers):
        pos[i] = len(first) + q
    return pos


@pytest.mark.parametrize("make", [
    lambda t: ddp.plan(t, MODEL, 8, bucket_cap_mb=0.05),
    lambda t: bytescheduler.plan(
        t, MODEL, 8, bytescheduler.Knobs(search="none", partition_params=3000)),
    lambda t: dear.plan(t, MODEL, 8, dear.Knobs(search="none", threshold_mb=0.01)),
])
def test_same_sequence_as_the_loop(make) -> None:
    trace = synthetic_compute_trace(40, seed=9)
    plan = make(trace)
    items = plan_items(trace_arrays(trace), plan, MODEL, 8, 0.0)
    got = executor_sequence(plan, items)
    assert got.dtype == np.int64
    assert np.array_equal(got, loop_sequence(plan, items))
    assert sorted(got.tolist()) == list(range(len(items.bucket)))
