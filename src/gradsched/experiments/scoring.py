"""The replay as the planners' scorer, and :func:`make_plan` that supplies it.

The planners that search by scoring candidate plans (``best``, ``search``, ``dear``,
``bytescheduler``, ``bytescheduler-ps``) define the scorer they need
(:class:`gradsched.planners.ScorerFactory`) but never import the replay engine, which lies
above them; this module is the factory they are given. With gradient accumulation
(``grad_accum`` micro-batches per step, :mod:`gradsched.replay.engine`) every scoring replay
replays a whole step, so a planner scores its candidates at the ``k`` its plan is judged
by.
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

    def __init__(self, grad_accum: int = 1) -> None:
        self._caches: dict[tuple[Any, ...], ReplayCache] = {}
        self.grad_accum = grad_accum

    def __call__(self, trace: ComputeTrace, model: CommModel, world_size: int,
                 iterations: int = 5, **interference: Any) -> ReplayCache:
        if self.grad_accum != 1:
            interference = {"grad_accum": self.grad_accum, **interference}
        options = ReplayOptions(iterations=iterations, **interference)  # defaults filled in
        key = (id(trace), id(model), world_size, options)
        if key not in self._caches:  # the cache holds trace and model: their ids stay unique
            self._caches[key] = ReplayCache(trace, model, world_size, iterations,
                                            **interference)
        return self._caches[key]


def make_plan(name: str, trace: ComputeTrace, model: CommModel, world_size: int,
              knobs: Mapping[str, str | float | int] | None = None,
              grad_accum: int = 1) -> Plan:
    """:func:`gradsched.planners.make_plan` with candidate plans scored by the replay of one
    optimizer step of ``grad_accum`` micro-batches, one cache of replays shared by every
    planner the call runs (:class:`SharedReplayCaches`). A plan made with ``grad_accum``
    other than 1 says so in ``info``."""
    ReplayOptions(grad_accum=grad_accum)  # checked before any planner runs
    plan = planners.make_plan(name, trace, model, world_size, knobs,
                              scorer=SharedReplayCaches(grad_accum))
    if grad_accum != 1:
        plan.info["grad_accum"] = grad_accum
    return plan
