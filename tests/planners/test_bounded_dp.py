"""The contiguous program on long sequences: exact up to MAX_EXACT_TENSORS tensors; beyond,
the best grouping with boundaries every k-th tensor, said in the plan. SYNTHETIC traces."""

from __future__ import annotations

import numpy as np
import pytest

from gradsched.costmodel import AlphaBetaModel
from gradsched.planners import _family, contiguous
from tests.conftest import synthetic_compute_trace

MODEL = AlphaBetaModel(2e-4, 1e-9)


@pytest.mark.parametrize("seed", range(5))
def test_long_sequences_get_the_best_grouping_on_run_boundaries(
        seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    trace = synthetic_compute_trace(30, seed=seed)
    seq = _family.ready_seq(trace)
    exact_ends, exact_finish = _family.optimal_ends(seq, MODEL, 16)
    monkeypatch.setattr(_family, "MAX_EXACT_TENSORS", 8)
    ends, finish, said = _family.bounded_optimal_ends(seq, MODEL, 16)
    assert said["coarsened"]["tensors_per_run"] == 4
    assert ends[-1] == 30 and all(e % 4 == 0 for e in ends[:-1])
    assert finish >= exact_finish * (1 - 1e-12)
    if all(e % 4 == 0 for e in exact_ends[:-1]):  # the optimum lies on run boundaries
        assert finish == pytest.approx(exact_finish, rel=1e-12)
    plan = contiguous.plan(trace, MODEL, 16)
    assert plan.info["coarsened"]["tensors_per_run"] == 4
    assert sorted(t for b in plan.buckets for t in b.tensors) == sorted(trace.names)


def test_short_sequences_are_exact_and_say_nothing() -> None:
    trace = synthetic_compute_trace(30, seed=1)
    seq = _family.ready_seq(trace)
    ends, finish, said = _family.bounded_optimal_ends(seq, MODEL, 16)
    exact_ends, exact_finish = _family.optimal_ends(seq, MODEL, 16)
    assert said == {} and np.array_equal(ends, exact_ends) and finish == exact_finish
