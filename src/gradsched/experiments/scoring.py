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
from collections.abc import Mapping, Sequence
from dataclasses import asdict, replace
from typing import Any

from gradsched import planners
from gradsched.costmodel.base import CommModel
from gradsched.plan import Bucket, Plan
from gradsched.planners._family import bucket_signature, plan_signature
from gradsched.replay import ReplayOptions, ReplayResult, replay
from gradsched.traces.bundle import ComputeTrace


def replay_iteration_s(trace: ComputeTrace, plan: Plan, model: CommModel, world_size: int,
                       iterations: int = 5, **interference: Any) -> float:
    """Steady-state iteration time of ``plan`` by the replay engine (``interference``:
    ``compute_slowdown``, ``comm_slowdown``, ``collective_cpu_s`` and ``issue`` of
    :class:`~gradsched.replay.ReplayOptions`)."""
    options = ReplayOptions(iterations=iterations, **interference)
    return float(replay(trace, plan, model, world_size, options, timeline=False).iteration_s)


UNBOUNDED_CREDIT = math.inf
"""What :func:`scoring_signature` writes for a credit that never binds."""


def item_bytes(buckets: Sequence[Bucket], tensor_bytes: Mapping[str, float]) -> float:
    """Bytes of one iteration's collective items of ``buckets`` (``tensor_bytes``: the
    trace's bytes per tensor): each bucket's bytes, twice where its reduce-scatter has an
    all-gather twin (:func:`gradsched.replay.prep.plan_items`); infinite where a bucket names
    a tensor the trace lacks (the replay refuses it)."""
    return sum((2.0 if b.collective == "rs_ag" else 1.0)
               * sum(tensor_bytes.get(name, math.inf) for name in b.tensors)
               for b in buckets)


def credit_key(credit: float | None, items: float) -> float | None:
    """``credit`` (bytes) as a replay key: :data:`UNBOUNDED_CREDIT` where it exceeds the
    ``items`` bytes in flight at most (by more than the rounding of a sum). The replay
    starts an item only while fewer than ``credit_bytes`` are in flight
    (:func:`gradsched.replay.list_schedule.joint_schedule`), and the bytes in flight never
    exceed those of one iteration's items, so such a credit is never reached and every such
    credit replays the same schedule: ByteScheduler's credit tuning and ``search``'s sweep
    try several of them on a small model, and each is replayed once."""
    if credit is not None and credit > items * (1.0 + 1e-9):
        return UNBOUNDED_CREDIT
    return credit


def scoring_signature(plan: Plan, tensor_bytes: Mapping[str, float]) -> tuple[Any, ...]:
    """:func:`~gradsched.planners._family.plan_signature` with the credit written by
    :func:`credit_key` (what :class:`ReplayCache` scores once)."""
    signature = plan_signature(plan)
    if plan.credit_bytes is None:
        return signature
    credit = credit_key(plan.credit_bytes, item_bytes(plan.buckets, tensor_bytes))
    return (*signature[:3], credit, *signature[4:])


class PlanKeys:
    """The keys :class:`ReplayCache` files plans under: :func:`scoring_signature` with the
    buckets' content replaced by a number, one per distinct content. A search scores many
    plans that share one tuple of buckets (ByteScheduler's credits at one partition) or
    meets the same content again; building and hashing the content of 45,000 buckets per
    score was a tenth of ``advise`` at LLM scale, so each tuple of buckets is read once
    (kept, so that its identity stays its own)."""

    def __init__(self, tensor_bytes: Mapping[str, float]) -> None:
        self.tensor_bytes = tensor_bytes
        self._held: dict[int, tuple[tuple[Bucket, ...], int]] = {}
        self._numbers: dict[tuple[Any, ...], int] = {}
        self._items: dict[int, float] = {}  # a content's item bytes, where a credit asked

    def _number(self, buckets: Sequence[Bucket]) -> int:
        held = self._held.get(id(buckets))
        if held is not None and held[0] is buckets:
            return held[1]
        number = self._numbers.setdefault(bucket_signature(buckets), len(self._numbers))
        if isinstance(buckets, tuple):  # immutable (a list could change under its id)
            self._held[id(buckets)] = (buckets, number)
        return number

    def score(self, plan: Plan) -> tuple[Any, ...]:
        """The plan's score key (equal keys: equal replays)."""
        number = self._number(plan.buckets)
        credit = plan.credit_bytes
        if credit is not None:
            if number not in self._items:
                self._items[number] = item_bytes(plan.buckets, self.tensor_bytes)
            credit = credit_key(credit, self._items[number])
        return (plan.update, plan.channels, plan.ag_issue, credit, number)

    def replay(self, plan: Plan) -> tuple[Any, ...]:
        """The score key and the optimizer's parameter collectives (a whole replay's)."""
        return (*self.score(plan), plan.optimizer, plan.param_sync)


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
        self.keys = PlanKeys(self.tensor_bytes)
        self._seen: dict[tuple[Any, ...], float] = {}
        self._results: dict[tuple[Any, ...], ReplayResult] = {}

    def __call__(self, plan: Plan) -> float:
        key = self.keys.score(plan)
        if key not in self._seen:
            whole = self._results.get(self.keys.replay(plan))
            self._seen[key] = float(whole.iteration_s) if whole is not None else \
                replay_iteration_s(self.trace, plan, self.model, self.world_size,
                                   self.iterations, **self.interference)
        return self._seen[key]

    def result(self, plan: Plan) -> ReplayResult:
        """The replay of ``plan`` without its timeline (:func:`gradsched.replay.replay`,
        ``timeline=False``), labelled with ``plan``'s algorithm; replayed once per
        :meth:`PlanKeys.replay` key."""
        key = self.keys.replay(plan)
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
