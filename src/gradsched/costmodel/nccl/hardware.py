"""The two-level machine NCCL runs on: R GPUs per node joined by NVLink/NVSwitch or PCIe, and
the nodes' NICs between them.

The fields are what :mod:`.tuning` reads from NCCL's topology (``graphs[a]->typeIntra``,
``nChannels``, the GPU generation, the CPU vendor) plus the line rates that bound the bus
bandwidth. Line rates are per direction, from the vendors' specifications: NVLink 2 (V100,
6 links x 25 GB/s), NVLink 3 (A100, 12 x 25 GB/s), NVLink 4 (H100, 18 x 25 GB/s), NVLink 5
(B200, 18 x 50 GB/s); InfiniBand EDR 100, HDR 200, NDR 400 Gbit/s per port. ``channels`` is
NCCL's ring count, which its topology search picks at run time; the default per generation
is PyTorch Inductor's heuristic (``torch/_inductor/comm_analysis.py``, ``_GPU_NCHANNELS``,
torch 2.14.1): Volta 2, Ampere 8, Hopper 16, Blackwell 32. It only enters through the per-channel
bandwidth caps and the ring plateau threshold of tuning.cc L647-650.
Under NCCL 2.8.4 between nodes the *choice* does not read ``channels`` or the line rates: it
reads the graphs that version's topology search builds on the node (:mod:`.graph`: ABCI A100
4 channels x 24 GB/s, V100 2 x 12); the price still does.

NVLink SHARP (NVLS, Hopper and later with NVSwitch) and CollNet (in-network reduction) are
recorded (``nvls``, ``collnet``) but not priced: where a machine has them NCCL may pick them
and the ring/tree time here is an upper bound; :meth:`Hardware.notes` says so.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

from gradsched.errors import ConfigError, InputError

NVLINK_BPS: dict[str, float] = {"volta": 150e9, "ampere": 300e9, "hopper": 450e9,
                                "blackwell": 900e9}
"""Per-GPU NVLink rate per direction (bytes/s) by generation."""
PCIE_BPS = 24e9
"""Effective PCIe rate of a GPU-to-GPU ring step (Inductor's ``_PCIE_INTRA_NODE_BW``)."""
DEFAULT_CHANNELS: dict[str, int] = {"volta": 2, "ampere": 8, "hopper": 16, "blackwell": 32}
IB_GBIT: dict[str, float] = {"EDR": 100.0, "HDR": 200.0, "NDR": 400.0, "XDR": 800.0}

_GENERATION_OF = (("V100", "volta"), ("A100", "ampere"), ("A800", "ampere"),
                  ("H100", "hopper"), ("H200", "hopper"), ("H800", "hopper"),
                  ("GH200", "hopper"), ("B200", "blackwell"), ("GB200", "blackwell"),
                  ("GB300", "blackwell"), ("B300", "blackwell"))


@dataclass(frozen=True)
class Hardware:
    """One node type and its network (see the module docstring)."""

    name: str
    gpus_per_node: int
    generation: str
    intra_link: str  # "nvlink" or "pci"
    intra_Bps: float  # per GPU, per direction
    nics_per_node: int
    nic_Bps: float  # per NIC, per direction
    channels: int
    cpu_vendor: str = "intel"
    nvls: bool = False
    collnet: bool = False
    nccl_version: str = "current"
    net_ll128: bool = True
    """LL128 between nodes: NCCL enables it only where the graph's GPU-NIC path is no
    longer than a PCIe switch hierarchy (``typeInter <= PATH_PXB``, tuning.cc L194 at
    v2.8.4-1, L517-537 at master). Nothing in an nccl-tests log says which path a node has,
    so :func:`.calibrate.calibrate` decides it from the fitted multi-node sweep."""
    full_bisection_nodes: int = 0
    """How many nodes share a full-bisection fabric (a rack's leaf switches under their own
    aggregation switches, whose uplinks above are oversubscribed); 0 = not known. A
    collective on at most that many nodes placed in one such domain meets no oversubscribed
    link, so the fabric slowdown (:mod:`.fabric`) starts above it
    (:meth:`.tuning.Params.inter_busbw_Bps`). Known machines: :data:`FULL_BISECTION_NODES`."""

    def __post_init__(self) -> None:
        if self.nccl_version not in ("2.8.4", "current"):
            raise ConfigError(f"hardware {self.name}: nccl_version must be 2.8.4 or current")
        if self.gpus_per_node < 1:
            raise ConfigError(f"hardware {self.name}: gpus_per_node must be >= 1")
        if self.generation not in NVLINK_BPS:
            raise ConfigError(f"hardware {self.name}: generation {self.generation!r}; known: "
                              f"{', '.join(NVLINK_BPS)}")
        if self.intra_link not in ("nvlink", "pci"):
            raise ConfigError(f"hardware {self.name}: intra_link must be nvlink or pci")
        if self.cpu_vendor not in ("intel", "amd"):
            raise ConfigError(f"hardware {self.name}: cpu_vendor must be intel or amd")
        for field in ("intra_Bps", "nic_Bps"):
            if not getattr(self, field) > 0:
                raise ConfigError(f"hardware {self.name}: {field} must be > 0")
        if self.nics_per_node < 1 or self.channels < 1:
            raise ConfigError(f"hardware {self.name}: nics_per_node and channels must be >= 1")
        if self.full_bisection_nodes < 0:
            raise ConfigError(f"hardware {self.name}: full_bisection_nodes must be >= 0")

    @property
    def ll128(self) -> bool:
        """LL128 is enabled over NVLink (current tuning.cc L517-537); NCCL 2.8.4 also asks for
        Volta or Ampere GPUs only (``minCompCap == maxCompCap`` 70 or 80, tuning.cc L192-195 at
        v2.8.4-1). Between nodes NCCL also asks the NIC to be PCIe-switch close to the GPUs
        (``typeInter <= PATH_PXB``, GPU Direct RDMA): :meth:`ll128_at`."""
        if self.nccl_version == "2.8.4" and self.generation not in ("volta", "ampere"):
            return False
        return self.intra_link == "nvlink"

    def ll128_at(self, n_nodes: int) -> bool:
        """LL128 on ``n_nodes`` nodes: :attr:`ll128`, and between nodes :attr:`net_ll128`
        (the graph's GPU-NIC path type ``typeInter <= PATH_PXB``, tuning.cc L194 at
        v2.8.4-1)."""
        return self.ll128 and (n_nodes == 1 or self.net_ll128)

    @property
    def node_nic_Bps(self) -> float:
        """All NICs of a node together (bytes/s per direction): a ring's bus bandwidth
        between nodes cannot exceed it (each channel's ring enters and leaves every node
        once, through one NIC)."""
        return self.nics_per_node * self.nic_Bps

    def notes(self) -> list[str]:
        """What the model leaves out on this machine."""
        out = []
        if self.nvls:
            out.append("NVLink SHARP (NVLS) is present but not priced: ring/tree times are "
                       "an upper bound where NCCL would pick NVLS")
        if self.collnet:
            out.append("CollNet (in-network reduction) is present but not priced")
        return out

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Hardware:
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})


