"""``best`` and the searches it runs share one cache of replays: no plan is replayed twice,
and the chosen plan is the one separate caches choose. Traces are SYNTHETIC."""

from __future__ import annotations

from typing import Any

import pytest

from gradsched import planners
from gradsched.costmodel import AlphaBetaModel
from gradsched.experiments import scoring
from gradsched.planners._family import plan_signature
from tests.conftest import synthetic_compute_trace

MODEL = AlphaBetaModel(1e-4, 1e-9)


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, ...]]:
    """Every replay ``ReplayCache`` asks for, as (plan signature, options)."""
    seen: list[tuple[Any, ...]] = []
    real = scoring.replay_iteration_s

    def counted(trace, plan, model, world_size, iterations=5, **interference):
        seen.append((plan_signature(plan), iterations, tuple(sorted(interference.items()))))
        return real(trace, plan, model, world_size, iterations, **interference)

    monkeypatch.setattr(scoring, "replay_iteration_s", counted)
    return seen


def test_best_replays_each_plan_once(monkeypatch: pytest.MonkeyPatch) -> None:
    trace = synthetic_compute_trace(12, seed=3)
    seen = _counting(monkeypatch)
    shared = scoring.make_plan("best", trace, MODEL, 8)
    plans = [signature for signature, _, _ in seen]
    assert len(plans) == len(set(plans)), "a plan was replayed twice"
    seen.clear()
    separate = planners.make_plan("best", trace, MODEL, 8, scorer=scoring.ReplayCache)
    assert len(seen) > len(plans)  # without sharing, the searches replay plans again
    assert plan_signature(shared) == plan_signature(separate)
    assert shared.info["candidates"] == separate.info["candidates"]


def test_caches_differ_by_replay_options() -> None:
    trace = synthetic_compute_trace(4)
    caches = scoring.SharedReplayCaches()
    assert caches(trace, MODEL, 8, 5) is caches(trace, MODEL, 8, 5, collective_cpu_s=0.0,
                                                 issue="dynamic")
    assert caches(trace, MODEL, 8, 5) is not caches(trace, MODEL, 8, 3)
    assert caches(trace, MODEL, 8, 5) is not caches(trace, MODEL, 8, 5, comm_slowdown=2.0)
    assert caches(trace, MODEL, 8, 5) is not caches(trace, MODEL, 16, 5)
