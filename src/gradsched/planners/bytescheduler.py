"""ByteScheduler (and P3 as a special case): partitioned, prioritised, credit-limited.

Peng et al., "A Generic Communication Scheduler for Distributed DNN Training
Acceleration", ACM SOSP 2019; Jayarajan et al., "Priority-based Parameter Propagation for
Distributed DNN Training" (P3), SysML 2019.

Rule: one bucket per layer (the layer's tensors together), split into
``chunks = ceil(bytes / partition)`` equal all-reduces, with priority = the layer's forward
index (layer 0, needed first by the next forward, is the most urgent). ``credit``
collectives may be in flight at once (sharing bandwidth; ``Plan.channels``). Each layer is
updated just before its next forward (``update="per_layer"``), so the next iteration's
forward starts as soon as the first layers' gradients are reduced.

``p3=true`` selects P3: slices of 50,000 parameters (P3's slice size in its MXNet
implementation; ``chunks = ceil(numel / 50000)``) and credit 1 (one transfer at a time,
strict priority). ``search=bo`` tunes the partition size by Bayesian optimisation over
[0.0625, 64] MiB (log scale) with ``bo_iters`` replays, as ByteScheduler auto-tunes its
partition with BO (Sec. 4.3; the credit stays fixed here).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from gradsched.costmodel.base import CommModel
from gradsched.errors import ConfigError
from gradsched.plan import Bucket, Plan
from gradsched.planners._bayesopt import minimize_1d
from gradsched.planners._family import (
    MB,
    Knob,
    ReadySeq,
    ReplayCache,
    base_info,
    check_choice,
    check_positive,
    ready_seq,
)
from gradsched.traces.bundle import ComputeTrace

NAME = "bytescheduler"
SUMMARY = "per-layer buckets, partitioned, prioritised by layer, credit-limited (Peng 2019)"
P3_SLICE_PARAMS = 50_000
SEARCHES = ("none", "bo")
SEARCH_RANGE_MB = (0.0625, 64.0)
SEED = 20191027
KNOBS: tuple[Knob, ...] = (
    Knob("partition_mb", float, 4.0, "largest chunk in MiB"),
    Knob("credit", int, 1, "collectives in flight at once (sharing bandwidth)"),
    Knob("p3", bool, False, "P3: 50,000-parameter slices, credit 1"),
    Knob("search", str, "none", "bo: tune partition_mb by Bayesian optimisation over "
         "[0.0625, 64] MiB", SEARCHES),
    Knob("bo_iters", int, 12, "replays spent by the Bayesian optimisation"),
    Knob("replay_iterations", int, 5, "iterations of each scoring replay"),
)


def layer_members(seq: ReadySeq) -> list[np.ndarray]:
    """Tensor indices (ready order) of each layer, layers in ready order of their last
    gradient."""
    layers, inverse = np.unique(seq.layer, return_inverse=True)
    members = [np.flatnonzero(inverse == k) for k in range(len(layers))]
    members.sort(key=lambda m: (float(seq.ready_s[m].max()), int(m.max())))
    return members


def bs_plan(seq: ReadySeq, *, partition_bytes: float | None, credit: int,
            knobs: dict[str, Any], info: dict[str, Any]) -> Plan:
    """The plan for one partition size (``None``: P3 slices by parameter count)."""
    buckets = []
    for m in layer_members(seq):
        if partition_bytes is None:
            chunks = math.ceil(int(seq.numel[m].sum()) / P3_SLICE_PARAMS)
        else:
            chunks = math.ceil(float(seq.nbytes[m].sum()) / partition_bytes)
        buckets.append(Bucket(tensors=tuple(seq.names[i] for i in m), chunks=max(1, chunks),
                              priority=int(seq.layer[m[0]])))
    return Plan(algorithm=NAME, buckets=tuple(buckets), knobs=dict(knobs), update="per_layer",
                channels=credit, info=dict(info))


def plan(trace: ComputeTrace, model: CommModel, world_size: int, *,
         partition_mb: float = 4.0, credit: int = 1, p3: bool = False, search: str = "none",
         bo_iters: int = 12, replay_iterations: int = 5) -> Plan:
    """ByteScheduler's (or P3's) plan."""
    check_positive("partition_mb", partition_mb)
    check_choice("search", search, SEARCHES)
    if credit < 1:
        raise ConfigError(f"knob credit must be an integer >= 1, got {credit}")
    if bo_iters < 1:
        raise ConfigError(f"knob bo_iters must be >= 1, got {bo_iters}")
    if p3 and search != "none":
        raise ConfigError("knob p3=true fixes the slice size; use search=none with it")
    seq = ready_seq(trace)
    info = base_info(trace, world_size)
    if p3:
        knobs = {"p3": True, "credit": 1, "slice_params": P3_SLICE_PARAMS}
        return bs_plan(seq, partition_bytes=None, credit=1, knobs=knobs, info=info)
    knobs = {"partition_mb": partition_mb, "credit": credit, "p3": False, "search": search}
    if search == "none":
        return bs_plan(seq, partition_bytes=partition_mb * MB, credit=credit, knobs=knobs,
                       info=info | {"partition_mb": partition_mb})
    knobs |= {"bo_iters": bo_iters, "replay_iterations": replay_iterations}
    score = ReplayCache(trace, model, world_size, replay_iterations)

    def objective(mb: float) -> float:
        return score(bs_plan(seq, partition_bytes=mb * MB, credit=credit, knobs=knobs,
                             info=info))

    result = minimize_1d(objective, *SEARCH_RANGE_MB, iterations=bo_iters,
                         initial=[partition_mb], seed=SEED)
    info = info | {
        "partition_mb": result.best_x,
        "best_iteration_s": result.best_y,
        "evaluated": [{"partition_mb": x, "iteration_s": y}
                      for x, y in zip(result.xs, result.ys, strict=True)],
    }
    return bs_plan(seq, partition_bytes=result.best_x * MB, credit=credit, knobs=knobs,
                   info=info)
