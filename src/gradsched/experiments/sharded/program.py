"""The exact sharded optimum in streams semantics, for units resharded after forward, forward
prefetch depth 0 or 1 and backward depth 1, by dynamic programming over blocks.

It follows the replay of :func:`gradsched.replay.sharded.replay_layout` (FSDP2's hooks:
``pre_forward`` issues a unit's all-gather and prefetches the next, ``pre_backward`` the
previous unit's, ``post_backward`` the reduce-scatter; one channel in issue order; the host
issues when the compute reaches the hook). Units ``0..m-1`` in forward order; ``f``, ``b``
their forward and backward compute, ``g``, ``r`` their all-gather and reduce-scatter,
``G``, ``D`` their gathered bytes (the all-gather's) and unsharded-gradient bytes (under
a mixed-precision policy they differ, :mod:`gradsched.experiments.sharded.dtypes`; without
one both are the trace's bytes); the root's layers lie before the first block (``F0``,
``B0``) and after the last (``F1``, ``B1``), its all-gather ``gR`` and reduce-scatter
``rR``, its bytes ``G_R``, ``D_R``. All-gathers are priced on their gather bytes,
reduce-scatters on their reduce bytes.

**Forward.** Unit ``k``'s compute starts at ``s_k``. Depth 1: the prefetch of ``k+1`` is
issued at ``k``'s pre-forward and starts when ``k``'s all-gather ends, which is ``s_k``,
so ``s_{k+1} = s_k + max(f_k, g_{k+1})``; depth 0: ``s_{k+1} = s_k + f_k + g_{k+1}``.
``s_0 = c0 + g_0`` with ``c0`` set by the root alone.

**Backward** (units in reverse; the channel is free when it starts). The channel carries
``r_{k+1}`` then ``g_{k-1}``, both issued before unit ``k``'s compute starts at ``s_k``,
and ``r_{k+1}`` starts at ``s_k`` (unit ``k``'s own all-gather, before it, had to end), so
``s_{k-1} = s_k + max(b_k, r_{k+1} + g_{k-1})`` (``r_m = 0``), the first
``s_{m-1} = start + g_{m-1}``, and the iteration ends at
``s_0 + max(b_0 + B0, max(b_0, r_1) + r_0) + rR``, then the update. A sum of terms over
windows of three consecutive units.

**Memory.** The level is highest right after unit ``k``'s pre-backward allocations (the
level only falls between allocations, and which allocations and frees come before an
instant depends on the times alone, not on the bytes):
``G_R + D_R + G_{k-1} + G_k + D_k + D_{k+1} [r_{k+1} > 0] + D_{k+2} [r_{k+2} > b_{k+1}]``
(gathered: the root, unit ``k`` and ``k-1`` prefetched; gradients: the root's, unit
``k``'s, and those of ``k+1`` and ``k+2`` while their reduce-scatters run: those of ``k+2``
outlive ``k+1``'s backward when its reduce-scatter is longer); the forward's
``G_R + G_k + G_{k+1}`` is lower. A window of four units.

**Program.** State: the last three units (four block boundaries ``x < a < b < c``); adding
``[c, d)`` charges unit ``[b, c)``'s backward term and the forward pair ending at
``[c, d)``, and checks unit ``[a, b)``'s memory window. The check bounds ``G`` of
``[x, a)``, which shrinks as ``x`` grows, so the best predecessor is a suffix minimum over
``x``: ``O(n^4)`` work, vectorised. Time ties within :data:`gradsched.ties.RTOL` lean to
fewer units (a penalty far below the tolerance per unit); the caller replays the grouping.

**Not here** (not a sum over bounded windows): units kept gathered (their reduce-scatters
queue with no all-gather between, a lag carried over any number of units: see
:mod:`gradsched.experiments.sharded.kept`), prefetch depth 2 (the all-gather queue's lead
likewise) and root layers between blocks (the lag of one reduce-scatter enters the next
window). :func:`window_applies` says whether the tables apply.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from gradsched.costmodel.base import CommModel, comm_times
from gradsched.experiments.sharded.common import range_times
from gradsched.replay.sharded_dtypes import LayerBytes
from gradsched.traces.layers import LayerSeq

PAD = 2
"""Virtual empty units before the first block (boundaries 0, 1) and after the last."""


@dataclass(frozen=True)
class Tables:
    """Per run of blocks ``[x, y)`` in padded boundaries (virtual runs are zero): all-gather,
    reduce-scatter, forward, backward seconds, gathered bytes (``size``) and gradient bytes
    (``grad``); and the root's constants (``root_bytes`` gathered, ``root_grad``)."""

    ag: np.ndarray
    rs: np.ndarray
    fwd: np.ndarray
    bwd: np.ndarray
    size: np.ndarray
    grad: np.ndarray
    prefix_bytes: np.ndarray
    root_bytes: float
    root_grad: float
    root_ag: float
    root_rs: float
    pre: tuple[float, float]
    post: tuple[float, float]
    update: float


