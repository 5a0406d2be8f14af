"""What a device mesh changes in the sharded replay's per-unit inputs
(:mod:`gradsched.replay.sharded_mesh`): HSDP's all-reduce among replicas after each
reduce-scatter, and the backward all-gathers and post-forward slices of units resharded to
a smaller group (``reshard_after_forward=int``)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class MeshTimes:
    """Per unit (the root last where it has one): ``all_reduce_s`` the all-reduce among
    replicas after the reduce-scatter (empty: no replicas); ``backward_all_gather_s`` the
    backward all-gather's time (units only); ``post_forward_bytes`` the slice a unit keeps
    from its forward until its backward all-gather ends (0 for ``True``/``False``)."""

    all_reduce_s: np.ndarray
    backward_all_gather_s: np.ndarray
    post_forward_bytes: np.ndarray
