"""What would have to be true for a predicted point to reach its published step: the
decomposition of the part of the published growth the replay does not explain.

For every predicted point of a group (the calibration point's utilisation kept, as the
study predicts it, :mod:`~.study`), with ``missing_s`` = published - predicted step:

* **exposed communication needed**: the replay's exposed communication plus ``missing_s``
  (all of the missing time as communication the compute does not hide);
* **collective-time factor** ``comm_factor``: the factor on every collective's time at
  this point only (the calibration point keeps the model's) at which the replayed step
  equals the published one (:func:`comm_factor`: the replayed step is non-decreasing in the
  factor; found by bisection to :data:`FACTOR_RTOL`), and the bus bandwidth it implies for
  the largest unit's all-gather (``busbw = bytes x (P - 1) / P / time``, NCCL's definition,
  ``doc/PERFORMANCE.md`` of NVIDIA/nccl-tests) beside the model's;
* **overlap slowdown needed** ``slowdown_needed``: compute that progresses at ``1/s``
  while a collective runs loses ``B (1 - 1/s)`` over a step with ``B`` seconds of
  collectives; the calibration absorbs what the calibration point loses, so to first order
  the point lacks ``(B_P - B_0)(1/s - 1/s')`` and ``1/s' = 1/s - missing_s / (B_P - B_0)``
  (``inf`` where no slowdown can reach the published step: then ``1/s' <= 0``);
* the same ``missing_s`` as a fixed cost per step, beside the published step.

Nothing here is fitted to or applied to a prediction: the columns say how far each
candidate cause would have to go, so a reader can hold it against independent measurements
(the H100 reduce-scatter bus bandwidths of :data:`gradsched.costmodel.nccl.fabric.
ISSUE_1229_BUSBW_GBPS`, the measured overlap slowdowns of :mod:`gradsched.costmodel.
overlap_slowdown`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence

import pandas as pd

from gradsched.costmodel.base import CommModel
from gradsched.experiments.at_scale.hooks import compute_slowdown
from gradsched.experiments.at_scale.points import Point, grouped
from gradsched.experiments.at_scale.predict import (
    at_mfu,
    base_trace,
    calibrate_mfu,
    comm_model,
    replay_step,
)
from gradsched.experiments.at_scale.settings import AtScaleSettings

FACTOR_RTOL = 1e-4
"""Relative tolerance on the replayed step at the factor found."""
FACTOR_MAX = 64.0
"""Largest collective-time factor searched (beyond it: ``inf``)."""

COLUMNS = ("group", "model", "gpus", "nodes", "published_step_s", "predicted_step_s",
           "missing_s", "missing_pct", "exposed_comm_s", "exposed_comm_needed_s",
           "comm_busy_s", "comm_busy_growth_s", "comm_factor", "unit_ag_bytes",
           "model_busbw_GBps", "implied_busbw_GBps", "slowdown_applied", "slowdown_needed")


def comm_factor(step: Callable[[float], float], target: float) -> float:
    """The smallest factor ``f >= 1`` with ``step(f) >= target`` (``step`` non-decreasing;
    NaN where ``step(1)`` already reaches it, ``inf`` beyond :data:`FACTOR_MAX`)."""
    if step(1.0) >= target:
        return math.nan
    lo, hi = 1.0, 2.0
    while step(hi) < target:
        lo, hi = hi, 2 * hi
        if hi > FACTOR_MAX:
            return math.inf
    while hi - lo > FACTOR_RTOL * lo:
        mid = 0.5 * (lo + hi)
        if step(mid) < target:
            lo = mid
        else:
            hi = mid
    return hi


def _busbw_GBps(nbytes: float, seconds: float, gpus: int) -> float:
    return nbytes * (gpus - 1) / gpus / seconds / 1e9 if seconds > 0 else math.nan


def _r(value: float, digits: int) -> float:
    return round(float(value), digits) + 0.0 if math.isfinite(value) else float(value)


def point_rows(members: Sequence[Point], mfu: float, model: CommModel,
               settings: AtScaleSettings) -> list[dict[str, object]]:
    """The rows of one group's predicted points (``members`` sorted by GPU count, the
    first calibrated at utilisation ``mfu``)."""
    first = members[0]
    base0 = base_trace(first)
    busy0 = replay_step(at_mfu(base0, mfu), first, model, settings).replay.comm_busy_s
    per_node = getattr(getattr(model, "hardware", None), "gpus_per_node", 8)
    rows = []
    for p in members[1:]:
        trace = at_mfu(base_trace(p), mfu)
        got = replay_step(trace, p, model, settings)
        predicted = got.replay.iteration_s
        missing = p.published_step_s - predicted
        factor = comm_factor(
            lambda f, t=trace, q=p: replay_step(t, q, model, settings, f).replay.iteration_s,
            p.published_step_s)
        ag_s = model.time("all_gather", got.largest_unit_bytes, p.gpus)
        busbw = _busbw_GBps(got.largest_unit_bytes, ag_s, p.gpus)
        s = compute_slowdown(trace, p, settings)
        grow = got.replay.comm_busy_s - busy0
        inv = 1 / s - missing / grow if grow > 0 else -1.0
        needed = (math.nan if missing <= 0 else 1 / inv if inv > 0 else math.inf)
        rows.append({
            "group": p.group, "model": p.shape.name, "gpus": p.gpus,
            "nodes": max(1, p.gpus // per_node),
            "published_step_s": _r(p.published_step_s, 6), "predicted_step_s": _r(predicted, 6),
            "missing_s": _r(missing, 6), "missing_pct": _r(100 * missing / p.published_step_s, 3),
            "exposed_comm_s": _r(got.replay.exposed_comm_s, 6),
            "exposed_comm_needed_s": _r(got.replay.exposed_comm_s + max(missing, 0.0), 6),
            "comm_busy_s": _r(got.replay.comm_busy_s, 6), "comm_busy_growth_s": _r(grow, 6),
            "comm_factor": _r(factor, 3), "unit_ag_bytes": int(got.largest_unit_bytes),
            "model_busbw_GBps": _r(busbw, 1), "implied_busbw_GBps": _r(busbw / factor, 1),
            "slowdown_applied": _r(s, 4), "slowdown_needed": _r(needed, 3)})
    return rows


def matching_groups(points: Sequence[Point], pattern: str = "") -> dict[str, list[Point]]:
    """The groups (each of two or more points, :func:`~.points.load_points` checks it) whose
    name matches ``pattern`` (a regular expression, searched; empty = every group)."""
    wanted = re.compile(pattern)
    return {name: members for name, members in grouped(points).items()
            if wanted.search(name)}


def decompose(points: Sequence[Point], settings: AtScaleSettings,
              pattern: str = "") -> pd.DataFrame:
    """One row per predicted point of the groups whose name matches ``pattern`` (a regular
    expression, searched; empty = every group), each group calibrated on its smallest
    count as the study does (:func:`~.predict.calibrate_mfu`)."""
    models: dict[str, CommModel] = {}
    rows: list[dict[str, object]] = []
    for members in matching_groups(points, pattern).values():
        gpu = members[0].gpu
        if gpu not in models:
            models[gpu] = comm_model(settings.choice(gpu).spec)
        mfu = calibrate_mfu(members[0], models[gpu], settings)
        rows += point_rows(members, mfu, models[gpu], settings)
    return pd.DataFrame(rows, columns=list(COLUMNS))
