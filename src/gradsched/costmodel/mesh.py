"""Collectives over the process groups of a data-parallel device mesh on a two-level
cluster (``nodes`` x ``ranks_per_node``, ranks numbered node by node).

A group is described by how it lies on the nodes: ``per_node`` of its ranks on each of
``nodes`` nodes (:func:`group_shape`). FSDP2's groups (:mod:`gradsched.plan_mesh`):

* a shard group, or a post-forward group of ``reshard_after_forward=g``, is ``g``
  consecutive ranks: inside one node when ``g`` divides the GPUs per node (``(g, 1)``),
  else ``g / R`` whole nodes (``(R, g / R)``);
* a replicate group takes one rank of each shard group: one rank per node when the shard
  group spans whole nodes (``(1, P / S)``), else ``R / S`` ranks on every node.

Every group of a kind runs its collective at the same time as the others (each rank is in
one): on a node, ``R / per_node`` groups share the node's network. Two pricers:

* :class:`TopologyPricer` over a :class:`~gradsched.costmodel.topology.Topology`: a group
  inside a node is the intra level at ``per_node`` ranks, one rank per node the inter level
  at ``nodes`` ranks, anything else the topology's two-level model
  (:class:`~gradsched.costmodel.topology.HierarchicalModel` or flat ring) over ``nodes`` x
  ``per_node``. The inter level is one rank's collective across nodes, every rank of a node
  running its own at once, as the hierarchical model's ``AR_inter(M / R, N)`` term assumes
  (rail-optimised nodes: one NIC per GPU).
* :class:`NCCLPricer` over an :class:`~gradsched.costmodel.nccl.model.NCCLModel`: the
  calibration moved (:meth:`NCCLModel.on_hardware`) to a node of ``per_node`` GPUs holding
  ``per_node / R`` of the node's NIC bandwidth (the groups sharing a node share its NICs),
  and NCCL's own choice and price at ``per_node x nodes`` ranks. A group of whole nodes
  (``per_node = R``) is the model itself.

Both are reconstructions from the levels' models; nothing here was measured on an HSDP run.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import replace

import numpy as np

from gradsched.costmodel.base import CommModel
from gradsched.costmodel.nccl.model import NCCLModel
from gradsched.costmodel.topology import Topology
from gradsched.errors import ConfigError

GroupShape = tuple[int, int]
"""``(per_node, nodes)``: ranks of the group on each node, and how many nodes it spans."""


def group_shape(size: int, ranks_per_node: int) -> GroupShape:
    """Shape of a group of ``size`` consecutive ranks (a shard or post-forward group)."""
    if size <= ranks_per_node:
        if ranks_per_node % size:
            raise ConfigError(f"a group of {size} consecutive ranks must divide the "
                              f"{ranks_per_node} ranks of a node or span whole nodes")
        return size, 1
    if size % ranks_per_node:
        raise ConfigError(f"a group of {size} consecutive ranks does not span whole nodes of "
                          f"{ranks_per_node} ranks")
    return ranks_per_node, size // ranks_per_node


def replicate_shape(shard: int, world_size: int, ranks_per_node: int) -> GroupShape:
    """Shape of a replicate group: one rank of each of the ``world_size / shard`` shard
    groups (rank ``i``, ``i + shard``, ...)."""
    group_shape(shard, ranks_per_node)  # the shard group must lie on the nodes
    replicas = world_size // shard
    if shard >= ranks_per_node:
        return 1, replicas
    return ranks_per_node // shard, replicas * shard // ranks_per_node


class GroupPricer(ABC):
    """Times of collectives over groups of a given shape on one cluster."""

    ranks_per_node: int
    nodes: int

    @property
    def world_size(self) -> int:
        return self.ranks_per_node * self.nodes

    @abstractmethod
    def times(self, collective: str, nbytes: np.ndarray, shape: GroupShape) -> np.ndarray:
        """Seconds of ``collective`` of ``nbytes`` over a group of ``shape``."""

    @abstractmethod
    def describe(self) -> str:
        """One line: the model and the cluster."""

    def domain(self, sizes: tuple[int, ...]) -> str:
        """Where the groups of ``sizes`` ranks were priced, measured or not (the domain
        every prediction carries)."""
        return "; ".join(f"{self.describe_group(s)}" for s in sizes)

    def describe_group(self, size: int) -> str:
        return f"{size} ranks"

    def check(self, world_size: int) -> None:
        if world_size != self.world_size:
            raise ConfigError(f"mesh of {world_size} ranks on a cluster of {self.nodes} nodes x "
                              f"{self.ranks_per_node} ranks = {self.world_size}")


class TopologyPricer(GroupPricer):
    """Groups priced on a :class:`Topology`'s levels (module docstring)."""

    def __init__(self, topology: Topology, collective: str = "hierarchical") -> None:
        self.topology = topology
        self.collective = collective
        self.ranks_per_node = int(topology.ranks_per_node)
        self.nodes = int(topology.nodes)

    def times(self, collective: str, nbytes: np.ndarray, shape: GroupShape) -> np.ndarray:
        per_node, nodes = shape
        t = self.topology
        if per_node * nodes <= 1:
            return np.zeros_like(np.asarray(nbytes, dtype=float))
        if nodes == 1:
            return t.intra.times(collective, nbytes, per_node)
        if per_node == 1:
            return t.inter.times(collective, nbytes, nodes)
        two = Topology(nodes, per_node, t.intra, t.inter).collective_model(self.collective)
        return two.times(collective, nbytes, nodes * per_node)

    def describe(self) -> str:
        return (f"topology {self.nodes} nodes x {self.ranks_per_node} ranks ({self.collective} "
                "across nodes)")

    def describe_group(self, size: int) -> str:
        t = self.topology
        if size <= self.ranks_per_node:
            return f"{size} ranks: intra level, {t.intra.world_size_basis(size)}"
        nodes = size // self.ranks_per_node
        return (f"{size} ranks: intra level at {self.ranks_per_node} "
                f"({t.intra.world_size_basis(self.ranks_per_node)}), inter level at {nodes} "
                f"({t.inter.world_size_basis(nodes)})")


