"""The items released at each backward position, listed by one stable sort (positions
ascending, items in item order within one): the same groups as a numpy split per
position. Plans are planted on a SYNTHETIC trace."""

from __future__ import annotations

import numpy as np
import pytest

from gradsched.costmodel import AlphaBetaModel
from gradsched.planners import bytescheduler, ddp, dear
from gradsched.replay.list_schedule import release_sequence
from gradsched.replay.prep import AG, plan_items, trace_arrays
from tests.conftest import synthetic_compute_trace

MODEL = AlphaBetaModel(1e-4, 1e-9)


def split_by_position(items) -> dict[int, list[int]]:
    """The grouping written with ``np.unique`` and ``np.split``."""
    released = np.flatnonzero(items.kind != AG)
    if released.size == 0:
        return {}
    position = items.bucket_last_pos[items.bucket[released]]
    order = np.argsort(position, kind="stable")
    keys, starts = np.unique(position[order], return_index=True)
    groups = np.split(released[order], starts[1:])
    return {int(k): g.tolist() for k, g in zip(keys.tolist(), groups, strict=True)}


@pytest.mark.parametrize("make", [
    lambda t: ddp.plan(t, MODEL, 8, bucket_cap_mb=0.05),
    lambda t: bytescheduler.plan(
        t, MODEL, 8, bytescheduler.Knobs(search="none", partition_params=3000)),
    lambda t: dear.plan(t, MODEL, 8, dear.Knobs(search="none", threshold_mb=0.01)),
])
def test_grouped_like_the_split(make) -> None:
    trace = synthetic_compute_trace(40, seed=9)
    items = plan_items(trace_arrays(trace), make(trace), MODEL, 8, 0.0)
    positions, released = release_sequence(items)
    grouped: dict[int, list[int]] = {}
    for pos, item in zip(positions, released, strict=True):
        grouped.setdefault(pos, []).append(item)
    assert grouped == split_by_position(items)
    assert positions == sorted(positions) and len(grouped) > 3
    assert all(type(k) is int for k in positions) and all(type(i) is int for i in released)
