"""A device mesh's groups priced by one flat comm model: every rank on one node, a group of
``g`` ranks priced as the model's collective at ``g`` ranks
(:func:`gradsched.costmodel.base.comm_times`).

For a model measured on one machine (gloo over loopback or a shaped link between local
ranks, :mod:`gradsched.runtime.mesh_run`'s 2 x 2 runs): a shard group and a replicate
group are the same kind of group there, so each is the model at its size. Groups of a
kind run at once (every rank is in one): that they do not slow each other down holds
where every rank has its own link (the emulated clusters of ``traces/comm/cpu/README.md``,
each rank's link shaped apart), not where they share one (loopback, or the CPU cores of
one machine). Its domain is the model's: group sizes it was not measured at are its own
extrapolation (:meth:`GroupPricer.domain`), and a multi-node cluster needs
:class:`~gradsched.costmodel.mesh.TopologyPricer` or
:class:`~gradsched.costmodel.mesh.NCCLPricer` instead.
"""

from __future__ import annotations

import numpy as np

from gradsched.costmodel.base import CommModel, comm_times
from gradsched.costmodel.mesh import GroupPricer, GroupShape
from gradsched.errors import ConfigError


class OneNodePricer(GroupPricer):
    """Every group of ``world_size`` ranks on one node, priced by ``model`` at its size."""

    def __init__(self, model: CommModel, world_size: int, name: str = "comm model") -> None:
        if isinstance(world_size, bool) or not isinstance(world_size, int) or world_size < 1:
            raise ConfigError(f"world size must be a positive integer, got {world_size!r}")
        self.model = model
        self.name = name
        self.ranks_per_node = world_size
        self.nodes = 1

    def times(self, collective: str, nbytes: np.ndarray, shape: GroupShape) -> np.ndarray:
        per_node, nodes = shape
        return comm_times(self.model, collective, nbytes, per_node * nodes)

    def describe(self) -> str:
        return f"{self.name}, one node of {self.ranks_per_node} ranks (groups at their size)"

    def describe_group(self, size: int) -> str:
        return f"{size} ranks: {self.name} at {size} ranks"