class NCCLPricer(GroupPricer):
    """Groups priced by an :class:`NCCLModel` moved to each group's share of a node
    (module docstring), on ``nodes`` nodes of the model's GPUs per node."""

    def __init__(self, model: NCCLModel, nodes: int) -> None:
        if not isinstance(model, NCCLModel):
            raise ConfigError("the mesh's NCCL pricer needs an nccl comm model")
        self.model = model
        self.ranks_per_node = int(model.hardware.gpus_per_node)
        self.nodes = int(nodes)
        self._moved: dict[int, CommModel] = {}

    def level(self, per_node: int) -> CommModel:
        """The model on a node of ``per_node`` GPUs with their share of its NICs."""
        if per_node == self.ranks_per_node:
            return self.model
        if per_node not in self._moved:
            hw = self.model.hardware
            share = hw.node_nic_Bps * per_node / self.ranks_per_node
            nics = max(1, hw.nics_per_node * per_node // self.ranks_per_node)
            moved = replace(hw, name=f"{hw.name}/{per_node}gpn", gpus_per_node=per_node,
                            nics_per_node=nics, nic_Bps=share / nics)
            self._moved[per_node] = self.model.on_hardware(moved)
        return self._moved[per_node]

    def times(self, collective: str, nbytes: np.ndarray, shape: GroupShape) -> np.ndarray:
        per_node, nodes = shape
        return self.level(per_node).times(collective, nbytes, per_node * nodes)

    def describe(self) -> str:
        return (f"nccl model on {self.model.hardware.name}, {self.nodes} nodes x "
                f"{self.ranks_per_node} GPUs")

    def domain(self, sizes: tuple[int, ...]) -> str:
        moved = self.model.meta.get("calibrated_on")
        where = f" (calibrated on {moved.get('name')})" if isinstance(moved, dict) else ""
        by_basis: dict[str, list[str]] = {}
        for s in sizes:
            by_basis.setdefault(self.model.world_size_basis(s), []).append(str(s))
        return "; ".join(f"groups of {', '.join(v)} ranks {k}" for k, v in by_basis.items()) \
            + where
