"""Where the effects of scale beyond today's comm models plug into the at-scale study.

Two hooks, each a function of the compute trace, the point and the settings; the study
calls both for every replay (:func:`gradsched.experiments.at_scale.predict.replay_step`),
calibration included, so a model plugged in here is calibrated with the rest:

* :func:`compute_slowdown` -- the factor by which compute kernels slow down while
  communication kernels overlap them (SMs and memory bandwidth shared). It belongs to the
  sharded replay (compute that overlaps a collective runs ``factor`` times slower); with
  ``overlap_slowdown`` off it is 1.
* :func:`straggler_transform` -- a compute-trace transform: each rank's compute stretched to
  the expected maximum over ``P`` ranks of its per-rank variation, since every collective
  waits for the slowest rank. With ``stragglers`` off it returns the trace unchanged.

Both are the project's measured models, in their ``auto`` setting: the compute slowdown of
the trace's GPU generation (:func:`gradsched.costmodel.overlap_slowdown.resolve`, fitted on
public Kineto traces; H100 and H200 borrow the A100 value, labelled), and the per-step
coefficient of variation of the trace's device class stretched by the expected maximum of
``P`` standard normals (:func:`gradsched.costmodel.stragglers.resolve_stragglers`,
:func:`~gradsched.costmodel.stragglers.apply_stragglers`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gradsched.costmodel.overlap_slowdown import resolve as resolve_overlap
from gradsched.costmodel.stragglers import apply_stragglers, resolve_stragglers
from gradsched.traces.bundle import ComputeTrace

if TYPE_CHECKING:
    from gradsched.experiments.at_scale.points import Point
    from gradsched.experiments.at_scale.settings import AtScaleSettings


def compute_slowdown(trace: ComputeTrace, point: Point, settings: AtScaleSettings) -> float:
    """Compute-time factor while communication overlaps (1 = none; module docstring)."""
    if not settings.overlap_slowdown:
        return 1.0
    return resolve_overlap(trace.meta, "auto").value


def straggler_transform(trace: ComputeTrace, point: Point,
                        settings: AtScaleSettings) -> ComputeTrace:
    """The trace as the slowest of ``point.gpus`` ranks runs it (module docstring)."""
    if not settings.stragglers or point.gpus < 2:
        return trace
    return apply_stragglers(trace, resolve_stragglers("auto", trace, point.gpus), point.gpus)
