"""Speed without a changed answer: MG-WFBP prices its merge sums ahead in batches, and the
contiguous program's answer is kept per (sequence, model, world size). Each is compared with
the one-by-one computation on planted cases. Traces are SYNTHETIC."""

from __future__ import annotations

import numpy as np
import pytest

from gradsched.costmodel import AlphaBetaModel
from gradsched.costmodel.base import CommModel, comm_times
from gradsched.planners import _family, contiguous, mgwfbp, oasr
from gradsched.planners._family import ReadySeq, ready_seq
from tests.conftest import synthetic_compute_trace


def one_by_one_ends(seq: ReadySeq, model: CommModel, world_size: int) -> np.ndarray:
    """MG-WFBP's sweep with one model call per size asked (the rule of
    :mod:`gradsched.planners.mgwfbp`, written out plainly)."""
    def t(nbytes: float) -> float:
        return float(comm_times(model, "all_reduce", np.asarray([nbytes]), world_size)[0])

    ends: list[int] = []
    prev_finish = -np.inf
    group = float(seq.nbytes[0])
    for k in range(seq.n - 1):
        start = max(float(seq.ready_s[k]), prev_finish)
        nxt = float(seq.nbytes[k + 1])
        if seq.ready_s[k + 1] < start + t(group) + t(nxt) - t(group + nxt):
            group += nxt
        else:
            ends.append(k + 1)
            prev_finish = start + t(group)
            group = nxt
    ends.append(seq.n)
    return np.asarray(ends, dtype=np.int64)


class Counting(AlphaBetaModel):
    """An alpha-beta model that counts its calls and the sizes it prices."""

    calls = 0
    sizes = 0

    def raw_times(self, collective: str, nbytes: np.ndarray, world_size: int) -> np.ndarray:
        type(self).calls += 1
        type(self).sizes += int(np.asarray(nbytes).size)
        return super().raw_times(collective, nbytes, world_size)


# from no merge (300 groups) through ~250, ~160 and ~20 groups to one group
@pytest.mark.parametrize("alpha,beta", [(0.0, 1e-9), (5e-4, 1e-9), (1e-3, 1e-9),
                                        (1e-4, 1e-8), (10.0, 1e-9)])
@pytest.mark.parametrize("seed", range(4))
def test_mgwfbp_priced_ahead_is_the_one_by_one_grouping(alpha: float, beta: float,
                                                        seed: int) -> None:
    seq = ready_seq(synthetic_compute_trace(300, seed=seed))
    model = AlphaBetaModel(alpha, beta)
    assert np.array_equal(mgwfbp.mgwfbp_ends(seq, model, 8),
                          one_by_one_ends(seq, model, 8))


def test_mgwfbp_one_group_takes_few_model_calls() -> None:
    seq = ready_seq(synthetic_compute_trace(2000, seed=7))
    model = Counting(10.0, 1e-9)  # every merge saves 10 s: one group
    Counting.calls = Counting.sizes = 0
    ends = mgwfbp.mgwfbp_ends(seq, model, 8)
    assert ends.tolist() == [2000]
    assert Counting.calls < 20 and Counting.sizes < 3 * 2000  # one-by-one: ~2000 calls


def test_the_contiguous_optimum_is_computed_once_per_model(
        monkeypatch: pytest.MonkeyPatch) -> None:
    trace = synthetic_compute_trace(40, seed=2)
    seq = ready_seq(trace)
    model = AlphaBetaModel(2e-4, 1e-9)
    runs: list[int] = []
    real = _family._bounded_optimal_ends

    def counted(*args, **kwargs):
        runs.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(_family, "_bounded_optimal_ends", counted)
    first = _family.bounded_optimal_ends(seq, model, 16)
    first[0][0] = -1  # a caller's change to its copy stays its own
    again = _family.bounded_optimal_ends(seq, model, 16)
    assert len(runs) == 1
    exact = _family.optimal_ends(seq, model, 16)
    assert np.array_equal(again[0], exact[0]) and again[1] == exact[1] and again[2] == {}
    assert contiguous.plan(trace, model, 16).buckets == oasr.plan(trace, model, 16).buckets
    assert len(runs) == 1
    _family.bounded_optimal_ends(seq, model, 32)  # another world size
    _family.bounded_optimal_ends(seq, AlphaBetaModel(2e-4, 1e-9), 16)  # another model
    monkeypatch.setattr(_family, "MAX_EXACT_TENSORS", 8)  # another bound
    coarse = _family.bounded_optimal_ends(seq, model, 16)
    assert len(runs) == 4 and coarse[2]["coarsened"]["tensors_per_run"] == 5


class Curved(AlphaBetaModel):
    """Start-up growing with the size (log), so the wire floor sits below the price by
    varying amounts."""

    def raw_times(self, collective: str, nbytes: np.ndarray, world_size: int) -> np.ndarray:
        m = np.asarray(nbytes, dtype=float)
        return self.alpha * (1.0 + 0.5 * np.log1p(m / 1e5)) + self.beta * m


@pytest.mark.parametrize("wide", [2, 64])
@pytest.mark.parametrize("model", [Curved(1e-4, 1e-8), AlphaBetaModel(1e-3, 1e-8)])
def test_floored_rows_give_the_whole_rows_answer(wide: int, model: CommModel,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    seq = ready_seq(synthetic_compute_trace(400, seed=3))  # communication-bound: wide rows
    assert _family.priced_floor(model, 8) is not None
    whole = _family.optimal_ends(seq, model, 8, prune=False)
    monkeypatch.setattr(_family, "priced_floor", lambda *_: None)
    pruned = _family.optimal_ends(seq, model, 8, prune=True)
    monkeypatch.undo()
    monkeypatch.setattr(_family, "WIDE_ROW", wide)
    floored = _family.optimal_ends(seq, model, 8, prune=True)
    assert len(pruned[0]) > 10  # a grouping, not a trivial one
    assert np.array_equal(floored[0], pruned[0]) and floored[1] == pruned[1]
    assert floored[1] == whole[1]  # the optimum (ties may group differently)


def test_a_groupings_buckets_are_made_once_per_sequence() -> None:
    trace = synthetic_compute_trace(50, seed=8)
    seq = ready_seq(trace)
    ends = np.array([10, 20, 50])
    first = _family.plan_from_ends("x", seq, ends, knobs={})
    again = _family.plan_from_ends("y", seq, ends.copy(), knobs={"k": 1})
    assert again.buckets is first.buckets and again.algorithm == "y"
    other = _family.plan_from_ends("x", seq, ends, knobs={}, collective="rs_ag")
    timed = _family.plan_from_ends("x", seq, ends, knobs={}, releases=[0.5, 1.0, 2.0])
    assert other.buckets is not first.buckets and other.buckets[0].collective == "rs_ag"
    assert [b.release_s for b in timed.buckets] == [0.5, 1.0, 2.0]
    assert [b.tensors for b in first.buckets] == [seq.names[0:10], seq.names[10:20],
                                                   seq.names[20:50]]


def test_partitions_that_split_alike_share_their_buckets() -> None:
    from gradsched.planners import bytescheduler

    tasks = bytescheduler.make_tasks(synthetic_compute_trace(20, seed=4), "tensor")
    biggest = int(tasks.numel.max())
    whole = tasks.buckets(biggest)
    assert tasks.buckets(biggest + 1000) is whole  # no task split either way
    assert all(b.chunks == 1 for b in whole)
    halves = tasks.buckets(max(biggest // 2, 1))
    assert halves is not whole and max(b.chunks for b in halves) == 2
