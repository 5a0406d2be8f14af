"""What every sharded solver of this package shares: the problem they solve, made once,
the error when no layout fits the memory cap, and the collective seconds and bytes of every
run of consecutive blocks.

**The problem** (:class:`ShardedProblem`): a compute trace, a comm model, a world size and
the settings of the search (collective semantics, the cap on gathered parameters and
unsharded gradients, the largest prefetch depth, the micro-batches per optimizer step,
whether parameters stay unsharded between micro-batches, the compute slowdown under
overlap, the collectives' dtypes). The trace's layers and blocks
(:func:`gradsched.traces.layers.layer_seq`, :func:`~gradsched.traces.layers.block_ranges`)
and each layer's bytes under the policy (``sizes``,
:func:`gradsched.experiments.sharded.dtypes.problem_sizes`) are derived once, when the
problem is made (``__post_init__``), and the settings checked there
(:func:`gradsched.replay.sharded.check_grad_accum`,
:func:`~gradsched.replay.sharded.check_compute_slowdown`); every solver takes the problem
whole.

**Three sizes per run of blocks** (:func:`range_times`, :func:`range_bytes`): the all-gather
moves and gathers ``sizes.gather``, the reduce-scatter moves ``sizes.reduce``, the unsharded
gradients hold ``sizes.grad`` (:mod:`gradsched.replay.sharded_dtypes`); without a policy
the three are the trace's bytes, the same array.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from gradsched.collective_dtypes import CollectiveDtypes
from gradsched.costmodel.base import CommModel, comm_times
from gradsched.errors import ConfigError
from gradsched.experiments.sharded.dtypes import problem_sizes
from gradsched.plan_sharded import ShardedPlan
from gradsched.replay.sharded import (
    SEMANTICS,
    Semantics,
    ShardedReplay,
    check_compute_slowdown,
    check_grad_accum,
    replay_sharded,
)
from gradsched.replay.sharded_bounds import sharded_lower_bound_s
from gradsched.replay.sharded_dtypes import LayerBytes
from gradsched.traces.bundle import ComputeTrace
from gradsched.traces.layers import LayerSeq, block_ranges, layer_seq


@dataclass(frozen=True)
class ShardedProblem:
    """One sharded case and the settings of its search (module docstring); the settings are
    checked and ``seq`` and ``blocks`` derived when it is made."""

    trace: ComputeTrace
    model: CommModel
    world_size: int
    semantics: Semantics = "streams"
    memory_cap_bytes: float | None = None
    max_prefetch: int = 2
    grad_accum: int = 1
    keep_unsharded: bool = False
    compute_slowdown: float = 1.0
    mixed_precision: CollectiveDtypes | None = None
    """The collectives' dtypes (:mod:`gradsched.experiments.sharded.dtypes`); every plan
    replayed with it."""
    seq: LayerSeq = field(init=False, repr=False, compare=False)
    blocks: list[tuple[int, int]] = field(init=False, repr=False, compare=False)
    sizes: LayerBytes = field(init=False, repr=False, compare=False)
    """Per layer of ``seq``: all-gather, reduce-scatter and unsharded-gradient bytes."""

    def __post_init__(self) -> None:
        if self.semantics not in SEMANTICS:
            raise ConfigError(f"semantics must be one of {', '.join(SEMANTICS)}, got "
                              f"{self.semantics!r}")
        check_grad_accum(self.grad_accum)
        check_compute_slowdown(self.compute_slowdown)
        seq = layer_seq(self.trace)
        object.__setattr__(self, "seq", seq)
        object.__setattr__(self, "blocks", block_ranges(seq))
        object.__setattr__(self, "sizes", problem_sizes(self.trace, seq, self.mixed_precision))

    @property
    def blocking(self) -> bool:
        return self.semantics == "blocking"

    def replay(self, plan: ShardedPlan) -> ShardedReplay:
        """``plan`` replayed under the problem's semantics, micro-batches and slowdown."""
        if self.mixed_precision is not None and plan.mixed_precision is None:
            plan = replace(plan, mixed_precision=self.mixed_precision)
        return replay_sharded(self.trace, plan, self.model, self.world_size,
                              semantics=self.semantics, grad_accum=self.grad_accum,
                              compute_slowdown=self.compute_slowdown)

    def lower_bound_s(self) -> float:
        """:func:`gradsched.replay.sharded_bounds.sharded_lower_bound_s` of the problem."""
        return sharded_lower_bound_s(self.trace, self.model, self.world_size,
                                     self.grad_accum, self.keep_unsharded,
                                     self.mixed_precision)


class NoLayoutFits(ConfigError):
    """No layout of whole blocks keeps its peak of gathered parameters and unsharded
    gradients within the memory cap; ``smallest_peak_bytes`` is the least any reached."""

    def __init__(self, message: str, smallest_peak_bytes: float) -> None:
        super().__init__(message)
        self.smallest_peak_bytes = smallest_peak_bytes


def no_fit(memory_cap_bytes: float | None, smallest_peak: float) -> NoLayoutFits:
    """The error when no candidate fits the memory cap, naming the smallest peak."""
    return NoLayoutFits(f"no sharded plan fits the memory cap of {memory_cap_bytes:.4g} "
                        f"bytes: the smallest peak of gathered parameters and gradients is "
                        f"{smallest_peak:.4g} bytes (a GPU with more memory, sharding below "
                        "the block, e.g. a fully_shard per expert, or tensor or expert "
                        "parallelism would be needed)", smallest_peak)


def range_times(blocks: list[tuple[int, int]], sizes: LayerBytes, model: CommModel,
                world: int) -> tuple[np.ndarray, np.ndarray]:
    """All-gather seconds (of ``sizes.gather``) and reduce-scatter seconds (of
    ``sizes.reduce``) of every run of blocks ``a..b`` (one vectorised model call per
    collective)."""
    n = len(blocks)
    out = []
    gather = range_bytes(sizes.gather, blocks)[np.triu_indices(n)]
    for collective, values in (("all_gather", sizes.gather), ("reduce_scatter", sizes.reduce)):
        flat = gather if values is sizes.gather else range_bytes(values, blocks)[np.triu_indices(n)]
        table = np.zeros((n, n))
        table[np.triu_indices(n)] = comm_times(model, collective, flat, world)
        out.append(table)
    return out[0], out[1]


def range_bytes(values: np.ndarray, blocks: list[tuple[int, int]]) -> np.ndarray:
    """Sum of the per-layer ``values`` (bytes) over every run of blocks ``a..b`` (upper
    triangle)."""
    n = len(blocks)
    prefix = np.concatenate([[0.0], np.cumsum(values)])
    sizes = np.zeros((n, n))
    for a in range(n):
        for b in range(a, n):
            sizes[a, b] = prefix[blocks[b][1] + 1] - prefix[blocks[a][0]]
    return sizes


def root_bytes(values: np.ndarray, blocks: list[tuple[int, int]]) -> float:
    """The root's share of the per-layer ``values``: the total less the blocks'."""
    return float(values.sum()) - sum(float(values[a:b + 1].sum()) for a, b in blocks)
