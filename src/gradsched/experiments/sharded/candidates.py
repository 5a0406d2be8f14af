"""Scoring sharded layouts for the searches over unit groupings: one grouping of blocks
(exclusive end indices) with one setting (resharding, forward and backward prefetch depth)
replayed by :func:`gradsched.replay.sharded.replay_layout` (``keep_unsharded``: the
parameters kept gathered between micro-batches) with collective times computed
once per run of blocks (all-gathers of their gather bytes, reduce-scatters of their reduce
bytes) and the units' three sizes under the problem's mixed-precision policy
(:mod:`gradsched.experiments.sharded.dtypes`), so the score is the exact replay's; its key
``(seconds, units, peak)`` for :func:`gradsched.ties.better`, and the smallest peak seen
(for the error when nothing fits the memory cap)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field, replace

import numpy as np

from gradsched.costmodel.base import comm_times
from gradsched.experiments.sharded.common import ShardedProblem, range_times, root_bytes
from gradsched.planners.sharded import merge_blocks
from gradsched.replay.sharded import ShardedReplay, StepOptions, replay_layout
from gradsched.replay.sharded_dtypes import LayerBytes, dtyped_layout
from gradsched.replay.sharded_layout import UnitLayout, layout_from_ranges
from gradsched.traces.layers import LayerSeq

Setting = tuple[bool, int, int]
"""(reshard after forward, forward prefetch depth, backward prefetch depth)."""
Key = tuple[float, int, float]
"""(iteration seconds, units, peak bytes): smaller is better, in that order."""


def accum_knob(grad_accum: int) -> dict[str, int]:
    """The plan knob recording ``grad_accum`` (none at 1: plans made without accumulation
    stay as they were written)."""
    return {} if grad_accum == 1 else {"grad_accum": grad_accum}


def settings(max_prefetch: int) -> list[Setting]:
    """Every setting: reshard or not, forward depth ``0..max``, backward ``1..max`` (FSDP2
    always prefetches one unit in backward)."""
    return list(itertools.product((True, False), range(max_prefetch + 1),
                                  range(1, max(max_prefetch, 1) + 1)))


@dataclass
class _Grouping:
    """One grouping's units: its ends, layer ranges, collective times (the root last) and
    layouts by resharding."""

    ends: np.ndarray
    ranges: list[tuple[int, int]]
    ag_u: np.ndarray
    rs_u: np.ndarray
    layouts: dict[bool, UnitLayout]


@dataclass
class LayoutScorer:
    """Replays layouts of one problem (module docstring)."""

    problem: ShardedProblem
    seq: LayerSeq
    """The problem's layers, or their block-level form (:func:`block_level`)."""
    blocks: list[tuple[int, int]]
    sizes: LayerBytes
    """Per layer of ``seq``: all-gather, reduce-scatter and gradient bytes."""
    smallest_peak: float = np.inf
    evaluated: int = 0
    _times: tuple[np.ndarray, np.ndarray] = field(init=False, repr=False)
    _root: list[float] = field(init=False, repr=False)
    _last: _Grouping | None = field(init=False, repr=False, default=None)

    def __post_init__(self) -> None:
        model, world_size = self.problem.model, self.problem.world_size
        self._times = range_times(self.blocks, self.sizes, model, world_size)
        # the root's all-gather and reduce-scatter (unused by the replay when it has no bytes)
        self._root = [float(comm_times(model, c, np.asarray([max(root_bytes(v, self.blocks),
                                                                 1.0)]), world_size)[0])
                      for c, v in (("all_gather", self.sizes.gather),
                                   ("reduce_scatter", self.sizes.reduce))]

    def _grouping(self, ends: np.ndarray) -> _Grouping:
        """What every setting of grouping ``ends`` shares, made once for the last grouping
        scored (the searches score each grouping under every setting in a row)."""
        held = self._last
        if held is not None and held.ends is ends:
            return held
        ranges = merge_blocks(self.blocks, ends)
        starts = [0, *ends[:-1].tolist()]
        ag, rs = self._times
        pairs = list(zip(starts, (ends - 1).tolist(), strict=True))
        ag_u = np.asarray([ag[a, b] for a, b in pairs] + [self._root[0]])
        rs_u = np.asarray([rs[a, b] for a, b in pairs] + [self._root[1]])
        self._last = _Grouping(ends, ranges, ag_u, rs_u, {})
        return self._last

    def _layout(self, grouping: _Grouping, reshard: bool) -> UnitLayout:
        """The grouping's layout with every unit resharding or not (one owner array for
        both, so that the replay reads its runs of layers once)."""
        layout = grouping.layouts.get(reshard)
        if layout is None:
            ranges = grouping.ranges
            other = grouping.layouts.get(not reshard)
            layout = (layout_from_ranges(self.seq, ranges, (reshard,) * len(ranges))
                      if other is None else replace(other, reshard=(reshard,) * len(ranges)))
            grouping.layouts[reshard] = layout
        return layout

    def score(self, ends: np.ndarray, setting: Setting) -> tuple[Key, ShardedReplay] | None:
        """The key and replay of grouping ``ends`` under ``setting``; None over the cap."""
        reshard, forward, backward = setting
        grouping = self._grouping(ends)
        ranges, ag_u, rs_u = grouping.ranges, grouping.ag_u, grouping.rs_u
        layout = self._layout(grouping, reshard)
        p = self.problem
        if p.mixed_precision is not None:
            layout = dtyped_layout(layout, self.sizes)
        result = replay_layout(self.seq, layout, (forward, backward), ag_u, rs_u,
                               p.world_size, StepOptions(
                                   blocking=p.blocking, grad_accum=p.grad_accum,
                                   keep_unsharded=p.keep_unsharded,
                                   compute_slowdown=p.compute_slowdown))
        self.evaluated += 1
        self.smallest_peak = min(self.smallest_peak, result.gathered_peak_bytes)
        if p.memory_cap_bytes is not None \
                and result.gathered_peak_bytes > p.memory_cap_bytes:
            return None
        return (result.iteration_s, len(ranges), result.gathered_peak_bytes), result


