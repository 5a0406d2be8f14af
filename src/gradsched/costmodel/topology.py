"""A two-level cluster (nodes x ranks per node) and the collectives over it.

A :class:`Topology` is ``N`` nodes of ``R`` ranks each (world size ``P = N * R``), an
*intra-node* :class:`~gradsched.costmodel.base.CommModel` (the links inside a node:
NVLink/NVSwitch, shared memory) queried at ``R`` ranks, and an *inter-node* one (the
network between nodes) queried at ``N`` ranks. Each level is any model kind ``--comm``
accepts (:func:`~gradsched.costmodel.base.load_comm_spec`): a comm-trace CSV, a fitted
model JSON, an inline ``alpha-beta:...`` model, or a model JSON object written inline.

Two collective cost models over a topology, both :class:`CommModel` subclasses, so every
planner and the replay use them unchanged (and the wire floor of
:mod:`gradsched.costmodel.wire` applies on top of :meth:`raw_times`):

``hierarchical`` (:class:`HierarchicalModel`) -- the two-level all-reduce of Horovod's
  ``HOROVOD_HIERARCHICAL_ALLREDUCE`` (horovod/common/ops/nccl_operations.cc,
  ``NCCLHierarchicalAllreduce::Execute``: ``ncclReduceScatter`` inside the node, an
  ``MPI_Allreduce`` of each rank's shard across nodes, ``ncclAllGather`` inside the node)
  and of the
  "2D"/hierarchical all-reduce (Jia et al. 2018, arXiv:1807.11205; Ueno & Yokota 2019):

      T_ar(M) = RS_intra(M, R) + AR_inter(M / R, N) + AG_intra(M, R)

  Reduce-scatter is ``RS_intra(M, R) + RS_inter(M / R, N)`` (each rank ends with
  ``M / P`` bytes) and all-gather its mirror ``AG_inter(M / R, N) + AG_intra(M, R)``;
  broadcast and reduce run the full message at each level. One node (``N = 1``) is the
  intra model at ``R`` ranks itself, one rank per node (``R = 1``) the inter model at
  ``N`` ranks.

``flat`` (:class:`FlatRingModel`) -- one ring through all ``P`` ranks, ordered node by
  node, as NCCL builds its rings (each ring crosses every node boundary once; Jeaugey,
  "Massively Scale Your Deep Learning Training with NCCL 2.4", NVIDIA blog 2019; the ring
  algorithm: Thakur, Rabenseifner & Gropp 2005, Sec. 4). A ring collective runs
  in lock step: each of its ``k(P-1)`` steps (k = 2 for all-reduce, 1 for reduce-scatter
  and all-gather) moves ``M / P`` bytes over every link and lasts as long as the slowest
  link takes. A level of ``n`` ranks measured as collective ``c`` gives that link's cost:
  its ring moves ``(n-1)/n * m`` bytes per link (times k) in ``k(n-1)`` steps, so a
  ring of ``P`` ranks over the same links moves the per-link bytes of a level collective
  of ``m = M * n (P-1) / (P (n-1))`` bytes and takes ``(P-1)/(n-1)`` times its steps:

      F_level(M) = T_c(M * n (P-1) / (P (n-1)), n) + (P - n) / (n - 1) * s_c(n)

  with ``s_c(n)`` the level's start-up (:meth:`CommModel.startup_s`). The flat ring's
  time is ``max(F_inter, F_intra)`` (the slower link sets the pace; in practice the
  inter-node one). It is exact for alpha-beta levels: for ``T = a + b m`` the per-step
  latency ``a / (k(n-1))`` and link rate ``b n / (k(n-1))`` give
  ``a (P-1)/(n-1) + b M n (P-1) / (P (n-1))``. ``N = 1`` is the intra model at ``R``
  ranks, ``R = 1`` the inter model at ``N``.

Both are reconstructions from the published algorithms, not measured NCCL internals
(NCCL 2.4+ also runs trees across nodes; neither model here is NCCL's tuner).
"""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from gradsched.costmodel.base import (
    CommModel,
    check_collective,
    load_comm_spec,
    model_from_dict,
    register_model,
)
from gradsched.costmodel.domain import CollectiveBasis, combine_bases
from gradsched.errors import ConfigError, GradschedError, InputError
from gradsched.io import read_json, read_yaml
from gradsched.limits import MAX_RANKS as LIMIT_RANKS
from gradsched.schema_check import check_schema

