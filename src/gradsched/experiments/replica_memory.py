"""Whether a full data-parallel replica fits one GPU: what DDP keeps on every rank.

Under DDP every rank holds the whole model (Rajbhandari et al., ZeRO, SC 2020, Section 3,
the baseline their Figure 1 calls "Baseline"): the parameters, a gradient of the same size,
and the optimizer's state, none of it sharded. With the byte counts of
:mod:`gradsched.experiments.sharded.memory`, which prices the sharded case:

* parameters and gradients: ``2 x bytes`` (the trace's gradient bytes, one copy each);
* Adam's state: ``K x numel`` with ``K`` = :data:`~gradsched.experiments.sharded.memory.
  ADAM_STATE_BYTES` (12 for 16-bit weights: fp32 master copy and two fp32 moments; 8 for
  fp32 weights).

Activations, DDP's bucket buffers and the framework's workspace are not counted, so a replica
that fits this budget may still not run; one that does not fit cannot. The GPU's memory is
that of the trace's ``device`` (:func:`~gradsched.experiments.sharded.memory.device_memory`),
and the check is skipped (None) where the device names no known GPU: a CPU trace, or a
published profile that does not say.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gradsched.experiments.sharded.memory import ADAM_STATE_BYTES, device_memory
from gradsched.traces.bundle import ComputeTrace

GIB = 2.0**30


@dataclass(frozen=True)
class ReplicaMemory:
    """One GPU's memory against a full replica (bytes)."""

    gpu_bytes: float
    device: str
    weights_grads_bytes: float
    optimizer_bytes: float

    @property
    def needed_bytes(self) -> float:
        return self.weights_grads_bytes + self.optimizer_bytes

    @property
    def fits(self) -> bool:
        return self.needed_bytes <= self.gpu_bytes

    def text(self) -> str:
        verdict = "fits" if self.fits else "DOES NOT FIT"
        return (f"a full DDP replica {verdict} one GPU: parameters + gradients "
                f"{self.weights_grads_bytes / GIB:.4g} GiB + Adam's state "
                f"{self.optimizer_bytes / GIB:.4g} GiB = {self.needed_bytes / GIB:.4g} GiB "
                f"{'<=' if self.fits else '>'} {self.gpu_bytes / GIB:.4g} GiB "
                f"({self.device}; activations not counted)")

    def to_dict(self) -> dict[str, Any]:
        return {"gpu_bytes": self.gpu_bytes, "device": self.device,
                "weights_grads_bytes": self.weights_grads_bytes,
                "optimizer_bytes": self.optimizer_bytes, "needed_bytes": self.needed_bytes,
                "fits": self.fits}


def replica_memory(trace: ComputeTrace) -> ReplicaMemory | None:
    """The replica against the memory of the trace's GPU; None where the trace's device
    names no GPU whose memory is known."""
    device = str(trace.meta.get("device", ""))
    gpu = device_memory(device)
    if gpu is None:
        return None
    total_bytes = float(trace.frame["bytes"].sum())
    numel = float(trace.frame["numel"].sum())
    element = round(total_bytes / numel) if numel else 4
    return ReplicaMemory(gpu_bytes=float(gpu), device=device,
                         weights_grads_bytes=2.0 * total_bytes,
                         optimizer_bytes=ADAM_STATE_BYTES.get(element, 12.0) * numel)
