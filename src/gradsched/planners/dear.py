"""DeAR: decoupled all-reduce (reduce-scatter in backward, all-gather before forward).

Zhang, Shi, Wang & Li, "DeAR: Accelerating Distributed Deep Learning with Fine-Grained
All-Reduce Pipelining", IEEE ICDCS 2023 (and its TPDS extension). Each fused bucket is
reduce-scattered as soon as its gradients are ready; its all-gather runs after backward,
in forward order, overlapped with the next forward pass, and each layer is updated just
before its forward (``update="per_layer"``).

Grouping rule (the authors' reference code, ``_generate_groups_with_threshold``): walk the
layers in forward order and add a layer to the open group iff the group is empty or its
size plus the layer's stays strictly below ``threshold_mb`` (MiB); otherwise start a new
group. Buckets are listed in ready order. ``search=bo`` (default) tunes the threshold by
Bayesian optimisation over [1, 256] MiB (log scale), as DeAR does, with ``bo_iters``
replays of the plan (first point: ``threshold_mb``) and a fixed seed; ``Plan.info``
records every evaluated threshold and the best.
"""

from __future__ import annotations

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

NAME = "dear"
SUMMARY = "reduce-scatter in backward, all-gather before forward, BO-tuned fusion (Zhang 2023)"
SEARCHES = ("bo", "none")
SEARCH_RANGE_MB = (1.0, 256.0)
SEED = 20230701
KNOBS: tuple[Knob, ...] = (
    Knob("threshold_mb", float, 25.0, "fusion threshold in MiB (first BO point with search=bo)"),
    Knob("search", str, "bo", "bo: tune threshold_mb by Bayesian optimisation over "
         "[1, 256] MiB; none: use threshold_mb", SEARCHES),
    Knob("bo_iters", int, 12, "replays spent by the Bayesian optimisation"),
    Knob("replay_iterations", int, 5, "iterations of each scoring replay"),
)


def layer_groups(seq: ReadySeq, threshold_bytes: float) -> list[np.ndarray]:
    """DeAR's groups of layers (forward order) -> tensor indices of each group."""
    layers, inverse = np.unique(seq.layer, return_inverse=True)
    layer_bytes = np.bincount(inverse, seq.nbytes, len(layers))
    group_of_layer = np.zeros(len(layers), dtype=np.int64)
    group, total = 0, 0.0
    for li, size in enumerate(layer_bytes):
        if total == 0 or total + size < threshold_bytes:
            total += size
        else:
            group += 1
            total = size
        group_of_layer[li] = group
    tensor_group = group_of_layer[inverse]
    return [np.flatnonzero(tensor_group == g) for g in range(group + 1)]


def dear_plan(seq: ReadySeq, threshold_mb: float, knobs: dict[str, Any],
              info: dict[str, Any]) -> Plan:
    """The DeAR plan for one threshold (buckets in ready order)."""
    groups = [g for g in layer_groups(seq, threshold_mb * MB) if g.size]
    groups.sort(key=lambda g: (float(seq.ready_s[g].max()), int(g.max())))
    buckets = tuple(Bucket(tensors=tuple(seq.names[i] for i in g), collective="rs_ag")
                    for g in groups)
    return Plan(algorithm=NAME, buckets=buckets, knobs=dict(knobs), update="per_layer",
                info=dict(info))


def plan(trace: ComputeTrace, model: CommModel, world_size: int, *,
         threshold_mb: float = 25.0, search: str = "bo", bo_iters: int = 12,
         replay_iterations: int = 5) -> Plan:
    """DeAR's plan, with the threshold tuned by BO unless ``search=none``."""
    check_positive("threshold_mb", threshold_mb)
    check_choice("search", search, SEARCHES)
    if bo_iters < 1:
        raise ConfigError(f"knob bo_iters must be >= 1, got {bo_iters}")
    seq = ready_seq(trace)
    knobs = {"threshold_mb": threshold_mb, "search": search, "bo_iters": bo_iters,
             "replay_iterations": replay_iterations}
    info = base_info(trace, world_size)
    if search == "none":
        return dear_plan(seq, threshold_mb, knobs, info | {"threshold_mb": threshold_mb})
    score = ReplayCache(trace, model, world_size, replay_iterations)
    result = minimize_1d(lambda mb: score(dear_plan(seq, mb, knobs, info)), *SEARCH_RANGE_MB,
                         iterations=bo_iters, initial=[threshold_mb], seed=SEED)
    best = result.best_x
    info = info | {
        "threshold_mb": best,
        "best_iteration_s": result.best_y,
        "evaluated": [{"threshold_mb": x, "iteration_s": y}
                      for x, y in zip(result.xs, result.ys, strict=True)],
    }
    return dear_plan(seq, best, knobs, info)
