"""NCCL's own cost model of one collective: every (algorithm, protocol) priced, the cheapest chosen.

This follows ``ncclTopoTuneModel`` and ``ncclTopoGetAlgoTime`` of NCCL's
``src/graph/tuning.cc`` at commit 5067397c2676d5aed50042fc39e5c8ee96eb0027 (github.com/NVIDIA/nccl,
June 2026), read line by line; PyTorch Inductor's port of the same two functions
(``torch/_inductor/comm_analysis.py`` of torch 2.14.1, ``_nccl_algo_time`` and
``_nccl_best_algo_time``, git 5c488690) was read beside it. The numbers in the tables below are
NCCL's default tuner constants (tuning.cc L148-212); the code is written here.

Per collective, ``nRanks`` ranks on ``nNodes`` nodes (tuning.cc L288-291):

* steps: all-reduce ``2(nRanks-1)``, reduce-scatter and all-gather ``nRanks-1``, broadcast and
  reduce ``nRanks``; inter-node steps of a ring (L411): all-reduce ``2(nNodes-1)``, the others
  ``nNodes-1`` (0 on one node).
* algorithms: ring for every collective; tree for all-reduce only (L294-299). NVLS, CollNet
  and PAT need hardware (NVLink SHARP, in-network reduction) or one GPU per node; they are
  absent here, and a hardware description that has them is refused (:mod:`.hardware`).
* bus bandwidth per (algorithm, protocol) (L304, L326-336): the level's bus bandwidth (the
  intra-node graph on one node, the inter-node one otherwise), then ring LL
  ``min(llMaxBw, 0.5 B)``, ring LL128 ``min(0.92 B, nCh * perChMaxRingLL128Bw)``, tree
  all-reduce ``min(0.92 B, nCh * perChMaxTreeBw)``, tree LL ``min(B/3.8, llMaxBw)``, tree
  LL128 ``min(B * (7/9 on one node, else 120/128), nCh * perChMaxTreeLL128Bw)``.
* bus -> algorithm bandwidth (L376-382): ring ``* nRanks/nsteps``, tree ``* 0.5``.
* latency (L384-417): ``baseLat[a][p]`` plus, for a ring all-reduce / reduce-scatter /
  all-gather, ``(nsteps - nInterSteps) * max(intraLat, netOverhead) + nInterSteps * interLat``
  (netOverhead = 1 us between nodes on Intel x86, x3 for Simple, L228-233 and L404-409); for a
  ring broadcast / reduce ``nsteps * lat`` (L399-401); for a tree all-reduce
  ``2((nRanks/nNodes - 1) intraLat + log2i(nNodes) interLat)`` (L416). ``interLat`` is the NET
  latency of the algorithm, or of the tree when each node holds one rank (L386-388).
* time (L628-654): ``lat + nBytes / algbw``; the tree's bandwidth is multiplied by
  ``treeCorrectionFactor[p][log2i(nBytes >> 6)]`` below 2^23 (L623-627, L639-642); a multi-node
  ring all-reduce with Simple pays its latency x1.4 (x1.9 before Ampere) once a channel's share
  ``nBytes / (nChannels nRanks)`` reaches 64 bytes (L647-650).
* LL128 is enabled where the node's GPUs talk over NVLink (L517-537: ``typeIntra <= PATH_NVB``;
  the NIC path is assumed PCIe-switch close, ``typeInter <= PATH_PXB``).

``nBytes`` is the collective's whole buffer: the all-reduce vector, the reduce-scatter input
or the all-gather output (as nccl-tests' ``size`` and the traces' ``bytes`` column), which is
what NCCL prices (its per-rank count times ``nRanks``).

Where this module departs from NCCL (and says so): the bus bandwidth of each level and the
base latency of each protocol are *inputs* (:class:`LevelParams`), so that
:mod:`.calibrate` can fit them to a measured sweep; with :func:`nccl_default_params` they are
NCCL's own (``baseLat`` and the line rate of the links). Everything else above is structure.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gradsched.costmodel.nccl.fabric import slowdown
from gradsched.costmodel.nccl.hardware import Hardware
from gradsched.errors import ConfigError

ALGORITHMS: tuple[str, ...] = ("tree", "ring")
PROTOCOLS: tuple[str, ...] = ("LL", "LL128", "Simple")
CHOICES: tuple[tuple[str, str], ...] = tuple((a, p) for a in ALGORITHMS for p in PROTOCOLS)
"""Every (algorithm, protocol) pair, in the order of the rows of :func:`choice_times`."""

_US = 1e-6
_GB = 1e9

# tuning.cc L149-155, baseLatencies (us): Tree, Ring x (LL, LL128, Simple)
BASE_LATENCY_US: dict[str, tuple[float, float, float]] = {
    "tree": (6.8, 14.0, 8.4), "ring": (6.6, 14.0, 8.4)}
# tuning.cc L156-176, hwLatencies (us): link kind x algorithm x (LL, LL128, Simple)
HW_LATENCY_US: dict[str, dict[str, tuple[float, float, float]]] = {
    "nvlink": {"tree": (0.6, 1.25, 4.0), "ring": (0.6, 1.9, 3.4)},
    "pci": {"tree": (1.0, 1.9, 4.0), "ring": (1.0, 2.5, 5.7)},
    "net": {"tree": (5.0, 8.5, 14.0), "ring": (2.7, 4.0, 14.0)},
}
GENERATIONS: tuple[str, ...] = ("volta", "ampere", "hopper", "blackwell")
# tuning.cc L177-183, llMaxBws (GB/s): row = GPU generation on one node, CPU vendor between
# nodes (row 0 Intel, row 1 AMD); column = nodes 1, 2, >2
LL_MAX_BW_GBPS: tuple[tuple[float, float, float], ...] = (
    (39.0, 39.0, 20.4), (87.7, 22.5, 19.0), (141.0, 45.0, 35.0), (282.0, 90.0, 70.0))
# tuning.cc L184-204 (GB/s per channel): generation x nodes (1, 2, >2)
PER_CH_MAX_RING_LL128_GBPS: tuple[tuple[float, float, float], ...] = (
    (20.0, 20.0, 20.0), (20.0, 20.0, 20.0), (36.7, 36.7, 36.7), (40.0, 40.0, 40.0))
PER_CH_MAX_TREE_LL128_GBPS: tuple[tuple[float, float, float], ...] = (
    (20.0, 20.0, 20.0), (20.0, 20.0, 20.0), (36.7, 36.7, 29.0), (55.6, 31.67, 20.0))
PER_CH_MAX_TREE_GBPS: tuple[tuple[float, float, float], ...] = (
    (26.5, 18.5, 10.0), (24.0, 23.6, 17.8), (38.7, 41.4, 36.0), (70.0, 42.8, 24.0))
# tuning.cc L623-627: tree bandwidth correction by log2(nBytes / 64), 0..23 (64 B .. 256 MiB)
TREE_CORRECTION: tuple[tuple[float, ...], ...] = (
    (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0,
     1.0, 1.0, 1.0),
    (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9,
     1.0, 1.0, 1.0),
    (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9,
     .9),
)
NET_OVERHEAD_US = 1.0
"""tuning.cc L228-233: the network post overhead on Intel x86 (2 us on AMD)."""

RING_STEPS = {"all_reduce": 2, "reduce_scatter": 1, "all_gather": 1}


@dataclass(frozen=True)
class LevelParams:
    """What differs between one machine and the next at one level (inside a node, or between
    nodes): the bus bandwidth of the graph NCCL builds (``nChannels * bw``, bytes/s, before
    the protocol refinements), the base latency of each protocol (seconds; NCCL's
    ``baseLat``, the same for ring and tree once calibrated) and how far LL and LL128 reach
    NCCL's own efficiency factors (1 = as tuning.cc L327-335 says; both ring and tree)."""

    busbw_Bps: float
    base_latency_s: tuple[float, float, float]
    protocol_efficiency: tuple[float, float] = (1.0, 1.0)

    def __post_init__(self) -> None:
        if len(self.protocol_efficiency) != 2 or not all(
                np.isfinite(v) and v > 0 for v in self.protocol_efficiency):
            raise ConfigError("protocol efficiencies: two numbers > 0 (LL, LL128), got "
                              f"{self.protocol_efficiency}")
        if not (np.isfinite(self.busbw_Bps) and self.busbw_Bps > 0):
            raise ConfigError(f"bus bandwidth must be > 0 bytes/s, got {self.busbw_Bps}")
        if len(self.base_latency_s) != 3 or not all(
                np.isfinite(v) and v >= 0 for v in self.base_latency_s):
            raise ConfigError("base latencies: three finite numbers >= 0 (LL, LL128, Simple) "
                              f"seconds, got {self.base_latency_s}")


