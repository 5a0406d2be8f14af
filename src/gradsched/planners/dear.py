"""DeAR: decoupled all-reduce (reduce-scatter in backward, all-gather before forward).

Zhang, Shi, Wang & Li, "DeAR: Accelerating Distributed Deep Learning with Fine-Grained
All-Reduce Pipelining", IEEE ICDCS 2023 (and its TPDS extension); reference code
lzhangbv/dear_pytorch (commit 43138d8), ``dear/dear_dopt.py`` (the optimizer
``dear/__init__.py`` exports) and ``dear/dopt_rsag_bo.py`` (the same with BO tuning).

Schedule (``ag_issue=lookahead``, default; ``Plan.ag_issue``, replayed by
:func:`gradsched.replay.lookahead.lookahead_gathers`): each fused group is reduce-scattered
as soon as all its gradients are in (``_push_to_buffer``, dear_dopt.py L258-272, launched
from the gradient hook L246-255); ``step()`` waits for every reduce-scatter and issues the
first group's all-gather (``_bp_barrier``, L348-353); the forward pre-hook of the first
module of group g waits for group g's all-gather and issues group g+1's (L283-287), then
updates the module's parameters (``_update_one_module``, L290; ``update="per_layer"``).
So each all-gather overlaps only the forward of the group before it.
``ag_issue=eager`` is gradsched's earlier variant: every all-gather becomes eligible after
backward and its reduce-scatter, in forward order, back to back on the one stream.

Grouping rule (``_generate_groups_with_threshold``, dear_dopt.py L109-139): walk the
layers in forward order and add a layer to the open group iff the group is empty or its
size plus the layer's stays strictly below ``threshold_mb`` (MiB, as the code's
``numel*4/1024/1024``); otherwise start a new group. Buckets are listed in ready order.

Threshold tuning (``search=bo``, default; dopt_rsag_bo.py L46, L100-101 and
``dear/tuner.py``): Bayesian optimisation of the threshold over [1, 256] MiB on a linear
scale, ``bo_iters`` = 10 evaluations (tuner.py L9 ``num_trials``: the start point
``threshold_mb``, then expected-improvement suggestions, no random points, L8/L22-26),
keeping the best measured point (L100-103). ``Plan.info`` records every evaluated
threshold and the best. ``search=none``: dear_dopt.py's fixed ``THRESHOLD = 25``.

Remaining differences from the reference code (a reconstruction):

* Each evaluation is one replay (``replay_iterations`` iterations of the model), not the
  mean of measured iterations (tuner.py L56-68); our expected improvement has no
  exploration margin (bayes_opt's ``xi=0.1``, tuner.py L36) and maximises over a fixed
  grid of 257 candidates instead of bayes_opt's random restarts + L-BFGS; it is seeded.
* Layers are the trace's layers; the code's "modules" are those owning parameters
  directly (L207-222). Padding to a multiple of the world size (L186-194) is ignored.
* The per-module update runs on the compute stream before the module's forward, as in
  the code; its division by the world size and SGD arithmetic are the trace's
  ``update_s``.
* The first iteration (no all-gathers, ``_num_steps == 0``, L278) is not modelled: the
  replay reports the steady state.
* The replay's ``issue=executor`` mode and gradsched's executor issue the all-gathers
  eagerly (the executor has no lookahead).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from gradsched.costmodel.base import CommModel
from gradsched.errors import ConfigError
from gradsched.plan import Bucket, Plan
from gradsched.planners._bayesopt import Search, minimize_1d
from gradsched.planners._family import (
    MB,
    Knob,
    ReadySeq,
    ScorerFactory,
    base_info,
    check_choice,
    check_positive,
    need_scorer,
    ready_seq,
)
from gradsched.traces.bundle import ComputeTrace

NAME = "dear"
SUMMARY = "reduce-scatter in backward, all-gather before forward, BO-tuned fusion (Zhang 2023)"
SEARCHES = ("bo", "none")
AG_ISSUES = ("lookahead", "eager")
SEARCH_RANGE_MB = (1.0, 256.0)
SEED = 20230701
SCORED = True  # searches by scoring candidate plans (takes a ``scorer``)
KNOBS: tuple[Knob, ...] = (
    Knob("threshold_mb", float, 25.0, "fusion threshold in MiB (first BO point with search=bo)"),
    Knob("search", str, "bo", "bo: tune threshold_mb by Bayesian optimisation over "
         "[1, 256] MiB (linear, as dear/tuner.py); none: use threshold_mb", SEARCHES),
    Knob("bo_iters", int, 10, "replays spent by the Bayesian optimisation (the "
         "reference tuner's num_trials = 10)"),
    Knob("ag_issue", str, "lookahead", "lookahead: group g+1's all-gather issued in group "
         "g's forward pre-hook (the reference code); eager: all after backward", AG_ISSUES),
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
    order = np.argsort(tensor_group, kind="stable")  # ascending indices within each group
    bounds = np.searchsorted(tensor_group[order], np.arange(group + 2))
    return [order[bounds[g]:bounds[g + 1]] for g in range(group + 1)]


def dear_plan(seq: ReadySeq, threshold_mb: float, knobs: dict[str, Any],
              info: dict[str, Any]) -> Plan:
    """The DeAR plan for one threshold (buckets in ready order; ``knobs["ag_issue"]``
    becomes ``Plan.ag_issue``)."""
    groups = [g for g in layer_groups(seq, threshold_mb * MB) if g.size]
    if groups:  # by (last ready time, last tensor): each group's maxima by one reduceat
        starts = np.cumsum([0] + [g.size for g in groups[:-1]])
        members = np.concatenate(groups)
        last_ready = np.maximum.reduceat(seq.ready_s[members], starts).tolist()
        last_tensor = np.maximum.reduceat(members, starts).tolist()
        order = sorted(range(len(groups)), key=lambda k: (last_ready[k], last_tensor[k]))
        groups = [groups[k] for k in order]
    names = seq.names
    buckets = tuple(Bucket(tensors=tuple([names[i] for i in g.tolist()]), collective="rs_ag")
                    for g in groups)
    return Plan(algorithm=NAME, buckets=buckets, knobs=dict(knobs), update="per_layer",
                info=dict(info), ag_issue=knobs["ag_issue"])


@dataclass(frozen=True)
class Knobs:
    """DeAR's knobs (:data:`KNOBS` documents each), checked once when built."""

    threshold_mb: float = 25.0
    search: str = "bo"
    bo_iters: int = 10
    ag_issue: str = "lookahead"
    replay_iterations: int = 5

    def __post_init__(self) -> None:
        check_positive("threshold_mb", self.threshold_mb)
        check_choice("search", self.search, SEARCHES)
        check_choice("ag_issue", self.ag_issue, AG_ISSUES)
        if self.bo_iters < 1:
            raise ConfigError(f"knob bo_iters must be >= 1, got {self.bo_iters}")