def every_grouping(n_blocks: int) -> Iterator[np.ndarray]:
    """Every grouping of ``n_blocks`` consecutive blocks, as exclusive end indices."""
    for cuts in itertools.product((False, True), repeat=max(n_blocks - 1, 0)):
        inner = [i + 1 for i, cut in enumerate(cuts) if cut]
        yield np.asarray([*inner, n_blocks], dtype=np.int64)


def block_level(seq: LayerSeq, blocks: list[tuple[int, int]], sizes: LayerBytes
                ) -> tuple[LayerSeq, list[tuple[int, int]], LayerBytes]:
    """``seq`` with each block's layers summed into one (the root's layers kept), the
    blocks' ranges in it and the per-layer ``sizes`` summed likewise. A unit is a run of
    whole blocks, so the replay of a grouping is the same on either, up to the order of the
    sums; the search scores candidates on this one, which is as long as the blocks, not the
    layers."""
    first_of = {a: b for a, b in blocks}
    groups: list[tuple[int, int]] = []
    j = 0
    while j < seq.n:
        last = first_of.get(j, j)
        groups.append((j, last))
        j = last + 1

    def summed(values: np.ndarray) -> np.ndarray:
        return np.asarray([float(values[a:b + 1].sum()) for a, b in groups])

    reduced = LayerSeq(
        tensors=tuple(tuple(t for k in range(a, b + 1) for t in seq.tensors[k])
                      for a, b in groups),
        nbytes=summed(seq.nbytes), forward_s=summed(seq.forward_s),
        backward_s=summed(seq.backward_s), update_s=summed(seq.update_s),
        block=tuple(seq.block[a] for a, _ in groups))
    position = {a: i for i, (a, _) in enumerate(groups)}
    gather = summed(sizes.gather)
    plain = sizes.reduce is sizes.gather and sizes.grad is sizes.gather
    summed_sizes = LayerBytes(gather=gather, reduce=gather if plain else summed(sizes.reduce),
                              grad=gather if plain else summed(sizes.grad))
    return reduced, [(position[a], position[a]) for a, _ in blocks], summed_sizes
