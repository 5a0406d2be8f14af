"""NCCL's own cost model of one collective: every (algorithm, protocol) priced, the cheapest chosen.

This follows ``ncclTopoTuneModel`` and ``ncclTopoGetAlgoTime`` of NCCL's ``src/graph/tuning.cc``
(github.com/NVIDIA/nccl), read line by line at two versions (:mod:`.constants`: 2.8.4, the
NCCL of the ABCI sweeps, and master at commit 5067397c, whose line numbers are cited below);
PyTorch Inductor's port of the same two functions (``torch/_inductor/comm_analysis.py`` of
torch 2.14.1, ``_nccl_algo_time`` and ``_nccl_best_algo_time``) was read beside it. The code
is written here; the numbers are NCCL's (:mod:`.constants`).

Per collective, ``nRanks`` ranks on ``nNodes`` nodes (tuning.cc L288-291):

* steps: all-reduce ``2(nRanks-1)``, reduce-scatter and all-gather ``nRanks-1``, broadcast and
  reduce ``nRanks``; inter-node steps of a ring (L411): all-reduce ``2(nNodes-1)``, the others
  ``nNodes-1`` (0 on one node).
* algorithms: ring for every collective; tree for all-reduce only (L294-299). NVLS, CollNet
  and PAT need hardware (NVLink SHARP, in-network reduction) or one GPU per node; they are
  not priced here (:meth:`.hardware.Hardware.notes` says so where a machine has them).
* bus bandwidth per (algorithm, protocol) (L304, L326-336): the level's bus bandwidth (the
  intra-node graph on one node, the inter-node one otherwise), then ring LL
  ``min(llMaxBw, f B)``, ring LL128 ``min(0.92 B, cap)``, tree all-reduce
  ``min(0.92 B, nCh * perChMaxTreeBw)``, tree LL ``min(B/3.8, llMaxBw)``, tree LL128
  ``min(B * (7/9 on one node, else ~0.92), cap)``.
* bus -> algorithm bandwidth (L376-382): ring ``* nRanks/nsteps``, tree ``* 0.5``.
* latency (L384-417): ``baseLat[a][p]`` plus, for a ring all-reduce / reduce-scatter /
  all-gather, ``(nsteps - nInterSteps) * max(intraLat, netOverhead) + nInterSteps * interLat``
  (L404-412); for a ring broadcast / reduce ``nsteps * lat`` (L399-401); for a tree all-reduce
  ``2((nRanks/nNodes - 1) intraLat + log2i(nNodes) interLat)`` (L416).
* time (L628-654): ``lat + nBytes / algbw``; the tree's bandwidth is multiplied by
  ``treeCorrectionFactor[p][log2i(nBytes >> 6)]`` below 2^23 (L639-642); a multi-node ring
  all-reduce with Simple pays its latency times a plateau factor beyond a size (L647-650).
* the tree's pipeline fill (:func:`tree_fill_s`, from NCCL's chunking in ``enqueue.cc`` and
  the proxy's per-step sends in ``net.cc``): not in NCCL's estimate, added to the price (not
  to the choice), each hop at the slower of the pair's own rate and the wire between nodes
  carrying the protocol's wire bytes.
* LL128 is enabled where the node's GPUs talk over NVLink (L517-537: ``typeIntra <= PATH_NVB``)
  and, between nodes, where the NIC is PCIe-switch close (``typeInter <= PATH_PXB``), which
  :attr:`.hardware.Hardware.net_ll128` records (decided by the calibration).

``nBytes`` is the collective's whole buffer: the all-reduce vector, the reduce-scatter input
or the all-gather output (as nccl-tests' ``size`` and the traces' ``bytes`` column), which is
what NCCL prices (its per-rank count times ``nRanks``).

NCCL *chooses* with its own constants and the links' rates (:func:`nccl_default_params`), and
under NCCL 2.8.4 between nodes with the channel count and per-channel speeds its topology
search gives each algorithm's graph on the machine (:mod:`.graph`); the choice is then
*priced* with calibrated inputs (:class:`Params`, :mod:`.calibrate`): the bus bandwidth of
each level, a latency offset over ``baseLat`` and the LL / LL128 efficiencies.
Everything else above is structure.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gradsched.costmodel.nccl.constants import constants_for
from gradsched.costmodel.nccl.fabric import slowdown
from gradsched.costmodel.nccl.graph import nccl_284_graphs
from gradsched.costmodel.nccl.hardware import Hardware
from gradsched.errors import ConfigError

ALGORITHMS: tuple[str, ...] = ("tree", "ring")
PROTOCOLS: tuple[str, ...] = ("LL", "LL128", "Simple")
CHOICES: tuple[tuple[str, str], ...] = tuple((a, p) for a in ALGORITHMS for p in PROTOCOLS)
"""Every (algorithm, protocol) pair, in the order of the rows of :func:`choice_times`."""

_US = 1e-6
_GB = 1e9
def tree_chunk_bytes(protocol: str, nbytes: np.ndarray, n_ranks: int, n_nodes: int,
                     channels: int) -> np.ndarray:
    """Data bytes of one tree chunk per channel (2.8.4 ``enqueue.cc`` L376-417, commit
    911d61f2): a step of the protocol's buffer (``buffSizes / NCCL_STEPS``; LL carries data in
    half of its 16-byte lines: 32 KiB; LL128 in 15 of 16 words of 614,400 bytes; Simple 512
    KiB), halved for LL128 and Simple while a channel would get too few chunks for the tree's
    depth."""
    m = np.asarray(nbytes, dtype=float)
    if protocol == "LL":
        return np.full(m.shape, 32768.0)
    ppn = n_ranks / n_nodes
    chunk = np.full(m.shape, 614400.0 if protocol == "LL128" else 524288.0)
    if protocol == "LL128":
        steps = 1 + int(log2i(n_nodes)) + 0.1 * ppn
        rules = ((steps * 64 / ppn, 131072.0), (steps * 16 / ppn, 32768.0))
    else:
        depth = (ppn - 1) + int(log2i(n_nodes)) + 1
        rules = ((depth * 8, 131072.0), (depth * 4, 65536.0), (depth, 32768.0))
    for need, floor in rules:
        for _ in range(6):
            halve = (m / (channels * chunk) < need) & (chunk > floor)
            chunk = np.where(halve, chunk / 2, chunk)
    return chunk * (15.0 / 16.0 if protocol == "LL128" else 1.0)


WIRE_BYTES_PER_DATA_BYTE: dict[str, float] = {"LL": 2.0, "LL128": 16.0 / 15.0, "Simple": 1.0}
"""Bytes a protocol puts on the wire per data byte (2.8.4 ``src/include/devcomm.h``: an LL
line is 16 bytes with 8 of data and 8 of flags; an LL128 line is 16 eight-byte words, 15 of
data, L65-67; Simple sends the data alone)."""


def tree_fill_s(hw: Hardware, protocol: str, nbytes: np.ndarray, n_ranks: int, n_nodes: int,
                bus_Bps: float, kernel_Bps: float | None = None) -> np.ndarray:
    """The tree's pipeline fill between nodes, which NCCL's time estimate leaves out.

    Across the network NCCL moves a collective in steps: the proxy posts a step's buffer to
    the NIC only once the kernel has written all of it (``netSendProxy``,
    ``src/transport/net.cc`` L286-321 at v2.8.4-1: one ``ncclNetIsend`` per step, posted
    when every LL / LL128 line of the step carries its flag), so a chunk
    (:func:`tree_chunk_bytes`) is stored and forwarded at every inter-node hop. Before the
    chunks stream at the algorithm bandwidth, the first one crosses ``2 log2i(nNodes) - 1``
    further hops (up the tree and down again). At each hop the chunk is written by the
    kernel at the protocol's rate ``kernel_Bps`` (the pair's bus bandwidth) and moved by
    the NIC at the wire bandwidth between nodes ``bus_Bps`` (the level's calibrated Simple
    bus bandwidth) carrying the protocol's wire bytes (:data:`WIRE_BYTES_PER_DATA_BYTE`);
    the kernel reads an arriving step line by line as it lands, but the next send waits for
    the whole step, so a hop costs the slower of the two:

        fill = (2 log2i(N) - 1) * min(nBytes, nCh * chunk) * max(1 / kernel, wire / bus)

    (``kernel_Bps`` ``None``: the wire alone.) A message smaller than one chunk per channel
    is forwarded whole at every hop, so the fill grows with the tree's depth (log2 of the
    node count). Both rates are those of the channels the collective runs on: a small
    collective runs on few of them (``getAlgoInfo``, ``src/enqueue.cc`` L304-312 at
    v2.8.4-1; :func:`channel_fraction`), each channel one CUDA block with its own
    connection, so a hop moves the message at that share of the rates, as the streaming
    term does (:func:`choice_times` passes both rates scaled by the fraction; arrays of
    one rate per size are accepted)."""
    hops = 2 * int(log2i(n_nodes)) - 1
    if hops <= 0:
        return np.zeros(np.shape(nbytes))
    chunk = tree_chunk_bytes(protocol, nbytes, n_ranks, n_nodes, hw.channels) * hw.channels
    per_byte = WIRE_BYTES_PER_DATA_BYTE[protocol] / np.asarray(bus_Bps, dtype=float)
    if kernel_Bps is not None:
        per_byte = np.maximum(per_byte, 1.0 / np.asarray(kernel_Bps, dtype=float))
    return hops * np.minimum(np.asarray(nbytes, dtype=float), chunk) * per_byte


MAX_CHANNELS = 32
"""``MAXCHANNELS`` (2.8.4 ``src/include/devcomm.h`` L49)."""
THREAD_THRESHOLD = {"LL": 8, "LL128": 8, "Simple": 64}
"""Bytes of work per thread before NCCL adds threads and channels (2.8.4
``src/include/comm.h`` L29-31); the ring's LL threshold is multiplied by ``nRanks``
(tuning.cc L235)."""
MAX_THREADS = {"LL": 512, "LL128": 640, "Simple": 512}
"""``NCCL_LL_MAX_NTHREADS``, ``NCCL_LL128_MAX_NTHREADS``, ``NCCL_SIMPLE_MAX_NTHREADS``
(2.8.4 ``devcomm.h`` L50-52, L69); the ring's Simple kernel keeps 256 where its graph's
bus bandwidth is at most ``PCI_WIDTH`` = 12 GB/s (tuning.cc L79-81, ``topo.h`` L19)."""


def runtime_channels(hw: Hardware, n_nodes: int) -> int:
    """``comm->nChannels`` under NCCL 2.8.4: the graphs' common channel count (the derived
    ring graph between nodes, :func:`.graph.nccl_284_graphs`, else ``hw.channels``)
    duplicated once (``ncclTopoPostset``, ``src/graph/connect.cc`` L267 at v2.8.4-1:
    ``min(MAXCHANNELS, 2 * nChannels)``)."""
    graph = nccl_284_graphs(hw, n_nodes)
    base = graph["ring"].n_channels if graph else hw.channels
    return min(MAX_CHANNELS, 2 * base)


def _bytes_per_channel(hw: Hardware, algorithm: str, protocol: str, n_ranks: int,
                       n_nodes: int) -> float:
    threads = MAX_THREADS[protocol]
    if algorithm == "ring" and protocol == "Simple":
        graph = nccl_284_graphs(hw, n_nodes)
        narrow = graph is not None and graph["ring"].bus_GBps(n_nodes) <= 12.0
        threads = 256 if narrow else threads
    return float(threads * THREAD_THRESHOLD[protocol]
                 * (n_ranks if (algorithm == "ring" and protocol == "LL") else 1))


def channel_steps(hw: Hardware, world_size: int) -> np.ndarray:
    """Every size at which :func:`channel_fraction` adds a channel to some (algorithm,
    protocol): where a price may step down as the message grows (:mod:`.envelope`)."""
    n_ranks, n_nodes = layout(world_size, hw.gpus_per_node)
    if hw.nccl_version != "2.8.4" or n_ranks <= 1:
        return np.zeros(0)
    ks = np.arange(2, runtime_channels(hw, n_nodes) + 1, dtype=float)
    return np.unique(np.concatenate([
        ks * _bytes_per_channel(hw, a, p, n_ranks, n_nodes) for a, p in CHOICES]))


def channel_fraction(hw: Hardware, algorithm: str, protocol: str, nbytes: np.ndarray,
                     n_ranks: int, n_nodes: int, speedup: float = 1.0) -> np.ndarray:
    """The share of its channels a collective of ``nbytes`` runs on under NCCL 2.8.4.

    Once the algorithm and protocol are chosen, ``getAlgoInfo`` (``src/enqueue.cc`` L304-312
    at v2.8.4-1) drops channels one by one while ``nBytes < nc * nt * threshold``
    (:data:`THREAD_THRESHOLD`, :data:`MAX_THREADS`), then halves the threads. Each channel is
    one CUDA block with its own connections (and, between nodes, its own network requests),
    so a collective on ``nc`` of ``NC`` channels moves data at ``nc / NC`` of the full rate,
    as NCCL's own estimate scales it when the channel count is fixed (``bw / comm->nChannels *
    info->nChannels``, tuning.cc L279) -- unless the channels share a bottleneck (the NICs,
    the PCIe path, the proxy thread), in which case one channel alone runs faster than its
    share, as NCCL's per-channel caps (``perChMaxTreeBws``, ``ll128MaxBwPerCh``, tuning.cc
    L74-76) bound a channel below the level's rate: ``min(1, speedup * nc / NC)`` with
    ``speedup >= 1`` calibrated (:attr:`LevelParams.channel_speedup`). Thread halving is not
    priced (the per-channel rate does not depend on it where the ABCI V100 2-node sweep runs
    on one channel: its 4-32 KiB points lie on one line, 27 us + size / 1.6 GB/s). 1 for
    other NCCL versions, whose channel logic was not read here."""
    m = np.asarray(nbytes, dtype=float)
    if hw.nccl_version != "2.8.4":
        return np.ones(m.shape)
    total = runtime_channels(hw, n_nodes)
    per_channel = _bytes_per_channel(hw, algorithm, protocol, n_ranks, n_nodes)
    used = np.clip(np.floor(m / per_channel), 1, total)
    return np.minimum(1.0, speedup * used / total)


RING_STEPS = {"all_reduce": 2, "reduce_scatter": 1, "all_gather": 1}


@dataclass(frozen=True)
class LevelParams:
    """What differs between one machine and the next at one level (inside a node, or between
    nodes): the bus bandwidth of the graph NCCL builds (``nChannels * bw``, bytes/s, before
    the protocol refinements), the base latency of each protocol (seconds; NCCL's
    ``baseLat``, the same for ring and tree once calibrated) and how far LL and LL128 reach
    NCCL's own efficiency factors (1 = as tuning.cc L327-335 says; both ring and tree), and
    how much faster than its share of the level one channel runs when NCCL runs a small
    collective on few channels (:func:`channel_fraction`; 1 = exactly its share)."""

    busbw_Bps: float
    base_latency_s: tuple[float, float, float]
    protocol_efficiency: tuple[float, float] = (1.0, 1.0)
    channel_speedup: float = 1.0

    def __post_init__(self) -> None:
        if len(self.protocol_efficiency) != 2 or not all(
                np.isfinite(v) and v > 0 for v in self.protocol_efficiency):
            raise ConfigError("protocol efficiencies: two numbers > 0 (LL, LL128), got "
                              f"{self.protocol_efficiency}")
        if not (np.isfinite(self.channel_speedup) and self.channel_speedup >= 1.0):
            raise ConfigError(f"channel speedup must be >= 1, got {self.channel_speedup}")
        if not (np.isfinite(self.busbw_Bps) and self.busbw_Bps > 0):
            raise ConfigError(f"bus bandwidth must be > 0 bytes/s, got {self.busbw_Bps}")
        if len(self.base_latency_s) != 3 or not all(
                np.isfinite(v) and v >= 0 for v in self.base_latency_s):
            raise ConfigError("base latencies: three finite numbers >= 0 (LL, LL128, Simple) "
                              f"seconds, got {self.base_latency_s}")


@dataclass(frozen=True)
class Params:
    """The inputs of the tuning model: the two levels, and a per-doubling slowdown of the
    inter-node bandwidth with the node count (:mod:`.fabric`; 0 = none) from
    ``fabric_ref_nodes`` on, none on at most ``fabric_free_nodes`` nodes (a full-bisection
    domain of the machine, :attr:`.hardware.Hardware.full_bisection_nodes`; 0 = unknown)."""

    intra: LevelParams
    inter: LevelParams
    fabric_per_doubling: float = 0.0
    fabric_ref_nodes: int = 2
    fabric_free_nodes: int = 0

    def inter_busbw_Bps(self, n_nodes: int) -> float:
        """The inter-node bus bandwidth at ``n_nodes`` (:func:`.fabric.slowdown`): the
        fitted one inside a full-bisection domain, where no link is oversubscribed, and
        beyond it slowed per doubling from the larger of the domain and the fitted scale."""
        if n_nodes <= self.fabric_free_nodes:
            return self.inter.busbw_Bps
        ref = max(self.fabric_ref_nodes, self.fabric_free_nodes)
        return self.inter.busbw_Bps / slowdown(n_nodes, ref, self.fabric_per_doubling)


def nccl_default_params(hw: Hardware) -> Params:
    """NCCL's own inputs for ``hw``: ``baseLat`` (the ring row; :func:`latency_s` adds the
    tree's difference) and bus bandwidths equal to the links' rates (NVLink per GPU inside a
    node, the node's NICs together between nodes)."""
    base = tuple(v * _US for v in constants_for(hw.nccl_version).base_latency_us["ring"])
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
                      protocol: str, n_ranks: int, n_nodes: int, graphs: bool = False) -> float:
    """NCCL's ``bandwidths[coll][a][p]`` (bytes/s, already algorithm bandwidth): the model
    refinements and the bus -> algorithm ratio of :mod:`.constants` (current: tuning.cc
    L304, L326-336, L376-382). 0 where the pair is not used. ``graphs``: between nodes, take
    the bus bandwidth and channel count of each algorithm's own graph as NCCL derives them
    (:func:`.graph.nccl_284_graphs`, tuning.cc L120-121 at 2.8.4) instead of ``params`` and
    ``hw.channels``, where that derivation applies.

    The fabric slowdown (:mod:`.fabric`, :meth:`Params.inter_busbw_Bps`) slows the wire
    between nodes, not the GPU's kernels: a protocol's rate is the lesser of its own rate at
    the reference scale (the refinements above) and what the slowed wire carries of its
    data, the wire's rate over the protocol's wire bytes per data byte
    (:data:`WIRE_BYTES_PER_DATA_BYTE`: 2 for LL, 16/15 for LL128, 1 for Simple). Simple
    fills the wire and slows with it; LL, whose flag-per-8-bytes lines cap it near a
    quarter of the wire (ring, tuning.cc L124 at v2.8.4-1), slows only once the wire's half
    falls below that."""
    if algorithm == "tree" and collective != "all_reduce":
        return 0.0
    if protocol == "LL128" and not hw.ll128_at(n_nodes):
        return 0.0
    k = constants_for(hw.nccl_version)
    gen = k.gen_row(hw.generation)
    i2 = _index2(n_nodes)
    graph = nccl_284_graphs(hw, n_nodes) if graphs else None
    n_ch = graph[algorithm].n_channels if graph else hw.channels
    ll_row = gen if n_nodes == 1 else (1 if hw.cpu_vendor == "amd" else 0)
    ll_max = k.ll_max_bw[ll_row][i2] * _GB
    level = params.intra if n_nodes == 1 else params.inter
    bus = level.busbw_Bps
    if graph:
        bus = graph[algorithm].bus_GBps(n_nodes) * _GB
    if k.ampere_busbw_cap_gbps is not None and hw.generation == "ampere":
        bus = min(bus, k.ampere_busbw_cap_gbps * _GB)
    if protocol != "Simple":
        bus *= level.protocol_efficiency[PROTOCOLS.index(protocol)]
    one_per_node = n_ranks == n_nodes
    if k.ll128_cap_per_ch_by_coll is not None:
        ll128_cap = k.ll128_cap_per_ch_by_coll[collective if collective != "p2p"
                                               else "broadcast"] * n_ch * _GB
        tree_ll128_cap = ll128_cap
    else:
        assert k.ring_ll128_cap_per_ch is not None and k.tree_ll128_cap_per_ch is not None
        ll128_cap = k.ring_ll128_cap_per_ch[gen][i2] * n_ch * _GB
        tree_ll128_cap = k.tree_ll128_cap_per_ch[gen][i2] * n_ch * _GB
    if algorithm == "ring" and protocol == "LL":
        factor = k.ring_ll_factor if (n_nodes > 1 or collective in ("all_reduce", "reduce")) \
            else k.ring_ll_factor_other
        bus = min(ll_max, bus * factor)
    if algorithm == "ring" and protocol == "LL128":
        bus = min(bus * (k.ring_ll128_factor_one_gpu_per_node if one_per_node else 0.92),
                  ll128_cap)
    if algorithm == "tree":
        bus = min(bus * 0.92, n_ch * k.tree_cap_per_ch[gen][i2] * _GB)
        if protocol == "LL":
            bus = min(bus / 3.8, ll_max)
        if protocol == "LL128":
            bus = min(bus * (7.0 / 9.0 if n_nodes == 1 else k.tree_ll128_factor_multi),
                      tree_ll128_cap)
    if n_nodes > 1 and not graph:
        bus = min(bus, params.inter_busbw_Bps(n_nodes) / WIRE_BYTES_PER_DATA_BYTE[protocol])
    if algorithm == "tree":
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
    """NCCL's ``latencies[coll][a][p]`` (seconds), with the calibrated base latency
    (current: tuning.cc L384-417; 2.8.4: L137-159)."""
    k = constants_for(hw.nccl_version)
    p = PROTOCOLS.index(protocol)
    level = params.intra if n_nodes == 1 else params.inter
    # the calibrated base latency is the ring's; the tree keeps NCCL's difference to it
    lat = level.base_latency_s[p] / _US + (k.base_latency_us[algorithm][p]
                                           - k.base_latency_us["ring"][p])
    intra_kind = "nvlink" if hw.intra_link == "nvlink" else "pci"
    intra_lat = k.hw_latency_us[intra_kind][algorithm][p]
    if n_nodes > 1 and protocol == "LL":
        intra_lat *= k.ll_intra_latency_multi
    ppn = n_ranks / n_nodes
    net_algo = "tree" if (ppn == 1 and k.version != "2.8.4") else algorithm
    inter_lat = k.hw_latency_us["net"][net_algo][p]
    nsteps = _nsteps(collective, n_ranks)
    if algorithm == "tree":
        lat += 2 * ((n_ranks // n_nodes - 1) * intra_lat + int(log2i(n_nodes)) * inter_lat)
    elif collective in ("broadcast", "reduce", "p2p"):
        kind = intra_kind if n_nodes == 1 else "net"
        hop = k.hw_latency_us[kind]["tree" if protocol == "Simple" else "ring"][p]
        lat += nsteps * hop
    else:
        overhead = 0.0
        if n_nodes > 1:
            overhead = k.net_overhead_us * (3.0 if protocol == "Simple" else 1.0)
        intra_lat = max(intra_lat, overhead)
        n_inter = 0 if n_nodes == 1 else RING_STEPS[collective] * (n_nodes - 1)
        lat += (nsteps - n_inter) * intra_lat + n_inter * inter_lat
    return lat * _US


def choice_times(hw: Hardware, params: Params, collective: str, nbytes: np.ndarray,
                 world_size: int, priced: bool = False, graphs: bool = False) -> np.ndarray:
    """Seconds of every (algorithm, protocol) of :data:`CHOICES` (rows) at every size
    (columns); ``inf`` where NCCL does not use the pair (tuning.cc L628-654). ``priced``
    adds what a run pays and NCCL's estimate leaves out (:func:`tree_fill_s`, the channels
    a small collective runs on, :func:`channel_fraction`); ``graphs``
    as in :func:`bus_bandwidth_Bps`."""
    m = np.asarray(nbytes, dtype=float)
    n_ranks, n_nodes = layout(world_size, hw.gpus_per_node)
    out = np.full((len(CHOICES), m.size), np.inf)
    if n_ranks <= 1:
        return np.zeros((len(CHOICES), m.size))
    k = constants_for(hw.nccl_version)
    log_size = log2i(np.floor(np.maximum(m, 0.0) / 64.0).astype(np.int64))
    for row, (algorithm, protocol) in enumerate(CHOICES):
        bw = bus_bandwidth_Bps(hw, params, collective, algorithm, protocol, n_ranks, n_nodes,
                               graphs)
        if bw <= 0:
            continue
        lat = latency_s(hw, params, collective, algorithm, protocol, n_ranks, n_nodes)
        bw_arr = np.full(m.shape, bw)
        lat_arr = np.full(m.shape, lat)
        if algorithm == "tree":
            table = np.asarray(k.tree_correction[PROTOCOLS.index(protocol)])
            small = (log_size < 23) & ((m >= 64) | (k.version == "2.8.4"))
            bw_arr[small] *= table[log_size[small]]
        if (algorithm == "ring" and protocol == "Simple" and n_nodes > 1
                and collective == "all_reduce"):
            if k.plateau_rule == "ranks16":
                plateau = m >= n_ranks / 16.0 * 65536.0
            else:
                plateau = np.floor(m / (hw.channels * n_ranks)) >= 64
            lat_arr[plateau] *= (k.plateau_factor_volta if hw.generation == "volta"
                                 else k.plateau_factor_ampere)
        frac = np.ones(m.shape)
        if priced:
            level = params.intra if n_nodes == 1 else params.inter
            frac = channel_fraction(hw, algorithm, protocol, m, n_ranks, n_nodes,
                                    level.channel_speedup)
            bw_arr *= frac
        out[row] = lat_arr + m / bw_arr
        if priced and algorithm == "tree" and n_nodes > 1:
            out[row] += tree_fill_s(hw, protocol, m, n_ranks, n_nodes,
                                    params.inter_busbw_Bps(n_nodes) * frac, 2.0 * bw * frac)
    return out


def select(hw: Hardware, params: Params, collective: str, nbytes: np.ndarray,
           world_size: int, chooser: Params | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(seconds, index into :data:`CHOICES`) at each size of the pair NCCL picks: the
    minimum of ``ncclTopoGetAlgoTime`` over algorithms and protocols (tuning.cc L628-654)
    under ``chooser`` (when ``None``: NCCL's own constants for ``hw``,
    :func:`nccl_default_params`, and between nodes the ring and tree graphs NCCL 2.8.4 builds
    on ``hw``, :func:`.graph.nccl_284_graphs`), priced with ``params``. NCCL chooses with its
    built-in constants and its topology search, not with what the machine really does, so a
    calibrated model must not re-choose."""
    ranked = choice_times(hw, chooser or nccl_default_params(hw), collective, nbytes,
                          world_size, graphs=chooser is None)
    idx = np.argmin(ranked, axis=0)
    stack = choice_times(hw, params, collective, nbytes, world_size, priced=True)
    return np.take_along_axis(stack, idx[None, :], axis=0)[0], idx
