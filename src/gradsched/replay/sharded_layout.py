"""A :class:`~gradsched.plan_sharded.ShardedPlan` mapped onto a trace's layers
(:mod:`gradsched.traces.layers`): which unit owns each layer, checked to be contiguous runs
of whole layers in forward order."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gradsched.errors import InputError
from gradsched.plan_sharded import ShardedPlan
from gradsched.traces.layers import LayerSeq

ROOT = -1


@dataclass(frozen=True)
class UnitLayout:
    """A plan mapped onto the layers: each layer's unit (``ROOT`` for the root) and each
    unit's (first, last) layer, units in forward order."""

    owner: np.ndarray
    ranges: tuple[tuple[int, int], ...]
    reshard: tuple[bool, ...]
    unit_bytes: np.ndarray
    root_bytes: float
    reduce_bytes: np.ndarray | None = None
    """Reduce-scatter bytes of each unit, the root last; ``None``: the gathered bytes
    (a mixed-precision policy sets both: :mod:`gradsched.replay.sharded_dtypes`)."""
    grad_bytes: np.ndarray | None = None
    """Unsharded gradient memory of each unit, the root last; ``None``: the gathered bytes."""

    def sizes(self) -> tuple[np.ndarray, np.ndarray]:
        """All-gather and reduce-scatter bytes of each unit, the root last."""
        gather = np.append(self.unit_bytes, self.root_bytes)
        return gather, gather if self.reduce_bytes is None else self.reduce_bytes

    def grad(self, k: int) -> float:
        """Unsharded gradient bytes of unit ``k`` (``ROOT``: the root)."""
        if self.grad_bytes is not None:
            return float(self.grad_bytes[k])
        return self.root_bytes if k == ROOT else float(self.unit_bytes[k])


def unit_layout(plan: ShardedPlan, seq: LayerSeq, source: str | None = None) -> UnitLayout:
    """Check that every unit is a contiguous run of whole layers, units in forward order,
    and map it onto the layers."""
    plan.check_covers(seq.names, source)
    layer_of = {t: j for j, group in enumerate(seq.tensors) for t in group}
    owner = np.full(seq.n, ROOT, dtype=np.int64)
    ranges = []
    for k, unit in enumerate(plan.units):
        layers = sorted({layer_of[t] for t in unit.tensors})
        first, last = layers[0], layers[-1]
        if layers != list(range(first, last + 1)):
            raise InputError(f"sharded plan '{plan.algorithm}': unit {k} is not a contiguous "
                             "run of layers in forward order", path=source, field="units")
        whole = {t for j in layers for t in seq.tensors[j]}
        if whole != set(unit.tensors):
            missing = sorted(whole - set(unit.tensors))[0]
            raise InputError(f"sharded plan '{plan.algorithm}': unit {k} splits a layer (it "
                             f"lacks {missing!r})", path=source, field="units")
        if ranges and first <= ranges[-1][1]:
            raise InputError(f"sharded plan '{plan.algorithm}': unit {k} does not follow unit "
                             f"{k - 1} in forward order", path=source, field="units")
        owner[first:last + 1] = k
        ranges.append((first, last))
    unit_bytes = np.asarray([seq.nbytes[a:b + 1].sum() for a, b in ranges], dtype=float)
    return UnitLayout(owner=owner, ranges=tuple(ranges),
                      reshard=tuple(u.reshard_after_forward for u in plan.units),
                      unit_bytes=unit_bytes,
                      root_bytes=float(seq.nbytes[owner == ROOT].sum()))


def layout_from_ranges(seq: LayerSeq, ranges: list[tuple[int, int]],
                       reshard: tuple[bool, ...]) -> UnitLayout:
    """The layout of units given as disjoint, increasing (first, last) layer ranges, for
    searches that build valid layouts themselves (no tensor-name checks)."""
    owner = np.full(seq.n, ROOT, dtype=np.int64)
    for k, (first, last) in enumerate(ranges):
        owner[first:last + 1] = k
    prefix = np.concatenate([[0.0], np.cumsum(seq.nbytes)])
    unit_bytes = np.asarray([prefix[b + 1] - prefix[a] for a, b in ranges], dtype=float)
    return UnitLayout(owner=owner, ranges=tuple(ranges), reshard=reshard,
                      unit_bytes=unit_bytes, root_bytes=float(seq.nbytes[owner == ROOT].sum()))
