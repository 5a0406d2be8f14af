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

import math
from collections.abc import Mapping
from dataclasses import asdict, replace
from typing import Any

from gradsched import planners
from gradsched.costmodel.base import CommModel
from gradsched.plan import Plan
from gradsched.planners._family import plan_signature
from gradsched.replay import ReplayOptions, ReplayResult, replay
from gradsched.traces.bundle import ComputeTrace


def replay_iteration_s(trace: ComputeTrace, plan: Plan, model: CommModel, world_size: int,
                       iterations: int = 5, **interference: Any) -> float:
    """Steady-state iteration time of ``plan`` by the replay engine (``interference``:
    ``compute_slowdown``, ``comm_slowdown``, ``collective_cpu_s`` and ``issue`` of
    :class:`~gradsched.replay.ReplayOptions`)."""
    options = ReplayOptions(iterations=iterations, **interference)
    return float(replay(trace, plan, model, world_size, options, timeline=False).iteration_s)


def replay_key(plan: Plan, tensor_bytes: Mapping[str, float]) -> tuple[Any, ...]:
    """What a replay reads of ``plan``: its schedule (:func:`scoring_signature`) and its
    optimizer's parameter collectives (a whole replay's result is kept under this key)."""
    return (scoring_signature(plan, tensor_bytes), plan.optimizer, plan.param_sync)


UNBOUNDED_CREDIT = math.inf
"""What :func:`scoring_signature` writes for a credit that never binds."""


def scoring_signature(plan: Plan, tensor_bytes: Mapping[str, float]) -> tuple[Any, ...]:
    """:func:`~gradsched.planners._family.plan_signature`, with a ByteScheduler credit
    that cannot bind written as :data:`UNBOUNDED_CREDIT` (``tensor_bytes``: the trace's
    bytes per tensor). The replay starts an item only while fewer than ``credit_bytes``
    are in flight (:func:`gradsched.replay.list_schedule.joint_schedule`), and the bytes
    in flight never exceed those of the plan's items in one iteration (each bucket's
    bytes, twice where its reduce-scatter has an all-gather twin); a credit above that
    total (by more than the rounding of a sum) is never reached, so every such credit
    replays the same schedule. ByteScheduler's credit tuning and ``search``'s sweep try
    several of them on a small model; each is replayed once."""
    signature = plan_signature(plan)
    credit = plan.credit_bytes
    if credit is None:
        return signature
    items = sum((2.0 if b.collective == "rs_ag" else 1.0)
                * sum(tensor_bytes.get(name, math.inf) for name in b.tensors)
                for b in plan.buckets)
    if credit > items * (1.0 + 1e-9):
        return (*signature[:3], UNBOUNDED_CREDIT, *signature[4:])
    return signature


class ReplayCache:
    """Replay-scored plans, memoised by schedule content (a
    :class:`~gradsched.planners.ScorerFactory`: constructing one makes the scorer); whole
    replays (:meth:`result`) are kept too, and a plan scored after its whole replay is not
    replayed again."""

    def __init__(self, trace: ComputeTrace, model: CommModel, world_size: int,
                 iterations: int = 5, **interference: Any) -> None:
        self.trace, self.model, self.world_size = trace, model, world_size
        self.iterations = iterations
        self.interference = interference
        self.options = ReplayOptions(iterations=iterations, **interference)
        frame = trace.frame
        self.tensor_bytes = dict(zip(frame["name"].tolist(),
                                     frame["bytes"].to_numpy(dtype=float).tolist(),
                                     strict=True))
        self._seen: dict[tuple[Any, ...], float] = {}
        self._results: dict[tuple[Any, ...], ReplayResult] = {}

    def __call__(self, plan: Plan) -> float:
        key = scoring_signature(plan, self.tensor_bytes)
        if key not in self._seen:
            whole = self._results.get(replay_key(plan, self.tensor_bytes))
            self._seen[key] = float(whole.iteration_s) if whole is not None else \
                replay_iteration_s(self.trace, plan, self.model, self.world_size,
                                   self.iterations, **self.interference)
        return self._seen[key]

    def result(self, plan: Plan) -> ReplayResult:
        """The replay of ``plan`` without its timeline (:func:`gradsched.replay.replay`,
        ``timeline=False``), labelled with ``plan``'s algorithm; replayed once per
        :func:`replay_key`."""
        key = replay_key(plan, self.tensor_bytes)
        if key not in self._results:
            self._results[key] = replay(self.trace, plan, self.model, self.world_size,
                                        self.options, timeline=False)
        return replace(self._results[key], algorithm=plan.algorithm)


class SharedReplayCaches:
    """A :class:`~gradsched.planners.ScorerFactory` that hands every planner asking for the
    same case and replay options the same :class:`ReplayCache`: ``best`` runs ``search``,
    ByteScheduler's and DeAR's searches among its candidates, and each of them, and ``best``
    itself, scores a plan another already replayed without replaying it again. One object
    passed to several :func:`make_plan` calls (and :meth:`for_options` to the replays of
    their plans, as ``advise`` does) shares the replays among them too."""

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

    def for_options(self, trace: ComputeTrace, model: CommModel, world_size: int,
                    options: ReplayOptions) -> ReplayCache:
        """The cache of replays with ``options`` (the one a planner scoring with the same
        options gets)."""
        settings = asdict(options)
        return self(trace, model, world_size, settings.pop("iterations"), **settings)


def make_plan(name: str, trace: ComputeTrace, model: CommModel, world_size: int,
              knobs: Mapping[str, str | float | int] | None = None,
              grad_accum: int = 1, caches: SharedReplayCaches | None = None) -> Plan:
    """:func:`gradsched.planners.make_plan` with candidate plans scored by the replay of one
    optimizer step of ``grad_accum`` micro-batches, one cache of replays shared by every
    planner the call runs (:class:`SharedReplayCaches`; ``caches``: that of several calls,
    made for the same ``grad_accum``). A plan made with ``grad_accum`` other than 1 says so
    in ``info``."""
    ReplayOptions(grad_accum=grad_accum)  # checked before any planner runs
    if caches is None:
        caches = SharedReplayCaches(grad_accum)
    elif caches.grad_accum != grad_accum:
        raise ValueError(f"replay caches made for grad_accum={caches.grad_accum}, "
                         f"not {grad_accum}")
    plan = planners.make_plan(name, trace, model, world_size, knobs, scorer=caches)
    if grad_accum != 1:
        plan.info["grad_accum"] = grad_accum
    return plan
