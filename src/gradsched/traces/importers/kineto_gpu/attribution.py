"""GPU kernel time -> gradients: the backward walk, the forward ops that own the gradients,
their forward time and the rows in forward order (package docstring, items 3-6)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from gradsched.errors import InputError
from gradsched.traces.importers.kineto_gpu.nesting import Op


@dataclass
class Grad:
    node_seq: int
    acc: Op
    backward_s: float
    ready: int


def backward_grads(bw_ops: list[Op], label: str,
                   value: Callable[[Op], float] = Op.kernel_s) -> tuple[list[Grad], float]:
    """Walk the backward ops; each AccumulateGrad closes one gradient, whose ``backward_s``
    is ``value`` (kernel time, or another per-op quantity) summed since the previous one.
    Returns the tail."""
    grads: list[Grad] = []
    pending = 0.0
    node: int | None = None
    for op in bw_ops:
        pending += value(op)
        if op.backward:
            node = op.backward_seq
        elif op.accumulate:
            if node is None:
                raise InputError("an AccumulateGrad op runs before any backward node",
                                 path=label, field=f"traceEvents[{op.span.index}]")
            grads.append(Grad(node, op, pending, len(grads)))
            pending = 0.0
    return grads, pending


def _last_recorder(ops: list[Op]) -> dict[int, int]:
    """Sequence number -> index of the last op recording it.

    The autograd node of a forward op takes the current sequence number and advances it;
    old PyTorch also stamps the ops that create no node with the current (not yet taken)
    number, so the op that created node ``n`` is the last one recording ``n``.
    """
    out: dict[int, int] = {}
    for i, op in enumerate(ops):
        for seq in op.seqs:
            out[seq] = i
    return out


def forward_ops(candidates: list[Op], lo: int, hi: int) -> list[Op]:
    """The forward: from the op that created the first backward node's forward
    counterpart on, the ops recording a sequence number within the backward's range."""
    recorder = _last_recorder(candidates)
    starts = [recorder[s] for s in range(lo, hi + 1) if s in recorder]
    if not starts:
        return []
    return [op for op in candidates[min(starts):] if any(lo <= s <= hi for s in op.seqs)]


def forward_owner(grads: list[Grad], fwd_ops: list[Op], label: str) -> dict[int, int]:
    """Gradient ready index -> index of the forward op that recorded its node's sequence."""
    seq_to_op = _last_recorder(fwd_ops)
    owner: dict[int, int] = {}
    for grad in grads:
        if grad.node_seq not in seq_to_op:
            raise InputError(f"backward node with Sequence number {grad.node_seq} has no "
                             "forward op with that number in the step", path=label,
                             field=f"traceEvents[{grad.acc.span.index}]")
        owner[grad.ready] = seq_to_op[grad.node_seq]
    return owner


def forward_times(fwd_ops: list[Op], owners: list[int]) -> tuple[dict[int, float], float]:
    """Forward kernel time per owning op (time since the previous owner), plus the tail."""
    return owned_sums(fwd_ops, fwd_ops, set(owners), Op.kernel_s)


def owned_sums(window: list[Op], fwd_ops: list[Op], owners: set[int],
               value: Callable[[Op], float]) -> tuple[dict[int, float], float]:
    """``value`` summed per owning forward op (index into ``fwd_ops``) over the window's ops
    since the previous owning op; what follows the last owning op goes to it and is
    returned as the tail."""
    position = {id(op): i for i, op in enumerate(fwd_ops)}
    out: dict[int, float] = {}
    pending = 0.0
    last = None
    for op in window:
        pending += value(op)
        i = position.get(id(op))
        if i is not None and i in owners:
            out[i] = pending
            pending = 0.0
            last = i
    if last is not None:
        out[last] += pending
    return out, pending


def _shape_numel(dims: Any) -> int | None:
    if not isinstance(dims, list) or not all(isinstance(d, int) for d in dims):
        return None
    return int(np.prod(dims)) if dims else 1


def grad_rows(grads: list[Grad], owner: dict[int, int], fwd_time: dict[int, float]
          ) -> pd.DataFrame:
    """One row per gradient in forward order (see the module docstring, item 6)."""
    order = sorted(grads, key=lambda g: (owner[g.ready], -g.ready))
    layers = {op: k for k, op in enumerate(sorted(set(owner.values())))}
    rows = []
    seen: set[int] = set()
    for grad in order:
        op = owner[grad.ready]
        rows.append({
            "op_index": op, "layer": layers[op], "ready_order": grad.ready,
            "forward_s": fwd_time[op] if op not in seen else 0.0,
            "backward_s": grad.backward_s,
            "trace_numel": _shape_numel(grad.acc.param_dims),
            "trace_dtype": grad.acc.param_type,
            "node": grad.acc.span.name,
        })
        seen.add(op)
    return pd.DataFrame(rows)