@dataclass(frozen=True)
class Params:
    """The inputs of the tuning model: the two levels, and a per-doubling slowdown of the
    inter-node bandwidth with the node count (:mod:`.fabric`; 0 = none)."""

    intra: LevelParams
    inter: LevelParams
    fabric_per_doubling: float = 0.0
    fabric_ref_nodes: int = 2

    def inter_busbw_Bps(self, n_nodes: int) -> float:
        """The inter-node bus bandwidth at ``n_nodes`` (:func:`.fabric.slowdown`)."""
        return self.inter.busbw_Bps / slowdown(n_nodes, self.fabric_ref_nodes,
                                               self.fabric_per_doubling)


def nccl_default_params(hw: Hardware) -> Params:
    """NCCL's own inputs for ``hw``: ``baseLat`` (the ring row; :func:`latency_s` adds the
    tree's difference) and bus bandwidths equal to the links' rates (NVLink per GPU inside a
    node, the node's NICs together between nodes)."""
    base = tuple(v * _US for v in BASE_LATENCY_US["ring"])
    return Params(LevelParams(hw.intra_Bps, base),  # type: ignore[arg-type]
                  LevelParams(hw.node_nic_Bps, base))  # type: ignore[arg-type]


def log2i(n: np.ndarray | int) -> np.ndarray:
    """NCCL's ``log2i``: floor(log2 n) for n >= 1, 0 below."""
    arr = np.asarray(n, dtype=np.int64)
    out = np.zeros(arr.shape, dtype=np.int64)
    pos = arr >= 1
    out[pos] = np.floor(np.log2(arr[pos].astype(float))).astype(np.int64)
    return out


