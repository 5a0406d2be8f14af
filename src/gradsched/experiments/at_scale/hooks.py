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

Neither model is in this tree yet: switched on, each refuses with a ConfigError rather
than return a number nobody measured.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gradsched.errors import ConfigError
from gradsched.traces.bundle import ComputeTrace

if TYPE_CHECKING:
    from gradsched.experiments.at_scale.points import Point
    from gradsched.experiments.at_scale.settings import AtScaleSettings


def compute_slowdown(trace: ComputeTrace, point: Point, settings: AtScaleSettings) -> float:
    """Compute-time factor while communication overlaps (1 = none; module docstring)."""
    if not settings.overlap_slowdown:
        return 1.0
    raise ConfigError("--overlap-slowdown: no compute-slowdown-under-overlap model is wired "
                      "into the at-scale study yet (experiments/at_scale/hooks.py)")


def straggler_transform(trace: ComputeTrace, point: Point,
                        settings: AtScaleSettings) -> ComputeTrace:
    """The trace as the slowest of ``point.gpus`` ranks runs it (module docstring)."""
    if not settings.stragglers:
        return trace
    raise ConfigError("--stragglers: no straggler model is wired into the at-scale study yet "
                      "(experiments/at_scale/hooks.py)")
