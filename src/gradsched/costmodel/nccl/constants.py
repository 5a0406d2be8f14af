"""NCCL's tuner constants and model switches, per NCCL version: the numbers :mod:`.tuning`
reads.

Two versions, each read from NVIDIA/nccl ``src/graph/tuning.cc``:

* ``2.8.4`` (tag v2.8.4-1, commit 911d61f214d45c98df1ee8c0ac23c33fb94b63de): the NCCL the
  ABCI sweeps were measured with (their logs' setup lines). ``baseLat`` L56, ``hwLat``
  L63-70, ``ll128MaxBwPerCh`` L74, ``llMaxBws`` / ``perChMaxTreeBws`` L75-76, the model
  refinements L124-133 (Ampere bus bandwidth capped at 235 GB/s; ring LL at 1/4 of the bus
  bandwidth between nodes and for all-reduce, else 1/3; LL128 at 0.92, or 0.7 with one GPU
  per node; tree at 0.92, LL 1/3.8, LL128 0.915 between nodes), the LL intra-node latency x1.8
  between nodes L141, ``treeCorrectionFactor`` L265-269, the ring plateau (latency x1.9 once
  ``nBytes >= nRanks / 16 * 64 KiB``) L280-281.
* ``current`` (master, commit 5067397c2676d5aed50042fc39e5c8ee96eb0027): ``baseLatencies``
  L149-155, ``hwLatencies`` L156-176, ``llMaxBws`` L177-183, the per-channel caps L184-204,
  the network overhead L228-233 and L404-410, the refinements L326-336,
  ``treeCorrectionFactor`` L623-627, the plateau (x1.4 from Ampere on, x1.9 before, once a
  channel's share reaches 64 bytes) L647-650. PyTorch Inductor's port
  (``torch/_inductor/comm_analysis.py``, torch 2.14.1) follows this version.

Rows of the per-generation tables: Volta, Ampere, Hopper, Blackwell (2.8.4 knows Volta and
Ampere: later GPUs read its Volta row, as its ``compCap80`` test does); columns: 1 node, 2
nodes, more.
"""

from __future__ import annotations

from dataclasses import dataclass

from gradsched.errors import ConfigError

Triple = tuple[float, float, float]


@dataclass(frozen=True)
class TunerConstants:
    """One NCCL version's numbers (latencies in us, bandwidths in GB/s)."""

    version: str
    commit: str
    base_latency_us: dict[str, Triple]  # algorithm -> (LL, LL128, Simple)
    hw_latency_us: dict[str, dict[str, Triple]]  # nvlink|pci|net -> algorithm -> protocols
    ll_max_bw: tuple[Triple, ...]  # row: generation on one node; CPU row between nodes
    ring_ll128_cap_per_ch: tuple[Triple, ...] | None  # per generation; None: per collective
    ll128_cap_per_ch_by_coll: dict[str, float] | None
    tree_ll128_cap_per_ch: tuple[Triple, ...] | None
    tree_cap_per_ch: tuple[Triple, ...]
    tree_correction: tuple[tuple[float, ...], ...]  # protocol -> log2(nBytes/64) 0..22
    ring_ll_factor: float  # ring LL between nodes and for all-reduce
    ring_ll_factor_other: float  # ring LL on one node, not all-reduce
    ring_ll128_factor_one_gpu_per_node: float
    tree_ll128_factor_multi: float
    ll_intra_latency_multi: float  # LL intra-node hop latency factor between nodes
    net_overhead_us: float  # per intra step of an inter-node ring, x3 for Simple
    plateau_rule: str  # "ranks16" (2.8.4) or "per-channel" (current)
    plateau_factor_volta: float
    plateau_factor_ampere: float
    ampere_busbw_cap_gbps: float | None

    def gen_row(self, generation: str) -> int:
        """The table row of ``generation``."""
        order = ("volta", "ampere", "hopper", "blackwell")
        if len(self.tree_cap_per_ch) == 2:
            return 1 if generation == "ampere" else 0
        return order.index(generation)


_TREE_LL = (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9,
            1.0, 1.0, 1.0, 1.0)
_TREE_SIMPLE = (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7,
                .7, .8, .9, .9)