def layout(world_size: int, gpus_per_node: int) -> tuple[int, int]:
    """(nRanks, nNodes) of ``world_size`` ranks packed ``gpus_per_node`` to a node."""
    if world_size < 1 or int(world_size) != world_size:
        raise ConfigError(f"world size must be an integer >= 1, got {world_size}")
    return int(world_size), max(1, -(-int(world_size) // int(gpus_per_node)))


def _index2(n_nodes: int) -> int:
    return n_nodes - 1 if n_nodes <= 2 else 2


def bus_bandwidth_Bps(hw: Hardware, params: Params, collective: str, algorithm: str,
                      protocol: str, n_ranks: int, n_nodes: int) -> float:
    """NCCL's ``bandwidths[coll][a][p]`` (bytes/s, already algorithm bandwidth): tuning.cc
    L304, L326-336, L376-382. 0 where the pair is not used."""
    if algorithm == "tree" and collective != "all_reduce":
        return 0.0
    if protocol == "LL128" and not hw.ll128:
        return 0.0
    gen = GENERATIONS.index(hw.generation)
    i2 = _index2(n_nodes)
    n_ch = hw.channels
    ll_row = gen if n_nodes == 1 else (1 if hw.cpu_vendor == "amd" else 0)
    ll_max = LL_MAX_BW_GBPS[ll_row][i2] * _GB
    level = params.intra if n_nodes == 1 else params.inter
    bus = level.busbw_Bps if n_nodes == 1 else params.inter_busbw_Bps(n_nodes)
    if protocol != "Simple":
        bus *= level.protocol_efficiency[PROTOCOLS.index(protocol)]
    if algorithm == "ring" and protocol == "LL":
        bus = min(ll_max, bus * 0.5)
    if algorithm == "ring" and protocol == "LL128":
        bus = min(bus * 0.92, n_ch * PER_CH_MAX_RING_LL128_GBPS[gen][i2] * _GB)
    if algorithm == "tree":
        bus = min(bus * 0.92, n_ch * PER_CH_MAX_TREE_GBPS[gen][i2] * _GB)
        if protocol == "LL":
            bus = min(bus / 3.8, ll_max)
        if protocol == "LL128":
            bus = min(bus * (7.0 / 9.0 if n_nodes == 1 else 120.0 / 128.0),
                      n_ch * PER_CH_MAX_TREE_LL128_GBPS[gen][i2] * _GB)
        return bus * 0.5
    return bus * n_ranks / _nsteps(collective, n_ranks)


def _nsteps(collective: str, n_ranks: int) -> int:
    if collective in RING_STEPS:
        return RING_STEPS[collective] * (n_ranks - 1)
    if collective == "p2p":
        return 1
    return n_ranks  # broadcast, reduce (tuning.cc L289-291)


def latency_s(hw: Hardware, params: Params, collective: str, algorithm: str, protocol: str,
              n_ranks: int, n_nodes: int) -> float:
    """NCCL's ``latencies[coll][a][p]`` (seconds), with the calibrated base latency:
    tuning.cc L384-417."""
    p = PROTOCOLS.index(protocol)
    level = params.intra if n_nodes == 1 else params.inter
    # the calibrated base latency is the ring's; the tree keeps NCCL's difference to it
    lat = level.base_latency_s[p] / _US + (BASE_LATENCY_US[algorithm][p]
                                           - BASE_LATENCY_US["ring"][p])
    intra_kind = "nvlink" if hw.intra_link == "nvlink" else "pci"
    intra_lat = HW_LATENCY_US[intra_kind][algorithm][p]
    ppn = n_ranks / n_nodes
    inter_lat = HW_LATENCY_US["net"]["tree" if ppn == 1 else algorithm][p]
    nsteps = _nsteps(collective, n_ranks)
    if algorithm == "tree":
        lat += 2 * ((n_ranks // n_nodes - 1) * intra_lat + int(log2i(n_nodes)) * inter_lat)
    elif collective in ("broadcast", "reduce", "p2p"):
        kind = intra_kind if n_nodes == 1 else "net"
        hop = HW_LATENCY_US[kind]["tree" if protocol == "Simple" else "ring"][p]
        lat += nsteps * hop
    else:
        overhead = 0.0
        if n_nodes > 1:
            overhead = NET_OVERHEAD_US * (3.0 if protocol == "Simple" else 1.0)
        intra_lat = max(intra_lat, overhead)
        n_inter = 0 if n_nodes == 1 else RING_STEPS[collective] * (n_nodes - 1)
        lat += (nsteps - n_inter) * intra_lat + n_inter * inter_lat
    return lat * _US


def choice_times(hw: Hardware, params: Params, collective: str, nbytes: np.ndarray,
                 world_size: int) -> np.ndarray:
    """Seconds of every (algorithm, protocol) of :data:`CHOICES` (rows) at every size
    (columns); ``inf`` where NCCL does not use the pair (tuning.cc L628-654)."""
    m = np.asarray(nbytes, dtype=float)
    n_ranks, n_nodes = layout(world_size, hw.gpus_per_node)
    out = np.full((len(CHOICES), m.size), np.inf)
    if n_ranks <= 1:
        return np.zeros((len(CHOICES), m.size))
    log_size = log2i(np.floor(np.maximum(m, 0.0) / 64.0).astype(np.int64))
    for row, (algorithm, protocol) in enumerate(CHOICES):
        bw = bus_bandwidth_Bps(hw, params, collective, algorithm, protocol, n_ranks, n_nodes)
        if bw <= 0:
            continue
        lat = latency_s(hw, params, collective, algorithm, protocol, n_ranks, n_nodes)
        bw_arr = np.full(m.shape, bw)
        lat_arr = np.full(m.shape, lat)
        if algorithm == "tree":
            table = np.asarray(TREE_CORRECTION[PROTOCOLS.index(protocol)])
            small = (m >= 64) & (log_size < 23)
            bw_arr[small] *= table[log_size[small]]
        if (algorithm == "ring" and protocol == "Simple" and n_nodes > 1
                and collective == "all_reduce"):
            plateau = np.floor(m / (hw.channels * n_ranks)) >= 64
            lat_arr[plateau] *= 1.9 if GENERATIONS.index(hw.generation) < 1 else 1.4
        out[row] = lat_arr + m / bw_arr
    return out


def select(hw: Hardware, params: Params, collective: str, nbytes: np.ndarray,
           world_size: int, chooser: Params | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(seconds, index into :data:`CHOICES`) at each size of the pair NCCL picks: the
    minimum of ``ncclTopoGetAlgoTime`` over algorithms and protocols (tuning.cc L628-654)
    under ``chooser`` (NCCL's own constants for ``hw``, :func:`nccl_default_params`, when
    ``None``), priced with ``params``. NCCL chooses with its built-in constants, not with what
    the machine really does, so a calibrated model must not re-choose."""
    ranked = choice_times(hw, chooser or nccl_default_params(hw), collective, nbytes,
                          world_size)
    idx = np.argmin(ranked, axis=0)
    stack = choice_times(hw, params, collective, nbytes, world_size)
    return np.take_along_axis(stack, idx[None, :], axis=0)[0], idx