def window_applies(seq: LayerSeq, blocks: list[tuple[int, int]]) -> bool:
    """Whether no root layer lies between two blocks (the recurrence's assumption)."""
    return all(b0 + 1 == a1 for (_, b0), (a1, _) in itertools.pairwise(blocks))


def tables(seq: LayerSeq, blocks: list[tuple[int, int]], sizes: LayerBytes, model: CommModel,
           world: int) -> Tables:
    """The tables of the program (module docstring); ``sizes``: per layer of ``seq``, the
    all-gather, reduce-scatter and gradient bytes."""
    n = len(blocks)
    size_n = n + 2 * PAD + 1
    ag_b, rs_b = range_times(blocks, sizes, model, world)
    first, last = blocks[0][0], blocks[-1][1]
    out = {}
    for name, values in (("fwd", seq.forward_s), ("bwd", seq.backward_s),
                         ("size", sizes.gather), ("grad", sizes.grad), ("reduce", sizes.reduce)):
        prefix = np.concatenate([[0.0], np.cumsum(values)])
        at = np.asarray([prefix[a] for a, _ in blocks] + [prefix[last + 1]])
        out[name] = at
    table = {k: np.zeros((size_n, size_n)) for k in ("ag", "rs", "fwd", "bwd", "size", "grad")}
    for x in range(n):
        for y in range(x + 1, n + 1):
            i, j = x + PAD, y + PAD
            table["ag"][i, j], table["rs"][i, j] = ag_b[x, y - 1], rs_b[x, y - 1]
            for name in ("fwd", "bwd", "size", "grad"):
                table[name][i, j] = out[name][y] - out[name][x]
    bounds = np.concatenate([np.zeros(PAD), out["size"] - out["size"][0],
                             np.full(PAD, out["size"][-1] - out["size"][0])])
    root = float(sizes.gather.sum()) - float(bounds[-1])
    root_grad, root_reduce = (
        root if values is sizes.gather else
        float(values.sum()) - float(out[name][-1] - out[name][0])
        for name, values in (("grad", sizes.grad), ("reduce", sizes.reduce)))
    root_t = [float(comm_times(model, c, np.asarray([max(nbytes, 1.0)]), world)[0])
              if root > 0 else 0.0
              for c, nbytes in (("all_gather", root), ("reduce_scatter", root_reduce))]
    return Tables(**table, prefix_bytes=bounds, root_bytes=root, root_grad=root_grad,
                  root_ag=root_t[0], root_rs=root_t[1],
                  pre=(float(seq.forward_s[:first].sum()), float(seq.backward_s[:first].sum())),
                  post=(float(seq.forward_s[last + 1:].sum()),
                        float(seq.backward_s[last + 1:].sum())),
                  update=float(seq.update_s.sum()) / max(world, 1))


def constant_s(t: Tables, has_stem: bool) -> float:
    """The iteration's part no grouping changes: the first unit's wait for the root (its
    all-gather and the stem's forward), the head's forward and backward, the update."""
    ready = t.root_ag if t.root_bytes > 0 else 0.0
    start = ready + t.pre[0] if has_stem else 0.0
    return max(start, ready) + t.post[0] + t.post[1] + t.update


def program(t: Tables, forward_depth: int, cap: float, units_weight: float
            ) -> tuple[float, list[int]] | None:
    """The least sum of window terms (plus ``units_weight`` per unit) over groupings whose
    memory windows fit ``cap``, and the grouping's exclusive block ends; None if none fits."""
    n_pad = t.ag.shape[0]
    last = n_pad - 1 - PAD  # padded boundary after the last block
    limit = cap - (t.root_bytes + t.root_grad)
    # c -> value[a, b, d - c - 1] and best x of the states (a, b, c, d)
    into: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    first = np.full((PAD, PAD, n_pad - PAD - 1), math.inf)  # (0, 1, 2, d): first unit [2, d)
    for d in range(PAD + 1, last + 1):
        own = t.ag[PAD, d] + (t.fwd[PAD, d] if forward_depth == 0 else 0.0)
        first[PAD - 2, PAD - 1, d - PAD - 1] = own + units_weight
    into[PAD] = (first, np.zeros(first.shape, dtype=np.int32))
    for c in range(PAD + 1, n_pad - 1):
        value = np.full((c, c, c), math.inf)  # states (x, a, b, c)
        for b in range(PAD, c):
            held = into[b][0]
            value[:b, :b, b] = held[:, :, c - b - 1]
        into[c] = _step(t, value, c, last, forward_depth, limit, units_weight)
    final = into[last + 1][0][:, :, 0]
    if not np.isfinite(final).any():
        return None
    a, b = np.unravel_index(int(np.argmin(final)), final.shape)
    return float(final[a, b]), _back(into, int(a), int(b), last)


