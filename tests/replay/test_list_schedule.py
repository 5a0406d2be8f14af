"""The general list schedule shares bandwidth as processor sharing: collectives in their
bandwidth phase progress at 1/k of the rate each, so with every one starting at once the
i-th smallest ends at ``sum_{j<i} w_j + (k - i) w_i`` (works sorted), whatever their number.
Inputs are SYNTHETIC."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gradsched.replay.list_schedule import joint_schedule
from gradsched.replay.prep import AR, PlanItems, TraceArrays


def _items(work_s: list[float], latency_s: list[float]) -> PlanItems:
    k = len(work_s)
    zeros = np.zeros(k)
    return PlanItems(
        bucket=np.arange(k), kind=np.full(k, AR), nbytes=np.ones(k),
        duration_s=np.asarray(work_s) + np.asarray(latency_s),
        latency_s=np.asarray(latency_s), ready_offset_s=zeros,
        key_priority=np.full(k, np.inf), ag_of=np.full(k, -1), member_index=np.arange(k),
        member_bucket=np.arange(k), bucket_unpack_s=zeros, bucket_last_pos=np.zeros(k, int),
        bucket_release_s=np.full(k, -np.inf), n_per_iteration=k)


def _arrays() -> TraceArrays:
    return TraceArrays(index={}, ready_s=np.zeros(1), nbytes=np.ones(1),
                       layer_of=np.zeros(1, int), layer_forward_s=np.zeros(1),
                       layer_update_s=np.zeros(1), ready_pos=np.zeros(1, int),
                       backward_seq_s=np.zeros(1), forward_s=0.0, backward_s=0.0, update_s=0.0)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(1e-4, 1.0), min_size=1, max_size=60))
def test_bandwidth_is_shared_equally(work_s: list[float]) -> None:
    k = len(work_s)
    start, end, _ = joint_schedule(_items(work_s, [0.0] * k), _arrays(), k, 1.0, 1.0)
    w = np.sort(work_s)
    expected = np.cumsum(w) - w + (k - np.arange(k)) * w  # sum_{j<i} w_j + (k - i) w_i
    assert np.allclose(np.sort(end), expected, rtol=1e-9)
    assert np.all(start == 0.0)


def test_latency_is_not_shared_and_one_channel_is_first_come() -> None:
    _, end, _ = joint_schedule(_items([1.0, 1.0], [0.5, 0.5]), _arrays(), 2, 1.0, 1.0)
    assert end.tolist() == pytest.approx([2.5, 2.5])  # 0.5 each, then 2 x 1.0 shared
    _, end, _ = joint_schedule(_items([1.0, 1.0], [0.5, 0.5]), _arrays(), 1, 1.0, 1.0)
    assert end.tolist() == pytest.approx([1.5, 3.0])
