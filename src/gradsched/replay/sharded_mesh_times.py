"""What a device mesh changes in the sharded replay's per-unit inputs
(:mod:`gradsched.replay.sharded_mesh`): HSDP's all-reduce among replicas after each
reduce-scatter, and the backward all-gathers and post-forward slices of units resharded to
a smaller group (``reshard_after_forward=int``)."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np


@dataclass(frozen=True)
class MeshTimes:
    """Per unit (the root last where it has one): ``all_reduce_s`` the all-reduce among
    replicas after the reduce-scatter (empty: no replicas); ``backward_all_gather_s`` the
    backward all-gather's time (units only); ``post_forward_bytes`` the slice a unit keeps
    from its forward until its backward all-gather ends (0 for ``True``/``False``);
    ``all_reduce_last``: the all-reduces run in the last micro-batch of a step only (HSDP's
    ``set_requires_all_reduce(False)`` on the others, :mod:`gradsched.replay.sharded_accum`),
    otherwise after every reduce-scatter."""

    all_reduce_s: np.ndarray
    backward_all_gather_s: np.ndarray
    post_forward_bytes: np.ndarray
    all_reduce_last: bool = False

    def before_last(self) -> MeshTimes:
        """The inputs of a micro-batch before the last: without all-reduces when
        ``all_reduce_last``, else these."""
        if not self.all_reduce_last:
            return self
        return replace(self, all_reduce_s=np.empty(0))
