"""Horovod tensor fusion driven by its background cycle.

Sergeev & Del Balso, "Horovod: fast and easy distributed deep learning in TensorFlow",
arXiv:1802.05799, 2018 (tensor fusion), and Horovod's ``HOROVOD_FUSION_THRESHOLD`` /
``HOROVOD_CYCLE_TIME`` (defaults 64 MiB / 5 ms before v0.21, 128 MiB / 1 ms from v0.21:
Horovod v0.21.0 release notes, PR #2468).

Rule (a simulation of the background loop): cycles tick every ``cycle_time_ms`` from the
start of backward. At the cycle boundary ``k * cycle`` the tensors that became ready in
``((k-1) * cycle, k * cycle]`` are fused, in ready order, into buckets that never exceed
``fusion_threshold_mb`` (a tensor larger than the threshold travels alone, as Horovod's
``FuseResponses``); each bucket gets ``release_s = k * cycle``. One all-reduce per bucket
on one stream; global update.
"""

from __future__ import annotations

import numpy as np

from gradsched.costmodel.base import CommModel
from gradsched.plan import Plan
from gradsched.planners._family import (
    MB,
    Knob,
    base_info,
    check_choice,
    check_positive,
    fill_groups,
    plan_from_ends,
    ready_seq,
)
from gradsched.traces.bundle import ComputeTrace

NAME = "horovod"
SUMMARY = "Horovod tensor fusion per background cycle (Sergeev & Del Balso 2018)"
DEFAULTS = {"pre021": (64.0, 5.0), "post021": (128.0, 1.0)}  # (threshold MiB, cycle ms)
KNOBS: tuple[Knob, ...] = (
    Knob("defaults", str, "post021", "pre021: 64 MiB / 5 ms (Horovod < 0.21); "
         "post021: 128 MiB / 1 ms", tuple(DEFAULTS)),
    Knob("fusion_threshold_mb", float, None, "fusion buffer in MiB (default: from defaults)"),
    Knob("cycle_time_ms", float, None, "background cycle in ms (default: from defaults)"),
)


def cycle_index(ready_s: np.ndarray, cycle_s: float) -> np.ndarray:
    """Index k of the boundary ``k * cycle`` at which each tensor is first seen."""
    # Rounding first keeps a tensor ready exactly on a boundary in that boundary's cycle.
    return np.ceil(np.round(ready_s / cycle_s, 9)).astype(np.int64)


def plan(trace: ComputeTrace, model: CommModel, world_size: int, *,
         defaults: str = "post021", fusion_threshold_mb: float | None = None,
         cycle_time_ms: float | None = None) -> Plan:
    """Fuse per cycle, release at the cycle boundary."""
    check_choice("defaults", defaults, tuple(DEFAULTS))
    threshold = DEFAULTS[defaults][0] if fusion_threshold_mb is None else fusion_threshold_mb
    cycle_ms = DEFAULTS[defaults][1] if cycle_time_ms is None else cycle_time_ms
    check_positive("fusion_threshold_mb", threshold)
    check_positive("cycle_time_ms", cycle_ms)
    seq = ready_seq(trace)
    cycle = cycle_ms * 1e-3
    k = cycle_index(seq.ready_s, cycle)
    ends: list[int] = []
    releases: list[float] = []
    start = 0
    for stop in [*np.flatnonzero(np.diff(k)).tolist(), seq.n - 1]:
        sub = fill_groups(seq.nbytes[start:stop + 1], [threshold * MB], overflow=False)
        ends.extend((sub + start).tolist())
        releases.extend([float(k[start] * cycle)] * len(sub))
        start = stop + 1
    if seq.n == 0:
        ends, releases = [], []
    knobs = {"defaults": defaults, "fusion_threshold_mb": threshold, "cycle_time_ms": cycle_ms}
    info = base_info(trace, world_size) | {"cycles_used": len(set(k.tolist()))}
    return plan_from_ends(NAME, seq, np.asarray(ends, dtype=np.int64), knobs=knobs, info=info,
                          releases=releases)
