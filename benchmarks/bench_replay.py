"""Replay speed on a SYNTHETIC 1,000-tensor model (run: make bench).

Aim: one replay of a 1,000-tensor model well under 5 ms.
"""

from __future__ import annotations

import pytest

from gradsched.costmodel import AlphaBetaModel
from gradsched.plan import Bucket, Plan
from gradsched.replay import lower_bound, replay
from tests.conftest import synthetic_compute_trace

N = 1000
MODEL = AlphaBetaModel(20e-6, 1 / 10e9)


@pytest.fixture(scope="module")
def trace():
    return synthetic_compute_trace(N, seed=1)


def _plans(trace) -> dict[str, Plan]:
    order = list(trace.ready_sequence()["name"])
    groups = [tuple(order[i:i + 25]) for i in range(0, N, 25)]
    return {
        "wfbp": Plan("wfbp", tuple(Bucket((n,)) for n in order)),
        "grouped": Plan("grouped", tuple(Bucket(g) for g in groups)),
        "syncsgd": Plan("syncsgd", (Bucket(tuple(order)),)),
        "priority_chunks": Plan("p", tuple(Bucket((n,), chunks=2, priority=i)
                                           for i, n in enumerate(trace.names)),
                                update="per_layer"),
        "rs_ag": Plan("dear", tuple(Bucket(g, collective="rs_ag") for g in groups),
                      update="per_layer"),
        "two_channels": Plan("c2", tuple(Bucket(g) for g in groups), channels=2),
    }


@pytest.mark.parametrize("name", ["wfbp", "grouped", "syncsgd", "priority_chunks", "rs_ag",
                                  "two_channels"])
def test_replay_1000_tensors(benchmark, trace, name):
    plan = _plans(trace)[name]
    replay(trace, plan, MODEL, 16)  # warm the trace's cached arrays
    result = benchmark(replay, trace, plan, MODEL, 16)
    assert result.iteration_s > 0


def test_lower_bound_1000_tensors(benchmark, trace):
    assert benchmark(lower_bound, trace, MODEL, 16).lower_bound_s > 0
