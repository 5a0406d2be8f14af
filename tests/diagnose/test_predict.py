"""The trace-fitted comm model, the replay of one rank's layout and the ranks' clock
(hand-checked numbers)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from gradsched.diagnose.predict import fit_trace, replay_rank
from gradsched.diagnose.ranks import align


def test_trace_fit_is_the_lower_envelope() -> None:
    f = pd.DataFrame({"collective": ["all_reduce"] * 3, "bytes": [1000, 2000, 4000],
                      "transfer_s": [0.001, 0.003, 0.003]})
    fit = fit_trace(f)
    alpha, bw = fit.params["all_reduce"]
    assert alpha == 0.001  # the shortest transfer
    assert bw == pytest.approx(4000 / 0.002)  # the best bytes / (t - alpha)
    assert fit.time("all_reduce", 4000) == pytest.approx(0.003)


def test_replay_one_stream_fifo_and_exposure() -> None:
    # two collectives on one stream, ready at 0 and 1 ms, 2 ms each: the second waits for
    # the first (starts at 2 ms); compute covers [0, 3] ms
    f = pd.DataFrame({"stream": ["7", "7"], "ready_s": [0.0, 0.001]})
    start, exposed = replay_rank(f, np.array([0.002, 0.002]), [(0.0, 0.003)])
    assert start.tolist() == pytest.approx([0.0, 0.002])
    assert exposed.tolist() == pytest.approx([0.0, 0.001])  # [2, 4] less [0, 3]


def test_align_two_ranks() -> None:
    # rank 1's clock is 10 s ahead; it starts the collective 2 ms after rank 0 (on the
    # common clock), both end together
    r0 = pd.DataFrame({"rank": [0], "index": [0], "collective": ["all_reduce"],
                       "bytes": [8], "start_s": [1.000], "end_s": [1.005],
                       "duration_s": [0.005]})
    r1 = r0.assign(rank=1, start_s=11.002, end_s=11.005, duration_s=0.003)
    out = align([r0, r1], ["a", "b"]).set_index("rank")
    assert out.loc[1, "offset_s"] == pytest.approx(10.0)
    assert out.loc[0, "wait_s"] == pytest.approx(0.002)
    assert out.loc[1, "wait_s"] == pytest.approx(0.0)
    assert out.loc[0, "transfer_s"] == pytest.approx(0.003)
    assert int(out.loc[0, "last_rank"]) == 1
    single = align([r0], ["a"])
    assert math.isnan(single["wait_s"].iloc[0])
