"""The graphs NCCL 2.8.4's topology search builds on the two ABCI node types, and the choice
they drive (the expected numbers are the search of ``src/graph/search.cc`` at v2.8.4-1 run
by hand in :mod:`gradsched.costmodel.nccl.graph`'s docstring)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from gradsched.costmodel.nccl.graph import TopoGraph, nccl_284_graphs
from gradsched.costmodel.nccl.hardware import PRESETS
from gradsched.costmodel.nccl.tuning import CHOICES, choice_times, nccl_default_params

A100, V100, H100 = PRESETS["abci-a100"], PRESETS["abci-v100"], PRESETS["h100-8x400g"]


def test_a100_node_one_channel_per_hdr_nic_at_pcie_gen4_speed() -> None:
    # maxWidth min(PCIe Gen4 24, HDR 25) = 24; a NET's width 25 holds one channel of 24;
    # 12 GB/s gives 8 x 12 = 96, not more than 4 x 24, so 4 channels stay
    for n_nodes in (2, 4, 16):
        g = nccl_284_graphs(A100, n_nodes)
        assert g is not None
        assert g["ring"] == TopoGraph(4, 24.0, 24.0)
        # pass 2 raises the tree's speedIntra to 42 (< 2 x 24): used only on two nodes
        assert g["tree"] == TopoGraph(4, 42.0, 24.0)
    assert nccl_284_graphs(A100, 2)["tree"].bus_GBps(2) == 168.0
    assert nccl_284_graphs(A100, 4)["tree"].bus_GBps(4) == 96.0


def test_v100_two_node_tree_loses_an_eighth_of_its_pcie_link_to_the_way_in() -> None:
    # ring: min(PCIe Gen3 12, EDR 12.5) = 12, one channel per NIC
    g2, g4 = nccl_284_graphs(V100, 2), nccl_284_graphs(V100, 4)
    assert g2 is not None and g4 is not None
    assert g2["ring"] == g4["ring"] == TopoGraph(2, 12.0, 12.0)
    # two nodes: the tree enters and leaves one GPU, whose link (12) carries s + s/8: 12 fails,
    # 10 fits; pass 2 raises speedIntra to 21 (the last step below 2 x 10)
    assert g2["tree"] == TopoGraph(2, 21.0, 10.0)
    # more nodes: the split tree leaves from a second GPU, so 12 fits; speedIntra to 24
    assert g4["tree"] == TopoGraph(2, 24.0, 12.0)
    # without Volta's reverse-traffic rule the two-node tree would keep 12
    no_volta = nccl_284_graphs(replace(V100, generation="ampere"), 2)
    assert no_volta is not None and no_volta["tree"].speed_inter_GBps == 12.0


def test_derivation_applies_only_to_nccl_2_8_4_between_nodes() -> None:
    assert nccl_284_graphs(A100, 1) is None
    assert nccl_284_graphs(H100, 4) is None
    assert nccl_284_graphs(replace(A100, nccl_version="current"), 4) is None


def test_ll128_follows_2_8_4s_volta_or_ampere_rule() -> None:
    assert A100.ll128 and V100.ll128
    assert not replace(H100, nccl_version="2.8.4").ll128
    assert H100.ll128


def _choice(hw, nbytes: float, world_size: int, graphs: bool) -> tuple[str, str]:
    times = choice_times(hw, nccl_default_params(hw), "all_reduce", np.array([nbytes]),
                         world_size, graphs=graphs)
    return CHOICES[int(np.argmin(times[:, 0]))]


def test_the_derived_four_channels_cap_the_a100_tree_so_nccl_picks_the_ring() -> None:
    # 8 nodes, 32 MiB: the tree's bus bandwidth is min(0.92 x 96, 4 x 16) = 64 GB/s with
    # NCCL's 4 channels (92 with the 8 assumed before), so the ring with LL128 wins
    assert _choice(A100, 2.0**25, 64, graphs=True) == ("ring", "LL128")
    assert _choice(A100, 2.0**25, 64, graphs=False) == ("tree", "LL128")
    # the current-NCCL machine is untouched
    assert _choice(H100, 2.0**25, 64, graphs=True) == _choice(H100, 2.0**25, 64, graphs=False)


def test_no_derived_graph_where_the_nic_is_not_pcie_switch_close() -> None:
    # the derivation assumes the NIC on the GPUs' PCIe switch (typeInter <= PATH_PXB); a
    # machine without it (no LL128 between nodes) falls back to the links' rates
    assert nccl_284_graphs(V100, 4) is not None
    assert nccl_284_graphs(replace(V100, net_ll128=False), 4) is None