def _step(t: Tables, value: np.ndarray, c: int, last: int, forward_depth: int, limit: float,
          units_weight: float) -> tuple[np.ndarray, np.ndarray]:
    """States (a, b, c, d) for every next boundary ``d`` from the states (x, a, b, c)."""
    n_pad = t.ag.shape[0]
    nxt = np.arange(c + 1, last + 1) if c < last else np.asarray([c + 1])
    suffix, arg = _suffix_min(value)
    a = np.arange(c)[:, None, None]
    b = np.arange(c)[None, :, None]
    d = nxt[None, None, :]
    mid = (t.grad[b, c] * (t.rs[b, c] > 0)
           + t.grad[c, d] * (t.rs[c, d] > t.bwd[b, c]))  # unit [a, b)'s window, beyond [a, b)
    threshold = limit - (t.size[a, b] + t.grad[a, b]) - mid  # the bytes [x, a) may gather
    low = np.searchsorted(t.prefix_bytes, t.prefix_bytes[a] - threshold, side="left")
    low = np.minimum(np.maximum(low, 0), c)  # c: no admissible x (suffix_min's inf row)
    aa, bb = np.broadcast_arrays(a, b, low)[:2]
    best = suffix[low, aa, bb]
    where = arg[low, aa, bb]
    term = backward_term(t, a, b, c, d)
    if forward_depth == 1:
        term = term + np.maximum(t.fwd[b, c], t.ag[c, d])
    else:
        term = term + t.ag[c, d] + t.fwd[c, d]
    term = term + units_weight * (d <= last)
    out = np.full((c, c, n_pad - c - 1), math.inf)
    xs = np.zeros(out.shape, dtype=np.int32)
    out[:, :, nxt - c - 1] = best + term
    xs[:, :, nxt - c - 1] = where
    return out, xs


def backward_term(t: Tables, a: np.ndarray, b: np.ndarray, c: int, d: np.ndarray
                  ) -> np.ndarray:
    """Unit ``[b, c)``'s backward term, after ``[a, b)`` and before ``[c, d)`` in forward
    order: ``max(b_k, r_{k+1} + g_{k-1})``, or the end of the iteration for the first unit."""
    first = (a == PAD - 1) & (b == PAD)
    tail = (np.maximum(t.bwd[b, c] + t.pre[1], np.maximum(t.bwd[b, c], t.rs[c, d]) + t.rs[b, c])
            + (t.root_rs if t.root_bytes > 0 else 0.0))
    return np.where(first, tail, np.maximum(t.bwd[b, c], t.rs[c, d] + t.ag[a, b]))


def _suffix_min(value: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Over axis 0 (``x``): the least value at or after each ``x`` and where, with a last
    row of ``inf`` for "no ``x`` fits"."""
    c = value.shape[0]
    suffix = np.full((c + 1, *value.shape[1:]), math.inf)
    arg = np.zeros(suffix.shape, dtype=np.int32)
    for x in range(c - 1, -1, -1):
        take = value[x] <= suffix[x + 1]
        suffix[x] = np.where(take, value[x], suffix[x + 1])
        arg[x] = np.where(take, x, arg[x + 1])
    return suffix, arg


def _back(into: dict[int, tuple[np.ndarray, np.ndarray]], a: int, b: int,
          last: int) -> list[int]:
    """The grouping's exclusive block ends, following the stored best predecessors from the
    final state (a, b, last + 1, last + 2)."""
    c, d = last + 1, last + 2
    bounds = [d, c, b, a]
    while c > PAD:
        x = int(into[c][1][a, b, d - c - 1])
        a, b, c, d = x, a, b, c
        bounds.append(a)
    return sorted(p - PAD for p in set(bounds) if PAD < p <= last)
