"""What a sharded layout may gather on one GPU: the GPU's memory less what every layout
keeps resident (ZeRO-3 / FSDP2, Rajbhandari et al., SC 2020, Section 3: parameters,
gradients and optimizer state, each sharded over the ``P`` ranks).

* parameter and gradient shards: ``2 x bytes / P`` (the trace's gradient bytes, one copy
  each), as the sharded replay's ``resident_bytes``;
* Adam's state: two moments in fp32, and an fp32 master copy of the weights when they
  train in a 16-bit type (mixed precision, Micikevicius et al., ICLR 2018): ``K`` bytes
  per parameter, ``K = 12`` for 16-bit weights and ``8`` for fp32 (ZeRO, Section 3.1,
  ``K = 12``), sharded: ``K x numel / P``.

* activations: the sidecar's ``activation_bytes`` where the trace has them (a FLOPs trace:
  :mod:`gradsched.traces.activations`, Korthikanti et al. 2022, Section 4, under its
  checkpointing mode), not sharded (each rank holds its own micro-batch's).

The rest is the budget for gathered parameters and unsharded gradients, the peak the replay
predicts. A measured trace carries no activation count: there the budget is an upper bound
on what a layout may gather, and the text says that activations are not counted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gradsched.errors import ConfigError
from gradsched.gpus import GPU_MEMORY_BYTES
from gradsched.traces.bundle import ComputeTrace

ADAM_STATE_BYTES = {2: 12.0, 4: 8.0}
"""Adam's bytes per parameter by the gradient element size (16-bit: master copy + 2
moments in fp32; fp32: 2 moments)."""


@dataclass(frozen=True)
class MemoryBudget:
    """One GPU's memory and what is resident on it (bytes)."""

    gpu_bytes: float
    source: str
    shards_bytes: float
    optimizer_bytes: float
    activation_bytes: float | None = None  # None: the trace does not say
    activation_mode: str = ""

    @property
    def gathered_cap_bytes(self) -> float:
        return (self.gpu_bytes - self.shards_bytes - self.optimizer_bytes
                - (self.activation_bytes or 0.0))

    def text(self) -> str:
        gib = 2**30
        acts = ("activations not counted: the trace has no activation count"
                if self.activation_bytes is None else
                f"activations {self.activation_bytes / gib:.4g} GiB "
                f"({self.activation_mode} recomputation)")
        return (f"GPU memory {self.gpu_bytes / gib:.4g} GiB ({self.source}) - parameter and "
                f"gradient shards {self.shards_bytes / gib:.4g} GiB - Adam's state "
                f"{self.optimizer_bytes / gib:.4g} GiB"
                + ("" if self.activation_bytes is None else f" - {acts}")
                + f" = {self.gathered_cap_bytes / gib:.4g} GiB for gathered parameters and "
                  "unsharded gradients" + (f" ({acts})" if self.activation_bytes is None else ""))


def device_memory(device: str) -> float | None:
    """The memory of the GPU a trace's ``device`` names: a size written in it (``80GB``)
    or its family's (:data:`gradsched.gpus.GPU_MEMORY_BYTES`); None for others."""
    written = re.search(r"(\d+)\s*G(?:i?B)\b", device, re.IGNORECASE)
    if written:
        return float(written.group(1)) * 2**30
    lowered = device.lower()
    for family in sorted(GPU_MEMORY_BYTES, key=len, reverse=True):
        if family in lowered or family.replace("-", " ") in lowered:
            return GPU_MEMORY_BYTES[family]
    return None


def memory_budget(trace: ComputeTrace, world_size: int,
                  gpu_memory_bytes: float | None,
                  source: str = "--gpu-memory") -> MemoryBudget | None:
    """The budget for ``trace`` on ``world_size`` ranks; the GPU's memory from
    ``gpu_memory_bytes`` (said to come from ``source``) or else the trace's device; None
    when neither says."""
    if gpu_memory_bytes is None:
        gpu_memory_bytes = device_memory(str(trace.meta.get("device", "")))
        source = f"the trace's device: {trace.meta.get('device')}"
        if gpu_memory_bytes is None:
            return None
    frame = trace.frame
    total_bytes = float(frame["bytes"].sum())
    numel = float(frame["numel"].sum())
    element = round(total_bytes / numel) if numel else 4
    ranks = max(world_size, 1)
    budget = MemoryBudget(gpu_bytes=float(gpu_memory_bytes), source=source,
                          shards_bytes=2.0 * total_bytes / ranks,
                          optimizer_bytes=ADAM_STATE_BYTES.get(element, 12.0) * numel / ranks,
                          activation_bytes=_number(trace.meta.get("activation_bytes")),
                          activation_mode=str(trace.meta.get("checkpointing", "")))
    if budget.gathered_cap_bytes <= 0:
        what = ("the resident shards alone exceed" if budget.activation_bytes is None else
                "the resident shards and the activations exceed")
        raise ConfigError(f"{what} the GPU's memory: {budget.text()}; shard over more ranks, "
                          "or recompute activations (traces flops --checkpointing)")
    return budget


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) \
        else None
