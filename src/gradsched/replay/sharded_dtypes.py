"""The bytes each sharded collective moves under a mixed-precision policy
(:class:`gradsched.collective_dtypes.CollectiveDtypes`), per layer and per unit.

Per tensor of ``numel`` elements, trace element size ``e = bytes / numel``, policy
``(param_dtype p, reduce_dtype r, float8_all_gather)`` (FSDP2 and torchao as the policy's
module docstring cites):

* **all-gather** ``numel x g``: ``g = 1`` for a float8 weight (:func:`is_float8_weight`),
  else ``bytes(p)`` (``e`` without ``p``);
* **reduce-scatter** ``numel x bytes(r)`` (without ``r``: the gradients' dtype, ``bytes(p)``
  or ``e``);
* **unsharded gradient memory** ``numel x max(bytes(p or e), bytes(r))``: the gradient is
  computed in the parameter dtype (a float8 weight's in ``p`` too: torchao's matmul returns
  high-precision gradients) and copied into the reduce-scatter's input buffer of
  ``reduce_dtype`` before it is freed (``foreach_reduce``, torch 2.14
  ``_fsdp_collectives.py`` L596-608: "Only after the copy-in finishes can we free the
  gradients"); under gradient accumulation FSDP2 keeps it in ``reduce_dtype``
  (``_fsdp_param.py`` ``to_accumulated_grad_if_needed`` L1019-1030). The larger of the two
  bounds both moments;
* **gathered parameter memory**: the all-gather's bytes (a float8 weight stays float8
  gathered). The resident shards stay in the trace's dtype (FSDP2 keeps the sharded
  parameters in their own dtype).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from gradsched.collective_dtypes import FLOAT8_BYTES, CollectiveDtypes
from gradsched.errors import ConfigError
from gradsched.replay.sharded_layout import ROOT, UnitLayout
from gradsched.traces.bundle import ComputeTrace
from gradsched.traces.layers import LayerSeq, block_of

FLOAT8_TRACES = ("flops-model",)
"""``capture_method`` of the traces whose tensor names say which are ``nn.Linear``
weights (:mod:`gradsched.traces.flops`: the names of :func:`gradsched.llm_shapes
.parameter_list`, every ``<module>.weight`` of a decoder block either a norm or a
linear)."""


def is_float8_weight(name: str) -> bool:
    """Whether torchao's ``convert_to_float8_training`` (with torchtitan's filter, which
    leaves the output head alone) converts the module owning ``name`` and the tensor is its
    weight: a ``weight`` inside a decoder block (:func:`gradsched.traces.layers.block_of`)
    whose module is not a norm (``*norm*``, ``ln_*``). Biases, norms, embeddings and the
    head (outside the blocks) are not."""
    parts = name.rsplit(".", 2)
    if len(parts) < 3 or parts[-1] != "weight" or block_of(name) is None:
        return False
    module = parts[-2]
    return "norm" not in module and not module.startswith("ln")


@dataclass(frozen=True)
class LayerBytes:
    """Per layer (forward order): all-gather bytes, reduce-scatter bytes and unsharded
    gradient memory (module docstring)."""

    gather: np.ndarray
    reduce: np.ndarray
    grad: np.ndarray


def layer_bytes(trace: ComputeTrace, seq: LayerSeq, dtypes: CollectiveDtypes) -> LayerBytes:
    """:class:`LayerBytes` of ``trace`` (its layers ``seq``) under ``dtypes``; float8 is
    refused for a trace whose names do not say which tensors are linear weights."""
    if dtypes.float8_all_gather and trace.meta.get("capture_method") not in FLOAT8_TRACES:
        raise ConfigError("float8 all-gather: the trace's tensor names must say which are "
                          "nn.Linear weights; only LLM traces of gradsched traces flops "
                          f"(capture_method {', '.join(FLOAT8_TRACES)}) do, this one is "
                          f"{trace.meta.get('capture_method')!r}")
    frame = trace.frame
    numel = dict(zip(frame["name"], frame["numel"].to_numpy(dtype=float), strict=True))
    nbytes = dict(zip(frame["name"], frame["bytes"].to_numpy(dtype=float), strict=True))
    out = np.zeros((3, seq.n))
    for j, tensors in enumerate(seq.tensors):
        for name in tensors:
            n = numel[name]
            element = nbytes[name] / n if n else 0.0
            grad = dtypes.gather_element(element)
            gather = float(FLOAT8_BYTES) if dtypes.float8_all_gather and \
                is_float8_weight(name) else grad
            reduce = dtypes.reduce_element(element)
            out[:, j] += (n * gather, n * reduce, n * max(grad, reduce))
    return LayerBytes(gather=out[0], reduce=out[1], grad=out[2])


def dtyped_layout(layout: UnitLayout, per_layer: LayerBytes) -> UnitLayout:
    """``layout`` with its units' and root's all-gather bytes, reduce-scatter bytes and
    gradient memory from ``per_layer`` (units in order, the root last)."""
    def per_unit(values: np.ndarray) -> np.ndarray:
        units = [float(values[a:b + 1].sum()) for a, b in layout.ranges]
        return np.asarray([*units, float(values[layout.owner == ROOT].sum())])

    gather = per_unit(per_layer.gather)
    return replace(layout, unit_bytes=gather[:-1], root_bytes=float(gather[-1]),
                   reduce_bytes=per_unit(per_layer.reduce), grad_bytes=per_unit(per_layer.grad))
