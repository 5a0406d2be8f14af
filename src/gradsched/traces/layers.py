"""Layers of a compute trace as sharded data parallelism sees them, and the unit layout
users write.

A layer is the trace's ``layer`` index (the owning module, forward order). Per layer:
parameter bytes (the all-gather and reduce-scatter payload; gradients have the parameters'
dtype in the trace), forward time, backward time (the sum of its tensors' ``backward_s``),
optimizer time. The backward visits layers in reverse forward order, as FSDP2's
pre-backward hooks fire (``FSDPParamGroup._backward_prefetch`` walks
``post_forward_order`` backwards); a trace whose ready order interleaves layers is
approximated by that order.

**Blocks.** Users of FSDP2 write ``for block in model.layers: fully_shard(block)`` and then
``fully_shard(model)`` (the PyTorch FSDP2 tutorial; torchtitan's ``apply_fsdp``). The block
of a tensor is its name up to and including the first purely numeric path component
(``layer1.0.conv1.weight`` -> ``layer1.0``, ``encoder.layer.3.attention...`` ->
``encoder.layer.3``, ``features.5.0.weight`` -> ``features.5``); a tensor without one
belongs to the root (``conv1``, ``fc``, embeddings, heads).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gradsched.errors import InputError
from gradsched.traces.bundle import ComputeTrace


@dataclass(frozen=True)
class LayerSeq:
    """Per-layer arrays in forward order, and each layer's tensors and block."""

    tensors: tuple[tuple[str, ...], ...]
    nbytes: np.ndarray
    forward_s: np.ndarray
    backward_s: np.ndarray
    update_s: np.ndarray
    block: tuple[str | None, ...]
    _cache: dict[str, Any] = field(default_factory=dict, init=False, repr=False,
                                   compare=False)
    """What is derived from the layers once (:func:`block_ranges`)."""

    @property
    def n(self) -> int:
        return len(self.tensors)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(t for group in self.tensors for t in group)


def block_of(name: str) -> str | None:
    """The block a tensor belongs to under the usual per-block wrapping, or None (root)."""
    parts = name.split(".")
    for i, part in enumerate(parts[:-1]):
        if part.isdigit():
            return ".".join(parts[: i + 1])
    return None


def layer_seq(trace: ComputeTrace) -> LayerSeq:
    """The layers of ``trace``, computed once per trace (cached on it): every planner,
    replay and bound of a sharded problem reads the same object."""
    cached = trace._cache.get("sharded_layers")
    if cached is not None:
        return cached
    out = _layer_seq(trace)
    trace._cache["sharded_layers"] = out
    return out


def _layer_seq(trace: ComputeTrace) -> LayerSeq:
    frame = trace.frame
    layers = frame["layer"].to_numpy()
    keys, layer_of = np.unique(layers, return_inverse=True)
    names = frame["name"].tolist()
    grouped: list[list[str]] = [[] for _ in range(keys.size)]
    for name, j in zip(names, layer_of.tolist(), strict=True):  # one pass: O(tensors)
        grouped[j].append(name)
    tensors = tuple(tuple(group) for group in grouped)
    blocks = []
    for j, group in enumerate(tensors):
        found = {block_of(t) for t in group}
        if len(found) != 1:
            raise InputError(f"layer {int(keys[j])} holds tensors of different blocks "
                             f"({sorted(map(str, found))})", path=trace.path, field="layer")
        blocks.append(found.pop())

    def per_layer(column: str) -> np.ndarray:
        return np.bincount(layer_of, frame[column].to_numpy(dtype=float), keys.size)

    out = LayerSeq(tensors=tensors, nbytes=per_layer("bytes"), forward_s=per_layer("forward_s"),
                   backward_s=per_layer("backward_s"), update_s=per_layer("update_s"),
                   block=tuple(blocks))
    return out


def block_ranges(seq: LayerSeq) -> list[tuple[int, int]]:
    """(first, last) layer of each block in forward order; a block must be contiguous.
    Computed once per ``seq`` (a fresh list each call)."""
    cached = seq._cache.get("block_ranges")
    if cached is None:
        cached = seq._cache["block_ranges"] = tuple(_block_ranges(seq))
    return list(cached)


def _block_ranges(seq: LayerSeq) -> list[tuple[int, int]]:
    ranges: list[tuple[int, int]] = []
    seen: set[str] = set()
    current: str | None = None
    for j, block in enumerate(seq.block):
        if block is None:
            current = None
            continue
        if block != current:
            if block in seen:
                raise InputError(f"block {block!r} is not a contiguous run of layers in "
                                 "forward order", field="layer")
            seen.add(block)
            ranges.append((j, j))
            current = block
        else:
            ranges[-1] = (ranges[-1][0], j)
    return ranges