LEVELS = ("intra", "inter")
TOPOLOGY_COLLECTIVES = ("flat", "hierarchical")
"""The collective cost models over a topology (``--topology-collective``)."""

MAX_RANKS = LIMIT_RANKS
"""Largest node count, ranks per node, and world size (their product) accepted: the world
size limit of :mod:`gradsched.limits`."""


@dataclass(frozen=True)
class Topology:
    """``nodes`` x ``ranks_per_node`` ranks; ``intra`` costs collectives inside a node at
    ``ranks_per_node`` ranks, ``inter`` collectives across nodes at ``nodes`` ranks."""

    nodes: int
    ranks_per_node: int
    intra: CommModel
    inter: CommModel

    def __post_init__(self) -> None:
        for name in ("nodes", "ranks_per_node"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | np.integer):
                raise ConfigError(f"topology: {name} must be an integer, got {value!r}")
            if not 1 <= int(value) <= MAX_RANKS:
                raise ConfigError(f"topology: {name} must be in [1, {MAX_RANKS}], got {value}")
        if int(self.nodes) * int(self.ranks_per_node) > MAX_RANKS:
            raise ConfigError(f"topology: {self.nodes} nodes x {self.ranks_per_node} ranks "
                              f"per node = {int(self.nodes) * int(self.ranks_per_node)} ranks, "
                              f"beyond the world size limit of {MAX_RANKS} (2**20) ranks")
        for level in LEVELS:
            if not isinstance(getattr(self, level), CommModel):
                raise ConfigError(f"topology: the {level}-node level is not a comm model")

    @property
    def world_size(self) -> int:
        """``P = nodes * ranks_per_node``."""
        return int(self.nodes) * int(self.ranks_per_node)

    @classmethod
    def from_world(cls, world_size: int, nodes: int, intra: CommModel,
                   inter: CommModel) -> Topology:
        """A topology of ``world_size`` ranks on ``nodes`` nodes; the world size must
        divide evenly."""
        if nodes < 1 or world_size < 1 or world_size % nodes:
            raise ConfigError(f"topology: world size {world_size} is not divisible by "
                              f"{nodes} nodes")
        return cls(nodes, world_size // nodes, intra, inter)

    def to_dict(self) -> dict[str, Any]:
        """The description format (levels as model JSON objects)."""
        return {"nodes": self.nodes, "ranks_per_node": self.ranks_per_node,
                "intra": self.intra.to_dict(), "inter": self.inter.to_dict()}

    def collective_model(self, name: str) -> CommModel:
        """The ``flat`` or ``hierarchical`` collective cost model over this topology."""
        models: dict[str, type[TopologyModel]] = {"flat": FlatRingModel,
                                                  "hierarchical": HierarchicalModel}
        if name not in models:
            raise ConfigError(f"unknown topology collective {name!r}; known: "
                              + ", ".join(TOPOLOGY_COLLECTIVES))
        return models[name](self)


# ---------------------------------------------------------------------------- loading

def _load_level(spec: Any, level: str, source: Path) -> CommModel:
    """One level: a ``--comm`` spec string (a relative path is relative to the topology
    file's folder) or a model JSON object."""
    if isinstance(spec, dict):
        return model_from_dict(spec, source=f"{source} ({level})")
    if not spec.strip():
        raise InputError(f"the {level}-node level must be a --comm spec (a comm-trace CSV, a "
                         "model JSON, alpha-beta:alpha=<s>,beta=<s/byte>) or a model object",
                         path=source, field=level)
    if not spec.startswith("alpha-beta:") and not Path(spec).is_absolute():
        spec = str(source.parent / spec)
    try:
        return load_comm_spec(spec)
    except GradschedError as exc:  # the level's own file and row stay in the message
        raise InputError(f"the {level}-node level: {exc}", path=source, field=level) from None


def _read_description(path: Path) -> dict[str, Any]:
    """Parse a JSON (``.json``) or YAML (any other suffix) topology file into a mapping."""
    if path.suffix == ".json":
        return read_json(path, missing="topology file not found")
    data = read_yaml(path, missing="topology file not found")
    if not isinstance(data, dict):
        raise InputError("expected a mapping with nodes, ranks_per_node, intra and inter",
                         path=path)
    return data


SCHEMA = "topology.schema.yaml"
"""The description's schema (``workflow/schemas/``): its fields, their types and ranges."""


def topology_from_dict(data: dict[str, Any], source: str | Path = "<topology>") -> Topology:
    """Build a :class:`Topology` from ``{"nodes", "ranks_per_node" | "world_size", "intra",
    "inter"}``, checked against :data:`SCHEMA`, then for what a schema cannot state (the
    world size agrees with the nodes); every problem is an :class:`InputError` naming
    ``source`` and the field."""
    source = Path(source)
    check_schema(data, SCHEMA, source)
    nodes = data["nodes"]
    ranks = data.get("ranks_per_node")
    world = data.get("world_size")
    if ranks is None and world % nodes:
        raise InputError(f"world size {world} is not divisible by {nodes} nodes",
                         path=source, field="world_size")
    if ranks is None:
        ranks = world // nodes
    elif world is not None and world != nodes * ranks:
        raise InputError(f"world_size {world} != nodes x ranks_per_node = {nodes * ranks}",
                         path=source, field="world_size")
    if nodes * ranks > MAX_RANKS:  # checked here too, so that the error names the file
        raise InputError(f"{nodes} nodes x {ranks} ranks per node = {nodes * ranks} ranks, "
                         f"beyond the world size limit of {MAX_RANKS} (2**20) ranks",
                         path=source, field="ranks_per_node")
    intra = _load_level(data["intra"], "intra", source)
    inter = _load_level(data["inter"], "inter", source)
    return Topology(nodes, ranks, intra, inter)


def load_topology(path: str | Path) -> Topology:
    """Read a topology description (JSON or YAML; see :func:`topology_from_dict`)."""
    path = Path(path)
    return topology_from_dict(_read_description(path), path)


# ------------------------------------------------------------------ collective models

class TopologyModel(CommModel):
    """A collective cost model over a :class:`Topology`; it answers at ``P = N * R`` only."""

    def __init__(self, topology: Topology) -> None:
        if not isinstance(topology, Topology):
            raise ConfigError(f"{self.kind}: expected a Topology, got {type(topology).__name__}")
        self.topology = topology

    def world_sizes(self) -> tuple[int, ...]:
        return (self.topology.world_size,)

    def _check_world(self, world_size: int) -> None:
        if int(world_size) != self.topology.world_size:
            t = self.topology
            raise ConfigError(f"{self.kind} topology model: world size {world_size} requested, "
                              f"but the topology is {t.nodes} nodes x {t.ranks_per_node} ranks "
                              f"= {t.world_size}")

    def raw_times(self, collective: str, nbytes: np.ndarray, world_size: int) -> np.ndarray:
        check_collective(collective)
        self._check_world(world_size)
        m = np.asarray(nbytes, dtype=float)
        t = self.topology
        if t.nodes == 1:
            return t.intra.times(collective, m, t.ranks_per_node)
        if t.ranks_per_node == 1:
            return t.inter.times(collective, m, t.nodes)
        return self._two_level(collective, m)

    @abstractmethod
    def _two_level(self, collective: str, m: np.ndarray) -> np.ndarray:
        """The collective's time over both levels (nodes > 1 and ranks per node > 1)."""

    def level_queries(self, collective: str) -> list[tuple[str, CommModel, str, int]]:
        """(level, its model, collective, ranks) of every level query behind
        ``collective`` (one level where the topology has one node or one rank per node)."""
        t = self.topology
        if t.nodes == 1:
            return [("intra", t.intra, collective, t.ranks_per_node)]
        if t.ranks_per_node == 1:
            return [("inter", t.inter, collective, t.nodes)]
        return [(level, getattr(t, level), c, t.ranks_per_node if level == "intra" else t.nodes)
                for level, c in self._level_collectives(collective)]

    def _level_collectives(self, collective: str) -> list[tuple[str, str]]:
        """(level, collective) pairs the two-level collective runs (default: its own at
        both levels)."""
        return [("intra", collective), ("inter", collective)]

    def world_size_basis(self, world_size: int) -> str:
        """From the levels: each at the ranks it is queried at."""
        self._check_world(world_size)
        return combine_bases(model.world_size_basis(ranks)
                             for _, model, _, ranks in self.level_queries("all_reduce"))

    def collective_basis(self, collective: str, world_size: int
                         ) -> tuple[CollectiveBasis, ...]:
        """Each level's own record, labelled with the level and its ranks."""
        self._check_world(world_size)
        return tuple(b.within(f"{level}-node level at {ranks} ranks")
                     for level, model, c, ranks in self.level_queries(collective)
                     for b in model.collective_basis(c, ranks))

    def sustained_algbw_Bps(self, world_size: int) -> float:
        """The all-reduce bandwidth of the wire floor, from the levels' own sustained
        bandwidths (:meth:`_seconds_per_byte`) rather than from a least-squares fit to the
        composite curve: the composite of two floored levels is never below
        ``startup + f_c m / b`` with this ``b``, and ``b`` only grows when a level gets
        faster. (The generic fit over a flat ring's kinked ``max`` curve made a faster
        inter-node alpha 0.26% *slower*: a floor artefact, found by the property test.)"""
        self._check_world(world_size)
        t = self.topology
        if t.nodes == 1:
            return t.intra.sustained_algbw_Bps(t.ranks_per_node)
        if t.ranks_per_node == 1:
            return t.inter.sustained_algbw_Bps(t.nodes)
        per_byte = self._seconds_per_byte()
        return 1.0 / per_byte if per_byte > 0 else float("inf")

    @abstractmethod
    def _seconds_per_byte(self) -> float:
        """Seconds per all-reduce byte of the slower level's sustained bandwidth."""

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, **self.topology.to_dict()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CommModel:
        body = {k: v for k, v in data.items() if k != "kind"}
        return cls(topology_from_dict(body))

    def describe(self) -> str:
        t = self.topology
        return (f"{self.kind} over {t.nodes} nodes x {t.ranks_per_node} ranks; intra: "
                f"{t.intra.describe()}; inter: {t.inter.describe()}")


@register_model
class HierarchicalModel(TopologyModel):
    """Reduce-scatter in the node, the cross-node collective on ``M / R``, all-gather in
    the node (module docstring; Horovod ``NCCLHierarchicalAllreduce``)."""

    kind: ClassVar[str] = "topology-hierarchical"

    def _two_level(self, collective: str, m: np.ndarray) -> np.ndarray:
        t = self.topology
        n, r = t.nodes, t.ranks_per_node
        shard = m / r
        if collective == "all_reduce":
            return (t.intra.times("reduce_scatter", m, r)
                    + t.inter.times("all_reduce", shard, n)
                    + t.intra.times("all_gather", m, r))
        if collective == "reduce_scatter":
            return t.intra.times("reduce_scatter", m, r) + t.inter.times("reduce_scatter",
                                                                         shard, n)
        if collective == "all_gather":
            return t.inter.times("all_gather", shard, n) + t.intra.times("all_gather", m, r)
        # broadcast / reduce: the whole message at each level (root's node, then the others)
        return t.intra.times(collective, m, r) + t.inter.times(collective, m, n)

    def _level_collectives(self, collective: str) -> list[tuple[str, str]]:
        if collective == "all_reduce":
            return [("intra", "reduce_scatter"), ("inter", "all_reduce"),
                    ("intra", "all_gather")]
        return super()._level_collectives(collective)

    def _seconds_per_byte(self) -> float:
        """All-reduce: ``1/b_intra`` (RS + AG of M) plus ``1/(R b_inter)`` (AR of M/R)."""
        t = self.topology
        return (1.0 / t.intra.sustained_algbw_Bps(t.ranks_per_node)
                + 1.0 / (t.ranks_per_node * t.inter.sustained_algbw_Bps(t.nodes)))


def ring_level_time(model: CommModel, collective: str, m: np.ndarray, level_ranks: int,
                    world_size: int) -> np.ndarray:
    """``F_level``: a ring of ``world_size`` ranks paced by the links a level of
    ``level_ranks`` ranks was measured on (module docstring)."""
    n, p = level_ranks, world_size
    equivalent = m * n * (p - 1) / (p * (n - 1))
    extra_steps = (p - n) / (n - 1) * model.startup_s(collective, n)
    return model.times(collective, equivalent, n) + extra_steps


@register_model
class FlatRingModel(TopologyModel):
    """One ring over all ``P`` ranks, paced by its slowest link (module docstring)."""

    kind: ClassVar[str] = "topology-flat"

    def _two_level(self, collective: str, m: np.ndarray) -> np.ndarray:
        t = self.topology
        p = t.world_size
        return np.maximum(ring_level_time(t.inter, collective, m, t.nodes, p),
                          ring_level_time(t.intra, collective, m, t.ranks_per_node, p))

    def _seconds_per_byte(self) -> float:
        """The slower level's ``k / b_level`` with ``k = n (P-1) / (P (n-1))``."""
        t = self.topology
        p = t.world_size
        return max(n * (p - 1) / (p * (n - 1)) / level.sustained_algbw_Bps(n)
                   for level, n in ((t.inter, t.nodes), (t.intra, t.ranks_per_node)))
