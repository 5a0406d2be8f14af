"""The collectives one :class:`~gradsched.runtime.executor.PlanExecutor` iteration issues:
how each is called on the installed torch, the handle of one that already finished, and
what an iteration communicated (:class:`StepStats`, counted when issued)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch.distributed as dist

from gradsched.collectives import get_allreduce

AR, RS, AG = "all_reduce", "reduce_scatter", "all_gather"
"""The kinds of collective a plan's buckets launch (:mod:`gradsched.plan`)."""

# torch >= 2.10 names them *_single (the *_tensor names are deprecated aliases).
reduce_scatter_into = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
all_gather_into = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor


class Completed:
    """The work handle of a collective that already finished (blocking algorithms)."""

    def wait(self, timeout: Any = None) -> bool:
        return True

    def is_completed(self) -> bool:
        return True


DONE = Completed()
"""The one handle of every collective that ran blocking."""


def blocking_allreduce(name: str) -> Any:
    """The point-to-point all-reduce ``name`` of :mod:`gradsched.collectives` (lp, ring,
    mst, rd, rhd), called blocking inside the gradient hook."""
    return get_allreduce(name)


@dataclass
class StepStats:
    """What one iteration communicated (counted when issued)."""

    collectives: dict[str, int] = field(default_factory=lambda: {AR: 0, RS: 0, AG: 0})
    bytes: dict[str, int] = field(default_factory=lambda: {AR: 0, RS: 0, AG: 0})
    bucket_launches: list[int] = field(default_factory=list)  # AR/RS collectives per bucket
    bucket_gathers: list[int] = field(default_factory=list)  # AG collectives per bucket
    unused: list[str] = field(default_factory=list)  # members zero-filled on this rank
    issue_sequence: list[tuple[str, int, int]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"collectives": dict(self.collectives), "bytes": dict(self.bytes),
                "bucket_launches": list(self.bucket_launches),
                "bucket_gathers": list(self.bucket_gathers), "unused": list(self.unused),
                "issue_sequence": [list(x) for x in self.issue_sequence]}


__all__ = ["AG", "AR", "DONE", "RS", "Completed", "StepStats", "all_gather_into",
           "blocking_allreduce", "reduce_scatter_into"]
