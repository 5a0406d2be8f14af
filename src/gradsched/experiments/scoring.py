"""The replay as the planners' scorer, and :func:`make_plan` that supplies it.

The planners that search by scoring candidate plans (``best``, ``search``, ``dear``,
``bytescheduler``, ``bytescheduler-ps``) define the scorer they need
(:class:`gradsched.planners.ScorerFactory`) but never import the replay engine, which lies
above them; this module is the factory they are given.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gradsched import planners
from gradsched.costmodel.base import CommModel
from gradsched.plan import Plan
from gradsched.planners._family import plan_signature
from gradsched.replay import ReplayOptions, replay
from gradsched.traces.bundle import ComputeTrace


def replay_iteration_s(trace: ComputeTrace, plan: Plan, model: CommModel, world_size: int,
                       iterations: int = 5, **interference: Any) -> float:
    """Steady-state iteration time of ``plan`` by the replay engine (``interference``:
    ``compute_slowdown``, ``comm_slowdown``, ``collective_cpu_s`` and ``issue`` of
    :class:`~gradsched.replay.ReplayOptions`)."""
    options = ReplayOptions(iterations=iterations, **interference)
    return float(replay(trace, plan, model, world_size, options, timeline=False).iteration_s)


class ReplayCache:
    """Replay-scored plans, memoised by schedule content (a
    :class:`~gradsched.planners.ScorerFactory`: constructing one makes the scorer)."""

    def __init__(self, trace: ComputeTrace, model: CommModel, world_size: int,
                 iterations: int = 5, **interference: Any) -> None:
        self.trace, self.model, self.world_size = trace, model, world_size
        self.iterations = iterations
        self.interference = interference
        self._seen: dict[tuple[Any, ...], float] = {}

    def __call__(self, plan: Plan) -> float:
        key = plan_signature(plan)
        if key not in self._seen:
            self._seen[key] = replay_iteration_s(self.trace, plan, self.model,
                                                 self.world_size, self.iterations,
                                                 **self.interference)
        return self._seen[key]


class SharedReplayCaches:
    """A :class:`~gradsched.planners.ScorerFactory` that hands every planner asking for the
    same case and replay options the same :class:`ReplayCache`: ``best`` runs ``search``,
    ByteScheduler's and DeAR's searches among its candidates, and each of them, and ``best``
    itself, scores a plan another already replayed without replaying it again."""

    def __init__(self) -> None:
        self._caches: dict[tuple[Any, ...], ReplayCache] = {}

    def __call__(self, trace: ComputeTrace, model: CommModel, world_size: int,
                 iterations: int = 5, **interference: Any) -> ReplayCache:
        options = ReplayOptions(iterations=iterations, **interference)  # defaults filled in
        key = (id(trace), id(model), world_size, options)
        if key not in self._caches:  # the cache holds trace and model: their ids stay unique
            self._caches[key] = ReplayCache(trace, model, world_size, iterations,
                                            **interference)
        return self._caches[key]


def make_plan(name: str, trace: ComputeTrace, model: CommModel, world_size: int,
              knobs: Mapping[str, str | float | int] | None = None) -> Plan:
    """:func:`gradsched.planners.make_plan` with candidate plans scored by the replay, one
    cache of replays shared by every planner the call runs (:class:`SharedReplayCaches`)."""
    return planners.make_plan(name, trace, model, world_size, knobs,
                              scorer=SharedReplayCaches())
