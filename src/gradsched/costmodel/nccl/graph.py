"""The channel graphs NCCL 2.8.4 builds between nodes, from which it *chooses* the algorithm
and protocol: ``nChannels``, ``speedIntra`` and ``speedInter`` of the ring and tree graphs.

A derivation (not a measurement, no NCCL log of the ABCI runs exists): ``ncclTopoCompute``
(``src/graph/search.cc`` at tag v2.8.4-1, commit 911d61f2) run by hand on a node whose NICs
each sit on a PCIe switch shared with ``gpus_per_node / nics_per_node`` GPUs, with GPU Direct
RDMA (the NIC-GPU path PIX or PXB, so the graphs' ``typeInter <= PATH_PXB``). The link widths
are 2.8.4's (GB/s): NVLink ``SM70_NVLINK_WIDTH`` = ``SM80_NVLINK_WIDTH`` = 21 per link
(``src/graph/topo.h`` L15-19, ``ncclTopoNVLinkSpeed`` L87-94, aggregated per peer in
``topo.cc`` L452-455), PCIe ``width * speed / 80`` with 8 GT/s -> 60, 16 GT/s -> 120 and
anything newer falling back to 60 (``topo.cc`` L310, L355-364: Gen3 x16 12, Gen4 x16 24), the
network port ``speed_Mbps / 8000`` (``topo.cc`` L274-276: EDR 12.5, HDR 25).

Search (``search.cc``):

* start speed: the largest of ``speedArray`` (L651) not above ``maxWidth``, the widest
  GPU -> NET path (L13-24, L34-48, L690): ``min(PCIe, NET)``;
* a channel starts at a NET whose ``net.width`` (decremented by the *integer* speed per
  channel, L397-412) still holds the speed, and each link on its paths must hold it
  (``followPath`` L65-100); on Volta a NET -> GPU transfer also takes 1/8 of the speed from
  the GPU's link back (L85-88);
* ring (L478): NET n -> GPU a .. GPU x -> NET n; the tree between more than two nodes
  (init.cc L652, search.cc L679-682: BALANCED_TREE from Ampere on, SPLIT_TREE before)
  enters one GPU and leaves from a second one (balanced: half the speed from each of two,
  L341-349), so on these nodes it gets the ring's channels; the tree between two nodes
  (TREE) enters and leaves the same GPU (L338), whose PCIe link then carries the speed out
  plus, on Volta, 1/8 of it for the way in;
* a lower speed is kept only where ``nChannels * speedIntra`` is strictly larger (L293-306,
  L756: tried down to 0.49 of the found speed); the search stops at ``maxChannels`` (16 for
  the ring, the ring's count for the tree, init.cc L646, L656);
* pass 2 raises a tree's ``speedIntra`` along ``speedArray`` while it stays below twice
  ``speedInter`` and the NVLink hops hold it (L778-788);
* a graph with ``speedIntra >= 25`` is duplicated (L799-806);
* the tree and ring then share ``min(nChannels)`` (init.cc L694-695, L744).

``ncclTopoTuneModel`` (tuning.cc L120-121) prices each algorithm with ``nChannels *
speedIntra`` on up to two nodes and ``nChannels * speedInter`` beyond.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from gradsched.costmodel.nccl.hardware import Hardware

SPEED_ARRAY: tuple[float, ...] = (42.0, 30.0, 24.0, 21.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0,
                                  6.0, 5.0, 4.0, 3.0, 2.4, 1.2, 0.24, 0.12)
"""``speedArray`` of search.cc L651 (v2.8.4-1), GB/s."""
NVLINK_WIDTH_284 = 21.0
"""GB/s per NVLink for SM70 and SM80 (topo.h L16-17)."""
PCI_WIDTH_284: dict[str, float] = {"volta": 12.0, "ampere": 24.0, "hopper": 12.0,
                                   "blackwell": 12.0}
"""x16 PCIe width by GPU generation: Gen3 (8 GT/s -> 60), Gen4 (16 GT/s -> 120); Gen5 and
later are not in 2.8.4's ``kvDictPciGen`` and fall back to 60 (topo.cc L310, L363)."""
RING_MAX_CHANNELS = 16
"""``MAXCHANNELS/2`` (init.cc L646; MAXCHANNELS is 32)."""
_NVLINK_LINE_BPS = 25e9
"""Line rate of one NVLink 2/3 link per direction, to count a GPU's links from its rate."""


@dataclass(frozen=True)
class TopoGraph:
    """One graph as ``ncclTopoTuneModel`` reads it."""

    n_channels: int
    speed_intra_GBps: float
    speed_inter_GBps: float

    def bus_GBps(self, n_nodes: int) -> float:
        """``nChannels * speed`` (tuning.cc L120-121)."""
        return self.n_channels * (self.speed_intra_GBps if n_nodes <= 2
                                  else self.speed_inter_GBps)


def _net_channels(net_width: float, speed: float) -> int:
    """Channels a NET starts at ``speed``: ``net.width`` must hold the speed and drops by its
    integer part per channel (search.cc L397-412)."""
    step = float(int(speed))
    if step <= 0:
        return 0
    k, width = 0, net_width
    while width >= speed and k < RING_MAX_CHANNELS:
        k, width = k + 1, width - step
    return k