PRESETS: dict[str, Hardware] = {
    "abci-a100": Hardware("abci-a100", 8, "ampere", "nvlink", NVLINK_BPS["ampere"], 4,
                          IB_GBIT["HDR"] / 8 * 1e9, DEFAULT_CHANNELS["ampere"],
                          nccl_version="2.8.4"),
    "abci-v100": Hardware("abci-v100", 4, "volta", "nvlink", NVLINK_BPS["volta"], 2,
                          IB_GBIT["EDR"] / 8 * 1e9, DEFAULT_CHANNELS["volta"],
                          nccl_version="2.8.4", full_bisection_nodes=34),
    "h100-8x400g": Hardware("h100-8x400g", 8, "hopper", "nvlink", NVLINK_BPS["hopper"], 8,
                            IB_GBIT["NDR"] / 8 * 1e9, DEFAULT_CHANNELS["hopper"], nvls=True),
}
"""Named machines: the two ABCI node types of the committed sweeps (as their logs' setup
lines state them, NCCL 2.8.4) and an HGX H100 node with eight 400 Gbit/s NICs (current NCCL)."""


FULL_BISECTION_NODES: dict[str, int] = {"ABCI V-node": 34}
"""Machines (a phrase of a sweep's hardware text) -> nodes of one full-bisection domain.
ABCI's V-nodes: a rack holds 34 nodes of two EDR ports each (68 ports on four 36-port leaf
switches), and the network is full-bisection up to the rack's aggregation switches and
1/3 oversubscribed between racks (news.mynavi.jp/article/abci-2, an article describing
ABCI's InfiniBand EDR network; 1,088 V-nodes = 32 racks of 34). The committed ABCI V-node
sweeps each ran inside one block of 34 consecutive host numbers (their logs' host names,
data/external/nccl-tests/abci-inter-vnode-*.txt; the 16- and 32-node jobs start at g0273
and g0307, 8 x 34 + 1 and 9 x 34 + 1): one rack, if racks are numbered in blocks of 34,
which is an inference from the numbering. No description of the ABCI A-node fabric was
found: unknown there (0)."""


