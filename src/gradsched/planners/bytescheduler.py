"""ByteScheduler (and P3 as a special case): per tensor, partitioned, prioritised, credit-limited.

Peng et al., "A Generic Communication Scheduler for Distributed DNN Training
Acceleration", ACM SOSP 2019; reference code bytedance/byteps, folder ``bytescheduler/``
(commit 2749848), its PyTorch/Horovod plugin ``bytescheduler/pytorch/horovod.py``
(below ``horovod.py``), ``common/bytecore.py``, ``common/bytetask.py``,
``common/tuner.py`` and ``common/search.py``. Jayarajan et al., "Priority-based Parameter
Propagation for Distributed DNN Training" (P3), SysML 2019.

Rule (``granularity=tensor``, default):

* One task per gradient tensor, posted when that gradient is ready (``horovod.py``
  L236-255): one bucket per tensor.
* Priority = the tensor's index in ``model.parameters()``, i.e. forward order, "the closer
  to input layer, the higher the priority" (``horovod.py`` L55-60; smaller is more
  urgent, ``bytetask.py`` L24): ``Bucket.priority`` = the trace row (forward order).
* Partition: a tensor of more than ``partition`` parameters (``BYTESCHEDULER_PARTITION``,
  default 1,000,000, ``bytecore.py`` L61-62, L173-177) is split into
  ``ceil(numel / partition)`` parts (``horovod_task.py`` L101) = ``Bucket.chunks``.
  Part i has priority ``priority * 1000 + i`` (``bytetask.py`` L39 with
  ``max_partition=1000``, L294); the replay orders a bucket's chunks by index after its
  priority, which is the same order while a tensor has at most 1000 parts
  (``Plan.info["tensors_over_max_partition"]`` counts those that do not).
* Credit: the scheduler pops the most urgent ready part and starts it while the credit is
  positive, subtracting its parameters; a finished part gives them back
  (``bytecore.py`` L229-253, L219-225). Credit ``credit`` parameters
  (``BYTESCHEDULER_CREDIT``, default 4,000,000, L64-66) = ``Plan.credit_bytes`` (credit x
  the trace's mean bytes per parameter); parts in flight share the bandwidth.
* Credit tuning, on by default (``BYTESCHEDULER_CREDIT_TUNING=1``, ``bytecore.py`` L74):
  Bayesian optimisation of the credit over [4, 64] million parameters (all-reduce
  space, ``tuner.py`` L47-53) on a linear scale, ``max_num_steps=15`` (L58): the first
  measured point (the configured credit) is dropped (``search.py`` L73-75), then 10
  uniform random points (L121-129) and expected-improvement suggestions (L113, L141)
  until step 14, and step 15 applies the best point measured (L147-151): ``tune_iters``
  = 14 evaluations, 10 of them random, the best kept. ``search=credit`` (default).
* Update: each parameter is updated when its all-reduce completes and its forward waits
  for it (``horovod.py`` L155-177, L197-202): ``update="per_layer"``.

``search=partition`` (ours): Bayesian optimisation of the partition alone over
[50,000, 32,000,000] parameters (log scale; the original's partition tuning, off by
default, searches [2, 32] million jointly with the credit, ``tuner.py`` L55-56, but sets
``_partition_unit`` (``bytecore.py`` L272) while ``post()`` partitions by ``_partition``
(L174-175), so its result never reaches the partitioner). ``search=none``: the configured
partition and credit. ``granularity=layer``: gradsched's earlier variant, one bucket per
layer (the layer's tensors together), priority = the layer's forward index, same
partition and credit rules.

``p3=true`` selects P3: per tensor, slices of 50,000 parameters (P3's slice size in its
MXNet implementation) and one transfer at a time (``Plan.channels = 1``, no credit).

Remaining differences from the reference code (a reconstruction):

* Parts are equal element counts; the original splits along the first dimension and
  makes at most ``shape[0]`` parts (``horovod_task.py`` L92-119); traces carry no shapes.
* Each part is its own all-reduce sharing bandwidth with the parts in flight; the
  original hands parts to Horovod (``horovod.py`` L121-133), whose background loop may
  fuse parts posted in the same cycle (one start-up for several parts).
* The per-parameter optimizer step runs in the plugin's poller thread as soon as the
  all-reduce finishes (``horovod.py`` L168-177); the replay runs the layer's ``update_s``
  on the compute stream just before its forward.
* Each tuning evaluation is one replay (``replay_iterations`` iterations), not the mean
  of ~100 measured steps (``tuner.py`` L75-86, L92-102); random points are seeded
  (deterministic), and our expected improvement has no ``xi=0.1`` margin and maximises
  over a fixed grid of candidates instead of bayes_opt's optimiser.
* The first iteration (parameters broadcast, ``horovod.py`` L93-108) is not modelled.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gradsched.costmodel.base import CommModel
from gradsched.errors import ConfigError
from gradsched.limits import MAX_COLLECTIVES_PER_ITERATION
from gradsched.plan import Bucket, Plan
from gradsched.planners._bayesopt import Search, minimize_1d
from gradsched.planners._family import (
    Knob,
    ScorerFactory,
    base_info,
    check_choice,
    need_scorer,
    ready_seq,
)
from gradsched.traces.bundle import ComputeTrace

NAME = "bytescheduler"
SUMMARY = ("per tensor, partitioned, prioritised by forward index, credit-limited with "
           "credit tuning (Peng 2019)")
PARTITION_PARAMS = 1_000_000  # bytecore.py L62
CREDIT_PARAMS = 4_000_000  # bytecore.py L65
MAX_PARTITION = 1000  # bytetask.py L15
CREDIT_SPACE_PARAMS = (4_000_000.0, 64_000_000.0)  # tuner.py L53 (all-reduce)
TUNER_EVALUATIONS = 14  # tuner.py L58 + search.py L61-66, L137-151
TUNER_RANDOM = 10  # search.py L124
PARTITION_SPACE_PARAMS = (50_000.0, 32_000_000.0)  # ours
P3_SLICE_PARAMS = 50_000
SEARCHES = ("credit", "partition", "none")
GRANULARITIES = ("tensor", "layer")
SEED = 20191027
SCORED_COLLECTIVES = 60_000
"""The most collectives per iteration of a candidate a search scores by replay (the credit
or partition tuning here, ``search``'s sweep): a finer partition is coarsened to the
smallest that fits (``Plan.info["partition_coarsened"]``), so that a tuning run costs at
most ``tune_iters`` replays of this many collectives. Every committed trace fits at every
partition swept (the largest, GPT-Neo 2.7B, launches 53,048 collectives as P3's
50,000-parameter slices, 42,432 at the sweep's finest 62,500); an LLM (LLaMA-2-70B: 69,407
at the default partition) is coarsened, and says so."""
SCORED = True  # searches by scoring candidate plans (takes a ``scorer``)
KNOBS: tuple[Knob, ...] = (
    Knob("partition_params", int, PARTITION_PARAMS,
         "partition size in parameters (BYTESCHEDULER_PARTITION)"),
    Knob("credit_params", int, CREDIT_PARAMS, "credit in parameters (BYTESCHEDULER_CREDIT); "
         "with search=credit only the tuner's first point, which it drops"),
    Knob("search", str, "credit", "credit: tune the credit by Bayesian optimisation over "
         "[4e6, 64e6] parameters as the original's tuner; partition: tune the partition "
         "over [5e4, 3.2e7] parameters (ours); none", SEARCHES),
    Knob("tune_iters", int, TUNER_EVALUATIONS, "replays spent by the search (the "
         "original's tuner: 14, the first 10 random)"),
    Knob("granularity", str, "tensor", "tensor: one task per parameter tensor (the "
         "original); layer: one per layer (gradsched's earlier variant)", GRANULARITIES),
    Knob("p3", bool, False, "P3: per tensor, 50,000-parameter slices, one at a time"),
    Knob("replay_iterations", int, 5, "iterations of each scoring replay"),
)




@dataclass(frozen=True)
class Tasks:
    """ByteScheduler's tasks in ready order: member tensors, parameters and priority."""

    members: tuple[tuple[str, ...], ...]
    numel: np.ndarray
    priority: np.ndarray
    bytes_per_param: float  # the trace's mean, to turn the credit into bytes
    _buckets: dict[bytes, tuple[Bucket, ...]] = field(default_factory=dict, compare=False,
                                                      repr=False)
    _made: dict[tuple[int, int], Bucket] = field(default_factory=dict, compare=False,
                                                 repr=False)

    def buckets(self, partition: int) -> tuple[Bucket, ...]:
        """One bucket per task, in ``ceil(numel / partition)`` chunks, made once per
        distinct chunk counts (a credit search replans the same partition with every
        credit; partitions that split every task alike share their buckets), and each
        (task, chunks) bucket once: partitions that split a task alike share its bucket
        (the small tensors of an LLM stay whole at every partition a search tries)."""
        chunks = n_parts(self.numel, partition)
        key = chunks.astype(np.int64).tobytes()
        if key not in self._buckets:
            made, members, priority = self._made, self.members, self.priority.tolist()
            out = []
            for t, c in enumerate(chunks.tolist()):
                bucket = made.get((t, c))
                if bucket is None:
                    bucket = made[(t, c)] = Bucket(tensors=members[t], chunks=c,
                                                   priority=priority[t])
                out.append(bucket)
            self._buckets[key] = tuple(out)
        return self._buckets[key]


def make_tasks(trace: ComputeTrace, granularity: str) -> Tasks:
    """One task per tensor (priority = forward index, ``horovod.py`` L55-60) or per layer
    (priority = the layer's index), listed in ready order (of a layer's last gradient)."""
    seq = ready_seq(trace)
    forward_index = {name: i for i, name in enumerate(trace.frame["name"])}
    total_numel = float(seq.numel.sum())
    bytes_per_param = float(seq.nbytes.sum()) / total_numel if total_numel else 4.0
    if granularity == "tensor":  # one task per tensor: no grouping to do
        return Tasks(members=tuple((name,) for name in seq.names),
                     numel=np.asarray(seq.numel, dtype=np.int64),
                     priority=np.asarray([forward_index[name] for name in seq.names],
                                         dtype=np.int64),
                     bytes_per_param=bytes_per_param)
    layers, inverse = np.unique(seq.layer, return_inverse=True)
    groups = [np.flatnonzero(inverse == k) for k in range(len(layers))]
    groups.sort(key=lambda m: (float(seq.ready_s[m].max()), int(m.max())))
    return Tasks(
        members=tuple(tuple(seq.names[i] for i in m) for m in groups),
        numel=np.array([int(seq.numel[m].sum()) for m in groups], dtype=np.int64),
        priority=np.asarray([int(seq.layer[m[0]]) for m in groups], dtype=np.int64),
        bytes_per_param=bytes_per_param,
    )


def n_parts(numel: np.ndarray, partition: int) -> np.ndarray:
    """Parts of each task at ``partition`` parameters: ceil, ``horovod_task.py`` L101."""
    return np.maximum(1, -(-numel // partition))


def smallest_partition(numel: np.ndarray, limit: int = MAX_COLLECTIVES_PER_ITERATION) -> int:
    """The smallest partition (parameters) at which the tasks launch at most ``limit``
    collectives (the parts are non-increasing in the partition: bisection)."""
    if len(numel) > limit:
        raise ConfigError(f"{len(numel)} tasks launch more than {limit} collectives at any "
                          "partition")
    low, high = 1, max(int(numel.max(initial=1)), 1)
    while low < high:
        mid = (low + high) // 2
        if int(n_parts(numel, mid).sum()) <= limit:
            high = mid
        else:
            low = mid + 1
    return low


def bs_plan(tasks: Tasks, *, partition: int, credit: int | None, knobs: dict[str, Any],
            info: dict[str, Any], budget: int = MAX_COLLECTIVES_PER_ITERATION) -> Plan:
    """The plan for one partition and credit (parameters); ``credit=None``: one part at a
    time (P3). A partition so small that the parts exceed ``budget`` collectives per
    iteration (the replay's :data:`gradsched.limits.MAX_COLLECTIVES_PER_ITERATION`, or a
    search's :data:`SCORED_COLLECTIVES`) is coarsened to the smallest that fits, and
    ``info["partition_coarsened"]`` says from what to what."""
    chunks = n_parts(tasks.numel, partition)
    if int(chunks.sum()) > budget:
        used = smallest_partition(tasks.numel, budget)
        info = dict(info) | {"partition_coarsened": {
            "asked_params": partition, "used_params": used,
            "why": f"{int(chunks.sum())} parts exceed the budget of "
                   f"{budget} collectives per iteration"
                   + (" of a scored candidate" if budget < MAX_COLLECTIVES_PER_ITERATION
                      else "")}}
        partition, chunks = used, n_parts(tasks.numel, used)
    buckets = tasks.buckets(partition)
    info = dict(info) | {"partition_params": partition, "credit_params": credit,
                         "tensors_over_max_partition": int(np.sum(chunks > MAX_PARTITION))}
    if credit is None:
        return Plan(algorithm=NAME, buckets=buckets, knobs=dict(knobs), update="per_layer",
                    channels=1, info=info)
    return Plan(algorithm=NAME, buckets=buckets, knobs=dict(knobs), update="per_layer",
                info=info, credit_bytes=credit * tasks.bytes_per_param)


@dataclass(frozen=True)
class Knobs:
    """ByteScheduler's knobs (:data:`KNOBS` documents each), checked once when built: the
    registry builds them from the knobs it parses and passes them whole."""

    partition_params: int = PARTITION_PARAMS
    credit_params: int = CREDIT_PARAMS
    search: str = "credit"
    tune_iters: int = TUNER_EVALUATIONS
    granularity: str = "tensor"
    p3: bool = False
    replay_iterations: int = 5

    def __post_init__(self) -> None:
        """Reject bad knob values with a :class:`ConfigError` naming the knob."""
        for name in ("partition_params", "credit_params", "tune_iters"):
            value = getattr(self, name)
            if value < 1:
                raise ConfigError(f"knob {name} must be an integer >= 1, got {value}")
        check_choice("search", self.search, SEARCHES)
        check_choice("granularity", self.granularity, GRANULARITIES)
        if self.p3 and self.search != "none":
            raise ConfigError("knob p3=true fixes the slice size and has no credit; use "
                              "search=none with it")


def plan(trace: ComputeTrace, model: CommModel, world_size: int, knobs: Knobs | None = None,
         scorer: ScorerFactory | None = None, *,
         budget: int = MAX_COLLECTIVES_PER_ITERATION, tasks: Tasks | None = None) -> Plan:
    """ByteScheduler's (or P3's) plan, the credit tuned (candidates scored by ``scorer``)
    unless ``knobs.search`` says otherwise. ``budget``: the most collectives per iteration
    of an untuned plan (a search that scores it passes :data:`SCORED_COLLECTIVES`); a tuned
    plan and its candidates are held to :data:`SCORED_COLLECTIVES`. ``tasks``: this trace's
    :func:`make_tasks` at ``knobs.granularity``, for a caller that plans many partitions."""
    k = knobs or Knobs()
    partition_params, credit_params, search = k.partition_params, k.credit_params, k.search
    tune_iters, granularity, p3 = k.tune_iters, k.granularity, k.p3
    replay_iterations = k.replay_iterations
    tasks = tasks if tasks is not None else make_tasks(trace, granularity)
    info = base_info(trace, world_size)
    if p3:
        recorded = {"p3": True, "granularity": granularity, "slice_params": P3_SLICE_PARAMS}
        return bs_plan(tasks, partition=P3_SLICE_PARAMS, credit=None, knobs=recorded, info=info,
                       budget=budget)
    recorded = {"partition_params": partition_params, "credit_params": credit_params,
                "search": search, "granularity": granularity, "p3": False}
    if search == "none":
        return bs_plan(tasks, partition=partition_params, credit=credit_params, knobs=recorded,
                       info=info, budget=budget)
    recorded |= {"tune_iters": tune_iters, "replay_iterations": replay_iterations}
    score = need_scorer(NAME, scorer)(trace, model, world_size, replay_iterations)
    if search == "credit":
        def objective(x: float) -> float:
            return score(bs_plan(tasks, partition=partition_params, credit=int(x),
                                 knobs=recorded, info=info, budget=SCORED_COLLECTIVES))

        result = minimize_1d(objective, Search(
            *CREDIT_SPACE_PARAMS, iterations=tune_iters, log_scale=False,
            n_random=min(TUNER_RANDOM, tune_iters), seed=SEED))
        best = {"partition": partition_params, "credit": int(result.best_x)}
    else:
        def objective(x: float) -> float:
            return score(bs_plan(tasks, partition=round(x), credit=credit_params,
                                 knobs=recorded, info=info, budget=SCORED_COLLECTIVES))

        result = minimize_1d(objective, Search(
            *PARTITION_SPACE_PARAMS, iterations=tune_iters, initial=(partition_params,),
            seed=SEED))
        best = {"partition": round(result.best_x), "credit": credit_params}
    key = f"{search}_params"
    info = info | {
        "best_iteration_s": result.best_y,
        "evaluated": [{key: int(x) if search == "credit" else round(x), "iteration_s": y}
                      for x, y in zip(result.xs, result.ys, strict=True)],
    }
    return bs_plan(tasks, partition=best["partition"], credit=best["credit"], knobs=recorded,
                   info=info, budget=SCORED_COLLECTIVES)
