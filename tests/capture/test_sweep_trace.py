"""The collective sweep's summary: the slowest rank's median, and p2p as half of rank 0's
round trip (synthetic per-rank times)."""

from __future__ import annotations

import pytest

from gradsched.capture import sweep_settings
from gradsched.capture.sweep_trace import summarise


def test_summary_is_slowest_ranks_median():
    per_rank = [
        {"results": [{"collective": "all_reduce", "bytes": 1000, "warmup": 1,
                      "times_s": [1.0, 2.0, 3.0]}]},
        {"results": [{"collective": "all_reduce", "bytes": 1000, "warmup": 1,
                      "times_s": [0.5, 4.0, 5.0]}]},
    ]
    row = summarise(per_rank, backend="gloo", world_size=2, nodes=1, in_place=False).iloc[0]
    assert row["time_s"] == 4.0  # max(median 2, median 4)
    assert row["time_min_s"] == 1.0  # max(min 1, min 0.5)
    assert row["time_max_s"] == 5.0
    assert row["algbw_Bps"] == pytest.approx(250.0)
    assert row["busbw_Bps"] == pytest.approx(250.0)  # 2(n-1)/n = 1 for n = 2
    assert row["in_place"] == 1  # torch's all_reduce is in place


def test_p2p_summary_is_half_of_rank0_round_trip():
    """p2p (point-to-point ping-pong): one-way time = half of rank 0's median round trip; rank 1's
    times (receive then send back) do not enter. Synthetic per-rank times."""
    per_rank = [
        {"rank": 1, "results": [{"collective": "p2p", "bytes": 1000, "warmup": 1,
                                 "times_s": [9.0, 9.0, 9.0]}]},
        {"rank": 0, "results": [{"collective": "p2p", "bytes": 1000, "warmup": 1,
                                 "times_s": [2.0, 4.0, 10.0]}]},
    ]
    row = summarise(per_rank, backend="gloo", world_size=2, nodes=2, in_place=False).iloc[0]
    assert row["time_s"] == 2.0 and row["time_min_s"] == 1.0 and row["time_max_s"] == 5.0
    assert row["algbw_Bps"] == pytest.approx(500.0) == row["busbw_Bps"]
    assert row["in_place"] == 0 and row["world_size"] == 2
    assert sweep_settings.bus_factor("p2p", 2) == 1.0