def generation_of(devices: str) -> str:
    """The GPU generation named in a device string (``A100-SXM4-40GB`` -> ampere)."""
    for token, gen in sorted(_GENERATION_OF, key=lambda kv: -len(kv[0])):
        if token in devices.upper():
            return gen
    raise ConfigError(f"no known NVIDIA GPU in {devices!r} (known: "
                      f"{', '.join(t for t, _ in _GENERATION_OF)})")


def from_trace_meta(meta: Mapping[str, Any], world_size: int, nodes: int,
                    source: str = "<meta>") -> Hardware:
    """The machine a comm-trace sidecar describes: GPUs per node from the series, the
    generation from ``devices``, NVLink where the ``hardware`` text names NVLink or NVSwitch,
    the NICs from ``<n>x InfiniBand <EDR|HDR|NDR>``, the NCCL constants from ``NCCL 2.8.4``
    (any other or no version: the current ones, :mod:`.constants`)."""
    text = f"{meta.get('hardware', '')} {meta.get('interconnect', '')}"
    devices = " ".join(map(str, meta.get("devices") or [])) or text
    try:
        gen = generation_of(devices)
    except ConfigError as exc:
        raise InputError(f"cannot describe the machine for the nccl model: {exc}",
                         path=source, field="devices") from None
    intra = "nvlink" if re.search(r"nvlink|nvswitch", text, re.I) else "pci"
    nic = re.search(r"(\d+)\s*x\s*InfiniBand\s*(EDR|HDR|NDR|XDR)", text, re.I)
    if nic:
        nics, rate = int(nic.group(1)), IB_GBIT[nic.group(2).upper()] / 8 * 1e9
    elif nodes > 1:
        raise InputError("cannot describe the machine for the nccl model: the sidecar's "
                         "hardware text names no '<n>x InfiniBand <EDR|HDR|NDR>' NICs",
                         path=source, field="hardware")
    else:  # one node: the NIC is never used
        nics, rate = 1, IB_GBIT["HDR"] / 8 * 1e9
    version = re.search(r"NCCL\s*(\d+\.\d+\.\d+)", text)
    nccl_version = "2.8.4" if version and version.group(1) == "2.8.4" else "current"
    per_node = max(1, world_size // max(nodes, 1))
    label = f"{gen}-{per_node}gpn-{intra}-{nics}x{rate * 8 / 1e9:.0f}g-nccl-{nccl_version}"
    bisection = max([n for phrase, n in FULL_BISECTION_NODES.items()
                     if phrase.lower() in text.lower()], default=0)
    return Hardware(label, per_node, gen, intra,
                    NVLINK_BPS[gen] if intra == "nvlink" else PCIE_BPS, nics, rate,
                    DEFAULT_CHANNELS[gen], nvls=gen in ("hopper", "blackwell") and
                    bool(re.search(r"nvswitch", text, re.I)), nccl_version=nccl_version,
                    full_bisection_nodes=bisection)


def parse_hardware(text: str) -> Hardware:
    """``--hardware``: a preset name (:data:`PRESETS`), optionally followed by
    ``:key=value,...`` overrides of its fields (``h100-8x400g:gpus_per_node=4``)."""
    name, _, body = text.partition(":")
    if name not in PRESETS:
        raise ConfigError(f"--hardware {text!r}: unknown machine {name!r}; known: "
                          f"{', '.join(PRESETS)}")
    hw = PRESETS[name]
    changes: dict[str, Any] = {}
    for part in filter(None, body.split(",")):
        key, eq, value = part.partition("=")
        if not eq or key not in Hardware.__dataclass_fields__ or key == "name":
            fields = ", ".join(f for f in Hardware.__dataclass_fields__ if f != "name")
            raise ConfigError(f"--hardware {text!r}: {part!r} is not field=value (fields: "
                              f"{fields})")
        kind = type(getattr(hw, key))
        try:
            changes[key] = (value.lower() in ("1", "true", "yes")) if kind is bool else kind(value)
        except ValueError:
            raise ConfigError(f"--hardware {text!r}: {key}={value!r} is not a "
                              f"{kind.__name__}") from None
    return replace(hw, **changes) if changes else hw
