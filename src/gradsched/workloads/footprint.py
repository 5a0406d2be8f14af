"""How much memory a model of the zoo needs per rank, estimated without allocating it.

The model is built on PyTorch's ``meta`` device (shapes, no storage) and run forward on one
sample, summing the outputs of its leaf modules (what autograd keeps for the backward
pass); activations scale with the batch. The admission checks
(:mod:`gradsched.admission`) compare the estimate with the memory available before any
rank starts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gradsched.workloads.zoo import build_model

STATE_COPIES = 4
"""Parameter-sized tensors one training rank holds: weights, gradients, the optimizer's
momentum and the communication buckets."""

ACTIVATION_COPIES = 1
"""Activation-sized memory during a step: every leaf module's output is counted (in-place
and view outputs too), which already covers the transient gradients of the backward pass."""


@dataclass(frozen=True)
class Footprint:
    """Parameter bytes and activation bytes per sample of one model."""

    parameter_bytes: int
    activation_bytes_per_sample: int

    def training_bytes(self, batch_size: int) -> int:
        """Estimated bytes of one rank training on ``batch_size`` samples."""
        return (STATE_COPIES * self.parameter_bytes
                + ACTIVATION_COPIES * batch_size * self.activation_bytes_per_sample)


def footprint(name: str, *, seq_len: int | None = None, dtype: str = "fp32") -> Footprint:
    """The :class:`Footprint` of zoo model ``name`` (built on the meta device)."""
    import torch

    with torch.device("meta"):
        spec = build_model(name, 1, device="meta", dtype=dtype, seq_len=seq_len)
    params = sum(p.numel() * p.element_size() for p in spec.model.parameters())
    return Footprint(params, _activation_bytes(spec))


def _activation_bytes(spec: Any) -> int:
    """Bytes of the leaf modules' outputs in one forward pass on one sample (0 where the
    model cannot run on the meta device: the estimate is then the parameters alone)."""
    import torch

    total = 0

    def count(_module: Any, _inputs: Any, output: Any) -> None:
        nonlocal total
        for tensor in output if isinstance(output, tuple | list) else (output,):
            if isinstance(tensor, torch.Tensor):
                total += tensor.numel() * tensor.element_size()

    handles = [m.register_forward_hook(count) for m in spec.model.modules()
               if not any(True for _ in m.children())]
    try:
        with torch.no_grad():
            spec.loss(spec.model, spec.make_batch())
    except Exception:  # an estimate: a model the meta device cannot run has none
        total = 0
    finally:
        for handle in handles:
            handle.remove()
    return total


__all__ = ["ACTIVATION_COPIES", "STATE_COPIES", "Footprint", "footprint"]
