"""ByteScheduler's parameter-server mode: per tensor, partitioned push+pull tasks, prioritised,
credit-limited, the credit tuned over the PS range.

Peng et al., "A Generic Communication Scheduler for Distributed DNN Training Acceleration",
ACM SOSP 2019; reference code bytedance/byteps commit 2749848, ``bytescheduler/`` (PS mode:
the MXNet plugin ``bytescheduler/mxnet/kvstore.py`` and ``kvstore_task.py``, below
``kvstore.py`` and ``kvstore_task.py``; the core ``common/bytecore.py``, ``common/tuner.py``).
The all-reduce mode is :mod:`gradsched.planners.bytescheduler`; this module reuses its tasks
and plan builder and changes what the PS mode changes.

Rule:

* One task per tensor that merges its push and its pull (``kvstore.py`` L104-123: the push
  is buffered, and the pull posts one ``push_pull`` task): one ``all_reduce`` bucket per
  tensor, which over a :class:`~gradsched.costmodel.ps.PSModel` is the push then the pull.
* Priority = the key's index, "the closer to input layer ... the higher priority"
  (``kvstore.py`` L85-87, L113: ``priority=-priority`` of MXNet's ``-index``) =
  ``Bucket.priority`` (the trace row, forward order).
* Partition ``partition_params`` (``BYTESCHEDULER_PARTITION``, default 1,000,000,
  ``bytecore.py`` L61-62) into ``Bucket.chunks``; the PS mode cannot tune it (``bytecore.py``
  L112: "Do not support partition tuning for ps").
* Credit ``credit_params`` (``BYTESCHEDULER_CREDIT``, default 4,000,000, ``bytecore.py``
  L64-66) = ``Plan.credit_bytes``; credit tuning (on by default, L74) searches the PS range
  [1, 16] million parameters (``tuner.py`` L50-51), 14 evaluations, the first 10 random, as
  the all-reduce mode (``search=credit``); ``search=none`` keeps the configured credit.
* Update: per layer (``update="per_layer"``): the pulled parameters are what the next forward
  of that layer waits for (MXNet's engine dependency on the pull's output).

Differences (a reconstruction), besides those of :mod:`gradsched.planners.bytescheduler`:

* A ``push_pull`` task returns its credit when the *push* completes (``kvstore_task.py``
  L63-70, "Called after push instead pull"); the replay returns it when the pull completes, so
  fewer tasks overlap than in the original.
* Only rank 0 schedules; the other workers post immediately (``kvstore.py`` L29-32); the
  replay stands one worker for all.
* The barrier push of each task (``kvstore_task.py`` L149-158, a 1-element tensor) is not
  modelled.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from gradsched.costmodel.base import CommModel
from gradsched.costmodel.ps import require_ps_model
from gradsched.errors import ConfigError
from gradsched.plan import Plan
from gradsched.planners._bayesopt import Search, minimize_1d
from gradsched.planners._family import (
    Knob,
    ScorerFactory,
    base_info,
    check_choice,
    need_scorer,
)
from gradsched.planners.bytescheduler import (
    CREDIT_PARAMS,
    PARTITION_PARAMS,
    SEED,
    TUNER_EVALUATIONS,
    TUNER_RANDOM,
    Tasks,
    bs_plan,
    make_tasks,
)
from gradsched.traces.bundle import ComputeTrace

NAME = "bytescheduler-ps"
SUMMARY = ("parameter server: ByteScheduler's PS mode, push+pull tasks per tensor, "
           "partitioned, prioritised, credit tuned over [1e6, 16e6] parameters (Peng 2019)")
CREDIT_SPACE_PARAMS = (1_000_000.0, 16_000_000.0)  # tuner.py L50-51 (ps)
SEARCHES = ("credit", "none")
SCORED = True  # searches by scoring candidate plans (takes a ``scorer``)
KNOBS: tuple[Knob, ...] = (
    Knob("partition_params", int, PARTITION_PARAMS,
         "partition size in parameters (BYTESCHEDULER_PARTITION; not tuned in PS mode)"),
    Knob("credit_params", int, CREDIT_PARAMS, "credit in parameters (BYTESCHEDULER_CREDIT); "
         "with search=credit only the tuner's first point, which it drops"),
    Knob("search", str, "credit", "credit: tune the credit by Bayesian optimisation over "
         "[1e6, 16e6] parameters as the original's PS tuner; none", SEARCHES),
    Knob("tune_iters", int, TUNER_EVALUATIONS, "replays spent by the search (the "
         "original's tuner: 14, the first 10 random)"),
    Knob("replay_iterations", int, 5, "iterations of each scoring replay"),
)


def ps_plan(tasks: Tasks, partition: int, credit: int, knobs: dict[str, Any],
            info: dict[str, Any]) -> Plan:
    """The all-reduce mode's plan for one partition and credit, named for the PS mode."""
    return replace(bs_plan(tasks, partition=partition, credit=credit, knobs=knobs, info=info),
                   algorithm=NAME)


@dataclass(frozen=True)
class Knobs:
    """ByteScheduler PS mode's knobs (:data:`KNOBS` documents each), checked once when
    built."""

    partition_params: int = PARTITION_PARAMS
    credit_params: int = CREDIT_PARAMS
    search: str = "credit"
    tune_iters: int = TUNER_EVALUATIONS
    replay_iterations: int = 5

    def __post_init__(self) -> None:
        for name in ("partition_params", "credit_params", "tune_iters"):
            value = getattr(self, name)
            if value < 1:
                raise ConfigError(f"knob {name} must be an integer >= 1, got {value}")
        check_choice("search", self.search, SEARCHES)


def plan(trace: ComputeTrace, model: CommModel, world_size: int, knobs: Knobs | None = None,
         scorer: ScorerFactory | None = None) -> Plan:
    """ByteScheduler's PS-mode plan, the credit tuned (candidates scored by ``scorer``)
    unless ``knobs.search`` is ``none``."""
    require_ps_model(model, NAME)
    k = knobs or Knobs()
    partition_params, credit_params, search = k.partition_params, k.credit_params, k.search
    tune_iters, replay_iterations = k.tune_iters, k.replay_iterations
    tasks = make_tasks(trace, "tensor")
    info = base_info(trace, world_size)
    recorded: dict[str, Any] = {"partition_params": partition_params,
                                "credit_params": credit_params, "search": search}
    if search == "none":
        return ps_plan(tasks, partition_params, credit_params, recorded, info)
    recorded |= {"tune_iters": tune_iters, "replay_iterations": replay_iterations}
    score = need_scorer(NAME, scorer)(trace, model, world_size, replay_iterations)
    result = minimize_1d(
        lambda x: score(ps_plan(tasks, partition_params, int(x), recorded, info)),
        Search(*CREDIT_SPACE_PARAMS, iterations=tune_iters, log_scale=False,
               n_random=min(TUNER_RANDOM, tune_iters), seed=SEED))
    info = info | {
        "best_iteration_s": result.best_y,
        "evaluated": [{"credit_params": int(x), "iteration_s": y}
                      for x, y in zip(result.xs, result.ys, strict=True)],
    }
    return ps_plan(tasks, partition_params, int(result.best_x), recorded, info)