def _per_nic(hw: Hardware, speed: float, same_gpu: bool) -> int:
    """Channels one NIC (and its PCIe switch) carries at ``speed``: the NET's own count, the
    NIC-switch link, the NIC's port each way, and the GPUs' links (``same_gpu``: the channel
    leaves from the GPU it entered, which then carries ``speed`` out plus Volta's 1/8 back)."""
    pci = PCI_WIDTH_284[hw.generation]
    net = hw.nic_Bps / 1e9
    rev = 1.0 / 8.0 if hw.generation == "volta" else 0.0
    gpus = max(1, hw.gpus_per_node // hw.nics_per_node)
    k = min(_net_channels(net, speed), math.floor(pci / speed + 1e-9),
            math.floor(net / speed + 1e-9))
    if same_gpu:
        per_gpu = math.floor(pci / (speed * (1.0 + rev)) + 1e-9)
        k = min(k, gpus * per_gpu)
    elif gpus < 2:
        return 0  # entering and leaving GPU must differ under one switch (not derived here)
    return max(k, 0)


def _nvlink_hop_GBps(hw: Hardware) -> float:
    """Width of one NVLink hop between two GPUs of the node in 2.8.4: all of a GPU's links
    through the NVSwitch (8-GPU boards from Ampere on), else its links shared evenly among the
    other GPUs (4-GPU V100 boards: 2 links per pair)."""
    links = max(1, round(hw.intra_Bps / _NVLINK_LINE_BPS))
    if hw.generation != "volta" and hw.gpus_per_node == 8:
        return links * NVLINK_WIDTH_284
    return max(1, links // max(1, hw.gpus_per_node - 1)) * NVLINK_WIDTH_284


def _search(hw: Hardware, same_gpu: bool, max_channels: int) -> tuple[int, float]:
    """(nChannels, speed) of pass 1 (search.cc L687-764)."""
    max_width = min(PCI_WIDTH_284[hw.generation], hw.nic_Bps / 1e9)
    speeds = [s for s in SPEED_ARRAY if s <= max_width] or [SPEED_ARRAY[-1]]
    best_n, best_s = 0, 0.0
    for s in speeds:
        if best_n and s / best_s <= 0.49:
            break
        n = min(max_channels, hw.nics_per_node * _per_nic(hw, s, same_gpu))
        if n and n * s > best_n * best_s:
            best_n, best_s = n, s
        if best_n == max_channels:
            break  # time = -1: optimal (L320, L712)
    if best_n == 0:
        return 1, 0.1  # the simple-order fallback of L790-797
    return best_n, best_s


def _raise_intra(hw: Hardware, n_channels: int, speed_inter: float) -> float:
    """Pass 2 for trees (L778-788): ``speedIntra`` up ``speedArray`` while below twice
    ``speedInter`` and the NVLink hops hold ``nChannels`` chains."""
    hop = _nvlink_hop_GBps(hw)
    switch = hw.generation != "volta" and hw.gpus_per_node == 8
    intra = speed_inter
    idx = SPEED_ARRAY.index(speed_inter) if speed_inter in SPEED_ARRAY else len(SPEED_ARRAY)
    while intra < 2 * speed_inter and idx > 0:
        idx -= 1
        trial = SPEED_ARRAY[idx]
        fits = n_channels * trial <= hop if switch else trial <= hop
        if not fits:
            break
        intra = trial
    return intra


def _dup(graph: TopoGraph, max_channels: int) -> TopoGraph:
    """L799-806: a graph at ``speedIntra >= 25`` gets twice the channels at a fraction of the
    speed."""
    if graph.speed_intra_GBps < 25.0:
        return graph
    dup = min(graph.n_channels * 2, max_channels)
    div = -(-dup // graph.n_channels)
    return TopoGraph(dup, graph.speed_intra_GBps / div, graph.speed_inter_GBps / div)


@lru_cache(maxsize=256)
def nccl_284_graphs(hw: Hardware, n_nodes: int) -> dict[str, TopoGraph] | None:
    """The ring and tree graphs NCCL 2.8.4 builds for ``n_nodes > 1`` nodes of ``hw`` (see the
    module docstring); ``None`` where this derivation does not apply (another NCCL version,
    one node, no NVLink, fewer than two GPUs per NIC, or a NIC that is not PCIe-switch close
    to the GPUs, :attr:`.hardware.Hardware.net_ll128` false: the search then runs on paths
    through the CPU, which this derivation does not cover)."""
    if hw.nccl_version != "2.8.4" or n_nodes <= 1 or hw.intra_link != "nvlink" or \
            hw.gpus_per_node < 2 * hw.nics_per_node or not hw.net_ll128:
        return None
    ring_n, ring_s = _search(hw, same_gpu=False, max_channels=RING_MAX_CHANNELS)
    ring = _dup(TopoGraph(ring_n, ring_s, ring_s), RING_MAX_CHANNELS)
    tree_n, tree_s = _search(hw, same_gpu=n_nodes <= 2, max_channels=ring.n_channels)
    tree = _dup(TopoGraph(tree_n, _raise_intra(hw, tree_n, tree_s), tree_s), ring.n_channels)
    n = min(ring.n_channels, tree.n_channels)
    return {"ring": TopoGraph(n, ring.speed_intra_GBps, ring.speed_inter_GBps),
            "tree": TopoGraph(n, tree.speed_intra_GBps, tree.speed_inter_GBps)}


__all__ = ["SPEED_ARRAY", "TopoGraph", "nccl_284_graphs"]
