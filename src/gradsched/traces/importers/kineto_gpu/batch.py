"""The batch size of a step from the input shapes its first forward op recorded
(``record_shapes=True``; package docstring, item 5's forward ops).

Two first ops say it: a convolution (image models: its input is ``[batch, channels, H, W]``)
and an embedding lookup whose indices are ``[batch, sequence]`` (``aten::embedding``, the
first op of BERT and GPT-2 in Hugging Face's implementations). Any other first op, a trace
without shapes, or 1-D indices (batch and sequence folded into one) say nothing, and the
reason is returned for the error that asks for ``batch_size``.
"""

from __future__ import annotations

from typing import Any

from gradsched.traces.importers.kineto_gpu.nesting import Op

CONV_OPS = frozenset({"aten::conv2d", "aten::convolution", "aten::_convolution",
                      "aten::cudnn_convolution"})
EMBEDDING_OPS = frozenset({"aten::embedding"})


def _leading(dims: Any, position: int, rank: int | None) -> int | None:
    """Dimension 0 of input ``position`` when that input has ``rank`` dimensions (any
    rank when None) and a positive integer leads it."""
    if not isinstance(dims, list) or len(dims) <= position:
        return None
    shape = dims[position]
    if not isinstance(shape, list) or not shape or (rank is not None and len(shape) != rank):
        return None
    first = shape[0]
    return first if isinstance(first, int) and not isinstance(first, bool) and first > 0 \
        else None


def batch_from_shapes(fwd_ops: list[Op]) -> tuple[int | None, str]:
    """(batch size, where it came from), or (None, why the shapes do not say it)."""
    if not fwd_ops:
        return None, "the step has no forward op"
    span = fwd_ops[0].span
    dims = span.args.get("Input Dims")
    if span.name in CONV_OPS:
        batch = _leading(dims, 0, None)
        where = "the leading dimension of its input"
    elif span.name in EMBEDDING_OPS:
        batch = _leading(dims, 1, 2)
        where = "the leading dimension of its [batch, sequence] indices"
    else:
        return None, (f"the first forward op {span.name} is neither a convolution nor an "
                      "embedding lookup")
    if batch is None:
        return None, (f"the first forward op {span.name} records no usable input shape "
                      f"(Input Dims {dims!r}; profile with record_shapes=True)")
    return batch, f"{where} of the first forward op {span.name} (Input Dims {dims!r})"
