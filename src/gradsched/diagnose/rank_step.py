"""What one rank's step gave :mod:`gradsched.diagnose`: the per-collective frame's columns
and the facts the causes read (shared by :mod:`.observe`, GPU, and :mod:`.observe_cpu`,
CPU over gloo)."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

HOLD_TOL_S = 5e-6
"""A compute kernel starting this soon after a collective's end, on a stream idle before
that end, was held by it: Kineto timestamps are microseconds and a kernel launched to an
idle stream starts a few microseconds after its launch call (the launch latency)."""

COLUMNS = ["rank", "index", "collective", "bytes", "world_size", "stream", "phase",
           "ready_s", "drained_s", "launch_s", "start_s", "end_s", "duration_s", "exposed_s",
           "hideable_s", "held_kernels", "same_stream_as_compute"]


@dataclass(frozen=True)
class RankStep:
    """One rank's step: its collectives (:data:`COLUMNS`) and the facts the causes read."""

    label: str
    rank: int
    world_size: int | None
    device: str | None
    step: int
    step_s: float
    gpu_end_s: float
    """End of the step's last GPU activity (s from the step start)."""
    compute_s: float
    """Union of the step's compute kernels (s)."""
    contenders: int
    """Collectives during which compute was pending: a compute kernel launched before the
    collective's end that had not started before the collective's start."""
    beside: int
    """Of those, the collectives beside which one such kernel started (ran)."""
    compute: tuple[tuple[float, float], ...]
    """The compute kernels' union (s from the step start), from the step start to twice
    the step's GPU span (room for a predicted schedule that runs longer)."""
    frame: pd.DataFrame

    @property
    def cpu(self) -> bool:
        """A CPU run over gloo (:mod:`gradsched.diagnose.observe_cpu`)."""
        return bool(self.device and self.device.startswith("CPU"))