NCCL_2_8_4 = TunerConstants(
    version="2.8.4", commit="911d61f214d45c98df1ee8c0ac23c33fb94b63de",
    base_latency_us={"tree": (4.4, 4.4, 0.0), "ring": (3.6, 10.0, 8.4)},
    hw_latency_us={
        "nvlink": {"tree": (.52, 1.25, 28.0), "ring": (.47, 1.9, 3.4)},
        "pci": {"tree": (1.0, 1.9, 28.0), "ring": (1.0, 2.5, 5.7)},
        "net": {"tree": (5.0, 8.5, 28.0), "ring": (2.7, 4.0, 9.6)},
    },
    ll_max_bw=((39.0, 39.0, 20.4), (87.7, 22.5, 19.0)),
    ring_ll128_cap_per_ch=None,
    ll128_cap_per_ch_by_coll={"broadcast": 18.8, "reduce": 12.0, "all_gather": 18.3,
                              "reduce_scatter": 15.2, "all_reduce": 16.9},
    tree_ll128_cap_per_ch=None,
    tree_cap_per_ch=((26.5, 18.5, 10.0), (24.0, 22.5, 16.0)),
    tree_correction=(_TREE_LL,
                     (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .5, .6, .6, .7,
                      .7, .8, .9, .9, .92, .92),
                     _TREE_SIMPLE),
    ring_ll_factor=1.0 / 4.0, ring_ll_factor_other=1.0 / 3.0,
    ring_ll128_factor_one_gpu_per_node=0.7, tree_ll128_factor_multi=0.915,
    ll_intra_latency_multi=1.8, net_overhead_us=0.0,
    plateau_rule="ranks16", plateau_factor_volta=1.9, plateau_factor_ampere=1.9,
    ampere_busbw_cap_gbps=235.0,
)

NCCL_CURRENT = TunerConstants(
    version="current", commit="5067397c2676d5aed50042fc39e5c8ee96eb0027",
    base_latency_us={"tree": (6.8, 14.0, 8.4), "ring": (6.6, 14.0, 8.4)},
    hw_latency_us={
        "nvlink": {"tree": (0.6, 1.25, 4.0), "ring": (0.6, 1.9, 3.4)},
        "pci": {"tree": (1.0, 1.9, 4.0), "ring": (1.0, 2.5, 5.7)},
        "net": {"tree": (5.0, 8.5, 14.0), "ring": (2.7, 4.0, 14.0)},
    },
    ll_max_bw=((39.0, 39.0, 20.4), (87.7, 22.5, 19.0), (141.0, 45.0, 35.0),
               (282.0, 90.0, 70.0)),
    ring_ll128_cap_per_ch=((20.0, 20.0, 20.0), (20.0, 20.0, 20.0), (36.7, 36.7, 36.7),
                           (40.0, 40.0, 40.0)),
    ll128_cap_per_ch_by_coll=None,
    tree_ll128_cap_per_ch=((20.0, 20.0, 20.0), (20.0, 20.0, 20.0), (36.7, 36.7, 29.0),
                           (55.6, 31.67, 20.0)),
    tree_cap_per_ch=((26.5, 18.5, 10.0), (24.0, 23.6, 17.8), (38.7, 41.4, 36.0),
                     (70.0, 42.8, 24.0)),
    tree_correction=(_TREE_LL,
                     (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8,
                      .9, .9, .9, .9, 1.0, 1.0),
                     _TREE_SIMPLE),
    ring_ll_factor=0.5, ring_ll_factor_other=0.5,
    ring_ll128_factor_one_gpu_per_node=0.92, tree_ll128_factor_multi=120.0 / 128.0,
    ll_intra_latency_multi=1.0, net_overhead_us=1.0,
    plateau_rule="per-channel", plateau_factor_volta=1.9, plateau_factor_ampere=1.4,
    ampere_busbw_cap_gbps=None,
)

VERSIONS: dict[str, TunerConstants] = {"2.8.4": NCCL_2_8_4, "current": NCCL_CURRENT}
"""``Hardware.nccl_version`` -> its constants."""


def constants_for(version: str) -> TunerConstants:
    """The constants of NCCL ``version`` (``2.8.4`` or ``current``)."""
    if version not in VERSIONS:
        raise ConfigError(f"NCCL version {version!r}: known {', '.join(VERSIONS)}")
    return VERSIONS[version]
