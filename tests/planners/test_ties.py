"""Planners that pick the fastest of scored candidates (``search``, ``best``, the Bayesian
optimiser behind DeAR and ByteScheduler) break ties by their fixed candidate order, never by
floating-point noise: candidate scores moved by one ulp pick the same plan.

Traces are SYNTHETIC (tests/planners/test_planners.py)."""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np
import pytest

from gradsched import planners
from gradsched.costmodel import AlphaBetaModel
from gradsched.experiments.scoring import ReplayCache
from gradsched.plan import Plan
from gradsched.planners._bayesopt import BOResult, Search, minimize_1d
from gradsched.planners._family import plan_signature
from gradsched.ties import same_time
from tests.planners.test_planners import tiny_trace

T = 0.30994  # seconds


def _ulps(value: float, n: int) -> float:
    for _ in range(abs(n)):
        value = float(np.nextafter(value, np.inf if n > 0 else -np.inf))
    return value


def _side(plan: Plan, pattern: int) -> int:
    """-1 or +1 ulp for ``plan``, a fixed pseudo-random pattern per ``pattern``."""
    digest = hashlib.sha256(repr((pattern, plan_signature(plan))).encode()).digest()
    return 1 if digest[0] % 2 else -1


def noisy(pattern: int | None, constant_s: float | None = None) -> Any:
    """A scorer factory: the replay (or ``constant_s`` for every plan), each plan's score
    moved by one ulp up or down by ``pattern`` (``None``: unmoved)."""

    class Noisy(ReplayCache):
        def __call__(self, plan: Plan) -> float:
            s = constant_s if constant_s is not None else super().__call__(plan)
            return s if pattern is None else _ulps(s, _side(plan, pattern))
    return Noisy


@pytest.fixture
def trace():
    return tiny_trace([2048, 1024, 1024, 512], [1.0, 0.5, 2.5, 0.25])


def _plan(name: str, trace, scorer: Any, **knobs: Any) -> Plan:
    return planners.make_plan(name, trace, AlphaBetaModel(1e-3, 1e-6), 8, knobs,
                              scorer=scorer)


def test_search_with_every_candidate_tied_keeps_the_fewest_collectives(trace) -> None:
    """All candidates equally fast up to one ulp: the one launching the fewest collectives
    wins, the earliest among those (with ``<`` on the scores, the one whose noise is lowest
    won)."""
    winners = {_plan("search", trace, noisy(pattern, T), bo_iters=3).info["family"]
               for pattern in range(4)}
    assert len(winners) == 1


@pytest.mark.parametrize("name,label", [("search", "family"), ("best", "winner")])
def test_one_ulp_of_noise_on_the_replayed_scores_picks_the_same_plan(trace, name: str,
                                                                     label: str) -> None:
    knobs = {"bo_iters": 3} if name == "search" else {}
    clean = _plan(name, trace, noisy(None), **knobs)
    for pattern in range(3):
        moved = _plan(name, trace, noisy(pattern), **knobs)
        assert moved.info[label] == clean.info[label]
        assert plan_signature(moved) == plan_signature(clean)


def test_best_with_every_candidate_tied_keeps_the_fewest_collectives(trace) -> None:
    plans = [_plan("best", trace, noisy(pattern, T)) for pattern in range(4)]
    assert len({p.info["winner"] for p in plans}) == 1
    assert plans[0].n_collectives == 1  # SyncSGD's one bucket: the fewest launches


def test_the_optimiser_keeps_the_earliest_of_tied_evaluations() -> None:
    result = BOResult(xs=[1.0, 2.0, 3.0], ys=[T, _ulps(T, -1), _ulps(T, -2)])
    assert result.best_index == 0 and result.best_x == 1.0
    assert BOResult(xs=[1.0, 2.0], ys=[T, T * 0.9]).best_x == 2.0


def test_a_flat_objective_is_searched_the_same_whatever_its_noise() -> None:
    """An objective flat up to one ulp (a knob that does not matter) evaluates the same
    points as an exactly flat one: the noise is not standardised into a landscape."""
    def objective(pattern: int | None):
        def f(x: float) -> float:
            if pattern is None:
                return T
            digest = hashlib.sha256(repr((pattern, x)).encode()).digest()
            return _ulps(T, 1 if digest[0] % 2 else -1)
        return f

    flat = minimize_1d(objective(None), Search(1.0, 100.0, iterations=8, n_random=2, seed=0))
    for pattern in range(3):
        moved = minimize_1d(objective(pattern),
                            Search(1.0, 100.0, iterations=8, n_random=2, seed=0))
        assert moved.xs == flat.xs
        assert moved.best_x == flat.best_x == flat.xs[0]
        assert all(same_time(y, T) for y in moved.ys)
