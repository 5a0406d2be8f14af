"""A two-level model of how NCCL runs a collective (NVLink/PCIe inside a node, NICs between
nodes): NCCL's tuning model (:mod:`.tuning`) on a described machine (:mod:`.hardware`),
calibrated on the smallest measured scale (:mod:`.calibrate`), with an inter-node bandwidth
that falls with the node count (:mod:`.fabric`), as the ``nccl`` comm model (:mod:`.model`)."""

from gradsched.costmodel.nccl.hardware import PRESETS, Hardware
from gradsched.costmodel.nccl.model import NCCLModel

__all__ = ["PRESETS", "Hardware", "NCCLModel"]
