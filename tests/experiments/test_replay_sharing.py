"""Replays shared across the steps of a case (a replayed case's rows, ``advise``) and across
ByteScheduler credits that cannot bind: the same numbers as replaying each plan on its own.
Traces are SYNTHETIC."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gradsched.costmodel import AlphaBetaModel
from gradsched.experiments import grid, recommend, scoring
from gradsched.planners import ALGORITHMS_ALL, bytescheduler
from gradsched.replay import ReplayOptions, replay
from tests.conftest import synthetic_compute_trace

MODEL = AlphaBetaModel(1e-4, 1e-9)


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """One entry per replay the engine runs."""
    runs: list[int] = []
    real = scoring.replay

    def counted(*args, **kwargs):
        runs.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(scoring, "replay", counted)
    monkeypatch.setattr(grid, "replay", counted)
    real_score = scoring.replay_iteration_s

    def counted_score(*args, **kwargs):
        runs.append(1)
        return real_score(*args, **kwargs)

    monkeypatch.setattr(scoring, "replay_iteration_s", counted_score)
    return runs


def test_a_cases_rows_are_the_plans_replayed_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    trace = synthetic_compute_trace(10, seed=4)
    runs = _counting(monkeypatch)
    frame = grid.compare(trace, MODEL, 8, ALGORITHMS_ALL)
    shared = len(runs)
    for row in frame.to_dict("records"):
        plan = grid.plan_case(row["algorithm"], trace, MODEL, 8)
        alone = replay(trace, plan, MODEL, 8, ReplayOptions())
        assert (row["iteration_s"], row["exposed_comm_s"], row["comm_busy_s"],
                row["n_collectives"]) == (alone.iteration_s, alone.exposed_comm_s,
                                          alone.comm_busy_s, alone.n_collectives)
    runs.clear()
    for name in ALGORITHMS_ALL:  # each planned and replayed with caches of its own
        grid.run_algorithm(name, trace, MODEL, 8, options=ReplayOptions())
    assert shared < len(runs)


def test_advise_steps_share_replays_with_the_same_answers() -> None:
    trace = synthetic_compute_trace(12, seed=5)
    options = ReplayOptions(issue="executor")
    caches = scoring.SharedReplayCaches()
    alone = recommend.sweep_ddp(trace, MODEL, 8, (1, 4, 25), options)
    shared = recommend.sweep_ddp(trace, MODEL, 8, (1, 4, 25), options, caches)
    assert repr(alone) == repr(shared)  # NaN shares: compared as written
    plan, result = grid.run_algorithm("ddp", trace, MODEL, 8, {"bucket_cap_mb": 4}, options,
                                      caches=caches)  # replayed by the sweep: kept
    assert repr(result) == repr(replace(replay(trace, plan, MODEL, 8, options),
                                        algorithm="ddp"))
    with pytest.raises(ValueError, match="grad_accum"):
        grid.plan_case("best", trace, MODEL, 8, {}, 2, caches)


def test_credits_that_cannot_bind_share_one_replay() -> None:
    trace = synthetic_compute_trace(16, seed=6)
    total = float(trace.frame["bytes"].sum())
    tasks = bytescheduler.make_tasks(trace, "tensor")
    params = total / tasks.bytes_per_param

    def plan(credit_params: float):
        return bytescheduler.bs_plan(tasks, partition=2048, credit=int(credit_params),
                                     knobs={}, info={})

    cache = scoring.ReplayCache(trace, MODEL, 8)
    above, far_above, within = plan(1.01 * params), plan(50 * params), plan(0.02 * params)
    key = scoring.scoring_signature
    assert key(above, cache.tensor_bytes) == key(far_above, cache.tensor_bytes)
    assert key(within, cache.tensor_bytes) != key(above, cache.tensor_bytes)
    times = [replay(trace, p, MODEL, 8).iteration_s for p in (above, far_above, within)]
    assert times[0] == times[1]  # the claim the shared key rests on
    assert times[2] != times[0]  # a binding credit changes the schedule
    assert [cache(p) for p in (above, far_above, within)] == times