def plan(trace: ComputeTrace, model: CommModel, world_size: int, knobs: Knobs | None = None,
         scorer: ScorerFactory | None = None) -> Plan:
    """DeAR's plan, with the threshold tuned by BO (candidates scored by ``scorer``)
    unless ``knobs.search`` is ``none``."""
    k = knobs or Knobs()
    threshold_mb, search, bo_iters = k.threshold_mb, k.search, k.bo_iters
    replay_iterations, ag_issue = k.replay_iterations, k.ag_issue
    seq = ready_seq(trace)
    recorded = {"threshold_mb": threshold_mb, "search": search, "bo_iters": bo_iters,
                "replay_iterations": replay_iterations, "ag_issue": ag_issue}
    info = base_info(trace, world_size)
    if search == "none":
        return dear_plan(seq, threshold_mb, recorded, info | {"threshold_mb": threshold_mb})
    score = need_scorer(NAME, scorer)(trace, model, world_size, replay_iterations)
    result = minimize_1d(lambda mb: score(dear_plan(seq, mb, recorded, info)),
                         Search(*SEARCH_RANGE_MB, iterations=bo_iters, log_scale=False,
                                initial=(threshold_mb,), n_random=0, seed=SEED))
    best = result.best_x
    info = info | {
        "threshold_mb": best,
        "best_iteration_s": result.best_y,
        "evaluated": [{"threshold_mb": x, "iteration_s": y}
                      for x, y in zip(result.xs, result.ys, strict=True)],
    }
    return dear_plan(seq, best, recorded, info)
